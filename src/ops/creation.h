// Primitives that make arrays from parameters alone.
#pragma once

#include <optional>

#include "ops/primitive.h"

namespace kiln {

/* Fills the output with its one input, a 0-d array of the output's dtype. */
class Full : public Primitive {
 public:
  explicit Full(Shape shape) : Primitive(OpKind::Full), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>&) const override { return {shape_}; }
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const Full&>(o).shape_ == shape_;
  }

 private:
  Shape shape_;
};

/* start + i * step for i in [0, n), computed in float64 and converted. When `last` is
   given (linspace) the final element is exactly that value, not start + (n-1) * step. */
class Arange : public Primitive {
 public:
  Arange(double start, double step, int64_t n, std::optional<double> last = std::nullopt)
      : Primitive(OpKind::Arange), start_(start), step_(step), n_(n), last_(last) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>&) const override { return {{n_}}; }
  bool is_equivalent(const Primitive& o) const override {
    if (o.kind() != kind()) return false;
    auto* b = static_cast<const Arange*>(&o);
    return b->start_ == start_ && b->step_ == step_ && b->n_ == n_ && b->last_ == last_;
  }
  void print(std::ostream& os) const override {
    os << name() << "(" << start_ << "," << step_ << "," << n_;
    if (last_) os << "," << *last_;
    os << ")";
  }

 private:
  double start_, step_;
  int64_t n_;
  std::optional<double> last_;
};

/* The number of elements along `axes` of its input, minus ddof (never below 0), as a
   0-d array of the output dtype. Computed from the input's shape when run, so mean's
   divisor follows the size of a shapeless replay; compile folds it when shapes are fixed. */
class AxisSize : public Primitive {
 public:
  AxisSize(std::vector<int> axes, int64_t ddof) : Primitive(OpKind::AxisSize), axes_(std::move(axes)), ddof_(ddof) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>&) const override { return {Shape{}}; }
  bool is_equivalent(const Primitive& o) const override {
    if (o.kind() != kind()) return false;
    auto& b = static_cast<const AxisSize&>(o);
    return b.axes_ == axes_ && b.ddof_ == ddof_;
  }
  void print(std::ostream& os) const override { os << name() << "(ddof=" << ddof_ << ")"; }
  /* The value for an input of the given shape. */
  double count(const Shape& in) const;

 private:
  std::vector<int> axes_;
  int64_t ddof_;
};

/* The count of elements along axes of x minus ddof, as a 0-d array of dtype: a constant
   outside compile traces, an AxisSize node inside them. */
Array axis_size(const Array& x, const std::vector<int>& axes, int64_t ddof, Dtype dtype);

}  // namespace kiln
