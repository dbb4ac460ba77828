// Elementwise math, written once. Eager kernels and generated (fused) kernel
// source both include this file, so fused and unfused results agree.
// Functors take and return the compute type: float for float16/bfloat16,
// the type itself otherwise. Integer arithmetic wraps (done in unsigned) and
// never invokes undefined behaviour.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/half.h"

#ifndef KILN_HD
#define KILN_HD
#endif

namespace kiln::math {

template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>, float, T>;

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Marks functors the front end only ever calls on floating types (it casts other
// inputs first), so kernels are not instantiated for integers.
#define KILN_FLOATS_ONLY static constexpr bool floats_only = true;
template <class F>
concept FloatsOnly = F::floats_only;

template <class T>
using unsigned_t = std::make_unsigned_t<T>;

template <class T>
KILN_HD inline T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<unsigned_t<T>>(a) + static_cast<unsigned_t<T>>(b));
}
template <class T>
KILN_HD inline T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<unsigned_t<T>>(a) - static_cast<unsigned_t<T>>(b));
}
template <class T>
KILN_HD inline T wrap_mul(T a, T b) {
  // Promote to at least unsigned int so uint16*uint16 does not overflow a signed int.
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(static_cast<unsigned_t<T>>(a)) * static_cast<U>(static_cast<unsigned_t<T>>(b)));
}

// ---- unary --------------------------------------------------------------------
struct Abs {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::fabs(x);
    else if constexpr (std::is_signed_v<T>)
      return x < 0 ? wrap_sub(T(0), x) : x;
    else
      return x;
  }
};
struct Negative {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_int_v<T>)
      return wrap_sub(T(0), x);
    else
      return -x;
  }
};
struct Sign {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::isnan(x) ? x : static_cast<T>((x > 0) - (x < 0));
    else if constexpr (std::is_signed_v<T>)
      return static_cast<T>((x > 0) - (x < 0));
    else
      return static_cast<T>(x > 0);
  }
};
#if !defined(__CUDACC__)
// float exp, sigmoid, sin and cos without libm, like tanh_f32 below (which works in float):
// computed in double with branch-free code (selects, integer bit tricks), so GCC if-converts and
// vectorizes the eager and fused loops instead of calling scalar expf/sinf per element.
// Polynomials are near-minimax fits of the relative error, derived by
// bench/tools/fit_float_math.py (Lawson's weighted least squares, mpmath reference).
// Max error vs double std:: functions is checked by tests/ops/test_fast_math.cpp.

