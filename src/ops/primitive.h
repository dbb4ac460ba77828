// The primitive interface: what an op computes, independent of where.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "core/tensor.h"
#include "ops/op_traits.h"

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_UNARY(F, n, ...) F,
#define KILN_BINARY(F, n, ...) F,
#define KILN_REDUCE(F, n) F,
#define KILN_OP(C, n, cat) C,
#define KILN_INTERNAL_OP(C, n, cat) C,
#include "ops/op_table.def"
};

/* The registry row of a primitive. */
const OpTraits& op_traits(OpKind kind);
inline const char* op_name(OpKind kind) { return op_traits(kind).name; }
inline OpCategory op_category(OpKind kind) { return op_traits(kind).category; }
/* Unary, binary, astype and where: one output element from the same-index input elements. */
bool is_elementwise(OpKind kind);

class Primitive {
 public:
  explicit Primitive(OpKind kind) : kind_(kind) {}
  virtual ~Primitive() = default;

  OpKind kind() const { return kind_; }
  const char* name() const { return op_name(kind_); }

  /* Computes outputs from evaluated inputs on the CPU. Outputs arrive with shape and
     dtype set; the kernel allocates them (or makes them views of an input). */
  virtual void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) = 0;
  /* Output shapes for the given input shapes; throws kiln::Error when they cannot apply.
     Shapeless compile re-runs this on replay. */
  virtual std::vector<Shape> output_shapes(const std::vector<Shape>& in) const = 0;
  /* Same op with every attribute equal (so equal inputs give equal outputs): CSE merges
     two nodes on it. Each primitive states it, a parameterless one with same_kind. */
  virtual bool is_equivalent(const Primitive& other) const = 0;
  /* Name and parameters, e.g. "transpose(1,0)"; used by DOT output and cache keys. */
  virtual void print(std::ostream& os) const { os << name(); }
  /* True when outputs alias an input's buffer and no kernel runs. */
  virtual bool is_view() const { return false; }
  /* Whether the kernel may write an output into this input's buffer when the input arrives
     donated (nothing else holds it); a multi-output op may name several, one per output. */
  virtual bool may_write_into(size_t /*input*/) const { return false; }

 protected:
  /* is_equivalent of a primitive without attributes. */
  bool same_kind(const Primitive& other) const { return kind_ == other.kind_; }

 private:
  OpKind kind_;
};

}  // namespace kiln
