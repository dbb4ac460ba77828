// C API: vectors of arrays.
#include "capi/capi.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_vector_array_new(kiln_vector_array* out) {
  return guard([&] {
    check_out("kiln_vector_array_new", out);
    put(out, {});
  });
}

int kiln_vector_array_new_data(kiln_vector_array* out, const kiln_array* arrays, size_t n) {
  return guard([&] {
    const char* fn = "kiln_vector_array_new_data";
    check_out(fn, out);
    if (n > 0 && !arrays) fail(fn, "null arrays with ", n, " arrays");
    std::vector<Array> v;
    v.reserve(n);
    for (size_t i = 0; i < n; ++i) v.push_back(get(fn, arrays[i]));
    put(out, std::move(v));
  });
}

int kiln_vector_array_set(kiln_vector_array* out, const kiln_vector_array src) {
  return guard([&] {
    check_out("kiln_vector_array_set", out);
    std::vector<Array> copy = get("kiln_vector_array_set", src);
    put(out, std::move(copy));
  });
}

int kiln_vector_array_free(kiln_vector_array v) {
  return guard([&] { delete v; });
}

int kiln_vector_array_append(kiln_vector_array v, const kiln_array a) {
  return guard([&] {
    const char* fn = "kiln_vector_array_append";
    if (!v) fail(fn, "null vector handle");
    v->v.push_back(get(fn, a));
  });
}

int kiln_vector_array_append_vector(kiln_vector_array v, const kiln_vector_array other) {
  return guard([&] {
    const char* fn = "kiln_vector_array_append_vector";
    if (!v) fail(fn, "null vector handle");
    std::vector<Array> add = get(fn, other);  // a copy, so appending v to itself works
    v->v.insert(v->v.end(), add.begin(), add.end());
  });
}

int kiln_vector_array_get(kiln_array* out, const kiln_vector_array v, size_t i) {
  return guard([&] {
    const char* fn = "kiln_vector_array_get";
    check_out(fn, out);
    const auto& vec = get(fn, v);
    if (i >= vec.size()) fail(fn, "index ", i, " is out of range for a vector of ", vec.size(), " arrays");
    put(out, vec[i]);
  });
}

int kiln_vector_array_size(size_t* out, const kiln_vector_array v) {
  return guard([&] {
    check_out("kiln_vector_array_size", out);
    *out = get("kiln_vector_array_size", v).size();
  });
}

int kiln_vector_array_clear(kiln_vector_array v) {
  return guard([&] {
    if (!v) fail("kiln_vector_array_clear", "null vector handle");
    v->v.clear();
  });
}

}  // extern "C"
