// Small helpers shared by the CPU kernels of the language-model ops.
#pragma once

#include <cstring>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/cpu/copy.h"

namespace kiln::detail {

/* t itself when row-major, else a row-major copy in the same dtype. */
inline Tensor row_major(const Tensor& t) {
  if (t.row_contiguous()) return t;
  Tensor c(t.shape, t.dtype);
  c.allocate();
  copy_convert(t, c);
  return c;
}

/* The elements of t, row-major, converted to A (float, double or int32_t). */
template <class A>
std::vector<A> elements_as(const Tensor& t) {
  std::vector<A> out(static_cast<size_t>(t.size()));
  if (out.empty()) return out;
  Tensor dst(t.shape, dtype_of_v<A>);
  dst.buffer = Buffer::borrow(out.data(), out.size() * sizeof(A));
  copy_convert(t, dst);
  return out;
}
inline std::vector<float> to_floats(const Tensor& t) { return elements_as<float>(t); }

/* Eight floats as one GCC vector: AVX registers in code built for AVX2, SSE pairs elsewhere
   (passed by reference only, so no function's ABI depends on the target). */
using f32x8 = float __attribute__((vector_size(32)));
[[gnu::always_inline]] inline void load8(f32x8& v, const float* p) { std::memcpy(&v, p, sizeof v); }
[[gnu::always_inline]] inline void store8(float* p, const f32x8& v) { std::memcpy(p, &v, sizeof v); }

/* a . b over n floats in four independent 8-lane sums (a single chain would wait on each
   add's latency). */
[[gnu::always_inline]] inline float dot_lanes(const float* a, const float* b, int64_t n) {
  f32x8 acc[4] = {}, x, y;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int c = 0; c < 4; ++c) {
      load8(x, a + i + 8 * c);
      load8(y, b + i + 8 * c);
      acc[c] += x * y;
    }
  }
  for (; i + 8 <= n; i += 8) {
    load8(x, a + i);
    load8(y, b + i);
    acc[0] += x * y;
  }
  const f32x8 sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((sum[0] + sum[4]) + (sum[1] + sum[5])) + ((sum[2] + sum[6]) + (sum[3] + sum[7])) + tail;
}

/* Calls f with a value of the C++ type of a float16, bfloat16, float32 or float64 dtype. */
template <class F>
decltype(auto) dispatch_float(Dtype d, F&& f) {
  switch (d) {
    case Dtype::float16: return f(float16_t{});
    case Dtype::bfloat16: return f(bfloat16_t{});
    case Dtype::float32: return f(float{});
    case Dtype::float64: return f(double{});
    default: break;
  }
  fail("dtype", "expected a floating-point dtype, got ", dtype_name(d));
}

}  // namespace kiln::detail
