// Reduction and scan primitives. Reductions keep the input's rank (reduced axes
// become size 1); dropping them is a reshape done by the front end, so a
// shapeless replay only has to re-run output_shapes.
#pragma once

#include "backend/common/math.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"

namespace kiln {

/* "(0,2)" */
std::string axes_str(const std::vector<int>& axes);

/* Reduces the listed axes (non-negative, sorted, distinct) with F; the output
   has the input's dtype. Front ends cast first where the accumulator differs.
   max and min refuse an empty reduced axis unless `empty_ok`, which gives F's
   identity (-inf for max) instead: softmax and logsumexp use it so that the graph
   they trace holds at every size (a shapeless replay may make the axis empty). */
template <class F>
class Reduce : public Primitive {
 public:
  explicit Reduce(std::vector<int> axes, bool empty_ok = false)
      : Primitive(op_kind_of<F>::value), axes_(std::move(axes)), empty_ok_(empty_ok) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    auto& r = static_cast<const Reduce&>(o);
    return o.kind() == kind() && r.axes_ == axes_ && r.empty_ok_ == empty_ok_;
  }
  void print(std::ostream& os) const override { os << name() << axes_str(axes_); }
  const std::vector<int>& axes() const { return axes_; }
  bool empty_ok() const { return empty_ok_; }

 private:
  std::vector<int> axes_;
  bool empty_ok_;
};

/* Index (int32) of the first extreme element along one axis, which becomes size 1.
   NaN counts as the extreme. */
class ArgReduce : public Primitive {
 public:
  ArgReduce(OpKind kind, int axis) : Primitive(kind), axis_(axis) {}
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const ArgReduce&>(o).axis_ == axis_;
  }
  void print(std::ostream& os) const override { os << name() << "(" << axis_ << ")"; }
  int axis() const { return axis_; }

 protected:
  int axis_;
};

class ArgMax : public ArgReduce {
 public:
  explicit ArgMax(int axis) : ArgReduce(OpKind::ArgMax, axis) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
};

class ArgMin : public ArgReduce {
 public:
  explicit ArgMin(int axis) : ArgReduce(OpKind::ArgMin, axis) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
};

/* Cumulative sum along one axis in the input's dtype (float16/bfloat16 accumulate
   in float32). Exclusive puts the sum of the elements before each position. */
class CumSum : public Primitive {
 public:
  CumSum(int axis, bool reverse, bool inclusive)
      : Primitive(OpKind::CumSum), axis_(axis), reverse_(reverse), inclusive_(inclusive) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    auto& c = static_cast<const CumSum&>(o);
    return o.kind() == kind() && c.axis_ == axis_ && c.reverse_ == reverse_ && c.inclusive_ == inclusive_;
  }
  void print(std::ostream& os) const override {
    os << name() << "(" << axis_ << "," << reverse_ << "," << inclusive_ << ")";
  }
  int axis() const { return axis_; }
  bool reverse() const { return reverse_; }
  bool inclusive() const { return inclusive_; }

 private:
  int axis_;
  bool reverse_, inclusive_;
};

/* The axes of any Reduce<F> primitive (kind in the KILN_REDUCE rows of the op table). */
inline const std::vector<int>& reduce_axes_of(const Primitive& p) {
  switch (p.kind()) {
    // clang-format 14 would join the #include below onto the macro's line.
    // clang-format off
#define KILN_REDUCE(F, n) \
  case OpKind::F:         \
    return static_cast<const Reduce<math::F>&>(p).axes();
#include "ops/op_table.def"
    // clang-format on
    default: fail("reduce", "not a reduction: ", p.name());
  }
}

}  // namespace kiln
