/* C API tests: reductions, matmul, layout, random numbers and selection. Built as C11 with -Wall -Werror. */
#include <math.h>
#include <stdint.h>

#include "harness.h"

static kiln_array new_f32(const float* data, const int64_t* shape, int ndim) {
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, data, shape, ndim, KILN_FLOAT32));
  return a;
}

static int equals_f32(kiln_array a, const float* want, size_t n) {
  size_t size = 0;
  float got[64];
  if (kiln_array_size(&size, a) != 0 || size != n || n > 64) return 0;
  if (kiln_array_copy_to(got, sizeof got, a, KILN_FLOAT32) != 0) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (fabsf(got[i] - want[i]) > 1e-5f * (1.0f + fabsf(want[i]))) return 0;
  }
  return 1;
}

static int has_shape(kiln_array a, const int64_t* want, int ndim) {
  int nd = -1;
  const int64_t* shape = NULL;
  if (kiln_array_ndim(&nd, a) != 0 || nd != ndim || kiln_array_shape(&shape, a) != 0) return 0;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] != want[i]) return 0;
  }
  return 1;
}

static kiln_dtype dtype_of(kiln_array a) {
  kiln_dtype d = KILN_NUM_DTYPES;
  kiln_array_dtype(&d, a);
  return d;
}

/* m = [[0, 1, 2], [3, 4, 5]] */
static const float kM[6] = {0, 1, 2, 3, 4, 5};
static const int64_t kS23[2] = {2, 3};