// c ? a : b by bit masks, for the float paths below. Under GCC's default -ftrapping-math a
// floating-point ?: (or std::max) feeding more arithmetic stays a branch when the target
// has no blend instruction (eager kernels build for baseline x86-64), which stops the loop
// from vectorizing; this integer form vectorizes everywhere and gives the same result.
// (GCC 12 at SSE2 also gives up on two such double selects in a row, so clamps are done on
// the float input with select_f32, which is exact: the bounds are floats.)
KILN_HD inline double select_f64(bool c, double a, double b) {
  uint64_t m = uint64_t{0} - static_cast<uint64_t>(c);
  return std::bit_cast<double>((std::bit_cast<uint64_t>(a) & m) | (std::bit_cast<uint64_t>(b) & ~m));
}
KILN_HD inline float select_f32(bool c, float a, float b) {
  uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// e^z for double z in [-745, 709] (callers clamp; NaN passes through): z = k ln2 + r,
// |r| <= ln2/2, e^r by a degree-7 polynomial (relative error 5e-11), times 2^k.
KILN_HD inline double exp_f64_core(double z) {
  constexpr double shifter = 6755399441055744.0;  // 1.5 * 2^52: t's low bits hold round(z/ln2)
  double t = z * 1.4426950408889634 + shifter;
  double k = t - shifter;
  double r = z - k * 0.6931471805599453;  // k*ln2 rounding: < 1e-13 absolute, far below float ulps
  double p = 0.00019790244066553056;
  p = p * r + 0.001394475858318536;
  p = p * r + 0.008333497673752896;
  p = p * r + 0.04166629363440062;
  p = p * r + 0.1666666586459333;
  p = p * r + 0.5000000068037379;
  p = 1.0 + (r + r * r * p);
  // 2^k from t's low bits by integer arithmetic only (|k| <= 1022 here; defined for NaN too).
  uint64_t kbits = std::bit_cast<uint64_t>(t);
  return p * std::bit_cast<double>((kbits + 1023u) << 52);
}

// Clamping to [-104, 89] keeps 2^k a normal double; e^89 rounds to +inf and e^-104 to 0
// in float, and values between come out right: the double -> float conversion does the
// overflow and the (gradual) underflow.
KILN_HD inline float exp_f32(float xf) {
  xf = select_f32(xf < -104.0f, -104.0f, xf);
  xf = select_f32(xf > 89.0f, 89.0f, xf);  // NaN passes both
  return static_cast<float>(exp_f64_core(xf));
}

// 1 / (1 + e^-x) in double; e^-x clamped to [e^-40, e^110] (the float result is 1 resp. 0
// beyond).
KILN_HD inline float sigmoid_f32(float xf) {
  float z = -xf;
  z = select_f32(z < -40.0f, -40.0f, z);
  z = select_f32(z > 110.0f, 110.0f, z);
  return static_cast<float>(1.0 / (1.0 + exp_f64_core(z)));
}

// sin(x + quadrant * pi/2) for float x, in double. Cody-Waite reduction x = k pi/2 + r with
// pi/2 = C1 + C2 + C3, C1 and C2 of 23 bits so k*C1, k*C2 and the first two subtractions are
// exact for |k| < 2^30 (|x| < ~1.6e9): there r is within ~2^-68 absolute, and sin/cos come
// out within an ulp. Beyond, the reduction loses accuracy (see docs/benchmarks_history.md, "Vectorized
// float math", for measured errors) and past ~2^51 the results are meaningless, though they
// stay in [-1, 1]. +-inf and NaN give NaN.
KILN_HD inline float sincos_f32(float xf, unsigned quadrant) {
  double x = xf;
  constexpr double shifter = 6755399441055744.0;
  double t = x * 0.6366197723675814 + shifter;  // round(x * 2/pi) in t's low bits
  double k = t - shifter;
  double r = x - k * 1.570796251296997;
  r = r - k * 7.549789415861596e-08;
  r = r - k * 5.390302858158119e-15;
  double u = r * r;
  double s = -0.0001983930441671277 + u * 2.7180464816090044e-06;
  s = 0.008333329280529118 + u * s;
  s = -0.1666666664058825 + u * s;
  s = r * (1.0 + u * s);  // sin(r), |r| <= pi/4 (a product keeps sin(-0) = -0)
  double c = -0.0013888883467189713 + u * (2.479945153366608e-05 + u * -2.720504499511829e-07);
  c = 0.041666666619105966 + u * c;
  c = 1.0 - 0.5 * u + (u * u) * c;  // cos(r)
  uint64_t q = std::bit_cast<uint64_t>(t) + quadrant;
  double v = select_f64(q & 1, c, s);
  uint64_t sign = (q & 2) << 62;
  float y = static_cast<float>(std::bit_cast<double>(std::bit_cast<uint64_t>(v) ^ sign));
  // Past |x| ~ 2^51 the reduction fails outright (r is not small); keep results in [-1, 1].
  y = select_f32(y > 1.0f, 1.0f, y);
  return select_f32(y < -1.0f, -1.0f, y);
}
#endif
struct Exp {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>) return exp_f32(x);
#endif
    return std::exp(x);
  }
};
struct Expm1 {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::expm1(x);
  }
};
struct Log {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::log(x);
  }
};
struct Log1p {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::log1p(x);
  }
};
struct Log2 {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::log2(x);
  }
};
struct Sqrt {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::sqrt(x);
  }
};
struct Rsqrt {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return T(1) / std::sqrt(x);
  }
};
struct Square {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_int_v<T>)
      return wrap_mul(x, x);
    else if constexpr (std::is_same_v<T, bool>)
      return x;
    else
      return x * x;
  }
};
struct Reciprocal {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return T(1) / x;
  }
};
// The float sin and cos forms below share their ends: t = x 2/pi + 1.5 * 2^23 holds
// k = round(x 2/pi) in its low bits (and t - 1.5 * 2^23 is k), and the pick of sin r or cos r
// for quadrant k + quadrant, with its sign.
KILN_HD inline float quadrant_shifted(float x) { return std::fma(x, 0.636619747f, 12582912.0f); }
KILN_HD inline float quadrant_k(float t) { return t - 12582912.0f; }
KILN_HD inline float sincos_pick(float t, unsigned quadrant, float s, float c) {
  const uint32_t q = std::bit_cast<uint32_t>(t) + quadrant;  // k + quadrant in the low bits
  const float v = q & 1 ? c : s;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(v) ^ ((q & 2u) << 30));
}
// sin(x + quadrant * pi/2) for a float holding a float16 or bfloat16 value whose result is
// rounded to 16 bits (the GPU's 16-bit sin and cos): the GPU's sinf takes k through two
// float<->int conversions (16 a clock per SM) and a three-constant reduction. For |x| <= 2^20:
// k = round(x 2/pi) in the low bits of t (the 1.5 * 2^23 shifter), r = x - k pi/2 by two fmas
// (C1 is pi/2 cut to 24 bits, so x - k C1 is exact; the dropped k 2^-49 is far below |r| for
// every 16-bit input), sin r by degree 7 and cos r by degree 6 (relative error 2^-28 and
// 2^-24.6 for |r| <= 0.7885: Lawson fits in r^2, as bench/tools/fit_float_math.py makes them).
// At most 6 float ulps off over 16-bit inputs. C1 and C2 are below pi/2 and positive so that
// sin(-0) = -0. Beyond 2^20, and for inf and NaN, std::sin/std::cos. Checked over every
// float16 and bfloat16 input by tests/ops/test_fast_math.cpp. The core is for |x| <= 2^20
// only; sincos_narrow_f32 below adds the fallback.
KILN_HD inline float sincos_narrow_core_f32(float x, unsigned quadrant) {
  const float t = quadrant_shifted(x);
  const float k = quadrant_k(t);
  float r = std::fma(-k, 1.57079625f, x);  // 0x1.921fb4p+0
  r = std::fma(-k, 7.54979013e-08f, r);  // 0x1.4442d2p-24
  const float u = r * r;
  const float s = r * std::fma(u, std::fma(u, std::fma(u, -0.000195147208f, 0.00833215937f), -0.166666552f), 1.0f);
  const float c = std::fma(u, std::fma(u, std::fma(u, -0.00135894399f, 0.0416555963f), -0.499998808f), 1.0f);
  return sincos_pick(t, quadrant, s, c);
}
KILN_HD inline float sincos_narrow_f32(float x, unsigned quadrant) {
  if (!(std::fabs(x) <= 0x1p20f)) return quadrant & 1 ? std::cos(x) : std::sin(x);
  return sincos_narrow_core_f32(x, quadrant);
}
// sin(x + quadrant * pi/2) in float with fma: the GPU's float32 sin and cos. CUDA's sinf
// rounds x 2/pi through two float<->int conversions (16 a clock per SM); here the shifter
// does it on the FMA pipe. pi/2 = P1 + P2 + P3, floats cut below it and all positive (r
// keeps a zero's sign); with fma, x - k P1 is exact for |x| < 105615 (as in sinf's own fast path).
// sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2), degree 2 in float from
// bench/tools/fit_float_math.py. Within 2 ulp (CUDA's sinf contract), test_fast_math. The
// core is for |x| < 105615 only; sincos_fma_f32 adds the fallback.
KILN_HD inline float sincos_fma_core_f32(float x, unsigned quadrant) {
  const float t = quadrant_shifted(x);
  const float k = quadrant_k(t);
  float r = std::fma(-k, 1.57079625f, x);  // 0x3fc90fda
  r = std::fma(-k, 7.54978942e-08f, r);  // 0x33a22168
  r = std::fma(-k, 5.39030295e-15f, r);  // 0x27c234c5
  const float u = r * r;
  const float sp = std::fma(std::fma(u, -0.0001951463200384751f, 0.008332155644893646f), u, -0.16666655242443085f);
  const float cp = std::fma(std::fma(u, 2.443241282890085e-05f, -0.0013887309469282627f), u, 0.04166664555668831f);
  const float s = std::copysign(std::fma(r * u, sp, r), r);  // the fma makes -0 of r +0
  const float c = std::fma(u * u, cp, std::fma(-0.5f, u, 1.0f));
  return sincos_pick(t, quadrant, s, c);
}
KILN_HD inline float sincos_fma_f32(float x, unsigned quadrant) {
  if (!(std::fabs(x) < 105615.0f)) return quadrant & 1 ? std::cos(x) : std::sin(x);
  return sincos_fma_core_f32(x, quadrant);
}
struct Sin {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>) return sincos_f32(x, 0u);
#else
    if constexpr (std::is_same_v<T, float>) return sincos_fma_f32(x, 0u);
