// The evaluated form of an array that kernels read and write: a buffer plus a
// strided view of it. Kernels take Tensors, never graph nodes, so plans can run
// them without building any.
#pragma once

#include <memory>
#include <utility>

#include "core/buffer.h"
#include "kiln/array.h"

namespace kiln::detail {

/* Row-major strides (in elements) for a shape. */
Strides row_major_strides(const Shape& shape);
/* Product of the dimensions (1 for a 0-d shape); kiln::Error when it passes int64. */
int64_t shape_size(const Shape& shape);
/* "(2,3)" */
std::string shape_str(const Shape& shape);

struct Tensor {
  Shape shape;
  Strides strides;  // in elements; 0 along broadcast axes
  Dtype dtype = float32;
  std::shared_ptr<Buffer> buffer;
  int64_t offset = 0;  // in elements, from the buffer's start
  // The buffer may be overwritten by whoever holds this tensor: an input of a
  // compiled call whose caller gave up the only reference, or a dead buffer a
  // plan hands to an output.
  bool donated = false;

  Tensor() = default;
  Tensor(Shape s, Dtype d) : shape(std::move(s)), strides(row_major_strides(shape)), dtype(d) {}

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t size() const { return shape_size(shape); }
  size_t itemsize() const { return static_cast<size_t>(size_of(dtype)); }
  /* True when elements are laid out densely in row-major order. */
  bool row_contiguous() const;

  void* raw() const { return static_cast<char*>(buffer->data()) + offset * static_cast<int64_t>(itemsize()); }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  /* Row-major strides and offset 0, in place: no allocation when the rank is unchanged
     (replayed calls reset every output). */
  void reset_layout();
  /* Gives this tensor a fresh row-major buffer for its shape. */
  void allocate();
  /* A view of `src`'s buffer with this tensor's shape and the given strides/offset. */
  void view_of(const Tensor& src, Strides s, int64_t off);
};

/* A view of base's buffer with the given shape, strides and offset. */
inline Tensor view(const Tensor& base, Shape shape, Strides strides, int64_t offset) {
  Tensor t = base;
  t.shape = std::move(shape);
  t.strides = std::move(strides);
  t.offset = offset;
  return t;
}

}  // namespace kiln::detail