static void test_reductions(void) {
  kiln_array m = new_f32(kM, kS23, 2), out = NULL;
  const int ax1 = 1, ax0 = 0, both[2] = {0, -1};
  const int64_t s2 = 2, s3 = 3, s21[2] = {2, 1};

  /* Every reduction of the list runs, over all axes and over one. */
#define KILN_C_REDUCE(name)                        \
  OK(kiln_##name(&out, m, NULL, 0, false));        \
  CHECK(has_shape(out, NULL, 0));                  \
  OK(kiln_##name(&out, m, &ax1, 1, true));         \
  CHECK(has_shape(out, s21, 2));                   \
  OK(kiln_array_eval(out));
#include "kiln/c/kiln_reduce_ops.def"
#undef KILN_C_REDUCE

  const float sum_all = 15, sum1[2] = {3, 12}, sum0[3] = {3, 5, 7}, mean1[2] = {1, 4}, max0[3] = {3, 4, 5},
              prod1[2] = {0, 60}, min1[2] = {0, 3};
  OK(kiln_sum(&out, m, NULL, 0, false));
  CHECK(equals_f32(out, &sum_all, 1));
  OK(kiln_sum(&out, m, both, 2, false));
  CHECK(equals_f32(out, &sum_all, 1));
  OK(kiln_sum(&out, m, &ax1, 1, false));
  CHECK(equals_f32(out, sum1, 2) && has_shape(out, &s2, 1));
  OK(kiln_sum(&out, m, &ax0, 1, false));
  CHECK(equals_f32(out, sum0, 3) && has_shape(out, &s3, 1));
  OK(kiln_mean(&out, m, &ax1, 1, false));
  CHECK(equals_f32(out, mean1, 2));
  OK(kiln_max(&out, m, &ax0, 1, false));
  CHECK(equals_f32(out, max0, 3));
  OK(kiln_min(&out, m, &ax1, 1, false));
  CHECK(equals_f32(out, min1, 2));
  OK(kiln_prod(&out, m, &ax1, 1, false));
  CHECK(equals_f32(out, prod1, 2));
  OK(kiln_all(&out, m, NULL, 0, false));
  CHECK(dtype_of(out) == KILN_BOOL);
  bool b = true;
  OK(kiln_array_item_bool(&b, out));
  CHECK(!b); /* m holds a zero */
  OK(kiln_any(&out, m, NULL, 0, false));
  OK(kiln_array_item_bool(&b, out));
  CHECK(b);
  const float lse1[2] = {logf(expf(0) + expf(1) + expf(2)), logf(expf(3) + expf(4) + expf(5))};
  OK(kiln_logsumexp(&out, m, &ax1, 1, false));
  CHECK(equals_f32(out, lse1, 2));
  const float var1[2] = {2.0f / 3, 2.0f / 3}, var1_ddof[2] = {1, 1};
  OK(kiln_var(&out, m, &ax1, 1, false, 0));
  CHECK(equals_f32(out, var1, 2));
  OK(kiln_var(&out, m, &ax1, 1, false, 1));
  CHECK(equals_f32(out, var1_ddof, 2));
  const int ax5 = 5;
  FAILS_WITH(kiln_sum(&out, m, &ax5, 1, false), "axis 5 is out of range for an array of rank 2");
  FAILS_WITH(kiln_sum(&out, m, NULL, 1, false), "[kiln_sum] null axes with 1 axes");

  /* argmax / argmin */
  const float v[6] = {3, 9, 1, 7, 2, 8};
  kiln_array a = new_f32(v, kS23, 2);
  const float am1[2] = {1, 2}, amin0[3] = {0, 1, 0}, amax_all = 1, amin_all = 2;
  OK(kiln_argmax(&out, a, 1, false));
  CHECK(equals_f32(out, am1, 2) && dtype_of(out) == KILN_INT32);
  OK(kiln_argmin(&out, a, 0, false));
  CHECK(equals_f32(out, amin0, 3));
  OK(kiln_argmax_all(&out, a, false));
  CHECK(equals_f32(out, &amax_all, 1));
  OK(kiln_argmin_all(&out, a, true));
  CHECK(equals_f32(out, &amin_all, 1) && has_shape(out, (const int64_t[]){1, 1}, 2));

  /* softmax over the last axis by default; cumsum. */
  float sm[6];
  for (int r = 0; r < 2; ++r) {
    float z = 0;
    for (int c = 0; c < 3; ++c) z += expf(kM[r * 3 + c]);
    for (int c = 0; c < 3; ++c) sm[r * 3 + c] = expf(kM[r * 3 + c]) / z;
  }
  OK(kiln_softmax(&out, m, NULL, 0));
  CHECK(equals_f32(out, sm, 6));
  OK(kiln_softmax(&out, m, &ax1, 1));
  CHECK(equals_f32(out, sm, 6));
  const float cs[6] = {0, 1, 3, 3, 7, 12}, cs_rev_ex[6] = {3, 2, 0, 9, 5, 0};
  OK(kiln_cumsum(&out, m, 1, false, true));
  CHECK(equals_f32(out, cs, 6));
  OK(kiln_cumsum(&out, m, 1, true, false));
  CHECK(equals_f32(out, cs_rev_ex, 6));

  kiln_array_free(m);
  kiln_array_free(a);
  kiln_array_free(out);
}

static void test_matmul(void) {
  const float bv[6] = {1, 0, 0, 1, 1, 1};
  const int64_t s32[2] = {3, 2}, s22[2] = {2, 2};
  kiln_array m = new_f32(kM, kS23, 2), b = new_f32(bv, s32, 2), out = NULL;
  /* [[0,1,2],[3,4,5]] @ [[1,0],[0,1],[1,1]] = [[2,3],[8,9]] */
  const float want[4] = {2, 3, 8, 9};
  OK(kiln_matmul(&out, m, b));
  CHECK(equals_f32(out, want, 4) && has_shape(out, s22, 2));
  /* Mismatched shapes: a status, and the op's message. */
  FAILS_WITH(kiln_matmul(&out, m, m), "[matmul] inner dimensions differ");
  CHECK(equals_f32(out, want, 4)); /* *out untouched */
  FAILS_WITH(kiln_matmul(&out, m, NULL), "null array handle");
  kiln_array_free(m);
  kiln_array_free(b);
  kiln_array_free(out);
}

static void test_layout(void) {
  kiln_array m = new_f32(kM, kS23, 2), out = NULL, part = NULL;
  kiln_vector_array v = NULL, parts = NULL;
  size_t n = 0;

  OK(kiln_vector_array_new(&v));
  OK(kiln_vector_array_append(v, m));
  OK(kiln_vector_array_append(v, m));
  const int64_t s43[2] = {4, 3}, s26[2] = {2, 6}, s223[3] = {2, 2, 3};
  OK(kiln_concatenate(&out, v, 0));
  CHECK(has_shape(out, s43, 2));
  OK(kiln_concatenate(&out, v, 1));
  const float cat1[12] = {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5};
  CHECK(has_shape(out, s26, 2) && equals_f32(out, cat1, 12));
  OK(kiln_stack(&out, v, 0));
  CHECK(has_shape(out, s223, 3));
  kiln_vector_array empty = NULL;
  OK(kiln_vector_array_new(&empty));
  FAILS_WITH(kiln_concatenate(&out, empty, 0), "[concatenate] need at least one array to concatenate");
  FAILS_WITH(kiln_stack(&out, empty, 0), "[stack] need at least one array to stack");

  /* split into sections and at indices */
  OK(kiln_split(&parts, m, 3, 1));
  OK(kiln_vector_array_size(&n, parts));
  CHECK(n == 3);
  OK(kiln_vector_array_get(&part, parts, 2));
  const float col2[2] = {2, 5};
  CHECK(equals_f32(part, col2, 2));
  FAILS_WITH(kiln_split(&parts, m, 2, 1), "cannot be split into 2 equal sections");
  OK(kiln_vector_array_size(&n, parts));
  CHECK(n == 3); /* untouched by the failure */
  const int64_t at[1] = {1};
  OK(kiln_split_indices(&parts, m, at, 1, 1));
  OK(kiln_vector_array_size(&n, parts));
  CHECK(n == 2);
  OK(kiln_vector_array_get(&part, parts, 1));
  const float tail[4] = {1, 2, 4, 5};
  CHECK(equals_f32(part, tail, 4));

  /* pad */
  const int64_t widths[4] = {0, 1, 1, 0};
  const float padded[12] = {9, 0, 1, 2, 9, 3, 4, 5, 9, 9, 9, 9};
  OK(kiln_pad(&out, m, widths, 2, 9));
  CHECK(equals_f32(out, padded, 12));
  const int64_t negw[4] = {0, -1, 0, 0};
  FAILS_WITH(kiln_pad(&out, m, negw, 2, 0), "[pad] pad widths must be non-negative");

  /* take and take_along_axis */
  const int32_t idx[2] = {2, -3};
  const int64_t s2 = 2;
  kiln_array ix = NULL;
  OK(kiln_array_new_data(&ix, idx, &s2, 1, KILN_INT32));
  const float took[4] = {2, 0, 5, 3};
  OK(kiln_take(&out, m, ix, 1));
  CHECK(equals_f32(out, took, 4));
  kiln_array fidx = NULL;
  OK(kiln_astype(&fidx, ix, KILN_FLOAT32));
  FAILS_WITH(kiln_take(&out, m, fidx, 1), "indices must be integers");
  const int32_t along[2] = {2, 0};
  const int64_t s21[2] = {2, 1};
  OK(kiln_array_new_data(&ix, along, s21, 2, KILN_INT32));
  const float tal[2] = {2, 3};
  OK(kiln_take_along_axis(&out, m, ix, 1));
  CHECK(equals_f32(out, tal, 2));

  /* slice_update and copy */
  kiln_array upd = NULL;
  OK(kiln_array_new_float(&upd, -1, KILN_FLOAT32));
  const int64_t start[2] = {0, 1}, stop[2] = {2, 3};
  const float updated[6] = {0, -1, -1, 3, -1, -1};
  OK(kiln_slice_update(&out, m, upd, start, stop, NULL, 2));
  CHECK(equals_f32(out, updated, 6));
  FAILS_WITH(kiln_slice_update(&out, m, upd, start, stop, NULL, 1), "[slice_update]");
  OK(kiln_copy(&out, m));
  CHECK(equals_f32(out, kM, 6) && has_shape(out, kS23, 2));

  kiln_array_free(m);
  kiln_array_free(out);
  kiln_array_free(part);
  kiln_array_free(ix);
  kiln_array_free(fidx);
  kiln_array_free(upd);
  kiln_vector_array_free(v);
  kiln_vector_array_free(parts);
  kiln_vector_array_free(empty);
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
  const float want_b[3] = {0, 1, 1};
  CHECK(dtype_of(b) == KILN_BOOL && equals_f32(b, want_b, 3));
  /* Only category 2 can be drawn. */
  const float l[6] = {-INFINITY, -INFINITY, 0, -INFINITY, -INFINITY, 0};
  const int64_t two_three[2] = {2, 3};
  logits = new_f32(l, two_three, 2);
  OK(kiln_random_categorical(&c, logits, key, -1));
  const float want_c[2] = {2, 2};
  CHECK(dtype_of(c) == KILN_INT32 && equals_f32(c, want_c, 2));
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
  const float want_topk[4] = {0, 2, 0, 2}; /* NaN counts as largest */
  CHECK(equals_f32(i, want_topk, 4));
  OK(kiln_argsort(&as, a, 1));
  const float want_argsort[8] = {1, 3, 2, 0, 3, 1, 2, 0}; /* stable: the first 1 before the second */
  CHECK(equals_f32(as, want_argsort, 8));
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
  RUN(test_reductions);
  RUN(test_matmul);
  RUN(test_layout);
  RUN(test_random);
  RUN(test_selection);
  return harness_finish();
}
