// Front ends of the collectives, their shapes and their CPU evaluation.
#include "distributed/comm.h"
#include "kiln/distributed.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "ops/distributed.h"

namespace kiln {

namespace {

// What every collective needs of x: a dtype NCCL sums, and the rank's device.
void check_input(const char* op, const Array& x, const distributed::Group& g, bool needs_axis) {
  switch (x.dtype()) {
    case float16:
    case bfloat16:
    case float32:
    case float64:
    case int32:
    case int64: break;
    default:
      fail(op, "dtype ", dtype_name(x.dtype()),
           " is not supported (float16, bfloat16, float32, float64, int32, int64)");
  }
  if (const auto d = g.device(); d && *d != x.device())
    fail(op, "x is on ", x.device().str(), ", but rank ", g.rank(), " of the group is on ", d->str());
  if (needs_axis && x.ndim() == 0) fail(op, "x must have at least one axis");
}

}  // namespace

std::vector<Shape> Collective::output_shapes(const std::vector<Shape>& in) const {
  Shape s = in[0];
  const int64_t n = group_.size();
  if (kind() == OpKind::AllSum) return {s};
  if (s.empty()) fail(name(), "x must have at least one axis");
  if (kind() == OpKind::AllGather) {
    s[0] *= n;
  } else {
    if (s[0] % n != 0) fail(name(), "axis 0 of length ", s[0], " does not divide over ", n, " ranks");
    s[0] /= n;
  }
  return {s};
}

void Collective::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  group_.comm()->run_host(kind(), group_.rank(), in[0], out[0]);
}

Array all_sum(const Array& x, const distributed::Group& group) {
  check_input("all_sum", x, group, false);
  return Array::make(x.shape(), x.dtype(), std::make_shared<AllSum>(group), {x});
}

Array all_gather(const Array& x, const distributed::Group& group, int axis) {
  check_input("all_gather", x, group, true);
  const int rank = x.ndim();
  const int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank) fail("all_gather", "axis ", axis, " is out of range for an array of rank ", rank);
  auto prim = std::make_shared<AllGather>(group);
  Array y = Array::make(prim->output_shapes({x.shape()})[0], x.dtype(), prim, {x});
  const int64_t n = group.size();
  if (ax == 0 || n == 1) return y;
  // The ranks' parts follow each other along axis 0: (n, d0, ...) with n moved in front of `axis`.
  Shape parts{n};
  for (int64_t d : x.shape()) parts.push_back(d);
  std::vector<int> order;
  for (int i = 1; i <= ax; ++i) order.push_back(i);
  order.push_back(0);
  for (int i = ax + 1; i <= rank; ++i) order.push_back(i);
  Shape joined = x.shape();
  joined[static_cast<size_t>(ax)] *= n;
  return reshape(transpose(reshape(y, parts), order), joined);
}

Array reduce_scatter(const Array& x, const distributed::Group& group) {
  check_input("reduce_scatter", x, group, true);
  auto prim = std::make_shared<ReduceScatter>(group);
  return Array::make(prim->output_shapes({x.shape()})[0], x.dtype(), prim, {x});
}

}  // namespace kiln
