// Sorting and selection primitives. Each works along the last axis (front ends move
// another axis there and back) in numpy.sort's order: NaN after every number. Index
// results are int32; equal values keep their input order.
#pragma once

#include "ops/primitive.h"

namespace kiln {

/* The shared form: the kind says what is computed, `k` is the kth position of a
   partition (negative: from the end of the row, resolved when it runs) or the count of
   a topk (unused by sort and argsort). */
class Selection : public Primitive {
 public:
  Selection(OpKind kind, int64_t k) : Primitive(kind), k_(k) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const Selection&>(o).k_ == k_;
  }
  void print(std::ostream& os) const override;
  int64_t k() const { return k_; }

 private:
  int64_t k_;
};

/* The row sorted ascending. */
class Sort : public Selection {
 public:
  Sort() : Selection(OpKind::Sort, 0) {}
};

/* The positions that sort the row (stable). */
class ArgSort : public Selection {
 public:
  ArgSort() : Selection(OpKind::ArgSort, 0) {}
};

/* The row with its kth element in sorted position, no larger one before it and no
   smaller one after it. */
class Partition : public Selection {
 public:
  explicit Partition(int64_t kth) : Selection(OpKind::Partition, kth) {}
};

/* The positions of Partition's result. */
class ArgPartition : public Selection {
 public:
  explicit ArgPartition(int64_t kth) : Selection(OpKind::ArgPartition, kth) {}
};

/* Two outputs: the k largest values of the row, largest first (NaN counts as largest,
   equal values in input order), and their positions. */
class TopK : public Selection {
 public:
  explicit TopK(int64_t k) : Selection(OpKind::TopK, k) {}
};

}  // namespace kiln
