// OpTraits from the rows of the op registry (ops/op_table.def).
#include <cstring>

#include "ops/primitive.h"

namespace kiln {

namespace {

constexpr OpTraits elementwise_row(const char* name, int arity, DtypeRule dtypes, OpCost cost, bool smooth) {
  return {name, arity, arity == 1 ? OpCategory::unary : OpCategory::binary, dtypes, cost, smooth, true, name, name};
}

constexpr OpTraits own_row(const char* name, OpCategory cat, bool primitive, bool internal) {
  // Composite reductions share the KILN_REDUCE rows' signature, so their C function is generated too.
  const char* c_api = !primitive && cat == OpCategory::reduce ? name : nullptr;
  return {name, -1, cat, DtypeRule::own, OpCost::cheap, false, primitive, internal ? nullptr : name, c_api};
}

// The fuzz column's words.
constexpr bool smooth = true;
constexpr bool rough = false;

// Primitives, in OpKind order (the same rows in the same order make both).
const OpTraits kPrimitives[] = {
#define KILN_UNARY(F, n, dtypes, cost, fuzz) elementwise_row(#n, 1, DtypeRule::dtypes, OpCost::cost, fuzz),
#define KILN_BINARY(F, n, dtypes, cost, fuzz) elementwise_row(#n, 2, DtypeRule::dtypes, OpCost::cost, fuzz),
#define KILN_REDUCE(F, n) {#n, 1, OpCategory::reduce, DtypeRule::own, OpCost::cheap, false, true, #n, #n},
#define KILN_OP(C, n, cat) own_row(#n, OpCategory::cat, true, false),
#define KILN_INTERNAL_OP(C, n, cat) own_row(#n, OpCategory::cat, true, true),
#include "ops/op_table.def"
};

const OpTraits kComposites[] = {
#define KILN_COMPOSITE(n, cat) own_row(#n, OpCategory::cat, false, false),
#include "ops/op_table.def"
};

}  // namespace

const OpTraits& op_traits(OpKind kind) { return kPrimitives[static_cast<size_t>(kind)]; }

const std::vector<OpTraits>& op_registry() {
  static const std::vector<OpTraits> rows = [] {
    std::vector<OpTraits> r(std::begin(kPrimitives), std::end(kPrimitives));
    r.insert(r.end(), std::begin(kComposites), std::end(kComposites));
    return r;
  }();
  return rows;
}

const OpTraits* find_op(const char* name) {
  for (const OpTraits& t : op_registry())
    if (std::strcmp(t.name, name) == 0) return &t;
  return nullptr;
}

bool is_elementwise(OpKind kind) {
  auto c = op_category(kind);
  return c == OpCategory::unary || c == OpCategory::binary || c == OpCategory::elementwise;
}

}  // namespace kiln
