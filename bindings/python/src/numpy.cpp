// kiln arrays to NumPy and other readers of host memory: __array__, Array.numpy, the buffer
// protocol (memoryview), tolist and item. Views share the evaluated buffer (read-only: kiln
// arrays never change); bfloat16, which NumPy lacks, converts to float32 unless asked for its bits.
#include "numpy.h"

#include "buffers.h"

namespace kpy {

namespace {

kiln::Array on_host(const kiln::Array& a) {
  if (a.device().type == kiln::Device::Type::cpu) return a;
  nb::gil_scoped_release nogil;
  return kiln::to(a, kiln::Device::cpu());
}

const char* buffer_format(kiln::Dtype d) {
  switch (d) {
    case kiln::Dtype::bool_: return "?";
    case kiln::Dtype::uint8: return "B";
    case kiln::Dtype::uint16: return "H";
    case kiln::Dtype::uint32: return "I";
    case kiln::Dtype::uint64: return "Q";
    case kiln::Dtype::int8: return "b";
    case kiln::Dtype::int16: return "h";
    case kiln::Dtype::int32: return "i";
    case kiln::Dtype::int64: return "q";
    case kiln::Dtype::float16: return "e";
    case kiln::Dtype::float32: return "f";
    case kiln::Dtype::float64: return "d";
    case kiln::Dtype::bfloat16: return nullptr;
  }
  return nullptr;
}

/* What a Py_buffer points into while it is held. */
struct Exported {
  View view;
  std::vector<Py_ssize_t> shape, strides;
};

int get_buffer(PyObject* self, Py_buffer* out, int flags) noexcept {
  try {
    if (flags & PyBUF_WRITABLE) {
      PyErr_SetString(PyExc_BufferError, "[buffer] kiln arrays are immutable: no writable buffer");
      return -1;
    }
    kiln::Array a = on_host(*nb::inst_ptr<kiln::Array>(self));
    const char* format = buffer_format(a.dtype());
    if (!format) {
      PyErr_SetString(PyExc_BufferError,
                      "[buffer] bfloat16 has no buffer format: use numpy.asarray (float32) or "
                      "Array.numpy(bfloat16_bits=True) (uint16)");
      return -1;
    }
    auto* e = new Exported{view_of(a), {}, {}};
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t i = e->view.shape.size(); i-- > 0;) {
      contiguous = contiguous && (e->view.shape[i] == 1 || e->view.strides[i] == expect);
      expect *= static_cast<int64_t>(e->view.shape[i]);
    }
    if (!contiguous && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
      kiln::Array c = kiln::copy(a);
      e->view = view_of(c);
    }
    const auto item = static_cast<Py_ssize_t>(a.itemsize());
    for (size_t i = 0; i < e->view.shape.size(); ++i) {
      e->shape.push_back(static_cast<Py_ssize_t>(e->view.shape[i]));
      e->strides.push_back(static_cast<Py_ssize_t>(e->view.strides[i]) * item);
    }
    out->buf = e->view.data;
    out->obj = Py_NewRef(self);
    out->len = static_cast<Py_ssize_t>(a.size()) * item;
    out->itemsize = item;
    out->readonly = 1;
    out->ndim = static_cast<int>(e->shape.size());
    out->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
    out->shape = e->shape.data();
    out->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? e->strides.data() : nullptr;
    out->suboffsets = nullptr;
    out->internal = e;
    return 0;
  } catch (const std::exception& ex) {
    PyErr_SetString(PyExc_BufferError, ex.what());
    return -1;
  }
}

void release_buffer(PyObject*, Py_buffer* view) noexcept { delete static_cast<Exported*>(view->internal); }

}  // namespace

PyType_Slot buffer_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(get_buffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(release_buffer)},
    {0, nullptr},
};

nb::object to_numpy(const kiln::Array& array, bool bfloat16_bits) {
  kiln::Array a = on_host(array);
  View v;
  if (a.dtype() == kiln::bfloat16 && !bfloat16_bits) {
    v = view_of(kiln::astype(a, kiln::float32));
  } else {
    v = view_of(a);
    if (v.dtype == kiln::bfloat16) v.dtype = kiln::uint16;
  }
  return nb::ndarray<nb::numpy, nb::ro>(v.data, v.shape.size(), v.shape.data(), v.owner, v.strides.data(),
                                        to_dlpack(v.dtype), nb::device::cpu::value, 0)
      .cast();
}

nb::object item(const kiln::Array& a) {
  nb::gil_scoped_release nogil;
  const kiln::Dtype d = a.dtype();
  if (d == kiln::bool_) {
    bool v = a.item<bool>();
    nb::gil_scoped_acquire gil;
    return nb::bool_(v);
  }
  if (kiln::is_unsigned(d)) {
    uint64_t v = a.item<uint64_t>();
    nb::gil_scoped_acquire gil;
    return nb::int_(v);
  }
  if (kiln::is_integral(d)) {
    int64_t v = a.item<int64_t>();
    nb::gil_scoped_acquire gil;
    return nb::int_(v);
  }
  double v = a.item<double>();
  nb::gil_scoped_acquire gil;
  return nb::float_(v);
}

void init_numpy(ArrayClass& array) {
  array
      .def(
          "__array__",
          [](const kiln::Array& a, nb::object dtype, nb::object copy) {
            nb::object out = to_numpy(a, false);
            if (!dtype.is_none())
              out = out.attr("astype")(dtype);
            else if (!copy.is_none() && nb::cast<bool>(copy))
              out = out.attr("copy")();
            return out;
          },
          "dtype"_a.none() = nb::none(), "copy"_a.none() = nb::none(),
          "The array as a read-only NumPy array over kiln's buffer (no copy; bfloat16 converts to float32).")
      .def("numpy", &to_numpy, "bfloat16_bits"_a = false,
           "Evaluates and returns a read-only NumPy view of the data (no copy where it is on the host).\n"
           "bfloat16, which NumPy lacks, converts to float32, or with bfloat16_bits=True is viewed\n"
           "as uint16 holding the bits (no copy; numpy_array.view(ml_dtypes.bfloat16) reads them).")
      .def("item", &item, "The single element as a Python bool, int or float (evaluates).")
      .def(
          "tolist", [](const kiln::Array& a) { return to_numpy(a, false).attr("tolist")(); },
          "The elements as nested Python lists (evaluates).");
}

}  // namespace kpy
