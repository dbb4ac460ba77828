// kiln::Array: a cheap value handle to an immutable node of the lazy graph.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <vector>

#include "kiln/device.h"
#include "kiln/dims.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

using Shape = Dims;
using Strides = Dims;

class Primitive;
namespace detail {
struct Node;
struct Tensor;
}  // namespace detail

class Array {
 public:
  /* An empty handle; every query on it throws. */
  Array() = default;

  const Shape& shape() const;
  /* Size of one axis; negative axes count from the end. */
  int64_t shape(int axis) const;
  Dtype dtype() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t size() const;
  size_t itemsize() const { return static_cast<size_t>(size_of(dtype())); }
  size_t nbytes() const { return static_cast<size_t>(size()) * itemsize(); }
  Device device() const;
  bool valid() const { return node_ != nullptr; }

  /* Evaluates this array (and what it depends on) if not yet done. */
  void eval() const;
  bool is_evaluated() const;

  /* The single element, converted to T; evaluates. */
  template <class T>
  T item() const {
    check_item();
    T out{};
    copy_to(&out, dtype_of_v<T>);
    return out;
  }
  /* All elements in row-major order, converted to T; evaluates. */
  template <class T>
  std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> bytes(static_cast<size_t>(size()));  // vector<bool> has no data()
      copy_to(bytes.data(), bool_);
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      std::vector<T> out(static_cast<size_t>(size()));
      copy_to(out.data(), dtype_of_v<T>);
      return out;
    }
  }
  /* Evaluates and writes the elements, row-major, converted to `as`, into dst. */
  void copy_to(void* dst, Dtype as) const;

  /* Identity of the underlying node: equal for copies of the same handle. */
  const void* id() const { return node_.get(); }

  // Internal: graph construction and access used by ops, backends and compile.
  static std::vector<Array> make(std::vector<Shape> shapes, std::vector<Dtype> dtypes, std::shared_ptr<Primitive> prim,
                                 std::vector<Array> inputs);
  static Array make(Shape shape, Dtype dtype, std::shared_ptr<Primitive> prim, std::vector<Array> inputs);
  static Array from_tensor(detail::Tensor t, Device device);
  explicit Array(std::shared_ptr<detail::Node> node) : node_(std::move(node)) {}
  const std::shared_ptr<detail::Node>& node() const { return node_; }
  /* The evaluated data; throws if not evaluated. */
  const detail::Tensor& tensor() const;

 private:
  void check_item() const;
  std::shared_ptr<detail::Node> node_;
};

/* An array from host data in row-major order (a copy is taken). */
Array array(const void* data, Shape shape, Dtype dtype);
/* As above, checking that `count` elements match the shape's product. */
Array array_checked(const void* data, size_t count, Shape shape, Dtype dtype);

/* An array over read-only host memory that never changes (a mapped file), with no copy:
   `owner` keeps the memory alive for as long as any array or device upload uses it, and kiln
   never writes or frees it. `data` must be aligned to the dtype's size. On the CPU device. */
Array external_array(const void* data, Shape shape, Dtype dtype, std::shared_ptr<const void> owner);

/* An array from host data; data.size() must equal the shape's product. */
template <class T>
Array array(const std::vector<T>& data, Shape shape) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());  // vector<bool> has no data()
    return array_checked(bytes.data(), bytes.size(), std::move(shape), bool_);
  } else {
    return array_checked(data.data(), data.size(), std::move(shape), dtype_of_v<T>);
  }
}
/* A 1-D array. */
template <class T>
Array array(std::initializer_list<T> data) {
  std::vector<T> v(data);
  return array(v, Shape{static_cast<int64_t>(v.size())});
}
/* A 0-d array holding one scalar; its dtype is that of T. */
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> || std::is_same_v<T, float16_t> ||
                                            std::is_same_v<T, bfloat16_t>>>
Array array(T value) {
  return array(&value, Shape{}, dtype_of_v<T>);
}
/* A 0-d array of the given dtype holding `value` converted to it, on `device`. */
Array scalar(double value, Dtype dtype, Device device = default_device());
Array scalar_int(int64_t value, Dtype dtype, Device device = default_device());

namespace detail {
/* A C++ scalar as an array matching `like` (its dtype never widened past like's kind), on like's
   device (so that `x * 2` works for x on any GPU, whatever the default device). */
template <class T>
Array scalar_for(T value, const Array& like) {
  Dtype d = promote_with_scalar(like.dtype(), scalar_kind_of<T>());
  if constexpr (std::is_floating_point_v<T>)
    return scalar(static_cast<double>(value), d, like.device());
  else
    return scalar_int(static_cast<int64_t>(value), d, like.device());
}
template <class T>
inline constexpr bool is_scalar_v = std::is_arithmetic_v<T>;
}  // namespace detail

}  // namespace kiln
