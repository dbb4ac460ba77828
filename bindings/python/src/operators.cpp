// Python operators on kiln.Array (+ - * / // % ** @, comparisons, bitwise, unary) and the
// methods that mirror common ops (a.sum(), a.reshape(...), a.T). A Python scalar operand takes
// the array's dtype unless it is of a higher kind, as in kiln's C++ operators.
#include "common.h"

namespace kpy {

namespace {

using BinaryFn = kiln::Array (*)(const kiln::Array&, const kiln::Array&);

template <BinaryFn F>
kiln::Array forward(const kiln::Array& a, const ArrayLike& b) {
  auto [x, y] = operands(ArrayLike{ArrayLike::Kind::array, a}, b);
  return F(x, y);
}
template <BinaryFn F>
kiln::Array reflected(const kiln::Array& a, const ArrayLike& b) {
  auto [x, y] = operands(b, ArrayLike{ArrayLike::Kind::array, a});
  return F(x, y);
}

kiln::Array shape_args(const kiln::Array& a, const nb::args& args) {
  kiln::Shape s;
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) {
    for (nb::handle h : args[0]) s.push_back(nb::cast<int64_t>(h));
  } else {
    for (nb::handle h : args) s.push_back(nb::cast<int64_t>(h));
  }
  return kiln::reshape(a, s);
}

kiln::Array transpose_args(const kiln::Array& a, const nb::args& args) {
  std::vector<int> perm;
  if (args.size() == 1 && !PyLong_Check(args[0].ptr()) && !args[0].is_none()) {
    for (nb::handle h : args[0]) perm.push_back(nb::cast<int>(h));
  } else {
    for (nb::handle h : args) perm.push_back(nb::cast<int>(h));
  }
  return kiln::transpose(a, perm);
}

}  // namespace

void init_operators(ArrayClass& c) {
  const auto op = nb::is_operator();
#define KPY_BINARY(py, fn)                                 \
  c.def("__" py "__", &forward<&kiln::fn>, "other"_a, op); \
  c.def("__r" py "__", &reflected<&kiln::fn>, "other"_a, op);
  KPY_BINARY("add", add)
  KPY_BINARY("sub", subtract)
  KPY_BINARY("mul", multiply)
  KPY_BINARY("truediv", divide)
  KPY_BINARY("floordiv", floor_divide)
  KPY_BINARY("mod", remainder)
  KPY_BINARY("pow", power)
  KPY_BINARY("matmul", matmul)
  KPY_BINARY("and", bitwise_and)
  KPY_BINARY("or", bitwise_or)
  KPY_BINARY("xor", bitwise_xor)
  KPY_BINARY("lshift", left_shift)
  KPY_BINARY("rshift", right_shift)
#undef KPY_BINARY
  c.def("__eq__", &forward<&kiln::equal>, "other"_a, op);
  c.def("__ne__", &forward<&kiln::not_equal>, "other"_a, op);
  c.def("__lt__", &forward<&kiln::less>, "other"_a, op);
  c.def("__le__", &forward<&kiln::less_equal>, "other"_a, op);
  c.def("__gt__", &forward<&kiln::greater>, "other"_a, op);
  c.def("__ge__", &forward<&kiln::greater_equal>, "other"_a, op);
  c.def("__neg__", [](const kiln::Array& a) { return kiln::negative(a); });
  c.def("__pos__", [](const kiln::Array& a) { return a; });
  c.def("__abs__", [](const kiln::Array& a) { return kiln::abs(a); });
  c.def("__invert__",
        [](const kiln::Array& a) { return a.dtype() == kiln::bool_ ? kiln::logical_not(a) : kiln::bitwise_not(a); });

  // Methods mirroring ops, as NumPy arrays have them.
#define KPY_REDUCE_METHOD(name)                                                        \
  c.def(                                                                               \
      #name,                                                                           \
      [](const kiln::Array& a, const std::optional<nb::object>& axis, bool keepdims) { \
        return kiln::name(a, axes_arg(axis), keepdims);                                \
      },                                                                               \
      "axis"_a = nb::none(), "keepdims"_a = false, "kiln." #name " over the given axes (None: every axis).");
  KPY_REDUCE_METHOD(sum)
  KPY_REDUCE_METHOD(prod)
  KPY_REDUCE_METHOD(mean)
  KPY_REDUCE_METHOD(max)
  KPY_REDUCE_METHOD(min)
  KPY_REDUCE_METHOD(all)
  KPY_REDUCE_METHOD(any)
#undef KPY_REDUCE_METHOD
  c.def("reshape", &shape_args,
        "The array in a new shape (a view when contiguous); a.reshape(2, 3) or a.reshape((2, 3)).");
  c.def("transpose", &transpose_args, "Axes permuted (reversed when none are given).");
  c.def_prop_ro(
      "T", [](const kiln::Array& a) { return kiln::transpose(a); }, "The axes reversed.");
  c.def("flatten", [](const kiln::Array& a) { return kiln::flatten(a); });
  c.def(
      "squeeze",
      [](const kiln::Array& a, const std::optional<nb::object>& axis) { return kiln::squeeze(a, axes_arg(axis)); },
      "axis"_a = nb::none());
  c.def(
      "swapaxes", [](const kiln::Array& a, int x, int y) { return kiln::swapaxes(a, x, y); }, "axis1"_a, "axis2"_a);
}

}  // namespace kpy
