// The branch-free float32 exp, sigmoid, sin, cos and tanh of backend/common/math.h (used by
// eager and generated kernels alike) against double-precision std:: references: a sweep of
// float bit patterns over the whole range (every 4099th, both signs), special values,
// overflow/underflow thresholds and multiples of pi/2. Error is in ulps of the float result.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "backend/common/math.h"
#include "kiln/half.h"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// |got - ref| in units of the float ulp at ref (the ulp of 2^-149 for subnormal results).
// A reference that rounds past FLT_MAX must give inf of its sign; NaN must give NaN.
double ulp_error(float got, double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : 1e9;
  if (std::isnan(got)) return 1e9;
  double ulp_max = std::ldexp(1.0, 127 - 23);
  if (std::fabs(ref) >= double(std::numeric_limits<float>::max()) + ulp_max / 2) {
    return got == (ref > 0 ? kInf : -kInf) ? 0 : 1e9;
  }
  if (std::isinf(got)) return 1e9;
  int e = std::ilogb(ref);
  double ulp = ref == 0 || e < -126 ? std::ldexp(1.0, -149) : std::ldexp(1.0, e - 23);
  return std::fabs(double(got) - ref) / ulp;
}

struct Worst {
  double err = 0;
  float at = 0;
  void add(double e, float x) {
    if (e > err) err = e, at = x;
  }
};

std::vector<float> sweep() {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) xs.push_back(std::bit_cast<float>(uint32_t(b)));
  const float m = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  for (float v : {0.0f,       kInf,        std::numeric_limits<float>::quiet_NaN(),
                  m,          tiny,        std::numeric_limits<float>::min(),
                  1.0f,       0.5f,        1e-30f,
                  1e-8f,      88.72283f,   88.72284f,
                  88.7f,      89.0f,       -87.33654f,
                  -87.3f,     -103.27893f, -103.97208f,
                  -103.9721f, -104.0f,     -150.0f,
                  10.0f,      9.0f,        17.0f,
                  40.0f,      0x1p-12f,    0x1p-13f}) {
    xs.push_back(v);
    xs.push_back(-v);
    xs.push_back(std::nextafter(v, kInf));
    xs.push_back(std::nextafter(v, -kInf));
  }
  for (int k = -200000; k <= 200000; k += 7) {  // near multiples of pi/2, up to 3e5 (> 2^17)
    float v = float(k * 1.5707963267948966);
    xs.push_back(v);
    xs.push_back(std::nextafter(v, kInf));
    xs.push_back(std::nextafter(v, -kInf));
  }
  return xs;
}

template <class F, class Ref>
Worst check(F f, Ref ref, float max_abs = kInf) {
  static const std::vector<float> xs = sweep();
  Worst w;
  for (float x : xs) {
    if (!(std::fabs(x) <= max_abs) && !std::isnan(x)) continue;
    w.add(ulp_error(f(x), ref(double(x))), x);
  }
  return w;
}

