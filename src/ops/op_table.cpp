#include "ops/primitive.h"

namespace kiln {

const char* op_name(OpKind kind) {
  switch (kind) {
#define KILN_UNARY(F, n) case OpKind::F: return #n;
#define KILN_BINARY(F, n) case OpKind::F: return #n;
#define KILN_REDUCE(F, n) case OpKind::F: return #n;
#define KILN_OP(C, n, cat) case OpKind::C: return #n;
#include "ops/op_table.def"
  }
  return "unknown";
}

OpCategory op_category(OpKind kind) {
  switch (kind) {
#define KILN_UNARY(F, n) case OpKind::F: return OpCategory::unary;
#define KILN_BINARY(F, n) case OpKind::F: return OpCategory::binary;
#define KILN_REDUCE(F, n) case OpKind::F: return OpCategory::reduce;
#define KILN_OP(C, n, cat) case OpKind::C: return OpCategory::cat;
#include "ops/op_table.def"
  }
  return OpCategory::layout;
}

bool is_elementwise(OpKind kind) {
  auto c = op_category(kind);
  return c == OpCategory::unary || c == OpCategory::binary || c == OpCategory::elementwise;
}

}  // namespace kiln
