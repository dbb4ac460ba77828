// Front ends of the reductions and scans: axis handling, accumulator dtypes, and
// the composite ops (mean, var, logsumexp, softmax) built from primitives.
#include <sstream>

#include "kiln/ops.h"
#include "ops/creation.h"
#include "ops/reduce.h"

namespace kiln {

int normalize_axis(const char* op, int axis, int ndim);  // ops_views.cpp

using detail::shape_str;

std::string axes_str(const std::vector<int>& axes) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < axes.size(); ++i) os << (i ? "," : "") << axes[i];
  os << ")";
  return os.str();
}

template <class F>
std::vector<Shape> Reduce<F>::output_shapes(const std::vector<Shape>& in) const {
  Shape out = in[0];
  for (int ax : axes_) {
    if (ax >= static_cast<int>(out.size())) {
      fail(name(), "axis ", ax, " is out of range for an array of rank ", out.size());
    }
    if constexpr (std::is_same_v<F, math::Max> || std::is_same_v<F, math::Min>) {
      // No identity exists: numpy and JAX refuse as well.
      if (out[static_cast<size_t>(ax)] == 0 && !empty_ok_) {
        fail(name(), "cannot reduce over an empty axis (axis ", ax, " of shape ", shape_str(in[0]), ")");
      }
    }
    out[static_cast<size_t>(ax)] = 1;
  }
  return {out};
}

#define KILN_REDUCE(F, n) template std::vector<Shape> Reduce<math::F>::output_shapes(const std::vector<Shape>&) const;
#include "ops/op_table.def"

std::vector<Shape> ArgReduce::output_shapes(const std::vector<Shape>& in) const {
  Shape out = in[0];
  if (axis_ >= static_cast<int>(out.size())) {
    fail(name(), "axis ", axis_, " is out of range for an array of rank ", out.size());
  }
  if (out[static_cast<size_t>(axis_)] == 0) {
    fail(name(), "cannot reduce over an empty axis (axis ", axis_, " of shape ", shape_str(in[0]), ")");
  }
  out[static_cast<size_t>(axis_)] = 1;
  return {out};
}

std::vector<Shape> CumSum::output_shapes(const std::vector<Shape>& in) const {
  if (axis_ >= static_cast<int>(in[0].size())) {
    fail(name(), "axis ", axis_, " is out of range for an array of rank ", in[0].size());
  }
  return {in[0]};
}

namespace {

void check_valid(const char* op, const Array& a) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
}

Array cast(const Array& a, Dtype d) { return a.dtype() == d ? a : astype(a, d); }

/* Normalized, sorted, distinct axes; all of them when `axes` is empty. */
std::vector<int> reduce_axes(const char* op, const Array& a, const std::vector<int>& axes) {
  int nd = a.ndim();
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < nd; ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> seen(static_cast<size_t>(nd), false);
  for (int ax : axes) {
    int i = normalize_axis(op, ax, nd);
    if (seen[static_cast<size_t>(i)]) fail(op, "axis ", i, " repeated in axes ", axes_str(axes));
    seen[static_cast<size_t>(i)] = true;
  }
  for (int i = 0; i < nd; ++i) {
    if (seen[static_cast<size_t>(i)]) out.push_back(i);
  }
  return out;
}

/* Reduces already normalized axes of x (whose dtype is the accumulator's) with F,
   keeping them as size-1 axes. */
template <class F>
Array reduce_keep(const Array& x, const std::vector<int>& axes, bool empty_ok = false) {
  if (axes.empty()) return x;  // a 0-d input: nothing to reduce
  auto prim = std::make_shared<Reduce<F>>(axes, empty_ok);
  Shape out = prim->output_shapes({x.shape()})[0];
  return Array::make(std::move(out), x.dtype(), std::move(prim), {x});
}

Array finish(const Array& r, const Shape& in_shape, const std::vector<int>& axes, bool keepdims) {
  return keepdims ? r : squeeze(r, axes);  // a squeeze, unlike a reshape, applies at any size
}

template <class F>
Array reduce_op(const char* op, const Array& a, const std::vector<int>& axes_in, bool keepdims, Dtype d) {
  check_valid(op, a);
  auto axes = reduce_axes(op, a, axes_in);
  return finish(reduce_keep<F>(cast(a, d), axes), a.shape(), axes, keepdims);
}

// Like JAX: narrow integers and bool accumulate (and return) in 32 bits.
Dtype sum_dtype(Dtype d) {
  switch (d) {
    case bool_:
    case int8:
    case int16: return int32;
    case uint8:
    case uint16: return uint32;
    default: return d;
  }
}

// float16/bfloat16 results are computed in float32 and rounded once at the end.
Dtype wide_float(Dtype d) { return d == float16 || d == bfloat16 ? float32 : d; }

Array mean_keep(const Array& x, const std::vector<int>& axes) {
  return reduce_keep<math::Sum>(x, axes) / axis_size(x, axes, 0, x.dtype());
}

/* max over axes with non-finite maxima replaced by 0, so shifting by it is safe. An empty
   axis gives -inf, hence 0: no branch on the size, so a shapeless trace holds at every size. */
