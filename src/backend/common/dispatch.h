// Calls a generic lambda with a value of the C++ type that matches a Dtype.
#pragma once

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::detail {

template <class F>
decltype(auto) dispatch_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::bool_: return f(bool{});
    case Dtype::uint8: return f(uint8_t{});
    case Dtype::uint16: return f(uint16_t{});
    case Dtype::uint32: return f(uint32_t{});
    case Dtype::uint64: return f(uint64_t{});
    case Dtype::int8: return f(int8_t{});
    case Dtype::int16: return f(int16_t{});
    case Dtype::int32: return f(int32_t{});
    case Dtype::int64: return f(int64_t{});
    case Dtype::float16: return f(float16_t{});
    case Dtype::bfloat16: return f(bfloat16_t{});
    case Dtype::float32: return f(float{});
    case Dtype::float64: return f(double{});
  }
  fail("dtype", "unknown dtype ", static_cast<int>(d));
}

}  // namespace kiln::detail
