// The random-bits primitive: counter-based words under a key that is an input of the
// graph, so a compiled function takes its key as an argument and two draws merge only
// when their keys and shapes are equal (then they are the same numbers).
#pragma once

#include "ops/primitive.h"

namespace kiln {

/* uint32 words of Threefry-2x32 (backend/common/threefry.h) in the given shape, from one
   key: a uint32 array of shape (2). */
class RandomBits : public Primitive {
 public:
  explicit RandomBits(Shape shape) : Primitive(OpKind::RandomBits), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {shape_}; }
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const RandomBits&>(o).shape_ == shape_;
  }
  void print(std::ostream& os) const override { os << name() << detail::shape_str(shape_); }
  const Shape& shape() const { return shape_; }

 private:
  Shape shape_;
};

}  // namespace kiln
