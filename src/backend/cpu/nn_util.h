// Small helpers shared by the CPU kernels of the language-model ops.
#pragma once

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
