// The collectives over a group (kiln/distributed.h): one class per op, the group an attribute,
// so CSE merges two only within one group.
#pragma once

#include "kiln/distributed.h"
#include "ops/primitive.h"

namespace kiln {

class Collective : public Primitive {
 public:
  Collective(OpKind kind, distributed::Group group) : Primitive(kind), group_(std::move(group)) {}
  const distributed::Group& group() const { return group_; }
  /* On host tensors: the group of one rank copies, a CPU group exchanges with its other threads. */
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    return same_kind(o) && static_cast<const Collective&>(o).group_ == group_;
  }
  void print(std::ostream& os) const override { os << name() << "(group=" << group_.id() << ")"; }

 private:
  distributed::Group group_;
};

/* The sum over the ranks, on every rank. */
class AllSum final : public Collective {
 public:
  explicit AllSum(distributed::Group g) : Collective(OpKind::AllSum, std::move(g)) {}
};

/* The ranks' inputs joined along axis 0 in rank order (other axes: the front end moves them). */
class AllGather final : public Collective {
 public:
  explicit AllGather(distributed::Group g) : Collective(OpKind::AllGather, std::move(g)) {}
};

/* The sum over the ranks, then this rank's part of axis 0. */
class ReduceScatter final : public Collective {
 public:
  explicit ReduceScatter(distributed::Group g) : Collective(OpKind::ReduceScatter, std::move(g)) {}
};

}  // namespace kiln
