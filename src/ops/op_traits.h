// The traits of every op, one OpTraits per row of ops/op_table.def (the op registry).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

enum class OpCategory {
  unary,
  binary,
  reduce,
  elementwise,
  creation,
  reduction,
  scan,
  matmul,
  view,
  layout,
  gather,
  nn,
  random,
  selection,
  collective,
  fused,
  compiled
};

/* The dtypes column: what an elementwise op takes and returns (docs/dtypes.md). */
enum class DtypeRule : uint8_t {
  same,  // the (promoted) input dtype
  floating,  // float math: integer and bool inputs compute in float32
  boolean,  // a bool result
  integer,  // integer and bool inputs only
  own,  // an op of its own class or a composite: its front end decides
};

/* The cost column: how much one element's work weighs (ops/op_table.def says what each means). */
enum class OpCost : uint8_t { cheap, light, math };

struct OpTraits {
  const char* name;
  int arity;  // inputs of an elementwise or reduce row; -1 where the op's front end decides
  OpCategory category;
  DtypeRule dtypes;
  OpCost cost;
  bool smooth;  // fuzz column: approximate inputs give approximate outputs
  bool primitive;  // has an OpKind (a composite has none)
  const char* kgraph;  // kgraph op name, nullptr when kgraph cannot spell it
  const char* c_api;  // name of the generated C function kiln_<c_api>, nullptr when none is generated
};

/* Every row of the registry in table order: primitives, then composites. */
const std::vector<OpTraits>& op_registry();
/* The row named `name` (an op's one spelling), or nullptr. */
const OpTraits* find_op(const char* name);

}  // namespace kiln