#endif
    return std::sin(x);
  }
};
struct Cos {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>) return sincos_f32(x, 1u);
#else
    if constexpr (std::is_same_v<T, float>) return sincos_fma_f32(x, 1u);
#endif
    return std::cos(x);
  }
};
struct Tan {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::tan(x);
  }
};
#if !defined(__CUDACC__)
// float tanh without libm, branch-free and in float throughout, so loops vectorize with the
// full float width (8 lanes on AVX2, 16 with AVX-512; the double version before ran half
// as many and was the bottleneck of compiled GELU). On a = |x|:
//  - a < 0.66: tanh(a) = a + a^3 P(a^2), P of degree 5 (no cancellation near 0; tiny and
//    subnormal x come out as x);
//  - otherwise: t = e^(-2a) = 2^k (1 + m) by range reduction and a degree-6 polynomial, and
//    tanh(a) = 1 - 2t + 2t * t/(1+t), with 1 - 2t split exactly (1 - 2^(k+1) is exact, the
//    rounding of the rest kept by Fast2Sum) so only the small last term adds error.
// Measured against double tanh on every float: at most 0.92 ulp (the double version: 0.50),
// 99.9% correctly rounded. a is clamped to 9.125, past which the result rounds to 1.
// Coefficients from bench/tools/fit_float_math.py.
KILN_HD inline float tanh_f32(float xf) {
  uint32_t sign = std::bit_cast<uint32_t>(xf) & 0x80000000u;
  float a = std::bit_cast<float>(std::bit_cast<uint32_t>(xf) ^ sign);
  float a2 = a * a;
  float p = 0.0020242801401764154f;
  p = p * a2 + -0.00804456789046526f;
  p = p * a2 + 0.02164577506482601f;
  p = p * a2 + -0.053936537355184555f;
  p = p * a2 + 0.13333123922348022f;
  p = p * a2 + -0.333333283662796f;
  float small = a + a * (a2 * p);
  float z = -2.0f * select_f32(a > 9.125f, 9.125f, a);  // NaN passes
  constexpr float shifter = 12582912.0f;  // 1.5 * 2^23: t's low bits hold round(z/ln2)
  float t = z * 1.44269502f + shifter;
  float k = t - shifter;  // in [-27, 0]
  float r = z - k * 0.693145751953125f;  // ln2 = hi + lo, hi of 16 bits: k * hi exact
  r = r - k * 1.42860677e-06f;
  float e = 0.00138144672f;
  e = e * r + 0.00836878084f;
  e = e * r + 0.0416683927f;
  e = e * r + 0.166665196f;
  e = e * r + 0.49999994f;
  float m = r + r * (r * e);  // e^r - 1
  float p2 = std::bit_cast<float>((std::bit_cast<uint32_t>(t) + 128u) << 23);  // 2^(k+1), integer ops only
  float hi = 1.0f - p2;  // exact for k + 1 <= 0
  float lo = p2 * m;  // exact
  float t2 = p2 + lo;  // 2t
  float s = hi - lo;
  float s_err = (hi - s) - lo;  // exact: |hi| >= |lo| here
  float big = s + (s_err + t2 * (t2 / (2.0f + t2)));
  float th = select_f32(a < 0.66f, small, big);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(th) ^ sign);
}
#endif
struct Tanh {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>) return tanh_f32(x);
#endif
    return std::tanh(x);
  }
};
struct Sigmoid {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>) return sigmoid_f32(x);
#endif
    return T(1) / (T(1) + std::exp(-x));
  }
};
/* silu(g) * u rounded to T after each op, as the separate ops round: the gate of a gated
   product, fused or not, on either backend. */
