// Front-end ops. Each validates its arguments, throws kiln::Error tagged with
// the op's name on bad input, and builds a lazy node; nothing is computed here.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "kiln/array.h"

namespace kiln {

// ---- creation ---------------------------------------------------------------
Array zeros(const Shape& shape, Dtype dtype = float32);
Array ones(const Shape& shape, Dtype dtype = float32);
Array full(const Shape& shape, double value, Dtype dtype = float32);
/* full with `value` (a 0-d array) broadcast to shape, in value's dtype. */
Array full(const Shape& shape, const Array& value);
Array zeros_like(const Array& a);
Array ones_like(const Array& a);
Array full_like(const Array& a, double value);
/* [start, stop) in steps of step, like numpy.arange. */
Array arange(double start, double stop, double step = 1.0, Dtype dtype = float32);
Array arange(int64_t stop, Dtype dtype = int32);
/* num evenly spaced values from start to stop inclusive. */
Array linspace(double start, double stop, int64_t num, Dtype dtype = float32);
/* n x m with ones on diagonal k (m defaults to n). */
Array eye(int64_t n, std::optional<int64_t> m = std::nullopt, int64_t k = 0, Dtype dtype = float32);

// ---- unary ------------------------------------------------------------------
// Array abs(const Array& a), exp, erf, ...: one function per unary row of the op registry,
// listed in the generated kiln/c/kiln_unary_ops.def; docs/ops.md says what each computes.
// Math on bool or integer inputs computes in float32 (docs/dtypes.md).
#define KILN_C_UNARY(name) Array name(const Array& a);
#include "kiln/c/kiln_unary_ops.def"
#undef KILN_C_UNARY
/* Converts element type (float to integer truncates toward zero, saturates, NaN gives 0). */
Array astype(const Array& a, Dtype dtype);

// ---- binary (broadcasting, dtypes promoted by promote_types) ----------------
// Array add(const Array& a, const Array& b), less, ...: one function per binary row of the
// op registry, listed in the generated kiln/c/kiln_binary_ops.def (docs/ops.md).
#define KILN_C_BINARY(name) Array name(const Array& a, const Array& b);
#include "kiln/c/kiln_binary_ops.def"
#undef KILN_C_BINARY
/* cond ? a : b, broadcasting all three. */
Array where(const Array& cond, const Array& a, const Array& b);
/* min(max(a, lo), hi); either bound may be absent. */
Array clip(const Array& a, const std::optional<Array>& lo, const std::optional<Array>& hi);

// ---- reductions -------------------------------------------------------------
// `axes` may be negative; an empty `axes` list means every axis.
// sum, prod and cumsum of bool and of integers narrower than 32 bits return int32
// (uint32 for unsigned), like JAX; float16/bfloat16 accumulate in float32. mean,
// var, logsumexp and softmax of bool or integers return float32. max, min, argmax
// and argmin over an empty axis are errors; sum gives 0 and prod 1 there.
Array sum(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
Array prod(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
Array mean(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
/* Variance with ddof degrees of freedom removed from the divisor. */
Array var(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false, int ddof = 0);
Array max(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
Array min(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
Array all(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
Array any(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
Array logsumexp(const Array& a, const std::vector<int>& axes = {}, bool keepdims = false);
/* Index (int32) of the first largest / smallest element along axis; without an axis,
   of the flattened array. NaN counts as largest for argmax and smallest for argmin. */
Array argmax(const Array& a, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array argmin(const Array& a, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array softmax(const Array& a, const std::vector<int>& axes = {-1});
/* Inclusive cumulative sum along axis (exclusive and reverse on request). */
Array cumsum(const Array& a, int axis, bool reverse = false, bool inclusive = true);

// ---- sorting and selection ----------------------------------------------------
// Along one axis, in numpy.sort's order: NaN after every number (largest). Index
// results are int32.
/* The k largest elements along axis (0 <= k <= its size), largest first, and their
   indices; equal values come in index order. */
std::pair<Array, Array> topk(const Array& a, int k, int axis = -1);
Array sort(const Array& a, int axis = -1);
/* Indices that sort a along axis; stable (equal values keep their order). */
Array argsort(const Array& a, int axis = -1);
/* Indices that put a's kth smallest element (kth may be negative) at position kth along
   axis, no larger element before it and no smaller one after it. */
Array argpartition(const Array& a, int kth, int axis = -1);
/* a rearranged as argpartition says. */
Array partition(const Array& a, int kth, int axis = -1);

// ---- linear algebra ---------------------------------------------------------
/* numpy.matmul semantics: 1-D operands are promoted and the added axis removed,
   leading (batch) axes broadcast. */
Array matmul(const Array& a, const Array& b);

// ---- layout -----------------------------------------------------------------
/* One dimension may be -1 and is inferred. */
Array reshape(const Array& a, Shape shape);
/* Reverses axes when perm is empty. */
Array transpose(const Array& a, std::vector<int> perm = {});
Array swapaxes(const Array& a, int axis1, int axis2);
Array broadcast_to(const Array& a, const Shape& shape);
Array expand_dims(const Array& a, int axis);
/* Removes the given size-1 axes, or all of them when axes is empty. */
Array squeeze(const Array& a, const std::vector<int>& axes = {});
Array flatten(const Array& a);
/* Python-style slicing per axis: start/stop clamp, negative values count from the end,
   negative steps walk backwards. Missing trailing axes are taken whole. */
struct SliceArg {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
Array slice(const Array& a, const std::vector<SliceArg>& args);
/* start/stop/step per axis with every axis given. */
Array slice(const Array& a, const Shape& start, const Shape& stop, const Shape& step = {});
Array concatenate(const std::vector<Array>& arrays, int axis = 0);
Array stack(const std::vector<Array>& arrays, int axis = 0);
/* Splits into `sections` equal parts along axis. */
std::vector<Array> split(const Array& a, int sections, int axis = 0);
/* Splits before each index along axis. */
std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis = 0);
/* Pads each axis with (before, after) elements of pad_value. */
Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& widths, double pad_value = 0.0);
/* numpy.take: selects along axis by integer indices (negative count from the end). */
Array take(const Array& a, const Array& indices, int axis);
/* numpy.take_along_axis: indices has a's rank and broadcasts against it off the axis. */
Array take_along_axis(const Array& a, const Array& indices, int axis);
/* A copy of a with the region start:stop:step replaced by update (broadcast to it). */
Array slice_update(const Array& a, const Array& update, const Shape& start, const Shape& stop, const Shape& step = {});
/* A contiguous copy. */
Array copy(const Array& a);

// ---- operators --------------------------------------------------------------
Array operator-(const Array& a);
Array operator~(const Array& a);
Array operator!(const Array& a);

#define KILN_BINARY_OPERATOR(OP, FN)                                            \
  inline Array operator OP(const Array& a, const Array& b) { return FN(a, b); } \
  template <class T, class = std::enable_if_t<detail::is_scalar_v<T>>>          \
  Array operator OP(const Array& a, T b) {                                      \
    return FN(a, detail::scalar_for(b, a));                                     \
  }                                                                             \
  template <class T, class = std::enable_if_t<detail::is_scalar_v<T>>>          \
  Array operator OP(T a, const Array& b) {                                      \
    return FN(detail::scalar_for(a, b), b);                                     \
  }
KILN_BINARY_OPERATOR(+, add)
KILN_BINARY_OPERATOR(-, subtract)
KILN_BINARY_OPERATOR(*, multiply)
KILN_BINARY_OPERATOR(/, divide)
KILN_BINARY_OPERATOR(%, remainder)
KILN_BINARY_OPERATOR(==, equal)
KILN_BINARY_OPERATOR(!=, not_equal)
KILN_BINARY_OPERATOR(<, less)
KILN_BINARY_OPERATOR(<=, less_equal)
KILN_BINARY_OPERATOR(>, greater)
KILN_BINARY_OPERATOR(>=, greater_equal)
KILN_BINARY_OPERATOR(&, bitwise_and)
KILN_BINARY_OPERATOR(|, bitwise_or)
KILN_BINARY_OPERATOR(^, bitwise_xor)
KILN_BINARY_OPERATOR(<<, left_shift)
KILN_BINARY_OPERATOR(>>, right_shift)
#undef KILN_BINARY_OPERATOR

/* Binary ops with one C++ scalar operand, without widening the array's dtype. */
template <class T, class = std::enable_if_t<detail::is_scalar_v<T>>>
Array maximum(const Array& a, T b) {
  return maximum(a, detail::scalar_for(b, a));
}
template <class T, class = std::enable_if_t<detail::is_scalar_v<T>>>
Array minimum(const Array& a, T b) {
  return minimum(a, detail::scalar_for(b, a));
}
template <class T, class = std::enable_if_t<detail::is_scalar_v<T>>>
Array power(const Array& a, T b) {
  return power(a, detail::scalar_for(b, a));
}

}  // namespace kiln
