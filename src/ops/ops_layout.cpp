// Front ends of the layout ops: copy, concatenate, stack, split, pad, take,
// take_along_axis, slice_update.
#include "kiln/ops.h"
#include "ops/layout.h"

namespace kiln {

using detail::shape_str;

int normalize_axis(const char* op, int axis, int ndim);  // ops_views.cpp

namespace {
void check_valid(const char* op, const Array& a) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
}

void check_indices(const char* op, const Array& indices) {
  check_valid(op, indices);
  if (!is_integral(indices.dtype())) fail(op, "indices must be integers, got ", dtype_name(indices.dtype()));
}

Array cast(const Array& a, Dtype d) { return a.dtype() == d ? a : astype(a, d); }
}  // namespace

Array copy(const Array& a) {
  check_valid("copy", a);
  return Array::make(a.shape(), a.dtype(), std::make_shared<Copy>(), {a});
}

Array concatenate(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) fail("concatenate", "need at least one array to concatenate");
  std::vector<Shape> shapes;
  for (auto& a : arrays) {
    check_valid("concatenate", a);
    shapes.push_back(a.shape());
  }
  if (shapes[0].empty()) fail("concatenate", "zero-dimensional arrays cannot be concatenated");
  int ax = normalize_axis("concatenate", axis, arrays[0].ndim());
  auto prim = std::make_shared<Concatenate>(ax);
  Shape out = prim->output_shapes(shapes)[0];
  Dtype d = arrays[0].dtype();
  for (auto& a : arrays) d = promote_types(d, a.dtype());
  if (arrays.size() == 1) return cast(arrays[0], d);  // arrays are immutable: no copy needed
  std::vector<Array> inputs;
  for (auto& a : arrays) inputs.push_back(cast(a, d));
  return Array::make(std::move(out), d, std::move(prim), std::move(inputs));
}

Array stack(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) fail("stack", "need at least one array to stack");
  for (size_t i = 0; i < arrays.size(); ++i) {
    check_valid("stack", arrays[i]);
    if (arrays[i].shape() != arrays[0].shape()) {
      fail("stack", "array ", i, " has shape ", shape_str(arrays[i].shape()), " but array 0 has shape ",
           shape_str(arrays[0].shape()));
    }
  }
  int ax = normalize_axis("stack", axis, arrays[0].ndim() + 1);
  std::vector<Array> expanded;
  for (auto& a : arrays) expanded.push_back(expand_dims(a, ax));
  return concatenate(expanded, ax);
}

std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis) {
  check_valid("split", a);
  int ax = normalize_axis("split", axis, a.ndim());
  std::vector<Array> parts;
  // Pieces are Python slices between consecutive split points, so indices clamp and may
  // be negative; the outer ends stay open so a shapeless replay keeps them at the ends.
  for (size_t i = 0; i <= indices.size(); ++i) {
    std::vector<SliceArg> args(static_cast<size_t>(ax) + 1);
    if (i > 0) args.back().start = indices[i - 1];
    if (i < indices.size()) args.back().stop = indices[i];
    parts.push_back(slice(a, args));
  }
  return parts;
}

std::vector<Array> split(const Array& a, int sections, int axis) {
  check_valid("split", a);
  int ax = normalize_axis("split", axis, a.ndim());
  if (sections <= 0) fail("split", "number of sections must be positive, got ", sections);
  int64_t n = a.shape()[static_cast<size_t>(ax)];
  if (n % sections != 0) {
    fail("split", "array of size ", n, " along axis ", ax, " cannot be split into ", sections, " equal sections");
  }
  std::vector<int64_t> indices;
  for (int i = 1; i < sections; ++i) indices.push_back(n / sections * i);
  return split(a, indices, ax);
}

Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& widths, double pad_value) {
  check_valid("pad", a);
  auto prim = std::make_shared<Pad>(widths, pad_value);
  Shape out = prim->output_shapes({a.shape()})[0];
  if (out == a.shape()) return a;
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a});
}

Array take(const Array& a, const Array& indices, int axis) {
  check_valid("take", a);
  check_indices("take", indices);
  int ax = normalize_axis("take", axis, a.ndim());
  auto prim = std::make_shared<Take>(ax);
  Shape out = prim->output_shapes({a.shape(), indices.shape()})[0];
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a, indices});
}

Array take_along_axis(const Array& a, const Array& indices, int axis) {
  check_valid("take_along_axis", a);
  check_indices("take_along_axis", indices);
  int ax = normalize_axis("take_along_axis", axis, a.ndim());
  auto prim = std::make_shared<TakeAlongAxis>(ax);
  Shape out = prim->output_shapes({a.shape(), indices.shape()})[0];
  return Array::make(std::move(out), a.dtype(), std::move(prim), {a, indices});
}

Array slice_update(const Array& a, const Array& update, const Shape& start, const Shape& stop, const Shape& step) {
  check_valid("slice_update", a);
  check_valid("slice_update", update);
  size_t nd = a.shape().size();
  if (start.size() != nd || stop.size() != nd || (!step.empty() && step.size() != nd)) {
    fail("slice_update", "start, stop and step need one entry per axis (", nd, ")");
  }
  std::vector<SliceArg> args(nd);
  for (size_t i = 0; i < nd; ++i) args[i] = SliceArg{start[i], stop[i], step.empty() ? 1 : step[i]};
  auto prim = std::make_shared<SliceUpdate>(std::move(args));
  prim->output_shapes({a.shape(), update.shape()});  // validates
  return Array::make(a.shape(), a.dtype(), std::move(prim), {a, cast(update, a.dtype())});
}

}  // namespace kiln