template <class T>
KILN_HD inline T silu_times(T g, T u) {
  using A = compute_t<T>;
  const T s = static_cast<T>(Sigmoid{}(static_cast<A>(g)));
  const T gs = static_cast<T>(static_cast<A>(g) * static_cast<A>(s));
  return static_cast<T>(static_cast<A>(gs) * static_cast<A>(u));
}
struct Erf {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T x) const {
    return std::erf(x);
  }
};
// erfinv in double. A closed form good to about 2e-3 (Winitzki's) starts three Halley steps
// on erf(x) = |y|; above 0.5 they solve erfc(x) = 1 - |y| instead, which is exact there and
// keeps the digits that 1 - erf(x) would cancel near 1. +-1 give +-inf; |y| > 1 and NaN, NaN.
KILN_HD inline double erfinv_f64(double y) {
  const double a = std::fabs(y);
  if (!(a < 1.0))
    return a == 1.0 ? std::copysign(std::numeric_limits<double>::infinity(), y)
                    : std::numeric_limits<double>::quiet_NaN();
  const double q = 1.0 - a;
  const double l = std::log(q * (1.0 + a));  // log(1 - y^2)
  const double t = 4.330746750799873 + 0.5 * l;  // 2 / (pi 0.147) + l / 2
  const double s = std::sqrt(t * t - l / 0.147) - t;  // rounds to <= 0 for tiny |y|: start at 0
  double x = s > 0 ? std::sqrt(s) : 0.0;
  for (int i = 0; i < 3; ++i) {
    const double r = a > 0.5 ? q - std::erfc(x) : std::erf(x) - a;  // erf(x) - |y|
    const double d = r / (1.1283791670955126 * std::exp(-x * x));  // over erf'(x)
    x -= d / (1.0 + x * d);
  }
  return std::copysign(x, y);
}
struct Erfinv {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
    return static_cast<T>(erfinv_f64(static_cast<double>(x)));
  }
};
// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): no overflow for large x, and e^x's own digits
// for very negative x. +inf gives inf, -inf 0; NaN passes.
struct Softplus {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::fabs(x)));
  }
};
// GELU, exact: x Phi(x) = x/2 erfc(-x/sqrt2), in double (erfc keeps the left tail accurate,
// where 1 + erf(x/sqrt2) cancels). Below -40 the double result is -0 anyway; clamping there
// also makes gelu(-inf) = -0 (the limit) instead of -inf * 0 = NaN. NaN passes.
KILN_HD inline double gelu_f64(double x) {
  x = x < -40.0 ? -40.0 : x;
  return 0.5 * x * std::erfc(x * -0.7071067811865476);
}
// GELU, tanh approximation: x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed
// as x / (1 + e^(-2u)) (the same function) so that negative x do not cancel. Below -30 the
// double result is -0 anyway; the clamp makes gelu_tanh(-inf) = -0. NaN passes.
KILN_HD inline double gelu_tanh_f64(double x) {
  x = x < -30.0 ? -30.0 : x;
  double u = 0.7978845608028654 * (x + 0.044715 * (x * x * x));
  return x / (1.0 + std::exp(-2.0 * u));
}
#if !defined(__CUDACC__)
// gelu_tanh_f64 for a float, with exp_f64_core instead of libm so eager and fused loops
// vectorize. Clamps: x >= -14 (the float result is -0 below -11 already), and -2u >= -40
// (e^-40 vanishes next to 1; keeps exp_f64_core in range for huge x and +inf).
KILN_HD inline float gelu_tanh_f32(float xf) {
  xf = select_f32(xf < -14.0f, -14.0f, xf);
  double x = xf;
  double z = -1.5957691216057308 * (x + 0.044715 * (x * x * x));
  z = select_f64(z < -40.0, -40.0, z);
  return static_cast<float>(x / (1.0 + exp_f64_core(z)));
}
#endif
// gelu_tanh for a float as the GPU computes it, where double exp and division cost many
// instructions: -2u in double (its rounding would be magnified by the exponential), then
// t = e^(-2|u|) in float from the split argument hi + lo as e^hi (1 + lo) (scaled by 2^64
// so it never is subnormal), and x / (1 + t) or, for negative u, x t / (1 + t) (the same
// function, with no overflow). The one division is a product by the reciprocal of
// 1 + t in [1, 2] (an approximation and a Newton step) and an fma correction, which the GPU
// runs without the branches and calls of two IEEE divisions. Within a few ulp of
// gelu_tanh_f64 where the result is a normal float (tests/ops/test_fast_math.cpp).
KILN_HD inline float gelu_tanh_split_f32(float xf) {
  xf = xf < -14.0f ? -14.0f : xf;  // the result is -0 below -11; gelu_tanh(-inf) = -0
  const double x = xf;
  const double z = -1.5957691216057308 * (x + 0.044715 * (x * x * x));
  double a = z > 0.0 ? -z : z;
  a = (a < -110.0 ? -110.0 : a) + 44.361419555836500;  // e^-110 is 0 in float; + 64 ln2 keeps e^a normal
  const float hi = static_cast<float>(a);
  const float lo = static_cast<float>(a - static_cast<double>(hi));
  const float s = std::exp(hi) * (1.0f + lo);  // 2^64 e^(-2|u|), NaN passes
  const float d = 1.0f + s * 0x1p-64f;
#if defined(__CUDA_ARCH__)
  float y = __fdividef(1.0f, d);  // the hardware approximation, good for d in [1, 2]
#else
  float y = 1.0f / d;
#endif
  y = std::fma(std::fma(-d, y, 1.0f), y, y);
  const float num = z > 0.0 ? xf * s : xf;
  float q = num * y;
  const float r = std::fma(-q, d, num);
  q = std::fabs(num) < 0x1p127f ? std::fma(r, y, q) : q;  // inf * 0 would make inf a NaN
  return z > 0.0 ? q * 0x1p-64f : q;
}
struct Gelu {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
    return static_cast<T>(gelu_f64(static_cast<double>(x)));
  }
};
struct GeluTanh {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T x) const {
#if !defined(__CUDACC__)
    if constexpr (std::is_same_v<T, float>) return gelu_tanh_f32(x);
#else
    if constexpr (std::is_same_v<T, float>) return gelu_tanh_split_f32(x);
#endif
    return static_cast<T>(gelu_tanh_f64(static_cast<double>(x)));
  }
};
struct Floor {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::floor(x);
    else
      return x;
  }
};
struct Ceil {
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::ceil(x);
    else
      return x;
  }
};
struct Round {  // half to even (the default rounding mode)
  template <class T>
  KILN_HD T operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::nearbyint(x);
    else
      return x;
  }
};
struct IsNaN {
  template <class T>
  KILN_HD bool operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::isnan(x);
    else
      return false;
  }
};
struct IsInf {
  template <class T>
  KILN_HD bool operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::isinf(x);
    else
      return false;
  }
};
struct IsFinite {
  template <class T>
  KILN_HD bool operator()(T x) const {
    if constexpr (is_float_v<T>)
      return std::isfinite(x);
    else
      return true;
  }
};
struct LogicalNot {
  template <class T>
  KILN_HD bool operator()(T x) const {
    return !x;
  }
};
struct BitwiseNot {
  template <class T>
  requires(!is_float_v<T>) KILN_HD T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool>)
      return !x;
    else
      return static_cast<T>(~x);
  }
};

