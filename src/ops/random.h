// The random-bits primitive: counter-based words under a key that is an input of the
// graph, so a compiled function takes its key as an argument and two draws merge only
// when their keys and shapes are equal (then they are the same numbers).
#pragma once

#include "ops/primitive.h"

namespace kiln {

/* Fails, tagged with op, for a draw past the 32-bit counters: 2^32 words or more. */
void check_draw_size(const char* op, const Shape& shape);

/* uint32 words of Threefry-2x32 (backend/common/threefry.h) from one key, in[0]: a uint32
   array of shape (2). The words' shape is `lead`, followed, when `like` is set, by the
   shape of in[1] (whose values are not read), so a shapeless replay draws for the shape
   it is given (categorical's noise takes the logits' shape). */
class RandomBits : public Primitive {
 public:
  RandomBits(Shape lead, bool like) : Primitive(OpKind::RandomBits), lead_(std::move(lead)), like_(like) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& o) const override {
    auto& r = static_cast<const RandomBits&>(o);
    return o.kind() == kind() && r.lead_ == lead_ && r.like_ == like_;
  }
  void print(std::ostream& os) const override { os << name() << detail::shape_str(lead_) << (like_ ? "+like" : ""); }

 private:
  Shape lead_;
  bool like_;
};

}  // namespace kiln
