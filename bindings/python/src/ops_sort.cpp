// Sorting and selection along one axis (NaN sorts last; index results are int32).
#include "ops_registry.h"

namespace kpy {

void bind_sort(nb::module_& m) {
  m.def(
      "sort", [](const ArrayLike& a, int axis) { return kiln::sort(a.get(), axis); }, "a"_a, "axis"_a = -1,
      op_doc("sort"));
}

void bind_argsort(nb::module_& m) {
  m.def(
      "argsort", [](const ArrayLike& a, int axis) { return kiln::argsort(a.get(), axis); }, "a"_a, "axis"_a = -1,
      op_doc("argsort"));
}

void bind_partition(nb::module_& m) {
  m.def(
      "partition", [](const ArrayLike& a, int kth, int axis) { return kiln::partition(a.get(), kth, axis); }, "a"_a,
      "kth"_a, "axis"_a = -1, op_doc("partition"));
}

void bind_argpartition(nb::module_& m) {
  m.def(
      "argpartition", [](const ArrayLike& a, int kth, int axis) { return kiln::argpartition(a.get(), kth, axis); },
      "a"_a, "kth"_a, "axis"_a = -1, op_doc("argpartition"));
}

void bind_topk(nb::module_& m) {
  m.def(
      "topk", [](const ArrayLike& a, int k, int axis) { return kiln::topk(a.get(), k, axis); }, "a"_a, "k"_a,
      "axis"_a = -1, "The k largest elements along axis, largest first, and their indices: (values, indices).");
}

}  // namespace kpy
