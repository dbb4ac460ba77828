// kiln.Array: the handle, its properties, construction from Python data, printing, and
// evaluation (eval / async_eval with the GIL released).
#include "numpy.h"

namespace kpy {

namespace {

nb::tuple shape_tuple(const kiln::Shape& s) {
  nb::list l;
  for (auto d : s) l.append(d);
  return nb::tuple(l);
}

/* kiln.array: always a copy, with kiln's default dtypes for Python scalars and lists. */
kiln::Array make_array(nb::handle obj, std::optional<kiln::Dtype> dtype) {
  kiln::Array a;
  if (nb::isinstance<kiln::Array>(obj)) {
    a = kiln::copy(nb::cast<const kiln::Array&>(obj));
  } else if (is_buffer_like(obj)) {
    a = from_buffer(obj, false, std::nullopt);
  } else {
    a = to_array_like(obj).get();
  }
  return dtype && *dtype != a.dtype() ? kiln::astype(a, *dtype) : a;
}

/* Arrays anywhere in nested lists, tuples and dicts (as eval's arguments may come). */
void collect(nb::handle h, std::vector<kiln::Array>& out) {
  if (nb::isinstance<kiln::Array>(h)) {
    out.push_back(nb::cast<const kiln::Array&>(h));
  } else if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    for (nb::handle x : h) collect(x, out);
  } else if (nb::isinstance<nb::dict>(h)) {
    for (auto [k, v] : nb::borrow<nb::dict>(h)) collect(v, out);
  } else if (!h.is_none()) {
    kiln::fail("eval", "expected arrays (or lists, tuples and dicts of them), got ",
               nb::cast<std::string>(nb::repr(nb::type_name(h.type()))));
  }
}

std::string repr(const kiln::Array& a) {
  nb::object np = nb::module_::import_("numpy");
  nb::object values = to_numpy(a, false);
  std::string body =
      nb::cast<std::string>(np.attr("array2string")(values, "separator"_a = ", ", "prefix"_a = "array("));
  return "array(" + body + ", dtype=" + kiln::dtype_name(a.dtype()) + ")";
}

}  // namespace

void init_array(nb::module_& m) {
  ArrayClass array(m, "Array", nb::type_slots(buffer_slots),
                   "An n-dimensional array: a cheap handle to a node of kiln's lazy graph.\n\n"
                   "Ops only record work; eval(), item(), numpy() and printing compute it (once, even\n"
                   "when several threads evaluate overlapping graphs). Arrays never change: indexed\n"
                   "assignment (a[1:3] = v) makes a new node with slice_update and points this handle at it.");
  array
      .def(
          "__init__",
          [](kiln::Array* self, nb::handle obj, std::optional<kiln::Dtype> dtype) {
            new (self) kiln::Array(make_array(obj, dtype));
          },
          "obj"_a, "dtype"_a = nb::none(), "A copy of obj (see kiln.array).")
      .def_prop_ro("shape", [](const kiln::Array& a) { return shape_tuple(a.shape()); })
      .def_prop_ro("dtype", &kiln::Array::dtype)
      .def_prop_ro("ndim", &kiln::Array::ndim)
      .def_prop_ro("size", &kiln::Array::size)
      .def_prop_ro("itemsize", &kiln::Array::itemsize)
      .def_prop_ro("nbytes", &kiln::Array::nbytes)
      .def_prop_ro("device", &kiln::Array::device)
      .def("is_evaluated", &kiln::Array::is_evaluated, "Whether the data has been computed.")
      .def(
          "eval", [](const kiln::Array& a) { eval_nogil({a}); },
          "Computes this array (and what it depends on) if not yet done; releases the GIL.")
      .def(
          "astype", [](const kiln::Array& a, kiln::Dtype d) { return kiln::astype(a, d); }, "dtype"_a,
          "Converts the element type (float to integer truncates toward zero and saturates).")
      .def(
          "to",
          [](const kiln::Array& a, kiln::Device d) {
            nb::gil_scoped_release nogil;
            return kiln::to(a, d);
          },
          "device"_a, "The data on another device (evaluates, then copies).")
      .def("__len__",
           [](const kiln::Array& a) {
             if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
             return a.shape(0);
           })
      .def("__bool__",
           [](const kiln::Array& a) {
             if (a.size() != 1)
               kiln::fail("bool", "the truth value of an array of ", a.size(),
                          " elements is ambiguous: use kiln.any or kiln.all");
             return nb::cast<bool>(item(a));
           })
      .def("__float__", [](const kiln::Array& a) { return nb::cast<double>(nb::float_(item(a))); })
      .def("__int__", [](const kiln::Array& a) { return nb::int_(item(a)); })
      .def("__index__",
           [](const kiln::Array& a) {
             if (!kiln::is_integral(a.dtype())) throw nb::type_error("only integer arrays can be used as an index");
             return nb::int_(item(a));
           })
      .def("__repr__", &repr)
      .def("__copy__", [](const kiln::Array& a) { return a; })
      .def(
          "__deepcopy__", [](const kiln::Array& a, nb::handle) { return a; }, "memo"_a);
  init_numpy(array);
  init_indexing(array);
  init_operators(array);
  init_dlpack(m, array);

  m.def("array", &make_array, "obj"_a, "dtype"_a = nb::none(),
        "A new array holding a copy of obj: an Array, a NumPy array, anything with the buffer\n"
        "protocol or DLPack, a (nested) list of numbers, or a Python scalar. Python floats become\n"
        "float32 and Python ints int32 (int64 when they do not fit); NumPy arrays keep their dtype.");
  m.def(
      "asarray",
      [](nb::handle obj, std::optional<kiln::Dtype> dtype) {
        kiln::Array a;
        if (nb::isinstance<kiln::Array>(obj))
          a = nb::cast<const kiln::Array&>(obj);
        else if (is_buffer_like(obj))
          return from_buffer(obj, true, dtype);
        else
          a = to_array_like(obj).get();
        return dtype && *dtype != a.dtype() ? kiln::astype(a, *dtype) : a;
      },
      "obj"_a, "dtype"_a = nb::none(),
      "obj as an array without a copy where its layout allows (a NumPy array, a buffer or a\n"
      "DLPack producer on the CPU or, in a CUDA build, a GPU): kiln then reads that memory in\n"
      "place, so it must not be written while kiln may still read it. Otherwise as kiln.array.");
  m.def(
      "eval",
      [](nb::args args) {
        std::vector<kiln::Array> arrays;
        collect(args, arrays);
        eval_nogil(arrays);
      },
      "Computes the given arrays (or lists, tuples and dicts of arrays) and everything they depend\n"
      "on, once per node even when other threads evaluate overlapping graphs. Releases the GIL.");
  m.def(
      "async_eval",
      [](nb::args args) {
        std::vector<kiln::Array> arrays;
        collect(args, arrays);
        nb::gil_scoped_release nogil;
        kiln::async_eval(arrays);
      },
      "Starts evaluating the given arrays on the calling thread's own stream and returns at once;\n"
      "a later eval, item or numpy() waits for the result and raises any error.");
}

}  // namespace kpy
