// Registry ops of their own class that compute (astype, where, clip, argmax/argmin, cumsum,
// matmul, var, softmax).
#include "ops_registry.h"

namespace kpy {

void bind_astype(nb::module_& m) {
  m.def(
      "astype", [](const ArrayLike& a, kiln::Dtype d) { return kiln::astype(a.get(), d); }, "a"_a, "dtype"_a,
      op_doc("astype"));
}

void bind_where(nb::module_& m) {
  m.def(
      "where",
      [](const ArrayLike& cond, const ArrayLike& a, const ArrayLike& b) {
        auto [x, y] = operands(a, b);
        return kiln::where(cond.get(), x, y);
      },
      "cond"_a, "a"_a, "b"_a, op_doc("where"));
}

void bind_clip(nb::module_& m) {
  m.def(
      "clip",
      [](const ArrayLike& a, const std::optional<ArrayLike>& lo, const std::optional<ArrayLike>& hi) {
        kiln::Array x = a.get();
        std::optional<kiln::Array> l, h;
        if (lo) l = lo->like(x);
        if (hi) h = hi->like(x);
        return kiln::clip(x, l, h);
      },
      "a"_a, "lo"_a = nb::none(), "hi"_a = nb::none(), op_doc("clip"));
}

void bind_argmax(nb::module_& m) {
  m.def(
      "argmax",
      [](const ArrayLike& a, std::optional<int> axis, bool keepdims) { return kiln::argmax(a.get(), axis, keepdims); },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, op_doc("argmax"));
}

void bind_argmin(nb::module_& m) {
  m.def(
      "argmin",
      [](const ArrayLike& a, std::optional<int> axis, bool keepdims) { return kiln::argmin(a.get(), axis, keepdims); },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, op_doc("argmin"));
}

void bind_cumsum(nb::module_& m) {
  m.def(
      "cumsum",
      [](const ArrayLike& a, int axis, bool reverse, bool inclusive) {
        return kiln::cumsum(a.get(), axis, reverse, inclusive);
      },
      "a"_a, "axis"_a, "reverse"_a = false, "inclusive"_a = true, op_doc("cumsum"));
}

void bind_matmul(nb::module_& m) {
  m.def(
      "matmul", [](const ArrayLike& a, const ArrayLike& b) { return kiln::matmul(a.get(), b.get()); }, "a"_a, "b"_a,
      op_doc("matmul"));
}

void bind_var(nb::module_& m) {
  m.def(
      "var",
      [](const ArrayLike& a, const std::optional<nb::object>& axis, bool keepdims, int ddof) {
        return kiln::var(a.get(), axes_arg(axis), keepdims, ddof);
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, op_doc("var"));
}

void bind_softmax(nb::module_& m) {
  m.def(
      "softmax",
      [](const ArrayLike& a, const nb::object& axis) {
        return kiln::softmax(a.get(), axes_arg(axis));  // None: every axis
      },
      "a"_a, "axis"_a.none() = -1, op_doc("softmax"));
}

}  // namespace kpy
