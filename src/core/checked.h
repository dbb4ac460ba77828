// Overflow-checked arithmetic for sizes, strides and byte counts, in one place.
// Every array shape passes check_shape when its node is built, so products of
// its dimensions (sizes, row-major strides, byte counts) cannot wrap later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <vector>

#include "kiln/array.h"
#include "kiln/error.h"

namespace kiln::detail {

/* a * b, or a kiln::Error tagged with op when it does not fit in int64. */
int64_t checked_mul(const char* op, int64_t a, int64_t b);
/* a + b, or a kiln::Error tagged with op when it does not fit in int64. */
int64_t checked_add(const char* op, int64_t a, int64_t b);
/* a * b for non-negative operands, saturating at INT64_MAX (cost estimates, grains). */
int64_t saturating_mul(int64_t a, int64_t b);
/* ceil(a / b) for a >= 0 and b > 0, without the a + b - 1 that can wrap. */
constexpr int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

/* Throws (tagged op) unless every dimension is >= 0 and the product of the nonzero
   ones times dtype's size fits in int64 (numpy's rule: zero-size arrays get no pass
   for absurd other dims, so their strides cannot wrap either). */
void check_shape(const char* op, const Shape& shape, Dtype dtype);
/* The number of elements of a valid shape; kiln::Error tagged with op if it has none. */
int64_t checked_size(const char* op, const Shape& shape);
/* Bytes that shape's elements of dtype take; kiln::Error tagged with op as check_shape. */
size_t checked_bytes(const char* op, const Shape& shape, Dtype dtype);

/* v.resize(n), with out-of-memory (or a length past the vector's max) as a kiln::Error
   tagged with op instead of std::bad_alloc / std::length_error. */
template <class T>
void checked_resize(const char* op, std::vector<T>& v, int64_t n, const T& fill = T()) {
  try {
    if (n < 0) throw std::length_error("negative");
    v.resize(static_cast<size_t>(n), fill);
  } catch (const std::bad_alloc&) {
    fail(op, "out of memory allocating ", n, " elements of ", sizeof(T), " bytes");
  } catch (const std::length_error&) {
    fail(op, "cannot allocate ", n, " elements of ", sizeof(T), " bytes");
  }
}

}  // namespace kiln::detail
