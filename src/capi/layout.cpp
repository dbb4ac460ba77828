// C API: layout ops that copy data (concatenate, pad, take, ...).
#include "capi/capi.h"
#include "kiln/ops.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_copy(kiln_array* out, const kiln_array a) {
  return guard([&] {
    check_out("kiln_copy", out);
    put(out, copy(get("kiln_copy", a)));
  });
}

int kiln_slice_update(kiln_array* out, const kiln_array a, const kiln_array update, const int64_t* start,
                      const int64_t* stop, const int64_t* step, int n) {
  return guard([&] {
    const char* fn = "kiln_slice_update";
    check_out(fn, out);
    Shape b, e, s;
    slice_args(fn, start, stop, step, n, b, e, s);
    put(out, slice_update(get(fn, a), get(fn, update), b, e, s));
  });
}

int kiln_concatenate(kiln_array* out, const kiln_vector_array arrays, int axis) {
  return guard([&] {
    check_out("kiln_concatenate", out);
    put(out, concatenate(get("kiln_concatenate", arrays), axis));
  });
}

int kiln_stack(kiln_array* out, const kiln_vector_array arrays, int axis) {
  return guard([&] {
    check_out("kiln_stack", out);
    put(out, stack(get("kiln_stack", arrays), axis));
  });
}

int kiln_split(kiln_vector_array* out, const kiln_array a, int sections, int axis) {
  return guard([&] {
    check_out("kiln_split", out);
    put(out, split(get("kiln_split", a), sections, axis));
  });
}

int kiln_split_indices(kiln_vector_array* out, const kiln_array a, const int64_t* indices, size_t n, int axis) {
  return guard([&] {
    const char* fn = "kiln_split_indices";
    check_out(fn, out);
    if (n > 0 && !indices) fail(fn, "null indices with ", n, " indices");
    put(out, split(get(fn, a), std::vector<int64_t>(indices, indices + n), axis));
  });
}

int kiln_pad(kiln_array* out, const kiln_array a, const int64_t* widths, int n, double pad_value) {
  return guard([&] {
    const char* fn = "kiln_pad";
    check_out(fn, out);
    if (n < 0) fail(fn, "negative axis count ", n);
    if (n > 0 && !widths) fail(fn, "null widths with ", n, " axes");
    std::vector<std::pair<int64_t, int64_t>> w;
    for (int i = 0; i < n; ++i) w.emplace_back(widths[2 * i], widths[2 * i + 1]);
    put(out, pad(get(fn, a), w, pad_value));
  });
}

int kiln_take(kiln_array* out, const kiln_array a, const kiln_array indices, int axis) {
  return guard([&] {
    check_out("kiln_take", out);
    put(out, take(get("kiln_take", a), get("kiln_take", indices), axis));
  });
}

int kiln_take_along_axis(kiln_array* out, const kiln_array a, const kiln_array indices, int axis) {
  return guard([&] {
    const char* fn = "kiln_take_along_axis";
    check_out(fn, out);
    put(out, take_along_axis(get(fn, a), get(fn, indices), axis));
  });
}

}  // extern "C"
