// C API: dtypes, arrays from and to host memory, and their queries.
#include <climits>
#include <cstring>
#include <sstream>

#include "capi/capi.h"
#include "core/checked.h"
#include "kiln/ops.h"

namespace kiln::capi {

Dtype to_dtype(const char* fn, const kiln_dtype& d) {
  int i = enum_value(d);
  if (i < 0 || i >= kNumDtypes) fail(fn, "invalid dtype ", i);
  return static_cast<Dtype>(i);
}

Shape to_shape(const char* fn, const int64_t* shape, int ndim) {
  if (ndim < 0) fail(fn, "negative ndim ", ndim);
  if (ndim > 0 && !shape) fail(fn, "null shape with ndim ", ndim);
  return Shape(shape, shape + ndim);
}

std::vector<int> to_axes(const char* fn, const int* axes, size_t n) {
  if (n > 0 && !axes) fail(fn, "null axes with ", n, " axes");
  return std::vector<int>(axes, axes + n);
}

namespace {

static_assert(KILN_NUM_DTYPES == kNumDtypes, "kiln_dtypes.def and kiln::Dtype disagree");
static_assert(KILN_BOOL == static_cast<int>(bool_) && KILN_UINT8 == static_cast<int>(uint8) &&
                  KILN_UINT16 == static_cast<int>(uint16) && KILN_UINT32 == static_cast<int>(uint32) &&
                  KILN_UINT64 == static_cast<int>(uint64) && KILN_INT8 == static_cast<int>(int8) &&
                  KILN_INT16 == static_cast<int>(int16) && KILN_INT32 == static_cast<int>(int32) &&
                  KILN_INT64 == static_cast<int>(int64) && KILN_FLOAT16 == static_cast<int>(float16) &&
                  KILN_BFLOAT16 == static_cast<int>(bfloat16) && KILN_FLOAT32 == static_cast<int>(float32) &&
                  KILN_FLOAT64 == static_cast<int>(float64),
              "kiln_dtypes.def and kiln::Dtype disagree");

// Writes a's elements (converted to double or int64) as nested lists.
void write_values(std::ostream& os, const Array& a) {
  Dtype d = a.dtype();
  bool as_int = !is_floating(d);
  std::vector<double> f;
  std::vector<int64_t> i;
  if (as_int)
    i = a.to_vector<int64_t>();
  else
    f = a.to_vector<double>();
  const Shape& shape = a.shape();
  if (shape.empty()) {
    if (d == bool_)
      os << (i[0] ? "true" : "false");
    else if (as_int)
      os << i[0];
    else
      os << f[0];
    return;
  }
  std::vector<int64_t> idx(shape.size(), 0);
  size_t flat = 0;
  int64_t total = a.size();
  for (size_t k = 0; k < shape.size(); ++k) os << '[';
  if (total == 0) {
    for (size_t k = 0; k < shape.size(); ++k) os << ']';
    return;
  }
  for (;;) {
    if (d == bool_)
      os << (i[flat] ? "true" : "false");
    else if (as_int)
      os << i[flat];
    else
      os << f[flat];
    ++flat;
    // Advance the multi-index, closing and reopening brackets as axes roll over.
    int axis = static_cast<int>(shape.size()) - 1;
    int closed = 0;
    while (axis >= 0 && ++idx[static_cast<size_t>(axis)] == shape[static_cast<size_t>(axis)]) {
      idx[static_cast<size_t>(axis)] = 0;
      --axis;
      ++closed;
    }
    for (int k = 0; k < closed; ++k) os << ']';
    if (axis < 0) return;
    os << ", ";
    for (int k = 0; k < closed; ++k) os << '[';
  }
}

}  // namespace
}  // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_dtype_size(size_t* out, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_dtype_size", out);
    *out = static_cast<size_t>(size_of(to_dtype("kiln_dtype_size", dtype)));
  });
}

int kiln_dtype_name(const char** out, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_dtype_name", out);
    *out = dtype_name(to_dtype("kiln_dtype_name", dtype));
  });
}

int kiln_dtype_from_name(kiln_dtype* out, const char* name) {
  return guard([&] {
    check_out("kiln_dtype_from_name", out);
    if (!name) fail("kiln_dtype_from_name", "null name");
    *out = static_cast<kiln_dtype>(dtype_from_name(name));
  });
}

int kiln_array_new(kiln_array* out) {
  return guard([&] {
    check_out("kiln_array_new", out);
    put(out, Array());
  });
}

int kiln_array_new_data(kiln_array* out, const void* data, const int64_t* shape, int ndim, kiln_dtype dtype) {
  return guard([&] {
    const char* fn = "kiln_array_new_data";
    check_out(fn, out);
    Shape s = to_shape(fn, shape, ndim);
    Dtype d = to_dtype(fn, dtype);
    detail::check_shape(fn, s, d);
    int64_t n = detail::checked_size(fn, s);
    if (!data && n > 0) fail(fn, "null data for ", n, " elements");
    put(out, array(data, std::move(s), d));
  });
}