// ---- binary -------------------------------------------------------------------
struct Add {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_int_v<T>)
      return wrap_add(a, b);
    else if constexpr (std::is_same_v<T, bool>)
      return a || b;
    else
      return a + b;
  }
};
struct Subtract {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_int_v<T>)
      return wrap_sub(a, b);
    else if constexpr (std::is_same_v<T, bool>)
      return a != b;
    else
      return a - b;
  }
};
struct Multiply {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_int_v<T>)
      return wrap_mul(a, b);
    else if constexpr (std::is_same_v<T, bool>)
      return a && b;
    else
      return a * b;
  }
};
struct Divide {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T a, T b) const {
    return a / b;
  }
};
struct FloorDivide {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      if (b == 0) return a / b;
      // floor of the exact quotient: (a - fmod(a, b)) / b is exact before rounding.
      T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
      if (div == 0) return std::copysign(T(0), a / b);
      T fl = std::floor(div);
      return (div - fl > T(0.5)) ? fl + T(1) : fl;
    } else if constexpr (std::is_same_v<T, bool>) {
      return b ? a : false;
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return wrap_sub(T(0), a);  // avoids MIN / -1
        T q = static_cast<T>(a / b);
        if ((a % b != 0) && ((a < 0) != (b < 0))) q = static_cast<T>(q - 1);
        return q;
      } else {
        return static_cast<T>(a / b);
      }
    }
  }
};
struct Remainder {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      T r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
      else if (r == 0)
        r = std::copysign(T(0), b);
      return r;
    } else if constexpr (std::is_same_v<T, bool>) {
      return false;
    } else {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
        T r = static_cast<T>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    }
  }
};
struct Power {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) return a == 1 ? T(1) : (a == -1 ? ((b & 1) ? T(-1) : T(1)) : T(0));
      }
      T result = 1;
      T base = a;
      auto e = static_cast<unsigned_t<T>>(b);
      while (e) {
        if (e & 1u) result = wrap_mul(result, base);
        base = wrap_mul(base, base);
        e >>= 1;
      }
      return result;
    }
  }
};
struct Maximum {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
#if defined(__CUDA_ARCH__)
    // The same result (a NaN is returned as it is) in three instructions rather than four.
    if constexpr (std::is_same_v<T, float>) return (a < b || b != b) ? b : a;
#endif
    if constexpr (is_float_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return a < b ? b : a;
  }
};
struct Minimum {
  template <class T>
  KILN_HD T operator()(T a, T b) const {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return (b < a || b != b) ? b : a;
#endif
    if constexpr (is_float_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    return b < a ? b : a;
  }
};
struct Arctan2 {
  KILN_FLOATS_ONLY template <class T>
  KILN_HD T operator()(T a, T b) const {
    return std::atan2(a, b);
  }
};
// log(e^a + e^b) as max(a, b) + log1p(e^-|a - b|). Equal arguments give a + log 2, which
// also covers two equal infinities (where a - b is NaN); NaN passes.
struct LogAddExp {
  KILN_FLOATS_ONLY
  template <class T>
  KILN_HD T operator()(T a, T b) const {
    if (a == b) return a + T(0.6931471805599453);
    return (a > b ? a : b) + std::log1p(std::exp(-std::fabs(a - b)));
  }
};
struct Equal {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a == b;
  }
};
struct NotEqual {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a != b;
  }
};
struct Less {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqual {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct Greater {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqual {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct LogicalAnd {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a && b;
  }
};
struct LogicalOr {
  template <class T>
  KILN_HD bool operator()(T a, T b) const {
    return a || b;
  }
};
struct BitwiseAnd {
  template <class T>
  requires(!is_float_v<T>) KILN_HD T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitwiseOr {
  template <class T>
  requires(!is_float_v<T>) KILN_HD T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitwiseXor {
  template <class T>
  requires(!is_float_v<T>) KILN_HD T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
struct LeftShift {
  template <class T>
  requires(!is_float_v<T>) KILN_HD T operator()(T a, T b) const {
    constexpr int bits = static_cast<int>(sizeof(T) * 8);
    if constexpr (std::is_same_v<T, bool>) {
      return b ? false : a;
    } else {
      if (b < 0 || b >= bits) return 0;
      return static_cast<T>(static_cast<unsigned_t<T>>(a) << b);
    }
  }
};
struct RightShift {
  template <class T>
  requires(!is_float_v<T>) KILN_HD T operator()(T a, T b) const {
    constexpr int bits = static_cast<int>(sizeof(T) * 8);
    if constexpr (std::is_same_v<T, bool>) {
      return b ? false : a;
    } else {
      if (b < 0 || b >= bits) {
        if constexpr (std::is_signed_v<T>)
          return a < 0 ? T(-1) : T(0);
        else
          return 0;
      }
      return static_cast<T>(a >> b);
    }
  }
};

// ---- where and conversion ------------------------------------------------------
struct Select {
  template <class T>
  KILN_HD T operator()(bool c, T a, T b) const {
    return c ? a : b;
  }
};

/* Converts between element types: float to integer truncates toward zero and
   saturates, NaN gives 0; anything to bool is "!= 0". */
template <class To, class From>
KILN_HD inline To convert(From x) {
  using CF = compute_t<From>;
  using CT = compute_t<To>;
  CF v = static_cast<CF>(x);
  constexpr bool to_half = std::is_same_v<To, float16_t> || std::is_same_v<To, bfloat16_t>;
  if constexpr (to_half && std::is_same_v<From, double>) {
    return To::from_bits(To::from_double(v));  // rounding through float would round twice
  } else if constexpr (to_half && is_int_v<From> && sizeof(From) >= 4) {
    if constexpr (std::is_signed_v<From>)
      return To::from_bits(To::from_int(v));
    else
      return To::from_bits(To::from_uint(v));
  } else if constexpr (std::is_same_v<CT, bool>) {
    return static_cast<To>(v != CF(0));
  } else if constexpr (is_float_v<CF> && is_int_v<CT>) {
    if (std::isnan(v)) return static_cast<To>(CT(0));
    if (v <= static_cast<CF>(std::numeric_limits<CT>::min())) return static_cast<To>(std::numeric_limits<CT>::min());
    if (v >= static_cast<CF>(std::numeric_limits<CT>::max())) return static_cast<To>(std::numeric_limits<CT>::max());
    return static_cast<To>(static_cast<CT>(v));
  } else {
    return static_cast<To>(static_cast<CT>(v));
  }
}

// ---- reductions: init() is the identity, operator() folds one element in ----------
struct Sum {
  template <class T>
  KILN_HD static T init() {
    return T(0);
  }
  template <class T>
  KILN_HD T operator()(T acc, T x) const {
    return Add{}(acc, x);
  }
};
struct Prod {
  template <class T>
  KILN_HD static T init() {
    return T(1);
  }
  template <class T>
  KILN_HD T operator()(T acc, T x) const {
    return Multiply{}(acc, x);
  }
};
struct Max {
  template <class T>
  KILN_HD static T init() {
    if constexpr (is_float_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  template <class T>
  KILN_HD T operator()(T acc, T x) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // One instruction that keeps a NaN (as the canonical NaN, like the CPU); of two zeros it
    // may keep either sign, as a different reduction order may.
    if constexpr (std::is_same_v<T, float>) {
      float r;
      asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(acc), "f"(x));
      return r;
    }
#endif
    return Maximum{}(acc, x);
  }
};
struct Min {
  template <class T>
  KILN_HD static T init() {
    if constexpr (is_float_v<T>)
      return std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::max();
  }
  template <class T>
  KILN_HD T operator()(T acc, T x) const {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<T, float>) {  // as Max
      float r;
      asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(acc), "f"(x));
      return r;
    }
#endif
    return Minimum{}(acc, x);
  }
};
struct All {
  template <class T>
  KILN_HD static T init() {
    return T(1);
  }
  template <class T>
  KILN_HD T operator()(T acc, T x) const {
    return static_cast<T>(acc && x);
  }
};
struct Any {
  template <class T>
  KILN_HD static T init() {
    return T(0);
  }
  template <class T>
  KILN_HD T operator()(T acc, T x) const {
    return static_cast<T>(acc || x);
  }
};

}  // namespace kiln::math
