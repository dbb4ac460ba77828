#include "core/checked.h"

#include <limits>

#include "core/tensor.h"

namespace kiln::detail {

int64_t checked_mul(const char* op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(op, "size ", a, " x ", b, " overflows int64");
  return r;
}

int64_t checked_add(const char* op, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(op, "size ", a, " + ", b, " overflows int64");
  return r;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

namespace {
// Product of the nonzero dims times item, or -1 when it passes int64; -2 for a negative dim.
int64_t nonzero_bytes(const Shape& shape, int64_t item) {
  int64_t bytes = item;
  for (int64_t d : shape) {
    if (d < 0) return -2;
    if (d != 0 && __builtin_mul_overflow(bytes, d, &bytes)) return -1;
  }
  return bytes;
}
}  // namespace

void check_shape(const char* op, const Shape& shape, Dtype dtype) {
  int64_t bytes = nonzero_bytes(shape, size_of(dtype));
  if (bytes == -2) fail(op, "negative dimension in shape ", shape_str(shape));
  if (bytes == -1) {
    fail(op, "shape ", shape_str(shape), " of ", dtype_name(dtype), " is too large: its byte count overflows int64");
  }
}

int64_t checked_size(const char* op, const Shape& shape) {
  int64_t n = nonzero_bytes(shape, 1);
  if (n == -2) fail(op, "negative dimension in shape ", shape_str(shape));
  if (n == -1) fail(op, "shape ", shape_str(shape), " has more elements than int64 holds");
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  return n;
}

size_t checked_bytes(const char* op, const Shape& shape, Dtype dtype) {
  check_shape(op, shape, dtype);
  return static_cast<size_t>(checked_size(op, shape)) * static_cast<size_t>(size_of(dtype));
}

}  // namespace kiln::detail
