// Front ends of the view ops: reshape, transpose and friends, broadcast, slice.
#include <algorithm>
#include <numeric>

#include "core/node.h"
#include "kiln/ops.h"
#include "ops/views.h"

namespace kiln {

using detail::shape_str;

/* Axis in [0, ndim) or a kiln::Error tagged with op. */
int normalize_axis(const char* op, int axis, int ndim) {
  int a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim) fail(op, "axis ", axis, " is out of range for an array of rank ", ndim);
  return a;
}

namespace {
void check_valid(const char* op, const Array& a) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
}
}  // namespace

Array reshape(const Array& a, Shape shape) {
  check_valid("reshape", a);
  auto prim = std::make_shared<Reshape>(std::move(shape));
  Shape out = prim->output_shapes({a.shape()})[0];
  // Inside a compile trace the node is kept: a shapeless replay at other sizes must apply it.
  if (out == a.shape() && detail::current_trace_id() == 0) return a;
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a});
}

Array flatten(const Array& a) {
  check_valid("flatten", a);
  return reshape(a, {-1});
}

Array transpose(const Array& a, std::vector<int> perm) {
  check_valid("transpose", a);
  int nd = a.ndim();
  if (perm.empty()) {
    perm.resize(static_cast<size_t>(nd));
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  if (static_cast<int>(perm.size()) != nd) {
    fail("transpose", "permutation has ", perm.size(), " axes but the array has rank ", nd);
  }
  std::vector<bool> seen(static_cast<size_t>(nd), false);
  for (auto& p : perm) {
    p = normalize_axis("transpose", p, nd);
    if (seen[static_cast<size_t>(p)]) fail("transpose", "axis ", p, " repeated in the permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  bool identity = true;
  for (int i = 0; i < nd; ++i) identity = identity && perm[static_cast<size_t>(i)] == i;
  if (identity) return a;
  auto prim = std::make_shared<Transpose>(std::move(perm));
  Shape out = prim->output_shapes({a.shape()})[0];
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a});
}

Array swapaxes(const Array& a, int axis1, int axis2) {
  check_valid("swapaxes", a);
  int nd = a.ndim();
  int i = normalize_axis("swapaxes", axis1, nd), j = normalize_axis("swapaxes", axis2, nd);
  std::vector<int> perm(static_cast<size_t>(nd));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  return transpose(a, perm);
}

Array broadcast_to(const Array& a, const Shape& shape) {
  check_valid("broadcast_to", a);
  for (auto d : shape) {
    if (d < 0) fail("broadcast_to", "negative dimension in shape ", shape_str(shape));
  }
  if (a.shape() == shape && detail::current_trace_id() == 0) return a;  // kept while tracing, as in reshape
  auto prim = std::make_shared<BroadcastTo>(shape);
  prim->output_shapes({a.shape()});  // validates
  return Array::make(shape, a.dtype(), std::move(prim), {a});
}

Array expand_dims(const Array& a, int axis) {
  check_valid("expand_dims", a);
  int ax = normalize_axis("expand_dims", axis, a.ndim() + 1);
  auto prim = std::make_shared<ExpandDims>(std::vector<int>{ax});
  Shape out = prim->output_shapes({a.shape()})[0];
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a});
}

Array squeeze(const Array& a, const std::vector<int>& axes) {
  check_valid("squeeze", a);
  int nd = a.ndim();
  std::vector<bool> drop(static_cast<size_t>(nd), false);
  if (axes.empty()) {
    for (int i = 0; i < nd; ++i) drop[static_cast<size_t>(i)] = a.shape()[static_cast<size_t>(i)] == 1;
  }
  for (int ax : axes) {
    int i = normalize_axis("squeeze", ax, nd);
    if (a.shape()[static_cast<size_t>(i)] != 1) {
      fail("squeeze", "cannot squeeze axis ", ax, " of size ", a.shape()[static_cast<size_t>(i)], " in shape ",
           shape_str(a.shape()));
    }
    drop[static_cast<size_t>(i)] = true;
  }
  std::vector<int> dropped;
  for (int i = 0; i < nd; ++i) {
    if (drop[static_cast<size_t>(i)]) dropped.push_back(i);
  }
  if (dropped.empty()) return a;
  auto prim = std::make_shared<Squeeze>(std::move(dropped));
  Shape out = prim->output_shapes({a.shape()})[0];
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a});
}

Array slice(const Array& a, const std::vector<SliceArg>& args) {
  check_valid("slice", a);
  auto prim = std::make_shared<Slice>(args);
  Shape out = prim->output_shapes({a.shape()})[0];
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a});
}

Array slice(const Array& a, const Shape& start, const Shape& stop, const Shape& step) {
  check_valid("slice", a);
  size_t nd = a.shape().size();
  if (start.size() != nd || stop.size() != nd || (!step.empty() && step.size() != nd)) {
    fail("slice", "start, stop and step need one entry per axis (", nd, ")");
  }
  std::vector<SliceArg> args(nd);
  for (size_t i = 0; i < nd; ++i) args[i] = SliceArg{start[i], stop[i], step.empty() ? 1 : step[i]};
  return slice(a, args);
}

}  // namespace kiln
