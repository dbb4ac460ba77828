// The standard-library pieces that kiln's shared headers (kiln/half.h,
// backend/common/math.h) use, written for NVRTC, which has no C++ standard
// library. Each is handed to NVRTC under the header name it replaces, so the
// shared headers compile unchanged for the device; math maps to CUDA's own
// functions (expf, ...), which agree with the CPU's libm within rounding.
#include "backend/cuda/prelude.h"

namespace kiln::cuda {

namespace {

const char* const kCstdint = R"(#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef unsigned long size_t;
typedef unsigned long uintptr_t;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t; using ::size_t;
}
)";

const char* const kCstddef = R"(#pragma once
#include <cstdint>
namespace std { typedef long ptrdiff_t; }
)";

const char* const kCstring = R"(#pragma once
#include <cstdint>
namespace std {
inline void* memcpy(void* d, const void* s, size_t n) {
  char* dc = static_cast<char*>(d);
  const char* sc = static_cast<const char*>(s);
  for (size_t i = 0; i < n; ++i) dc[i] = sc[i];
  return d;
}
}
)";

const char* const kBit = R"(#pragma once
#include <cstring>
namespace std {
// Through a union, which NVCC reads as a register move; the byte-loop memcpy left a float's
// sign flip split into byte masks.
template <class To, class From>
inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  union {
    From f;
    To t;
  } u{from};
  return u.t;
}
}
)";

const char* const kTypeTraits = R"(#pragma once
namespace std {
template <class T, T v> struct integral_constant { static constexpr T value = v; };
using true_type = integral_constant<bool, true>;
using false_type = integral_constant<bool, false>;
template <bool B, class T, class F> struct conditional { using type = T; };
template <class T, class F> struct conditional<false, T, F> { using type = F; };
template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { using type = T; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;
template <class T> struct remove_cv { using type = T; };
template <class T> struct remove_cv<const T> { using type = T; };
template <class T> struct remove_cv<volatile T> { using type = T; };
template <class T> struct remove_cv<const volatile T> { using type = T; };
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> struct is_floating_point_ : false_type {};
template <> struct is_floating_point_<float> : true_type {};
template <> struct is_floating_point_<double> : true_type {};
template <class T> struct is_floating_point : is_floating_point_<remove_cv_t<T>> {};
template <class T> inline constexpr bool is_floating_point_v = is_floating_point<T>::value;
template <class T> struct is_integral_ : false_type {};
template <> struct is_integral_<bool> : true_type {};
template <> struct is_integral_<char> : true_type {};
template <> struct is_integral_<signed char> : true_type {};
template <> struct is_integral_<unsigned char> : true_type {};
template <> struct is_integral_<short> : true_type {};
template <> struct is_integral_<unsigned short> : true_type {};
template <> struct is_integral_<int> : true_type {};
template <> struct is_integral_<unsigned int> : true_type {};
template <> struct is_integral_<long> : true_type {};
template <> struct is_integral_<unsigned long> : true_type {};
template <> struct is_integral_<long long> : true_type {};
template <> struct is_integral_<unsigned long long> : true_type {};
template <class T> struct is_integral : is_integral_<remove_cv_t<T>> {};
template <class T> inline constexpr bool is_integral_v = is_integral<T>::value;
template <class T> inline constexpr bool is_arithmetic_v = is_integral_v<T> || is_floating_point_v<T>;
template <class T> inline constexpr bool is_signed_v = is_arithmetic_v<T> && (T(-1) < T(0));
template <class T> inline constexpr bool is_unsigned_v = is_arithmetic_v<T> && !(T(-1) < T(0));
template <class T> struct make_unsigned;
template <> struct make_unsigned<char> { using type = unsigned char; };
template <> struct make_unsigned<signed char> { using type = unsigned char; };
template <> struct make_unsigned<unsigned char> { using type = unsigned char; };
template <> struct make_unsigned<short> { using type = unsigned short; };
template <> struct make_unsigned<unsigned short> { using type = unsigned short; };
template <> struct make_unsigned<int> { using type = unsigned int; };
template <> struct make_unsigned<unsigned int> { using type = unsigned int; };
template <> struct make_unsigned<long> { using type = unsigned long; };
template <> struct make_unsigned<unsigned long> { using type = unsigned long; };
template <> struct make_unsigned<long long> { using type = unsigned long long; };
template <> struct make_unsigned<unsigned long long> { using type = unsigned long long; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
}
)";

const char* const kLimits = R"(#pragma once
namespace std {
template <class T> struct numeric_limits;
#define KILN_INT_LIMITS(T, LO, HI) \
  template <> struct numeric_limits<T> { \
    static constexpr T min() { return LO; } \
    static constexpr T lowest() { return LO; } \
    static constexpr T max() { return HI; } };
KILN_INT_LIMITS(bool, false, true)
KILN_INT_LIMITS(signed char, -128, 127)
KILN_INT_LIMITS(unsigned char, 0, 255)
KILN_INT_LIMITS(short, -32768, 32767)
KILN_INT_LIMITS(unsigned short, 0, 65535)
KILN_INT_LIMITS(int, -2147483647 - 1, 2147483647)
KILN_INT_LIMITS(unsigned int, 0u, 4294967295u)
KILN_INT_LIMITS(long, -9223372036854775807L - 1, 9223372036854775807L)
KILN_INT_LIMITS(unsigned long, 0ul, 18446744073709551615ul)
#undef KILN_INT_LIMITS
template <> struct numeric_limits<float> {
  static float infinity() { return __int_as_float(0x7f800000); }
  static float quiet_NaN() { return __int_as_float(0x7fc00000); }
  static float lowest() { return -3.40282347e+38f; }
  static float max() { return 3.40282347e+38f; }
};
template <> struct numeric_limits<double> {
  static double infinity() { return __longlong_as_double(0x7ff0000000000000LL); }
  static double quiet_NaN() { return __longlong_as_double(0x7ff8000000000000LL); }
  static double lowest() { return -1.7976931348623157e+308; }
  static double max() { return 1.7976931348623157e+308; }
};
}
)";

