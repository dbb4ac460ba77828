// Elementwise primitives: one class per math functor, plus astype and where.
#pragma once

#include "backend/common/math.h"
#include "ops/primitive.h"

namespace kiln {

template <class F>
struct op_kind_of;
#define KILN_UNARY(F, n, ...)                  \
  template <>                                  \
  struct op_kind_of<math::F> {                 \
    static constexpr OpKind value = OpKind::F; \
  };
#define KILN_BINARY(F, n, ...) KILN_UNARY(F, n)
#define KILN_REDUCE(F, n) KILN_UNARY(F, n)
#include "ops/op_table.def"

/* Broadcast shape of several shapes; throws tagged with `op` when they do not broadcast. */
Shape broadcast_shapes(const char* op, const std::vector<Shape>& shapes);

/* Inputs broadcast to the output shape inside the kernel (no views), so shapeless replays re-broadcast. */
template <class F>
class Unary : public Primitive {
 public:
  Unary() : Primitive(op_kind_of<F>::value) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  bool is_equivalent(const Primitive& o) const override { return same_kind(o); }  // no attributes
};

template <class F>
class Binary : public Primitive {
 public:
  Binary() : Primitive(op_kind_of<F>::value) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return {broadcast_shapes(name(), in)};
  }
  bool is_equivalent(const Primitive& o) const override { return same_kind(o); }  // no attributes
};

class AsType : public Primitive {
 public:
  explicit AsType(Dtype to) : Primitive(OpKind::AsType), to_(to) {}
  Dtype to() const { return to_; }
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  bool is_equivalent(const Primitive& other) const override {
    return other.kind() == kind() && static_cast<const AsType&>(other).to_ == to_;
  }
  void print(std::ostream& os) const override { os << name() << "(" << dtype_name(to_) << ")"; }

 private:
  Dtype to_;
};

/* where(cond, a, b): cond is bool, a and b share the output dtype. */
class Where : public Primitive {
 public:
  Where() : Primitive(OpKind::Where) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override {
    return {broadcast_shapes("where", in)};
  }
  bool is_equivalent(const Primitive& o) const override { return same_kind(o); }  // no attributes
};

}  // namespace kiln
