// Memory in and out: another library's array (NumPy, a buffer, a DLPack producer) as a kiln
// array, shared or copied, and a kiln array's evaluated data as a view others can read.
#include "buffers.h"

#include <cstring>

#include "core/tensor.h"

namespace kpy {

using kiln::Dtype;

nb::dlpack::dtype to_dlpack(Dtype d) {
  using nb::dlpack::dtype_code;
  dtype_code code = dtype_code::Float;
  if (d == kiln::bool_)
    code = dtype_code::Bool;
  else if (d == kiln::bfloat16)
    code = dtype_code::Bfloat;
  else if (kiln::is_unsigned(d))
    code = dtype_code::UInt;
  else if (kiln::is_integral(d))
    code = dtype_code::Int;
  return {static_cast<uint8_t>(code), static_cast<uint8_t>(kiln::size_of(d) * 8), 1};
}

Dtype from_dlpack_dtype(nb::dlpack::dtype t, const char* op) {
  using nb::dlpack::dtype_code;
  const auto code = static_cast<dtype_code>(t.code);
  if (t.lanes == 1) {
    switch (code) {
      case dtype_code::Bool:
        if (t.bits == 8) return kiln::bool_;
        break;
      case dtype_code::Int:
        if (t.bits == 8) return kiln::int8;
        if (t.bits == 16) return kiln::int16;
        if (t.bits == 32) return kiln::int32;
        if (t.bits == 64) return kiln::int64;
        break;
      case dtype_code::UInt:
        if (t.bits == 8) return kiln::uint8;
        if (t.bits == 16) return kiln::uint16;
        if (t.bits == 32) return kiln::uint32;
        if (t.bits == 64) return kiln::uint64;
        break;
      case dtype_code::Float:
        if (t.bits == 16) return kiln::float16;
        if (t.bits == 32) return kiln::float32;
        if (t.bits == 64) return kiln::float64;
        break;
      case dtype_code::Bfloat:
        if (t.bits == 16) return kiln::bfloat16;
        break;
      default: break;
    }
  }
  kiln::fail(op, "no kiln dtype for DLPack type code ", int(t.code), " with ", int(t.bits), " bits and ", int(t.lanes),
             " lanes");
}

namespace {

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

using Imported = nb::ndarray<nb::ro>;

/* The import as a kiln array over its memory, kept alive by the import itself. */
kiln::Array share(const Imported& nd, Dtype dtype, kiln::Device device) {
  namespace kd = kiln::detail;
  kd::Tensor t;
  t.dtype = dtype;
  const int64_t item = kiln::size_of(dtype);
  int64_t lo = 0, hi = 0;
  bool empty = false;
  for (size_t i = 0; i < nd.ndim(); ++i) {
    const auto n = static_cast<int64_t>(nd.shape(i));
    t.shape.push_back(n);
    t.strides.push_back(n == 1 ? 0 : nd.stride(i));
    empty = empty || n == 0;
    if (n > 1) (nd.stride(i) < 0 ? lo : hi) += nd.stride(i) * (n - 1);
  }
  if (empty) return kiln::to(kiln::zeros(t.shape, dtype), device);
  const char* data = static_cast<const char*>(nd.data());
  if (reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(item) != 0)
    kiln::fail("array", "data at ", static_cast<const void*>(data), " is not aligned to ", item, " bytes for ",
               kiln::dtype_name(dtype));
  auto owner = std::shared_ptr<const void>(new Imported(nd), [](const void* p) {
    auto* keep = static_cast<const Imported*>(p);
    if (finalizing()) return;  // the interpreter is going away: leak rather than touch it
    nb::gil_scoped_acquire gil;
    delete keep;
  });
  t.buffer =
      kd::Buffer::external(data + lo * item, static_cast<size_t>((hi - lo + 1) * item), std::move(owner), device);
  t.offset = -lo;
  return kiln::Array::from_tensor(std::move(t), device);
}

bool row_major(const Imported& nd) {
  int64_t expect = 1;
  for (size_t i = nd.ndim(); i-- > 0;) {
    if (nd.shape(i) != 1 && nd.stride(i) != expect) return false;
    expect *= static_cast<int64_t>(nd.shape(i));
  }
  return true;
}

/* Python lists of numbers as NumPy reads them, with kiln's default dtypes (float32 for
   floats, int32 for integers that fit), as MLX does. */
nb::object numpy_from_sequence(nb::handle h) {
  nb::module_ np = nb::module_::import_("numpy");
  nb::object a = np.attr("asarray")(h);
  const std::string kind = nb::cast<std::string>(a.attr("dtype").attr("kind"));
  if (kind == "f" && nb::cast<int>(a.attr("dtype").attr("itemsize")) == 8) return a.attr("astype")("float32");
  if (kind == "i" && nb::cast<int>(a.attr("dtype").attr("itemsize")) == 8) {
    if (nb::cast<size_t>(a.attr("size")) == 0) return a.attr("astype")("int32");
    if (nb::cast<int64_t>(a.attr("min")()) >= INT32_MIN && nb::cast<int64_t>(a.attr("max")()) <= INT32_MAX)
      return a.attr("astype")("int32");
  }
  if (kind == "O" || kind == "U" || kind == "S" || kind == "c")
    kiln::fail("array", "cannot make a kiln array from ", nb::cast<std::string>(nb::repr(nb::type_name(h.type()))),
               " whose NumPy dtype is ", nb::cast<std::string>(nb::str(a.attr("dtype"))));
  return a;
}

}  // namespace

bool is_buffer_like(nb::handle h) {
  return PyObject_CheckBuffer(h.ptr()) || nb::hasattr(h, "__dlpack__") || nb::hasattr(h, "__array_interface__");
}

std::shared_ptr<nb::object> hold(nb::object o) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(o)), [](nb::object* p) {
    if (finalizing()) {
      (void)p->release();
      delete p;
      return;
    }
    nb::gil_scoped_acquire gil;
    delete p;
  });
}

