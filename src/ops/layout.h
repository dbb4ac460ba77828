// Primitives that rearrange or gather elements into a fresh buffer: copy,
// concatenate, pad, slice_update, take, take_along_axis. Every input that holds
// elements has the output's dtype (front ends cast); index inputs are integers.
#pragma once

#include <utility>

#include "kiln/ops.h"
#include "ops/primitive.h"

namespace kiln {

/* A contiguous copy of its input. */
class Copy : public Primitive {
 public:
  Copy() : Primitive(OpKind::Copy) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  bool is_equivalent(const Primitive& o) const override { return same_kind(o); }  // no attributes
};

/* Joins its inputs along axis_ (non-negative; ranks are fixed per cache entry). */
class Concatenate : public Primitive {
 public:
  explicit Concatenate(int axis) : Primitive(OpKind::Concatenate), axis_(axis) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  int axis() const { return axis_; }

 private:
  int axis_;
};

/* Surrounds the input with (before, after) elements of value_ on each axis. */
class Pad : public Primitive {
 public:
  Pad(std::vector<std::pair<int64_t, int64_t>> widths, double value)
      : Primitive(OpKind::Pad), widths_(std::move(widths)), value_(value) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  const std::vector<std::pair<int64_t, int64_t>>& widths() const { return widths_; }
  double value() const { return value_; }

 private:
  std::vector<std::pair<int64_t, int64_t>> widths_;
  double value_;
};

/* Inputs (a, update): a copy of a (or a itself, when donated) whose region args_ holds
   update broadcast to the region's shape. The region is resolved against a's shape on
   every run. */
class SliceUpdate : public Primitive {
 public:
  explicit SliceUpdate(std::vector<SliceArg> args) : Primitive(OpKind::SliceUpdate), args_(std::move(args)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool may_write_into(size_t input) const override { return input == 0; }
  const std::vector<SliceArg>& args() const { return args_; }

 private:
  std::vector<SliceArg> args_;  // one per axis
};

/* Inputs (a, indices): numpy.take along axis_. Out-of-range indices throw at run time. */
class Take : public Primitive {
 public:
  explicit Take(int axis) : Primitive(OpKind::Take), axis_(axis) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  int axis() const { return axis_; }

 private:
  int axis_;
};

/* Inputs (a, indices) of equal rank: numpy.take_along_axis, the axes other than
   axis_ broadcasting between a and indices. */
class TakeAlongAxis : public Primitive {
 public:
  explicit TakeAlongAxis(int axis) : Primitive(OpKind::TakeAlongAxis), axis_(axis) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  int axis() const { return axis_; }

 private:
  int axis_;
};

}  // namespace kiln