Array finite_max_keep(const Array& x, const std::vector<int>& axes) {
  Array m = reduce_keep<math::Max>(x, axes, /*empty_ok=*/true);
  return where(isfinite(m), m, scalar(0.0, m.dtype(), m.device()));  // a scalar keeps softmax fusable
}

template <class P>
Array arg_reduce(const char* op, const Array& a, std::optional<int> axis, bool keepdims) {
  check_valid(op, a);
  Array x = a;
  int ax = 0;
  if (axis)
    ax = normalize_axis(op, *axis, a.ndim());
  else
    x = reshape(a, {-1});
  auto prim = std::make_shared<P>(ax);
  Shape out = prim->output_shapes({x.shape()})[0];
  Array r = Array::make(std::move(out), int32, std::move(prim), {x});
  if (!axis) return reshape(r, keepdims ? Shape(a.shape().size(), 1) : Shape{});
  return keepdims ? r : squeeze(r, {ax});  // not a reshape to this size: shapeless replays
}

}  // namespace

Array sum(const Array& a, const std::vector<int>& axes, bool keepdims) {
  check_valid("sum", a);
  return reduce_op<math::Sum>("sum", a, axes, keepdims, sum_dtype(a.dtype()));
}

Array prod(const Array& a, const std::vector<int>& axes, bool keepdims) {
  check_valid("prod", a);
  return reduce_op<math::Prod>("prod", a, axes, keepdims, sum_dtype(a.dtype()));
}

Array max(const Array& a, const std::vector<int>& axes, bool keepdims) {
  check_valid("max", a);
  return reduce_op<math::Max>("max", a, axes, keepdims, a.dtype());
}

Array min(const Array& a, const std::vector<int>& axes, bool keepdims) {
  check_valid("min", a);
  return reduce_op<math::Min>("min", a, axes, keepdims, a.dtype());
}

Array all(const Array& a, const std::vector<int>& axes, bool keepdims) {
  return reduce_op<math::All>("all", a, axes, keepdims, bool_);
}

Array any(const Array& a, const std::vector<int>& axes, bool keepdims) {
  return reduce_op<math::Any>("any", a, axes, keepdims, bool_);
}

Array mean(const Array& a, const std::vector<int>& axes_in, bool keepdims) {
  check_valid("mean", a);
  auto axes = reduce_axes("mean", a, axes_in);
  Dtype out = to_floating(a.dtype());
  Array m = mean_keep(cast(a, wide_float(out)), axes);
  return cast(finish(m, a.shape(), axes, keepdims), out);
}

Array var(const Array& a, const std::vector<int>& axes_in, bool keepdims, int ddof) {
  check_valid("var", a);
  auto axes = reduce_axes("var", a, axes_in);
  Dtype out = to_floating(a.dtype());
  Array x = cast(a, wide_float(out));
  Array d = x - mean_keep(x, axes);
  // numpy's divisor: count - ddof, never below zero (0 gives inf or NaN).
  Array v = reduce_keep<math::Sum>(d * d, axes) / axis_size(x, axes, ddof, x.dtype());
  return cast(finish(v, a.shape(), axes, keepdims), out);
}

Array logsumexp(const Array& a, const std::vector<int>& axes_in, bool keepdims) {
  check_valid("logsumexp", a);
  auto axes = reduce_axes("logsumexp", a, axes_in);
  Dtype out = to_floating(a.dtype());
  Array x = cast(a, wide_float(out));
  // Over an empty axis the max shift is 0 and the sum of no exponentials 0, whose log is
  // -inf: the same ops give the right answer at every size.
  Array m = finite_max_keep(x, axes);
  Array r = log(reduce_keep<math::Sum>(exp(x - m), axes)) + m;
  return cast(finish(r, a.shape(), axes, keepdims), out);
}

Array softmax(const Array& a, const std::vector<int>& axes_in) {
  check_valid("softmax", a);
  auto axes = reduce_axes("softmax", a, axes_in);
  Dtype out = to_floating(a.dtype());
  Array x = cast(a, wide_float(out));
  // No branch on the size: an empty input gives an empty result through the same ops.
  Array e = exp(x - finite_max_keep(x, axes));
  return cast(e / reduce_keep<math::Sum>(e, axes), out);
}

Array argmax(const Array& a, std::optional<int> axis, bool keepdims) {
  return arg_reduce<ArgMax>("argmax", a, axis, keepdims);
}

Array argmin(const Array& a, std::optional<int> axis, bool keepdims) {
  return arg_reduce<ArgMin>("argmin", a, axis, keepdims);
}

Array cumsum(const Array& a, int axis, bool reverse, bool inclusive) {
  check_valid("cumsum", a);
  int ax = normalize_axis("cumsum", axis, a.ndim());
  Array x = cast(a, sum_dtype(a.dtype()));
  return Array::make(x.shape(), x.dtype(), std::make_shared<CumSum>(ax, reverse, inclusive), {x});
}

}  // namespace kiln
