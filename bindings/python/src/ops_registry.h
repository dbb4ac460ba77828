// The ops of the registry (src/ops/op_table.def) that have a class or a composite of their own:
// one binder each, declared here from the registry rows, so a row without a Python binding is a
// link error naming bind_<op>. The elementwise and reduction rows are bound generically
// (ops_generated.cpp).
#pragma once

#include "common.h"

namespace kpy {

#define KILN_OP(C, n, cat) void bind_##n(nb::module_& m);
#define KILN_COMPOSITE(n, cat) void bind_##n(nb::module_& m);
#define KILN_REDUCE_COMPOSITE(n)
#include "ops/op_table.def"

/* The docs/ops.md line of an op ("" when it has none), generated at build time. */
const char* op_doc(const char* name);

}  // namespace kpy
