// Internals shared by the C API sources: the handle structs, the guard that turns
// C++ exceptions into status codes, and argument helpers.
#pragma once

#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/c/kiln.h"
#include "kiln/error.h"

namespace kiln::capi {

/* A function of arrays behind a kiln_closure handle. */
class Closure {
 public:
  virtual ~Closure() = default;
  virtual std::vector<Array> call(const std::vector<Array>& inputs) const = 0;
};

}  // namespace kiln::capi

struct kiln_array_s {
  kiln::Array arr;
};
struct kiln_vector_array_s {
  std::vector<kiln::Array> v;
};
struct kiln_closure_s {
  std::shared_ptr<const kiln::capi::Closure> c;
};

namespace kiln::capi {

/* Sets the calling thread's last error and calls the error handler. */
void report(const char* msg) noexcept;
/* Sets the calling thread's last error without calling the handler. */
void set_last_error(const char* msg) noexcept;
/* The calling thread's last error. */
const std::string& last_error() noexcept;

/* Runs f; returns 0, or 1 after reporting the exception it threw. */
template <class F>
int guard(F&& f) noexcept {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    report(e.what());
  } catch (...) {
    report("[kiln] unknown error");
  }
  return 1;
}

/* The array behind a handle; `fn` names the C function for the message. */
inline const Array& get(const char* fn, const kiln_array a) {
  if (!a) fail(fn, "null array handle");
  return a->arr;
}
/* The array behind a handle, or nothing for a NULL handle. */
inline std::optional<Array> get_optional(const kiln_array a) {
  if (!a) return std::nullopt;
  return a->arr;
}
inline const std::vector<Array>& get(const char* fn, const kiln_vector_array v) {
  if (!v) fail(fn, "null vector handle");
  return v->v;
}
inline const std::shared_ptr<const Closure>& get(const char* fn, const kiln_closure c) {
  if (!c || !c->c) fail(fn, "null closure handle");
  return c->c;
}
template <class T>
void check_out(const char* fn, T* out) {
  if (!out) fail(fn, "null output pointer");
}

/* A copy of s for a C caller, released with kiln_string_free. */
inline char* c_string(const std::string& s) {
  char* buf = new char[s.size() + 1];
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return buf;
}

/* Stores a result in *out: a new handle when *out is NULL, else in place. */
inline void put(kiln_array* out, Array value) {
  if (*out)
    (*out)->arr = std::move(value);
  else
    *out = new kiln_array_s{std::move(value)};
}
inline void put(kiln_vector_array* out, std::vector<Array> value) {
  if (*out)
    (*out)->v = std::move(value);
  else
    *out = new kiln_vector_array_s{std::move(value)};
}

/* The integer a C caller passed as an enum. Read through memcpy: C lets any int
   through an enum parameter, while loading an out-of-range enum in C++ is undefined,
   so enum parameters are only ever passed on by reference. */
template <class E>
int enum_value(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

Dtype to_dtype(const char* fn, const kiln_dtype& d);
Device to_device(const char* fn, kiln_device d);
Shape to_shape(const char* fn, const int64_t* shape, int ndim);
std::vector<int> to_axes(const char* fn, const int* axes, size_t n);
/* start/stop/step of n axes; a NULL step means ones. */
inline void slice_args(const char* fn, const int64_t* start, const int64_t* stop, const int64_t* step, int n, Shape& b,
                       Shape& e, Shape& s) {
  b = to_shape(fn, start, n);
  e = to_shape(fn, stop, n);
  s = step ? to_shape(fn, step, n) : Shape(static_cast<size_t>(n < 0 ? 0 : n), 1);
}

}  // namespace kiln::capi
