// Front ends of sorting and selection: the axis is moved last for the primitive and
// moved back after it; kth and k are checked against the axis here.
#include <cstdint>

#include "kiln/ops.h"
#include "ops/sort.h"

namespace kiln {

int normalize_axis(const char* op, int axis, int ndim);  // ops_views.cpp

using detail::shape_str;

std::vector<Shape> Selection::output_shapes(const std::vector<Shape>& in) const {
  if (in[0].empty()) fail(name(), "needs an array of at least one axis");
  const int64_t n = in[0].back();
  if (n > int64_t{INT32_MAX}) fail(name(), "an axis of ", n, " elements is too long for int32 positions");
  Shape out = in[0];
  switch (kind()) {
    case OpKind::TopK:
      if (k_ > n) fail(name(), "k ", k_, " is more than the axis holds (", n, ")");
      out.back() = k_;
      return {out, out};
    case OpKind::Partition:
    case OpKind::ArgPartition:
      if (k_ < -n || k_ >= n) fail(name(), "kth ", k_, " is out of range for an axis of size ", n);
      return {out};
    default: return {out};
  }
}

void Selection::print(std::ostream& os) const {
  os << name();
  if (kind() == OpKind::TopK || kind() == OpKind::Partition || kind() == OpKind::ArgPartition) os << "(" << k_ << ")";
}

namespace {

/* The primitive's outputs (of the given dtypes) along `axis` of a: the axis is swapped
   last for it and back after it, as views. */
std::vector<Array> along_axis(const char* op, const Array& a, int axis, std::shared_ptr<Selection> prim,
                              std::vector<Dtype> dtypes) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
  const int ax = normalize_axis(op, axis, a.ndim()), last = a.ndim() - 1;
  Array x = ax == last ? a : swapaxes(a, ax, last);
  std::vector<Shape> shapes = prim->output_shapes({x.shape()});
  std::vector<Array> outs = Array::make(std::move(shapes), std::move(dtypes), std::move(prim), {x});
  if (ax != last) {
    for (auto& o : outs) o = swapaxes(o, ax, last);
  }
  return outs;
}

/* Checks kth against an axis of n elements (negative counts from the end) and returns it
   as given: the primitive counts a negative kth from the end of the row it runs on, so a
   shapeless replay at another length takes the same element eager code takes (resolved
   here, a traced kth=-1 stayed at the traced length's last position: kiln_fuzz seeds 170,
   455). */
int64_t check_kth(const char* op, const Array& a, int kth, int axis) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
  const int64_t n = a.shape(normalize_axis(op, axis, a.ndim()));
  if (kth < -n || kth >= n) fail(op, "kth ", kth, " is out of range for an axis of size ", n);
  return kth;
}

}  // namespace

std::pair<Array, Array> topk(const Array& a, int k, int axis) {
  if (!a.valid()) fail("topk", "operation on an empty Array handle");
  const int64_t n = a.shape(normalize_axis("topk", axis, a.ndim()));
  if (k < 0 || k > n) fail("topk", "k ", k, " is out of range for an axis of size ", n);
  auto outs = along_axis("topk", a, axis, std::make_shared<TopK>(k), {a.dtype(), int32});
  return {outs[0], outs[1]};
}

Array sort(const Array& a, int axis) {
  return along_axis("sort", a, axis, std::make_shared<Sort>(), {a.valid() ? a.dtype() : float32})[0];
}

Array argsort(const Array& a, int axis) {
  return along_axis("argsort", a, axis, std::make_shared<ArgSort>(), {int32})[0];
}

Array argpartition(const Array& a, int kth, int axis) {
  const int64_t k = check_kth("argpartition", a, kth, axis);
  return along_axis("argpartition", a, axis, std::make_shared<ArgPartition>(k), {int32})[0];
}

Array partition(const Array& a, int kth, int axis) {
  const int64_t k = check_kth("partition", a, kth, axis);
  return along_axis("partition", a, axis, std::make_shared<Partition>(k), {a.dtype()})[0];
}

}  // namespace kiln