int kiln_array_new_float(kiln_array* out, double value, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_array_new_float", out);
    put(out, scalar(value, to_dtype("kiln_array_new_float", dtype)));
  });
}

int kiln_array_new_int(kiln_array* out, int64_t value, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_array_new_int", out);
    put(out, scalar_int(value, to_dtype("kiln_array_new_int", dtype)));
  });
}

int kiln_array_new_bool(kiln_array* out, bool value) {
  return guard([&] {
    check_out("kiln_array_new_bool", out);
    put(out, array(value));
  });
}

int kiln_array_new_float_like(kiln_array* out, double value, const kiln_array like) {
  return guard([&] {
    check_out("kiln_array_new_float_like", out);
    put(out, detail::scalar_for(value, get("kiln_array_new_float_like", like)));
  });
}

int kiln_array_new_int_like(kiln_array* out, int64_t value, const kiln_array like) {
  return guard([&] {
    check_out("kiln_array_new_int_like", out);
    put(out, detail::scalar_for(value, get("kiln_array_new_int_like", like)));
  });
}

int kiln_array_set(kiln_array* out, const kiln_array src) {
  return guard([&] {
    check_out("kiln_array_set", out);
    put(out, get("kiln_array_set", src));
  });
}

int kiln_array_free(kiln_array a) {
  return guard([&] { delete a; });
}

int kiln_array_valid(bool* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_valid", out);
    *out = a && a->arr.valid();
  });
}

int kiln_array_ndim(int* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_ndim", out);
    *out = get("kiln_array_ndim", a).ndim();
  });
}

int kiln_array_shape(const int64_t** out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_shape", out);
    const Shape& s = get("kiln_array_shape", a).shape();
    *out = s.empty() ? nullptr : s.data();
  });
}

int kiln_array_dim(int64_t* out, const kiln_array a, int axis) {
  return guard([&] {
    check_out("kiln_array_dim", out);
    *out = get("kiln_array_dim", a).shape(axis);
  });
}

int kiln_array_size(size_t* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_size", out);
    *out = static_cast<size_t>(get("kiln_array_size", a).size());
  });
}

int kiln_array_itemsize(size_t* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_itemsize", out);
    *out = get("kiln_array_itemsize", a).itemsize();
  });
}

int kiln_array_nbytes(size_t* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_nbytes", out);
    *out = get("kiln_array_nbytes", a).nbytes();
  });
}

int kiln_array_dtype(kiln_dtype* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_dtype", out);
    *out = static_cast<kiln_dtype>(get("kiln_array_dtype", a).dtype());
  });
}

int kiln_array_device(kiln_device* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_device", out);
    Device d = get("kiln_array_device", a).device();
    out->type = d.type == Device::Type::cpu ? KILN_DEVICE_CPU : KILN_DEVICE_CUDA;
    out->index = d.index;
  });
}

int kiln_array_id(const void** out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_id", out);
    *out = get("kiln_array_id", a).id();
  });
}

int kiln_array_eval(const kiln_array a) {
  return guard([&] { get("kiln_array_eval", a).eval(); });
}

int kiln_array_is_evaluated(bool* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_is_evaluated", out);
    *out = get("kiln_array_is_evaluated", a).is_evaluated();
  });
}

int kiln_array_copy_to(void* dst, size_t dst_nbytes, const kiln_array a, kiln_dtype as) {
  return guard([&] {
    const char* fn = "kiln_array_copy_to";
    const Array& arr = get(fn, a);
    Dtype d = to_dtype(fn, as);
    size_t need = detail::checked_bytes(fn, arr.shape(), d);
    if (dst_nbytes < need) fail(fn, "destination holds ", dst_nbytes, " bytes, the array needs ", need);
    if (!dst && need > 0) fail(fn, "null destination");
    arr.copy_to(dst, d);
  });
}

#define KILN_C_DTYPE(E, n, t)                                               \
  int kiln_array_item_##n(t* out, const kiln_array a) {                     \
    return guard([&] {                                                      \
      check_out("kiln_array_item_" #n, out);                                \
      const Array& arr = get("kiln_array_item_" #n, a);                     \
      if (arr.size() != 1) fail("item", "item() needs an array of size 1"); \
      arr.copy_to(out, static_cast<Dtype>(E));                              \
    });                                                                     \
  }
#include "kiln/c/kiln_dtypes.def"
#undef KILN_C_DTYPE

int kiln_array_tostring(char** out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_array_tostring", out);
    const Array& arr = get("kiln_array_tostring", a);
    std::ostringstream os;
    os << "array(";
    write_values(os, arr);
    os << ", shape=(";
    for (size_t k = 0; k < arr.shape().size(); ++k) os << (k ? "," : "") << arr.shape()[k];
    os << "), dtype=" << dtype_name(arr.dtype()) << ")";
    *out = c_string(os.str());
  });
}

int kiln_string_free(char* s) {
  delete[] s;
  return 0;
}

}  // extern "C"
