// C API: view ops (reshape, transpose, slicing, ...).
#include "capi/capi.h"
#include "kiln/ops.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_reshape(kiln_array* out, const kiln_array a, const int64_t* shape, int ndim) {
  return guard([&] {
    check_out("kiln_reshape", out);
    put(out, reshape(get("kiln_reshape", a), to_shape("kiln_reshape", shape, ndim)));
  });
}

int kiln_transpose(kiln_array* out, const kiln_array a, const int* perm, size_t nperm) {
  return guard([&] {
    check_out("kiln_transpose", out);
    put(out, transpose(get("kiln_transpose", a), to_axes("kiln_transpose", perm, nperm)));
  });
}

int kiln_swapaxes(kiln_array* out, const kiln_array a, int axis1, int axis2) {
  return guard([&] {
    check_out("kiln_swapaxes", out);
    put(out, swapaxes(get("kiln_swapaxes", a), axis1, axis2));
  });
}

int kiln_broadcast_to(kiln_array* out, const kiln_array a, const int64_t* shape, int ndim) {
  return guard([&] {
    check_out("kiln_broadcast_to", out);
    put(out, broadcast_to(get("kiln_broadcast_to", a), to_shape("kiln_broadcast_to", shape, ndim)));
  });
}

int kiln_expand_dims(kiln_array* out, const kiln_array a, int axis) {
  return guard([&] {
    check_out("kiln_expand_dims", out);
    put(out, expand_dims(get("kiln_expand_dims", a), axis));
  });
}

int kiln_squeeze(kiln_array* out, const kiln_array a, const int* axes, size_t naxes) {
  return guard([&] {
    check_out("kiln_squeeze", out);
    put(out, squeeze(get("kiln_squeeze", a), to_axes("kiln_squeeze", axes, naxes)));
  });
}

int kiln_flatten(kiln_array* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_flatten", out);
    put(out, flatten(get("kiln_flatten", a)));
  });
}

int kiln_slice(kiln_array* out, const kiln_array a, const int64_t* start, const int64_t* stop, const int64_t* step,
               int n) {
  return guard([&] {
    const char* fn = "kiln_slice";
    check_out(fn, out);
    Shape b, e, s;
    slice_args(fn, start, stop, step, n, b, e, s);
    put(out, slice(get(fn, a), b, e, s));
  });
}

}  // extern "C"
