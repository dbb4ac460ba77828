// C API: random numbers (kiln/random.h) and sorting and selection.
#include "capi/capi.h"
#include "kiln/ops.h"
#include "kiln/random.h"

using namespace kiln;
using namespace kiln::capi;

extern "C" {

int kiln_random_key(kiln_array* out, uint64_t seed) {
  return guard([&] {
    check_out("kiln_random_key", out);
    put(out, random::key(seed));
  });
}

int kiln_random_split(kiln_array* out, const kiln_array key, int num) {
  return guard([&] {
    check_out("kiln_random_split", out);
    put(out, random::split(get("kiln_random_split", key), num));
  });
}

int kiln_random_bits(kiln_array* out, const int64_t* shape, int ndim, const kiln_array key) {
  return guard([&] {
    check_out("kiln_random_bits", out);
    put(out, random::bits(to_shape("kiln_random_bits", shape, ndim), get("kiln_random_bits", key)));
  });
}

int kiln_random_uniform(kiln_array* out, const int64_t* shape, int ndim, const kiln_array key, kiln_dtype dtype,
                        double low, double high) {
  return guard([&] {
    const char* fn = "kiln_random_uniform";
    check_out(fn, out);
    put(out, random::uniform(to_shape(fn, shape, ndim), get(fn, key), to_dtype(fn, dtype), low, high));
  });
}

int kiln_random_normal(kiln_array* out, const int64_t* shape, int ndim, const kiln_array key, kiln_dtype dtype,
                       double loc, double scale) {
  return guard([&] {
    const char* fn = "kiln_random_normal";
    check_out(fn, out);
    put(out, random::normal(to_shape(fn, shape, ndim), get(fn, key), to_dtype(fn, dtype), loc, scale));
  });
}

int kiln_random_bernoulli(kiln_array* out, const kiln_array p, const kiln_array key) {
  return guard([&] {
    check_out("kiln_random_bernoulli", out);
    put(out, random::bernoulli(get("kiln_random_bernoulli", p), get("kiln_random_bernoulli", key)));
  });
}

int kiln_random_categorical(kiln_array* out, const kiln_array logits, const kiln_array key, int axis) {
  return guard([&] {
    check_out("kiln_random_categorical", out);
    put(out, random::categorical(get("kiln_random_categorical", logits), get("kiln_random_categorical", key), axis));
  });
}

int kiln_topk(kiln_array* values, kiln_array* indices, const kiln_array a, int k, int axis) {
  return guard([&] {
    check_out("kiln_topk", values);
    check_out("kiln_topk", indices);
    auto [v, i] = topk(get("kiln_topk", a), k, axis);
    put(values, std::move(v));
    put(indices, std::move(i));
  });
}

int kiln_sort(kiln_array* out, const kiln_array a, int axis) {
  return guard([&] {
    check_out("kiln_sort", out);
    put(out, sort(get("kiln_sort", a), axis));
  });
}

int kiln_argsort(kiln_array* out, const kiln_array a, int axis) {
  return guard([&] {
    check_out("kiln_argsort", out);
    put(out, argsort(get("kiln_argsort", a), axis));
  });
}

int kiln_argpartition(kiln_array* out, const kiln_array a, int kth, int axis) {
  return guard([&] {
    check_out("kiln_argpartition", out);
    put(out, argpartition(get("kiln_argpartition", a), kth, axis));
  });
}

int kiln_partition(kiln_array* out, const kiln_array a, int kth, int axis) {
  return guard([&] {
    check_out("kiln_partition", out);
    put(out, partition(get("kiln_partition", a), kth, axis));
  });
}

}  // extern "C"