const char* const kCmath = R"(#pragma once
namespace std {
#define KILN_F1(name, f32, f64) \
  inline float name(float x) { return ::f32(x); } \
  inline double name(double x) { return ::f64(x); }
#define KILN_F2(name, f32, f64) \
  inline float name(float a, float b) { return ::f32(a, b); } \
  inline double name(double a, double b) { return ::f64(a, b); }
KILN_F1(fabs, fabsf, fabs)
KILN_F1(exp, expf, exp)
KILN_F1(expm1, expm1f, expm1)
KILN_F1(log, logf, log)
KILN_F1(log1p, log1pf, log1p)
KILN_F1(log2, log2f, log2)
KILN_F1(sqrt, sqrtf, sqrt)
KILN_F1(sin, sinf, sin)
KILN_F1(cos, cosf, cos)
KILN_F1(tan, tanf, tan)
KILN_F1(tanh, tanhf, tanh)
KILN_F1(erf, erff, erf)
KILN_F1(erfc, erfcf, erfc)
KILN_F1(floor, floorf, floor)
KILN_F1(ceil, ceilf, ceil)
KILN_F1(nearbyint, rintf, rint)
KILN_F2(fmod, fmodf, fmod)
KILN_F2(copysign, copysignf, copysign)
KILN_F2(pow, powf, pow)
KILN_F2(atan2, atan2f, atan2)
inline float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
inline double fma(double a, double b, double c) { return ::fma(a, b, c); }
#undef KILN_F1
#undef KILN_F2
inline bool isnan(float x) { return x != x; }
inline bool isnan(double x) { return x != x; }
inline bool isinf(float x) { return ::fabsf(x) == __int_as_float(0x7f800000); }
inline bool isinf(double x) { return ::fabs(x) == __longlong_as_double(0x7ff0000000000000LL); }
inline bool isfinite(float x) { return !isnan(x) && !isinf(x); }
inline bool isfinite(double x) { return !isnan(x) && !isinf(x); }
}
)";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& prelude_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"cstdint", kCstdint}, {"cstddef", kCstddef},   {"cstring", kCstring}, {"type_traits", kTypeTraits},
      {"limits", kLimits},   {"cmath", kCmath}, {"bit", kBit},
  };
  return headers;
}

}  // namespace kiln::cuda
