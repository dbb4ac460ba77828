// 16-bit floating-point storage types. Arithmetic on them is done in float32.
// This header is self-contained so that generated kernel source can include it.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

namespace half_detail {
inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);  // NVRTC lowers memcpy here to byte shuffles
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
// Narrowing to a 16-bit float in two steps rounds twice and can land on a tie that the
// exact value was not on. Rounding the first step to odd (truncate, then set the last bit
// when inexact) keeps that information, so the second rounding is the correct one.
inline float round_odd_float(double d) {
  float f = static_cast<float>(d);
  double back = static_cast<double>(f);
  if (!(back != d) || d != d) return f;  // exact, or NaN
  uint32_t u = float_bits(f);
  if (d > 0 ? back > d : back < d) u -= 1;  // rounded away from zero: step back toward it
  return bits_float(u | 1u);
}
// The same for an integer magnitude: keep 24 bits, fold the rest into a sticky last bit.
inline float round_odd_float(uint64_t m) {
  if (m < (1u << 24)) return static_cast<float>(m);
  uint32_t shift = 0;
  bool sticky = false;
  while (m >= (1u << 24)) {
    sticky = sticky || (m & 1u);
    m >>= 1;
    ++shift;
  }
  return static_cast<float>(m | (sticky ? 1u : 0u)) * bits_float((127u + shift) << 23);
}
inline float round_odd_float_signed(int64_t v) {
  uint64_t m = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  float f = round_odd_float(m);
  return v < 0 ? -f : f;
}
}  // namespace half_detail

// IEEE 754 binary16.
struct float16_t {
  uint16_t bits = 0;

  float16_t() = default;
  float16_t(float f) : bits(from_float(f)) {}  // NOLINT: implicit like a builtin
  operator float() const { return to_float(bits); }  // NOLINT

  static float16_t from_bits(uint16_t b) {
    float16_t h;
    h.bits = b;
    return h;
  }

  // Round to nearest even; overflow gives infinity, NaN stays NaN.
  static uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__)
    uint16_t r;  // one instruction on the GPU, the same rounding
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
#endif
    uint32_t x = half_detail::float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or NaN
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
    if (abs < 0x38800000u) {  // result is subnormal or zero: let float addition round it
      float magic = half_detail::bits_float(0x3f000000u);  // 0.5: shifts mantissa into place
      float r = half_detail::bits_float(abs) + magic;
      return static_cast<uint16_t>(sign | (half_detail::float_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (abs >> 13));
  }

  // Correctly rounded from wider types (one rounding, not two through float).
  static uint16_t from_double(double d) { return from_float(half_detail::round_odd_float(d)); }
  static uint16_t from_int(int64_t v) { return from_float(half_detail::round_odd_float_signed(v)); }
  static uint16_t from_uint(uint64_t v) { return from_float(half_detail::round_odd_float(v)); }

  static float to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
#endif
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t out;
    if (exp == 0x1fu) {
      out = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) return half_detail::bits_float(sign);
      // subnormal: value is mant * 2^-24
      float v = static_cast<float>(mant) * half_detail::bits_float(0x33800000u);
      return sign ? -v : v;
    } else {
      out = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    return half_detail::bits_float(out);
  }
};

// bfloat16: the upper half of a float32.
struct bfloat16_t {
  uint16_t bits = 0;

  bfloat16_t() = default;
  bfloat16_t(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return half_detail::bits_float(static_cast<uint32_t>(bits) << 16); }  // NOLINT

  static bfloat16_t from_bits(uint16_t b) {
    bfloat16_t h;
    h.bits = b;
    return h;
  }

  // Round to nearest even; NaN stays a quiet NaN.
  static uint16_t from_float(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint16_t r;  // one instruction on the GPU, the same rounding
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
#endif
    uint32_t x = half_detail::float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
  }
  // Correctly rounded from wider types (one rounding, not two through float).
  static uint16_t from_double(double d) { return from_float(half_detail::round_odd_float(d)); }
  static uint16_t from_int(int64_t v) { return from_float(half_detail::round_odd_float_signed(v)); }
  static uint16_t from_uint(uint64_t v) { return from_float(half_detail::round_odd_float(v)); }
};

}  // namespace kiln
