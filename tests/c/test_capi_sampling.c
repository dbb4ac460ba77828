/* C API tests: random numbers and sorting and selection. Built as C11 with -Wall -Werror. */
#include <math.h>
#include <stdint.h>

#include "harness.h"

static kiln_array new_f32(const float* data, const int64_t* shape, int ndim) {
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, data, shape, ndim, KILN_FLOAT32));
  return a;
}

static int equals_i32(kiln_array a, const int32_t* want, size_t n) {
  size_t size = 0;
  int32_t got[64];
  if (kiln_array_size(&size, a) != 0 || size != n || n > 64) return 0;
  if (kiln_array_copy_to(got, sizeof got, a, KILN_INT32) != 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) return 0;
  }
  return 1;
}

static kiln_dtype dtype_of(kiln_array a) {
  kiln_dtype d = KILN_NUM_DTYPES;
  kiln_array_dtype(&d, a);
  return d;
}

static void test_random(void) {
  kiln_array key = NULL, keys = NULL, bits = NULL, u = NULL, z = NULL, b = NULL, c = NULL, p = NULL, logits = NULL;
  OK(kiln_random_key(&key, 42));
  uint32_t k[2] = {1, 1};
  OK(kiln_array_copy_to(k, sizeof k, key, KILN_UINT32));
  CHECK(k[0] == 0 && k[1] == 42);
  /* MLX's split of key(42) (tests/ops/golden). */
  OK(kiln_random_split(&keys, key, 2));
  uint32_t s[4] = {0};
  OK(kiln_array_copy_to(s, sizeof s, keys, KILN_UINT32));
  CHECK(s[0] == 2465931498u && s[1] == 3679230171u && s[2] == 255383827u && s[3] == 267815257u);
  const int64_t shape[2] = {4, 8};
  OK(kiln_random_bits(&bits, shape, 2, key));
  CHECK(dtype_of(bits) == KILN_UINT32);
  OK(kiln_random_uniform(&u, shape, 2, key, KILN_FLOAT32, -1, 1));
  float uv[32];
  OK(kiln_array_copy_to(uv, sizeof uv, u, KILN_FLOAT32));
  int in_range = 1;
  for (int i = 0; i < 32; ++i) in_range = in_range && uv[i] >= -1 && uv[i] < 1;
  CHECK(in_range);
  OK(kiln_random_normal(&z, shape, 2, key, KILN_FLOAT64, 0, 1));
  CHECK(dtype_of(z) == KILN_FLOAT64);
  const float probs[3] = {0, 1, 1};
  const int64_t three = 3;
  p = new_f32(probs, &three, 1);
  OK(kiln_random_bernoulli(&b, p, key));
  const int32_t want_b[3] = {0, 1, 1};
  CHECK(dtype_of(b) == KILN_BOOL && equals_i32(b, want_b, 3));
  /* Only category 2 can be drawn. */
  const float l[6] = {-INFINITY, -INFINITY, 0, -INFINITY, -INFINITY, 0};
  const int64_t two_three[2] = {2, 3};
  logits = new_f32(l, two_three, 2);
  OK(kiln_random_categorical(&c, logits, key, -1));
  const int32_t want_c[2] = {2, 2};
  CHECK(dtype_of(c) == KILN_INT32 && equals_i32(c, want_c, 2));
  FAILS_WITH(kiln_random_split(&keys, key, 0), "[split] num must be at least 1; got 0");
  FAILS_WITH(kiln_random_uniform(&u, shape, 2, p, KILN_FLOAT32, 0, 1), "[uniform] a key is a uint32 array of shape (2)");
  FAILS_WITH(kiln_random_uniform(&u, shape, 2, key, KILN_INT32, 0, 1), "[uniform] dtype must be a floating type");
  FAILS_WITH(kiln_random_key(NULL, 1), "[kiln_random_key] null output pointer");
  FAILS_WITH(kiln_random_bits(&bits, shape, 2, NULL), "[kiln_random_bits] null array handle");
  kiln_array all[9] = {key, keys, bits, u, z, b, c, p, logits};
  for (int i = 0; i < 9; ++i) OK(kiln_array_free(all[i]));
}

static void test_selection(void) {
  /* [[3, 1, 2, 1], [NaN, 0, 5, -1]] */
  const float data[8] = {3, 1, 2, 1, NAN, 0, 5, -1};
  const int64_t shape[2] = {2, 4};
  kiln_array a = new_f32(data, shape, 2);
  kiln_array v = NULL, i = NULL, s = NULL, as = NULL, ap = NULL, pt = NULL;
  OK(kiln_topk(&v, &i, a, 2, -1));
  const int32_t want_topk[4] = {0, 2, 0, 2}; /* NaN counts as largest */
  CHECK(equals_i32(i, want_topk, 4));
  OK(kiln_argsort(&as, a, 1));
  const int32_t want_argsort[8] = {1, 3, 2, 0, 3, 1, 2, 0}; /* stable: the first 1 before the second */
  CHECK(equals_i32(as, want_argsort, 8));
  OK(kiln_sort(&s, a, 0));
  float sv[8];
  OK(kiln_array_copy_to(sv, sizeof sv, s, KILN_FLOAT32));
  CHECK(sv[0] == 3 && isnan(sv[4]) && sv[1] == 0 && sv[5] == 1 && sv[3] == -1 && sv[7] == 1);
  OK(kiln_argpartition(&ap, a, 0, -1));
  int32_t first[8];
  OK(kiln_array_copy_to(first, sizeof first, ap, KILN_INT32));
  CHECK(first[0] == 1 && first[4] == 3);
  OK(kiln_partition(&pt, a, -1, 1));
  float pv[8];
  OK(kiln_array_copy_to(pv, sizeof pv, pt, KILN_FLOAT32));
  CHECK(pv[3] == 3 && isnan(pv[7]));
  FAILS_WITH(kiln_topk(&v, &i, a, 5, -1), "[topk] k 5 is out of range for an axis of size 4");
  FAILS_WITH(kiln_topk(&v, NULL, a, 1, -1), "[kiln_topk] null output pointer");
  FAILS_WITH(kiln_argpartition(&ap, a, 4, -1), "[argpartition] kth 4 is out of range for an axis of size 4");
  FAILS_WITH(kiln_sort(&s, a, 2), "[sort] axis 2 is out of range for an array of rank 2");
  kiln_array all[7] = {a, v, i, s, as, ap, pt};
  for (int k = 0; k < 7; ++k) OK(kiln_array_free(all[k]));
}

int main(void) {
  RUN(test_random);
  RUN(test_selection);
  return harness_finish();
}
