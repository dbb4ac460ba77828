// Linear-algebra primitives.
#pragma once

#include "ops/primitive.h"

namespace kiln {

/* Batched matrix product of operands with rank >= 2 and one dtype: (..., M, K) @
   (..., K, N) -> (..., M, N), the batch axes broadcasting. 1-D promotion is done
   by the front end with reshapes. */
class Matmul : public Primitive {
 public:
  Matmul() : Primitive(OpKind::Matmul) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
};

}  // namespace kiln
