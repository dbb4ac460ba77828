// Shared by the files of the kiln Python module (kiln._kiln): array conversion from Python
// objects, Python scalars that take their dtype from the other operand, GIL-safe ownership.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <kiln/kiln.h>

namespace nb = nanobind;
using namespace nb::literals;

namespace kpy {

/* A function argument that may be an array: a kiln.Array, a NumPy array or anything NumPy
   turns into one (lists, buffers), a DLPack producer, or a Python scalar. A scalar is kept as
   it is until the other operand of a binary op fixes its dtype, as a C++ scalar does in kiln's
   operators (docs/dtypes.md): 2 * x keeps x's dtype. */
struct ArrayLike {
  enum class Kind { array, boolean, integer, floating };
  Kind kind = Kind::array;
  kiln::Array array;
  int64_t i = 0;
  double f = 0;

  /* The array itself, or the scalar as a 0-d array of its default dtype (bool, int32 or
     int64 when it does not fit, float32). */
  kiln::Array get() const;
  /* The scalar in `like`'s dtype unless it is of a higher kind (kiln's scalar rule). */
  kiln::Array like(const kiln::Array& like) const;
};

/* A shape argument: an int or a sequence of ints. */
struct ShapeLike {
  kiln::Shape dims;
};

/* Converts any array-like Python object; throws kiln::Error naming what it could not read. */
ArrayLike to_array_like(nb::handle h);
/* The two operands of a binary op, a scalar taking its dtype from the array beside it. */
std::pair<kiln::Array, kiln::Array> operands(const ArrayLike& a, const ArrayLike& b);

/* Host or device memory of another library as a kiln array. share: view it in place (the
   caller promises not to write it while kiln may read it); else copy it. */
kiln::Array from_buffer(nb::handle h, bool share, std::optional<kiln::Dtype> dtype);
/* Whether h is a NumPy array, a buffer or a DLPack producer (not a list or a scalar). */
bool is_buffer_like(nb::handle h);

/* A Python object owned from C++ that may be dropped on any thread: the last owner takes the
   GIL to release it (and leaks it when the interpreter is shutting down). */
std::shared_ptr<nb::object> hold(nb::object o);

/* Evaluates with the GIL released, so other Python threads run meanwhile. */
void eval_nogil(const std::vector<kiln::Array>& arrays);

/* Axes given as None (every axis), an int or a sequence of ints. */
std::vector<int> axes_arg(const std::optional<nb::object>& axis);
/* A shape given as an int or a sequence of ints. */
kiln::Shape shape_arg(nb::handle shape);
/* A Python int or a sequence of them, as int64 values (one per axis). */
std::vector<int64_t> ints_arg(nb::handle h);

using ArrayClass = nb::class_<kiln::Array>;

void init_dtypes(nb::module_& m);
void init_array(nb::module_& m);
void init_numpy(ArrayClass& array);
void init_indexing(ArrayClass& array);
void init_operators(ArrayClass& array);
void init_generated_ops(nb::module_& m);
void init_class_ops(nb::module_& m);
void init_compile(nb::module_& m);
void init_dlpack(nb::module_& m, ArrayClass& array);
void init_llm(nb::module_& m);
void init_executable(nb::module_& m);

/* kiln.random, made once. */
nb::module_ random_module(nb::module_& m);

}  // namespace kpy

namespace nanobind::detail {
template <>
struct type_caster<kpy::ArrayLike> {
  NB_TYPE_CASTER(kpy::ArrayLike, const_name("Array | numpy.typing.ArrayLike"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    try {
      value = kpy::to_array_like(src);
      return true;
    } catch (...) {
      PyErr_Clear();
      return false;
    }
  }
};
template <>
struct type_caster<kpy::ShapeLike> {
  NB_TYPE_CASTER(kpy::ShapeLike, const_name("int | collections.abc.Sequence[int]"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    try {
      value.dims = kpy::shape_arg(src);
      return true;
    } catch (...) {
      PyErr_Clear();
      return false;
    }
  }
};
}  // namespace nanobind::detail
