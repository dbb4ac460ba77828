#include "core/tensor.h"

#include <sstream>

#include "core/checked.h"

namespace kiln::detail {

namespace {
// Row-major strides of `shape` into `s`, which keeps its storage when the rank is the same.
void fill_row_major(const Shape& shape, Strides& s) {
  s.resize(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = stride;
    stride = checked_mul("shape", stride, shape[i]);
  }
}
}  // namespace

Strides row_major_strides(const Shape& shape) {
  Strides s;
  fill_row_major(shape, s);
  return s;
}

int64_t shape_size(const Shape& shape) { return checked_size("shape", shape); }

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ")";
  return os.str();
}

bool Tensor::row_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;  // stride of a size-1 axis is irrelevant
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

void Tensor::reset_layout() {
  fill_row_major(shape, strides);
  offset = 0;
}

void Tensor::allocate() {
  reset_layout();
  size_t need = checked_bytes("alloc", shape, dtype);
  // A buffer handed over by a compiled plan (a dead intermediate or donated input
  // nobody else can observe) is reused.
  bool reusable = buffer && (buffer.use_count() == 1 || donated) && buffer->owned() && buffer->on_host();
  donated = false;
  if (reusable && buffer->bytes() >= need) return;
  buffer = Buffer::allocate(need);
}

void Tensor::view_of(const Tensor& src, Strides s, int64_t off) {
  buffer = src.buffer;
  strides = std::move(s);
  offset = off;
}

}  // namespace kiln::detail
