// Every op of the registry (src/ops/op_table.def), bound from its rows: the elementwise and
// reduction rows by one generic binding each, the others through their own binder
// (ops_registry.h). kiln._registry_ops() lists the public rows, for the tests.
#include "ops_registry.h"

namespace kpy {

namespace {

nb::list registry_ops() {
  nb::list names;
#define KILN_UNARY(F, n, ...) names.append(#n);
#define KILN_BINARY(F, n, ...) names.append(#n);
#define KILN_REDUCE(F, n) names.append(#n);
#define KILN_OP(C, n, cat) names.append(#n);
#define KILN_COMPOSITE(n, cat) names.append(#n);
#include "ops/op_table.def"
  return names;
}

}  // namespace

void init_generated_ops(nb::module_& m) {
#define KILN_UNARY(F, n, ...) \
  m.def(                      \
      #n, [](const ArrayLike& a) { return kiln::n(a.get()); }, "a"_a, op_doc(#n));
#define KILN_BINARY(F, n, ...)                     \
  m.def(                                           \
      #n,                                          \
      [](const ArrayLike& a, const ArrayLike& b) { \
        auto [x, y] = operands(a, b);              \
        return kiln::n(x, y);                      \
      },                                           \
      "a"_a, "b"_a, op_doc(#n));
#define KILN_REDUCE(F, n)                                                            \
  m.def(                                                                             \
      #n,                                                                            \
      [](const ArrayLike& a, const std::optional<nb::object>& axis, bool keepdims) { \
        return kiln::n(a.get(), axes_arg(axis), keepdims);                           \
      },                                                                             \
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, op_doc(#n));
#define KILN_REDUCE_COMPOSITE(n) KILN_REDUCE(, n)
#include "ops/op_table.def"
  m.def("_registry_ops", &registry_ops, "The public ops of kiln's op registry, by name (for tests).");
}

void init_class_ops(nb::module_& m) {
#define KILN_OP(C, n, cat) bind_##n(m);
#define KILN_COMPOSITE(n, cat) bind_##n(m);
#define KILN_REDUCE_COMPOSITE(n)
#include "ops/op_table.def"
}

}  // namespace kpy
