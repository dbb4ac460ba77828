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
  bool is_equivalent(const Primitive& o) const override { return same_kind(o); }  // no attributes
};

/* activation(matmul(a, b) + bias) as one primitive, for floating dtypes; made by the
   fuse_matmul_epilogue compile pass from the separate ops (inputs a, b, bias; bias is a
   vector along the product's last axis there, but any broadcast is computed right). On
   the CPU every step rounds to the dtype as the separate ops do, so results are equal to
   theirs; on a GPU cuBLASLt's epilogue adds the bias (and its tanh GELU) before the one
   rounding of the product (docs/cuda.md). */
class MatmulEpilogue : public Primitive {
 public:
  enum class Activation { none, gelu, gelu_tanh };
  explicit MatmulEpilogue(Activation act) : Primitive(OpKind::MatmulEpilogue), act_(act) {}
  Activation activation() const { return act_; }
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override;
  bool is_equivalent(const Primitive& other) const override {
    return other.kind() == kind() && static_cast<const MatmulEpilogue&>(other).act_ == act_;
  }
  void print(std::ostream& os) const override;

 private:
  Activation act_;
};

}  // namespace kiln