void eval_nogil(const std::vector<kiln::Array>& arrays) {
  nb::gil_scoped_release nogil;
  kiln::eval(arrays);
}

kiln::Array from_buffer(nb::handle h, bool share_memory, std::optional<Dtype> dtype) {
  Imported nd;
  if (!nb::try_cast(h, nd, false)) {
    if (nb::hasattr(h, "__array_interface__"))
      return from_buffer(nb::module_::import_("numpy").attr("asarray")(h), share_memory, dtype);
    kiln::fail("array", "cannot read ", nb::cast<std::string>(nb::repr(nb::type_name(h.type()))),
               " as an array (it offers neither the buffer protocol nor DLPack in a type kiln has)");
  }
  const Dtype own = from_dlpack_dtype(nd.dtype(), "array");
  kiln::Device device = kiln::Device::cpu();
  if (nd.device_type() == nb::device::cuda::value) {
    device = kiln::Device::cuda(nd.device_id());
  } else if (nd.device_type() != nb::device::cpu::value) {
    kiln::fail("array", "cannot read memory of DLPack device type ", nd.device_type(), " (kiln has the CPU and CUDA)");
  }
  kiln::Array out;
  if (!share_memory && device.type == kiln::Device::Type::cpu && row_major(nd)) {
    kiln::Shape shape;
    for (size_t i = 0; i < nd.ndim(); ++i) shape.push_back(static_cast<int64_t>(nd.shape(i)));
    out = kiln::array(nd.data(), shape, own);
  } else {
    out = share(nd, own, device);
    if (!share_memory) {
      out = kiln::copy(out);
      eval_nogil({out});
    }
  }
  if (dtype && *dtype != own) out = kiln::astype(out, *dtype);
  return out;
}

kiln::Array ArrayLike::get() const {
  switch (kind) {
    case Kind::array: return array;
    case Kind::boolean: return kiln::array(i != 0);
    case Kind::integer: return i >= INT32_MIN && i <= INT32_MAX ? kiln::array(static_cast<int32_t>(i)) : kiln::array(i);
    case Kind::floating: return kiln::array(static_cast<float>(f));
  }
  return array;
}

kiln::Array ArrayLike::like(const kiln::Array& other) const {
  switch (kind) {
    case Kind::array: return array;
    case Kind::boolean: return kiln::detail::scalar_for(i != 0, other);  // on other's device, in its dtype
    case Kind::integer: return kiln::detail::scalar_for(i, other);
    case Kind::floating: return kiln::detail::scalar_for(f, other);
  }
  return array;
}

ArrayLike to_array_like(nb::handle h) {
  ArrayLike a;
  if (nb::isinstance<kiln::Array>(h)) {
    a.array = nb::cast<const kiln::Array&>(h);
  } else if (PyBool_Check(h.ptr())) {
    a.kind = ArrayLike::Kind::boolean;
    a.i = h.ptr() == Py_True;
  } else if (PyLong_Check(h.ptr())) {
    a.kind = ArrayLike::Kind::integer;
    int overflow = 0;
    a.i = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow)
      kiln::fail("array", "the Python integer ", nb::cast<std::string>(nb::str(h)), " does not fit in int64");
  } else if (PyFloat_Check(h.ptr())) {
    a.kind = ArrayLike::Kind::floating;
    a.f = PyFloat_AsDouble(h.ptr());
  } else if (is_buffer_like(h)) {
    a.array = from_buffer(h, false, std::nullopt);
  } else if (PySequence_Check(h.ptr()) && !PyUnicode_Check(h.ptr()) && !PyBytes_Check(h.ptr())) {
    a.array = from_buffer(numpy_from_sequence(h), false, std::nullopt);
  } else {
    kiln::fail("array", "cannot make a kiln array from ", nb::cast<std::string>(nb::repr(nb::type_name(h.type()))));
  }
  return a;
}

std::pair<kiln::Array, kiln::Array> operands(const ArrayLike& a, const ArrayLike& b) {
  using K = ArrayLike::Kind;
  if (a.kind == K::array && b.kind != K::array) return {a.array, b.like(a.array)};
  if (b.kind == K::array && a.kind != K::array) return {a.like(b.array), b.array};
  return {a.get(), b.get()};
}

View view_of(const kiln::Array& a) {
  eval_nogil({a});
  const kiln::detail::Tensor& t = a.tensor();
  View v;
  alignas(16) static char empty_data[16];
  v.data = t.buffer ? t.raw() : static_cast<void*>(empty_data);
  for (int i = 0; i < t.ndim(); ++i) {
    v.shape.push_back(static_cast<size_t>(t.shape[i]));
    v.strides.push_back(t.strides[i]);
  }
  v.dtype = t.dtype;
  v.device = t.buffer ? t.buffer->device() : kiln::Device::cpu();
  v.owner = nb::capsule(new kiln::Array(a), [](void* p) noexcept { delete static_cast<kiln::Array*>(p); });
  return v;
}

}  // namespace kpy
