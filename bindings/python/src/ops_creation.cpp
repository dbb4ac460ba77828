// Creation ops of the registry (full, arange, zeros, ones, linspace, eye) and their _like forms.
#include "ops_registry.h"

namespace kpy {

namespace {

/* A Python number's default dtype: bool, int32, float32. */
kiln::Dtype scalar_dtype(const ArrayLike& v) {
  switch (v.kind) {
    case ArrayLike::Kind::boolean: return kiln::bool_;
    case ArrayLike::Kind::integer: return kiln::int32;
    case ArrayLike::Kind::floating: return kiln::float32;
    case ArrayLike::Kind::array: return v.array.dtype();
  }
  return kiln::float32;
}

}  // namespace

void bind_full(nb::module_& m) {
  m.def(
      "full",
      [](const ShapeLike& shape, const ArrayLike& value, std::optional<kiln::Dtype> dtype) {
        const kiln::Dtype d = dtype.value_or(scalar_dtype(value));
        if (value.kind == ArrayLike::Kind::array) return kiln::astype(kiln::full(shape.dims, value.array), d);
        return kiln::full(shape.dims, kiln::astype(value.get(), d));
      },
      "shape"_a, "value"_a, "dtype"_a = nb::none(), op_doc("full"));
  m.def(
      "full_like", [](const kiln::Array& a, double v) { return kiln::full_like(a, v); }, "a"_a, "value"_a,
      "An array of a's shape and dtype filled with value.");
}

void bind_zeros(nb::module_& m) {
  m.def(
      "zeros", [](const ShapeLike& shape, kiln::Dtype d) { return kiln::zeros(shape.dims, d); }, "shape"_a,
      "dtype"_a = kiln::float32, op_doc("zeros"));
  m.def("zeros_like", &kiln::zeros_like, "a"_a);
}

void bind_ones(nb::module_& m) {
  m.def(
      "ones", [](const ShapeLike& shape, kiln::Dtype d) { return kiln::ones(shape.dims, d); }, "shape"_a,
      "dtype"_a = kiln::float32, op_doc("ones"));
  m.def("ones_like", &kiln::ones_like, "a"_a);
}

void bind_arange(nb::module_& m) {
  m.def(
      "arange",
      [](nb::handle start, nb::handle stop, nb::handle step, std::optional<kiln::Dtype> dtype) {
        const bool ints = PyLong_Check(start.ptr()) && (stop.is_none() || PyLong_Check(stop.ptr())) &&
                          (step.is_none() || PyLong_Check(step.ptr()));
        double a = 0, b = nb::cast<double>(start), s = 1;
        if (!stop.is_none()) a = b, b = nb::cast<double>(stop);
        if (!step.is_none()) s = nb::cast<double>(step);
        return kiln::arange(a, b, s, dtype.value_or(ints ? kiln::int32 : kiln::float32));
      },
      "start"_a, "stop"_a.none() = nb::none(), "step"_a.none() = nb::none(), "dtype"_a = nb::none(),
      "Values from start (0 when only one bound is given) up to stop, in steps of step, like\n"
      "numpy.arange; int32 when every bound is a Python int, else float32.");
}

void bind_linspace(nb::module_& m) {
  m.def("linspace", &kiln::linspace, "start"_a, "stop"_a, "num"_a = 50, "dtype"_a = kiln::float32, op_doc("linspace"));
}

void bind_eye(nb::module_& m) {
  m.def("eye", &kiln::eye, "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a = kiln::float32, op_doc("eye"));
}

}  // namespace kpy
