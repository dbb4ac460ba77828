/* C API tests: the language-model ops (quantization, norms, rope, attention, slice
   update at an array start). Built as C11 with -Wall -Werror. */
#include <math.h>

#include "harness.h"

static kiln_array new_data(const void* data, const int64_t* shape, int ndim, kiln_dtype d) {
  kiln_array a = NULL;
  OK(kiln_array_new_data(&a, data, shape, ndim, d));
  return a;
}

/* Every element of a and b within tol * (1 + |b|). */
static int close_to(kiln_array a, kiln_array b, float tol) {
  size_t n = 0, m = 0;
  static float x[4096], y[4096];
  if (kiln_array_size(&n, a) != 0 || kiln_array_size(&m, b) != 0 || n != m || n > 4096) return 0;
  if (kiln_array_copy_to(x, sizeof x, a, KILN_FLOAT32) != 0 || kiln_array_copy_to(y, sizeof y, b, KILN_FLOAT32) != 0) {
    return 0;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!(fabsf(x[i] - y[i]) <= tol * (1.0f + fabsf(y[i])))) return 0;
  }
  return 1;
}

static void test_quantized(void) {
  float w[4 * 64], xv[64];
  for (int i = 0; i < 4 * 64; ++i) w[i] = sinf(0.37f * (float)i + 0.1f);
  for (int i = 0; i < 64; ++i) xv[i] = cosf(0.11f * (float)i);
  const int64_t ws[2] = {4, 64}, xs[2] = {1, 64};
  kiln_array wa = new_data(w, ws, 2, KILN_FLOAT32), x = new_data(xv, xs, 2, KILN_FLOAT32);
  kiln_array packed = NULL, scales = NULL, biases = NULL, deq = NULL, y = NULL, wt = NULL, ref = NULL;
  OK(kiln_quantize(&packed, &scales, &biases, wa, 32, 4));
  kiln_dtype d = KILN_NUM_DTYPES;
  OK(kiln_array_dtype(&d, packed));
  CHECK(d == KILN_UINT32);
  OK(kiln_dequantize(&deq, packed, scales, biases, 32, 4));
  CHECK(close_to(deq, wa, 0.1f));  /* within half a step of 16 levels over [-1, 1] */
  OK(kiln_quantized_matmul(&y, x, packed, scales, biases, true, 32, 4));
  OK(kiln_transpose(&wt, deq, NULL, 0));
  OK(kiln_matmul(&ref, x, wt));
  CHECK(close_to(y, ref, 1e-5f));
  FAILS_WITH(kiln_quantize(&packed, &scales, &biases, wa, 48, 4), "[quantize] group_size must be 32, 64 or 128, got 48");
  FAILS_WITH(kiln_quantized_matmul(&y, wa, packed, scales, biases, false, 32, 4), "[quantized_matmul] inner dimensions differ");
  FAILS_WITH(kiln_quantize(&packed, NULL, &biases, wa, 32, 4), "null output pointer");
  kiln_array_free(wa), kiln_array_free(x), kiln_array_free(packed), kiln_array_free(scales);
  kiln_array_free(biases), kiln_array_free(deq), kiln_array_free(y), kiln_array_free(wt), kiln_array_free(ref);
}

static void test_norms_rope_attention(void) {
  const float xv[4] = {1, 2, 3, 4}, wv[2] = {2, 0.5f};
  const int64_t s22[2] = {2, 2}, s2 = 2, s1111[4] = {1, 1, 1, 2};
  kiln_array x = new_data(xv, s22, 2, KILN_FLOAT32), w = new_data(wv, &s2, 1, KILN_FLOAT32), out = NULL, want = NULL;
  OK(kiln_rms_norm(&out, x, w, 0.0f));
  /* Rows [1, 2] and [3, 4]: divided by sqrt(2.5) and sqrt(12.5), times the weight. */
  const float rms[4] = {2 / sqrtf(2.5f), 1 / sqrtf(2.5f), 6 / sqrtf(12.5f), 2 / sqrtf(12.5f)};
  want = new_data(rms, s22, 2, KILN_FLOAT32);
  CHECK(close_to(out, want, 1e-6f));
  OK(kiln_layer_norm(&out, x, NULL, NULL, 0.0f));
  const float ln[4] = {-1, 1, -1, 1};
  kiln_array want_ln = new_data(ln, s22, 2, KILN_FLOAT32);
  CHECK(close_to(out, want_ln, 1e-5f));
  FAILS_WITH(kiln_rms_norm(&out, x, x, 1e-5f), "[rms_norm] weight must be a vector");

  /* rope of (1, 0) at position 3 with base 1 (frequency 1): (cos 3, sin 3). */
  const float one[2] = {1, 0};
  const int32_t pos = 3;
  kiln_array r = new_data(one, s1111, 4, KILN_FLOAT32), off = new_data(&pos, NULL, 0, KILN_INT32), ro = NULL;
  OK(kiln_rope(&ro, r, 2, false, 1.0f, 1.0f, off, NULL));
  const float rot[2] = {cosf(3), sinf(3)};
  kiln_array rw = new_data(rot, s1111, 4, KILN_FLOAT32);
  CHECK(close_to(ro, rw, 1e-6f));
  FAILS_WITH(kiln_rope(&ro, r, 3, false, 1.0f, 1.0f, off, NULL), "[rope] dims must be even");

  /* One key: attention returns its value whatever the scores. */
  const float qv[2] = {0.3f, -2}, kv[2] = {1, 5}, vv[2] = {7, -8};
  kiln_array q = new_data(qv, s1111, 4, KILN_FLOAT32), k = new_data(kv, s1111, 4, KILN_FLOAT32),
             v = new_data(vv, s1111, 4, KILN_FLOAT32), att = NULL;
  OK(kiln_scaled_dot_product_attention(&att, q, k, v, 0.5f, NULL, true, NULL));
  CHECK(close_to(att, v, 1e-6f));
  FAILS_WITH(kiln_scaled_dot_product_attention(&att, q, x, v, 0.5f, NULL, false, NULL), "[scaled_dot_product_attention] q, k and v must be 4-D");

  /* Row 1 of a 3x2 zero cache replaced. */
  const float zero6[6] = {0, 0, 0, 0, 0, 0}, upd[2] = {5, 6};
  const int64_t s32[2] = {3, 2}, s12[2] = {1, 2}, one_axis = 1;
  const int32_t at = 1;
  const int axis = 0;
  kiln_array cache = new_data(zero6, s32, 2, KILN_FLOAT32), u = new_data(upd, s12, 2, KILN_FLOAT32),
             start = new_data(&at, &one_axis, 1, KILN_INT32), res = NULL;
  OK(kiln_slice_update_at(&res, cache, u, start, &axis, 1));
  const float after[6] = {0, 0, 5, 6, 0, 0};
  kiln_array aw = new_data(after, s32, 2, KILN_FLOAT32);
  CHECK(close_to(res, aw, 0));
  FAILS_WITH(kiln_slice_update_at(&res, cache, u, x, &axis, 1), "[slice_update] start must be int32");

  kiln_array handles[] = {x, w, out, want, want_ln, r, off, ro, rw, q, k, v, att, cache, u, start, res, aw};
  for (size_t i = 0; i < sizeof handles / sizeof handles[0]; ++i) kiln_array_free(handles[i]);
}

int main(void) {
  RUN(test_quantized);
  RUN(test_norms_rope_attention);
  return harness_finish();
}