TEST(FastMath, Exp) {
  Worst w = check(kiln::math::Exp{}, [](double x) { return std::exp(x); });
  EXPECT_LE(w.err, 1.0) << "at x = " << w.at;
  EXPECT_EQ(kiln::math::Exp{}(-kInf), 0.0f);
  EXPECT_EQ(kiln::math::Exp{}(kInf), kInf);
  EXPECT_EQ(kiln::math::Exp{}(89.0f), kInf);
  EXPECT_EQ(kiln::math::Exp{}(-104.0f), 0.0f);
  EXPECT_GT(kiln::math::Exp{}(-103.0f), 0.0f);  // subnormal
  EXPECT_TRUE(std::isnan(kiln::math::Exp{}(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, Sigmoid) {
  Worst w = check(kiln::math::Sigmoid{}, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  EXPECT_LE(w.err, 1.0) << "at x = " << w.at;
  EXPECT_EQ(kiln::math::Sigmoid{}(kInf), 1.0f);
  EXPECT_EQ(kiln::math::Sigmoid{}(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(kiln::math::Sigmoid{}(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, Tanh) {
  Worst w = check(kiln::math::Tanh{}, [](double x) { return std::tanh(x); });
  EXPECT_LE(w.err, 1.0) << "at x = " << w.at;
  EXPECT_EQ(kiln::math::Tanh{}(kInf), 1.0f);
  EXPECT_EQ(kiln::math::Tanh{}(-kInf), -1.0f);
  EXPECT_TRUE(std::signbit(kiln::math::Tanh{}(-0.0f)));
  EXPECT_TRUE(std::isnan(kiln::math::Tanh{}(std::numeric_limits<float>::quiet_NaN())));
  // Tiny x (the polynomial path) is x itself, subnormals included.
  for (float x : {1e-30f, -1e-30f, 0x1p-12f, std::numeric_limits<float>::denorm_min(), -0x1p-140f}) {
    EXPECT_EQ(kiln::math::Tanh{}(x), x) << x;
  }
  EXPECT_EQ(kiln::math::Tanh{}(std::numeric_limits<float>::max()), 1.0f);
  EXPECT_EQ(kiln::math::Tanh{}(-9.125f), -1.0f);
  // Every float where the polynomial and the exponential paths meet (|x| = 0.66) and where
  // the result reaches 1 (|x| ~ 9.01, clamped at 9.125).
  Worst near;
  for (float lo : {0.5f, 8.75f}) {
    for (float x = lo; x < lo + 0.5f; x = std::nextafter(x, kInf)) {
      near.add(ulp_error(kiln::math::Tanh{}(x), std::tanh(double(x))), x);
    }
  }
  EXPECT_LE(near.err, 1.0) << "at x = " << near.at;
}

// The GPU's float gelu_tanh (gelu_tanh_split_f32, checked here with the host's expf; CUDA's
// expf may add up to 2 ulp, still far inside the per-op suites' 2e-6 relative) against the
// double form: within 5 ulp wherever the result is a normal float, every 97th float of
// [-11, 11] plus the sweep.
TEST(FastMath, GeluTanhGpuForm) {
  auto ref = [](double x) { return kiln::math::gelu_tanh_f64(x); };
  Worst w;
  auto add = [&](float x) {
    double r = ref(double(x));
    if (std::fabs(r) < double(std::numeric_limits<float>::min()) && r != 0) return;  // subnormal results
    w.add(ulp_error(kiln::math::gelu_tanh_split_f32(x), r), x);
  };
  for (uint32_t b = 0; b < 0x41300000u; b += 97) {  // |x| < 11, both signs
    add(std::bit_cast<float>(b));
    add(-std::bit_cast<float>(b));
  }
  for (float x : sweep()) add(x);
  EXPECT_LE(w.err, 5.0) << "at x = " << w.at;
  EXPECT_EQ(kiln::math::gelu_tanh_split_f32(kInf), kInf);
  float m = kiln::math::gelu_tanh_split_f32(-kInf);
  EXPECT_TRUE(m == 0.0f && std::signbit(m));
  EXPECT_TRUE(std::isnan(kiln::math::gelu_tanh_split_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(kiln::math::gelu_tanh_split_f32(1e30f), 1e30f);
}

// Within 1 ulp (2 is the contract) while the Cody-Waite reduction is exact (|x| < 2^30);
// beyond, only |sin| <= 1 is promised (the reduction error grows with |x|).
template <class F, class Ref>
void check_trig(F f, Ref ref) {
  Worst w = check(f, ref, 0x1p30f);
  EXPECT_LE(w.err, 1.0) << "at x = " << w.at;
  for (float x : sweep()) {
    float y = f(x);
    if (std::isinf(x) || std::isnan(x)) {
      EXPECT_TRUE(std::isnan(y)) << x;
    } else {
      EXPECT_LE(std::fabs(y), 1.0f) << x;
    }
  }
}

TEST(FastMath, Sin) {
  check_trig(kiln::math::Sin{}, [](double x) { return std::sin(x); });
  EXPECT_TRUE(std::signbit(kiln::math::Sin{}(-0.0f)));
  EXPECT_EQ(kiln::math::Sin{}(0x1p-149f), 0x1p-149f);
}

TEST(FastMath, Cos) {
  check_trig(kiln::math::Cos{}, [](double x) { return std::cos(x); });
  EXPECT_EQ(kiln::math::Cos{}(0.0f), 1.0f);
}

// The GPU's sin and cos for 16-bit results (sincos_narrow_f32: the host runs the same float
// operations, its own sinf/cosf standing in for CUDA's past 2^20). For every input of H the
// result rounded to H is within 1 ulp of H of the rounded double sin/cos, NaN exactly where
// that is, a zero has the accurate float result's sign, and almost every result equals the
// accurate float result rounded to H.
template <class H>
void check_narrow_trig(const char* type, unsigned quadrant) {
  auto order = [](H h) { return (h.bits & 0x8000) ? -static_cast<int>(h.bits & 0x7FFF) : static_cast<int>(h.bits); };
  int worst = 0, differ = 0;
  float worst_at = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float x = static_cast<float>(H::from_bits(static_cast<uint16_t>(b)));
    const double ref = quadrant ? std::cos(double(x)) : std::sin(double(x));
    const H got(kiln::math::sincos_narrow_f32(x, quadrant)), want = H::from_bits(H::from_double(ref)),
                                                             accurate(quadrant ? std::cos(x) : std::sin(x));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(float(got))) << type << " x = " << x;
      continue;
    }
    ASSERT_FALSE(std::isnan(float(got))) << type << " x = " << x;
    const int d = std::abs(order(got) - order(want));
    if (d > worst) worst = d, worst_at = x;
    if (float(got) == 0 && float(accurate) == 0) {
      EXPECT_EQ(got.bits, accurate.bits) << type << " x = " << x;
    }
    differ += got.bits != accurate.bits;
  }
  std::printf("%s %s: at most %d ulp from the rounded double result; %d of 65536 differ from the rounded sinf/cosf\n",
              type, quadrant ? "cos" : "sin", worst, differ);
  EXPECT_LE(worst, 1) << type << " at x = " << worst_at;
  EXPECT_LE(differ, 4) << type;
}

// The GPU's float32 sin and cos (float with fma, the shifter in place of float<->int
// conversions): within 2 ulp (CUDA's sinf contract) over the sweep, which includes the
// neighbours of multiples of pi/2 to 3e5, past the core's bound of 105615.
TEST(FastMath, SinCosGpuFloat32) {
  using kiln::math::sincos_fma_f32;
  for (unsigned quadrant : {0u, 1u}) {
    auto f = [quadrant](float x) { return sincos_fma_f32(x, quadrant); };
    Worst w = check(f, [quadrant](double x) { return quadrant ? std::cos(x) : std::sin(x); });
    EXPECT_LE(w.err, 2.0) << (quadrant ? "cos" : "sin") << " at x = " << w.at;
  }
  EXPECT_TRUE(std::signbit(sincos_fma_f32(-0.0f, 0)));
  EXPECT_FALSE(std::signbit(sincos_fma_f32(0.0f, 0)));
  EXPECT_EQ(sincos_fma_f32(-0x1p-149f, 0), -0x1p-149f);
  EXPECT_EQ(sincos_fma_f32(-0.0f, 1), 1.0f);
  for (float x : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_TRUE(std::isnan(sincos_fma_f32(x, 0)) && std::isnan(sincos_fma_f32(x, 1))) << x;
  }
}

TEST(FastMath, SinCosForSixteenBitResults) {
  for (unsigned quadrant : {0u, 1u}) {
    check_narrow_trig<kiln::bfloat16_t>("bfloat16", quadrant);
    check_narrow_trig<kiln::float16_t>("float16", quadrant);
  }
  using kiln::math::sincos_narrow_f32;
  EXPECT_TRUE(std::signbit(sincos_narrow_f32(-0.0f, 0)));
  EXPECT_EQ(sincos_narrow_f32(0.0f, 1), 1.0f);
  for (float x : {kInf, -kInf, std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_TRUE(std::isnan(sincos_narrow_f32(x, 0)) && std::isnan(sincos_narrow_f32(x, 1))) << x;
  }
  const float past = std::nextafter(0x1p20f, kInf);  // the accurate functions from here on
  EXPECT_EQ(sincos_narrow_f32(past, 0), std::sin(past));
  EXPECT_EQ(sincos_narrow_f32(-past, 1), std::cos(-past));
}

}  // namespace
