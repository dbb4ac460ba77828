// Test support: random inputs, non-contiguous layouts of the same values, and
// comparison of kiln results against float64 references computed in the test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kt {

using kiln::Array;
using kiln::Dtype;
using kiln::Shape;

inline const std::vector<Dtype>& all_dtypes() {
  static const std::vector<Dtype> d = {kiln::bool_,    kiln::uint8,   kiln::uint16, kiln::uint32, kiln::uint64,
                                       kiln::int8,     kiln::int16,   kiln::int32,  kiln::int64,  kiln::float16,
                                       kiln::bfloat16, kiln::float32, kiln::float64};
  return d;
}
inline const std::vector<Dtype>& float_dtypes() {
  static const std::vector<Dtype> d = {kiln::float16, kiln::bfloat16, kiln::float32, kiln::float64};
  return d;
}
inline const std::vector<Dtype>& int_dtypes() {
  static const std::vector<Dtype> d = {kiln::uint8, kiln::uint16, kiln::uint32, kiln::uint64,
                                       kiln::int8,  kiln::int16,  kiln::int32,  kiln::int64};
  return d;
}

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

/* Values exactly representable in `d`: floats rounded through d, integers in [lo, hi]
   (clamped to d's range), bools half true. Never all zeros. */
inline std::vector<double> random_values(int64_t n, Dtype d, uint64_t seed, double lo = -4, double hi = 4) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  if (d == kiln::bool_) {
    for (auto& x : v) x = static_cast<double>(rng() & 1u);
    if (n > 0) v[0] = 1;
    return v;
  }
  if (kiln::is_unsigned(d)) lo = std::max(lo, 0.0);
  if (d == kiln::int8 || d == kiln::uint8) hi = std::min(hi, 100.0), lo = std::max(lo, -100.0);
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& x : v) {
    double r = u(rng);
    if (kiln::is_integral(d)) {
      x = std::round(r);
    } else if (d == kiln::float16) {
      x = static_cast<float>(kiln::float16_t(static_cast<float>(r)));
    } else if (d == kiln::bfloat16) {
      x = static_cast<float>(kiln::bfloat16_t(static_cast<float>(r)));
    } else if (d == kiln::float32) {
      x = static_cast<float>(r);
    } else {
      x = r;
    }
  }
  if (n > 0 && v[0] == 0) v[0] = kiln::is_unsigned(d) ? 1 : -1;
  return v;
}

/* An array of dtype d holding `values` (which must be representable). */
inline Array from_values(const std::vector<double>& values, const Shape& shape, Dtype d) {
  return kiln::astype(kiln::array(values, shape), d);
}

/* How the same logical values are laid out in memory. */
enum class Layout { contiguous, transposed, strided };
inline const char* layout_name(Layout l) {
  return l == Layout::contiguous ? "contiguous" : l == Layout::transposed ? "transposed" : "strided";
}

/* The values (row-major for `shape`) as an array with the given layout. Transposed:
   a transpose of contiguous data; strided: every other element of a larger array. */
inline Array with_layout(const std::vector<double>& values, const Shape& shape, Dtype d, Layout layout) {
  if (layout == Layout::contiguous || shape.size() < 1) {
    Array a = from_values(values, shape, d);
    a.eval();
    return a;
  }
  if (layout == Layout::transposed) {
    Shape rev(shape.rbegin(), shape.rend());
    std::vector<double> t(values.size());
    // element at index i of `shape` goes to the reversed index in `rev`
    std::vector<int64_t> idx(shape.size(), 0);
    for (size_t flat = 0; flat < values.size(); ++flat) {
      int64_t off = 0, stride = 1;
      for (size_t k = 0; k < shape.size(); ++k) {  // rev is row-major: last axis of rev = first of shape
        off += idx[k] * stride;
        stride *= shape[k];
      }
      t[static_cast<size_t>(off)] = values[flat];
      for (size_t k = shape.size(); k-- > 0;) {
        if (++idx[k] < shape[k]) break;
        idx[k] = 0;
      }
    }
    Array base = from_values(t, rev, d);
    base.eval();
    return kiln::transpose(base);
  }
  // strided: double the last axis and take every other element
  Shape big = shape;
  big.back() *= 2;
  std::vector<double> b(static_cast<size_t>(numel(big)), 0.0);
  for (size_t i = 0; i < values.size(); ++i) b[2 * i] = values[i];
  Array base = from_values(b, big, d);
  base.eval();
  std::vector<kiln::SliceArg> args(shape.size());
  args.back().step = 2;
  return kiln::slice(base, args);
}

/* Tolerance for comparing a result of dtype d against a float64 reference. */
inline double rel_tol(Dtype d) {
  switch (d) {
    case kiln::float16: return 2e-3;
    case kiln::bfloat16: return 1.6e-2;
    case kiln::float32: return 2e-6;
    case kiln::float64: return 1e-12;
    default: return 0;
  }
}

/* Rounds a float64 reference to what dtype d can hold (for exact comparison of
   results that are correctly rounded). */
inline double round_to(double x, Dtype d) {
  if (d == kiln::float16) return static_cast<float>(kiln::float16_t(static_cast<float>(x)));
  if (d == kiln::bfloat16) return static_cast<float>(kiln::bfloat16_t(static_cast<float>(x)));
  if (d == kiln::float32) return static_cast<float>(x);
  return x;
}

/* Expects got (any dtype) to match want elementwise: NaN where want is NaN, equal
   infinities, else within rel_tol(got.dtype()) * scale relative error (absolute near 0). */
inline void expect_close(const Array& got, const std::vector<double>& want, const std::string& ctx,
                         double tol_scale = 1.0, double abs_floor = 1e-6) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << ctx;
  double tol = kt::rel_tol(got.dtype()) * tol_scale;
  int reported = 0;
  for (size_t i = 0; i < g.size() && reported < 5; ++i) {
    double w = want[i], x = g[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(x);
    else if (std::isinf(w))
      ok = x == w;
    else
      ok = std::fabs(x - w) <= tol * std::max(std::fabs(w), abs_floor) || x == w;
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " got " << x << " want " << w << " (dtype "
                    << kiln::dtype_name(got.dtype()) << ")";
      ++reported;
    }
  }
}

/* Expects `fn` to throw kiln::Error whose message equals `message`. */
inline void expect_error(const std::function<void()>& fn, const std::string& message) {
  try {
    fn();
    ADD_FAILURE() << "expected error: " << message;
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

/* Makes `d` (by default the CPU) the default device for a scope: tests of CPU behaviour that
   the suite also runs with KILN_TEST_DEVICE=cuda, tests under another default device. */
struct DefaultDevice {
  kiln::Device was = kiln::default_device();
  explicit DefaultDevice(kiln::Device d = kiln::Device::cpu()) { kiln::set_default_device(d); }
  ~DefaultDevice() { kiln::set_default_device(was); }
  DefaultDevice(const DefaultDevice&) = delete;
  DefaultDevice& operator=(const DefaultDevice&) = delete;
};

}  // namespace kt
