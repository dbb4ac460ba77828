// C API: reductions, scans and matmul.
#include "capi/capi.h"
#include "kiln/ops.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

#define KILN_C_REDUCE(name)                                                                            \
  int kiln_##name(kiln_array* out, const kiln_array a, const int* axes, size_t naxes, bool keepdims) { \
    return guard([&] {                                                                                 \
      check_out("kiln_" #name, out);                                                                   \
      put(out, kiln::name(get("kiln_" #name, a), to_axes("kiln_" #name, axes, naxes), keepdims));      \
    });                                                                                                \
  }
#include "kiln/c/kiln_reduce_ops.def"
#undef KILN_C_REDUCE

int kiln_var(kiln_array* out, const kiln_array a, const int* axes, size_t naxes, bool keepdims, int ddof) {
  return guard([&] {
    check_out("kiln_var", out);
    put(out, var(get("kiln_var", a), to_axes("kiln_var", axes, naxes), keepdims, ddof));
  });
}

int kiln_argmax(kiln_array* out, const kiln_array a, int axis, bool keepdims) {
  return guard([&] {
    check_out("kiln_argmax", out);
    put(out, argmax(get("kiln_argmax", a), axis, keepdims));
  });
}

int kiln_argmin(kiln_array* out, const kiln_array a, int axis, bool keepdims) {
  return guard([&] {
    check_out("kiln_argmin", out);
    put(out, argmin(get("kiln_argmin", a), axis, keepdims));
  });
}

int kiln_argmax_all(kiln_array* out, const kiln_array a, bool keepdims) {
  return guard([&] {
    check_out("kiln_argmax_all", out);
    put(out, argmax(get("kiln_argmax_all", a), std::nullopt, keepdims));
  });
}

int kiln_argmin_all(kiln_array* out, const kiln_array a, bool keepdims) {
  return guard([&] {
    check_out("kiln_argmin_all", out);
    put(out, argmin(get("kiln_argmin_all", a), std::nullopt, keepdims));
  });
}

int kiln_softmax(kiln_array* out, const kiln_array a, const int* axes, size_t naxes) {
  return guard([&] {
    check_out("kiln_softmax", out);
    std::vector<int> ax = naxes == 0 ? std::vector<int>{-1} : to_axes("kiln_softmax", axes, naxes);
    put(out, softmax(get("kiln_softmax", a), ax));
  });
}

int kiln_cumsum(kiln_array* out, const kiln_array a, int axis, bool reverse, bool inclusive) {
  return guard([&] {
    check_out("kiln_cumsum", out);
    put(out, cumsum(get("kiln_cumsum", a), axis, reverse, inclusive));
  });
}

int kiln_matmul(kiln_array* out, const kiln_array a, const kiln_array b) {
  return guard([&] {
    check_out("kiln_matmul", out);
    put(out, matmul(get("kiln_matmul", a), get("kiln_matmul", b)));
  });
}

}  // extern "C"
