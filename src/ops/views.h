// Primitives whose output is a view of the input's buffer: no kernel runs
// (a reshape of a non-contiguous input is the exception and copies).
#pragma once

#include "kiln/ops.h"
#include "ops/primitive.h"

namespace kiln {

class Reshape : public Primitive {
 public:
  /* `shape` may hold one -1, inferred from the input's size (again on every replay). */
  explicit Reshape(Shape shape) : Primitive(OpKind::Reshape), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool is_view() const override { return true; }
  const Shape& target() const { return shape_; }

 private:
  Shape shape_;
};

class Transpose : public Primitive {
 public:
  explicit Transpose(std::vector<int> perm) : Primitive(OpKind::Transpose), perm_(std::move(perm)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool is_view() const override { return true; }
  const std::vector<int>& perm() const { return perm_; }

 private:
  std::vector<int> perm_;
};

class BroadcastTo : public Primitive {
 public:
  explicit BroadcastTo(Shape shape) : Primitive(OpKind::BroadcastTo), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool is_view() const override { return true; }
  const Shape& target() const { return shape_; }

 private:
  Shape shape_;
};

/* Removes size-1 axes (given as non-negative, sorted axes of the input). Unlike a
   reshape to a stored shape it applies at any size, so shapeless replays keep it. */
class Squeeze : public Primitive {
 public:
  explicit Squeeze(std::vector<int> axes) : Primitive(OpKind::Squeeze), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool is_view() const override { return true; }

 private:
  std::vector<int> axes_;
};

/* Inserts size-1 axes at the given (sorted, output) positions. */
class ExpandDims : public Primitive {
 public:
  explicit ExpandDims(std::vector<int> axes) : Primitive(OpKind::ExpandDims), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool is_view() const override { return true; }

 private:
  std::vector<int> axes_;
};

/* Python-style slicing; bounds are resolved against the input's shape each time,
   so a shapeless replay at another size slices the same way. */
class Slice : public Primitive {
 public:
  explicit Slice(std::vector<SliceArg> args) : Primitive(OpKind::Slice), args_(std::move(args)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override;
  void print(std::ostream& os) const override;
  bool is_view() const override { return true; }
  const std::vector<SliceArg>& args() const { return args_; }

 private:
  std::vector<SliceArg> args_;  // one per leading axis; missing trailing axes are taken whole
};

/* A slice resolved against a shape: start index, step and length per axis. */
struct ResolvedSlice {
  Shape start, step, length;
};
ResolvedSlice resolve_slice(const char* op, const Shape& shape, const std::vector<SliceArg>& args);

}  // namespace kiln
