// C API: creation and elementwise ops.
#include "capi/capi.h"
#include "kiln/ops.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_zeros(kiln_array* out, const int64_t* shape, int ndim, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_zeros", out);
    put(out, zeros(to_shape("kiln_zeros", shape, ndim), to_dtype("kiln_zeros", dtype)));
  });
}

int kiln_ones(kiln_array* out, const int64_t* shape, int ndim, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_ones", out);
    put(out, ones(to_shape("kiln_ones", shape, ndim), to_dtype("kiln_ones", dtype)));
  });
}

int kiln_full(kiln_array* out, const int64_t* shape, int ndim, double value, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_full", out);
    put(out, full(to_shape("kiln_full", shape, ndim), value, to_dtype("kiln_full", dtype)));
  });
}

int kiln_full_array(kiln_array* out, const int64_t* shape, int ndim, const kiln_array value) {
  return guard([&] {
    check_out("kiln_full_array", out);
    put(out, full(to_shape("kiln_full_array", shape, ndim), get("kiln_full_array", value)));
  });
}

int kiln_zeros_like(kiln_array* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_zeros_like", out);
    put(out, zeros_like(get("kiln_zeros_like", a)));
  });
}

int kiln_ones_like(kiln_array* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_ones_like", out);
    put(out, ones_like(get("kiln_ones_like", a)));
  });
}

int kiln_full_like(kiln_array* out, const kiln_array a, double value) {
  return guard([&] {
    check_out("kiln_full_like", out);
    put(out, full_like(get("kiln_full_like", a), value));
  });
}

int kiln_arange(kiln_array* out, double start, double stop, double step, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_arange", out);
    put(out, arange(start, stop, step, to_dtype("kiln_arange", dtype)));
  });
}

int kiln_linspace(kiln_array* out, double start, double stop, int64_t num, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_linspace", out);
    put(out, linspace(start, stop, num, to_dtype("kiln_linspace", dtype)));
  });
}

int kiln_eye(kiln_array* out, int64_t n, int64_t m, int64_t k, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_eye", out);
    std::optional<int64_t> cols;
    if (m >= 0) cols = m;
    put(out, eye(n, cols, k, to_dtype("kiln_eye", dtype)));
  });
}

#define KILN_C_UNARY(name)                               \
  int kiln_##name(kiln_array* out, const kiln_array a) { \
    return guard([&] {                                   \
      check_out("kiln_" #name, out);                     \
      put(out, kiln::name(get("kiln_" #name, a)));       \
    });                                                  \
  }
#include "kiln/c/kiln_unary_ops.def"
#undef KILN_C_UNARY

#define KILN_C_BINARY(name)                                                  \
  int kiln_##name(kiln_array* out, const kiln_array a, const kiln_array b) { \
    return guard([&] {                                                       \
      check_out("kiln_" #name, out);                                         \
      put(out, kiln::name(get("kiln_" #name, a), get("kiln_" #name, b)));    \
    });                                                                      \
  }
#include "kiln/c/kiln_binary_ops.def"
#undef KILN_C_BINARY

int kiln_astype(kiln_array* out, const kiln_array a, kiln_dtype dtype) {
  return guard([&] {
    check_out("kiln_astype", out);
    put(out, astype(get("kiln_astype", a), to_dtype("kiln_astype", dtype)));
  });
}

int kiln_where(kiln_array* out, const kiln_array cond, const kiln_array a, const kiln_array b) {
  return guard([&] {
    const char* fn = "kiln_where";
    check_out(fn, out);
    put(out, where(get(fn, cond), get(fn, a), get(fn, b)));
  });
}

int kiln_clip(kiln_array* out, const kiln_array a, const kiln_array lo, const kiln_array hi) {
  return guard([&] {
    check_out("kiln_clip", out);
    put(out, clip(get("kiln_clip", a), get_optional(lo), get_optional(hi)));
  });
}

}  // extern "C"
