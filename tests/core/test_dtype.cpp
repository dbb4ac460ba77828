// Dtype rules (promotion table, scalars, names) and the 16-bit float conversions,
// checked against references written independently in double arithmetic.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "reference.h"

using namespace kiln;

namespace {

constexpr Dtype B = bool_, U8 = uint8, U16 = uint16, U32 = uint32, U64 = uint64, I8 = int8, I16 = int16, I32 = int32,
                I64 = int64, F16 = float16, BF = bfloat16, F32 = float32, F64 = float64;

// The promotion table of docs/dtypes.md, row a, column b, in Dtype order.
const Dtype kTable[kNumDtypes][kNumDtypes] = {
    //        bool U8   U16  U32  U64  I8   I16  I32  I64  F16  BF   F32  F64
    /*bool*/ {B, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF, F32, F64},
    /*U8  */ {U8, U8, U16, U32, U64, I16, I16, I32, I64, F16, BF, F32, F64},
    /*U16 */ {U16, U16, U16, U32, U64, I32, I32, I32, I64, F16, BF, F32, F64},
    /*U32 */ {U32, U32, U32, U32, U64, I64, I64, I64, I64, F16, BF, F32, F64},
    /*U64 */ {U64, U64, U64, U64, U64, I64, I64, I64, I64, F16, BF, F32, F64},
    /*I8  */ {I8, I16, I32, I64, I64, I8, I16, I32, I64, F16, BF, F32, F64},
    /*I16 */ {I16, I16, I32, I64, I64, I16, I16, I32, I64, F16, BF, F32, F64},
    /*I32 */ {I32, I32, I32, I64, I64, I32, I32, I32, I64, F16, BF, F32, F64},
    /*I64 */ {I64, I64, I64, I64, I64, I64, I64, I64, I64, F16, BF, F32, F64},
    /*F16 */ {F16, F16, F16, F16, F16, F16, F16, F16, F16, F16, F32, F32, F64},
    /*BF  */ {BF, BF, BF, BF, BF, BF, BF, BF, BF, F32, BF, F32, F64},
    /*F32 */ {F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F64},
    /*F64 */ {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
};

Dtype dt(int i) { return static_cast<Dtype>(i); }

}  // namespace

TEST(Dtype, PromotionTable) {
  for (int i = 0; i < kNumDtypes; ++i) {
    for (int j = 0; j < kNumDtypes; ++j) {
      EXPECT_EQ(promote_types(dt(i), dt(j)), kTable[i][j]) << dtype_name(dt(i)) << " with " << dtype_name(dt(j));
    }
  }
}

TEST(Dtype, PromotionIsSymmetricAndHoldsBothOperands) {
  for (int i = 0; i < kNumDtypes; ++i) {
    for (int j = 0; j < kNumDtypes; ++j) {
      Dtype a = dt(i), b = dt(j), p = promote_types(a, b);
      EXPECT_EQ(p, promote_types(b, a));
      EXPECT_EQ(promote_types(p, a), p);  // the result absorbs each operand
      EXPECT_EQ(promote_types(p, b), p);
    }
  }
}

TEST(Dtype, BinaryOpsUsePromotedDtype) {
  // The table reaches the ops: every pair through add (and the bool result of less).
  for (int i = 0; i < kNumDtypes; ++i) {
    for (int j = 0; j < kNumDtypes; ++j) {
      if (i == 0 && j == 0) continue;
      Array a = zeros({2}, dt(i)), b = ones({1}, dt(j));
      Array s = add(a, b);
      EXPECT_EQ(s.dtype(), kTable[i][j]);
      EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{1, 1}));
      EXPECT_EQ(less(a, b).dtype(), bool_);
    }
  }
}

TEST(Dtype, ScalarsNeverWidenAnArray) {
  for (int i = 0; i < kNumDtypes; ++i) {
    Dtype d = dt(i);
    EXPECT_EQ(promote_with_scalar(d, ScalarKind::boolean), d);
    EXPECT_EQ(promote_with_scalar(d, ScalarKind::integer), d == bool_ ? int32 : d);
    EXPECT_EQ(promote_with_scalar(d, ScalarKind::floating), is_floating(d) ? d : float32);
  }
}

TEST(Dtype, KindsSizesAndNames) {
  const int sizes[kNumDtypes] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  for (int i = 0; i < kNumDtypes; ++i) {
    Dtype d = dt(i);
    EXPECT_EQ(size_of(d), sizes[i]) << dtype_name(d);
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
    EXPECT_EQ(is_floating(d), i >= 9);
    EXPECT_EQ(is_unsigned(d), i >= 1 && i <= 4);
    EXPECT_EQ(is_signed_integer(d), i >= 5 && i <= 8);
    EXPECT_EQ(is_integral(d), i >= 1 && i <= 8);
    EXPECT_EQ(to_floating(d), is_floating(d) ? d : float32);
  }
  EXPECT_STREQ(dtype_name(bool_), "bool");
  EXPECT_STREQ(dtype_name(bfloat16), "bfloat16");
  kt::expect_error([] { dtype_from_name("float8"); }, "[dtype] unknown dtype name 'float8'");
  kt::expect_error([] { dtype_name(static_cast<Dtype>(40)); }, "[dtype] unknown dtype 40");
}

// ---- 16-bit floats ----------------------------------------------------------------

namespace {

// Value of a float16 bit pattern, decoded by the IEEE 754 binary16 definition.
double decode_half(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (exp == 0)
    v = std::ldexp(mant, -24);
  else
    v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

// x correctly rounded (to nearest, ties to even) to a binary float with `digits` significant
// bits, smallest normal exponent emin and largest finite value max; beyond the rounding
// boundary above max it gives infinity.
double round_binary(double x, int digits, int emin, double max) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  double a = std::fabs(x);
  int e;
  std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1)
  int exp = std::max(e - 1, emin);
  double quantum = std::ldexp(1.0, exp - (digits - 1));
  double r = std::nearbyint(a / quantum) * quantum;
  double boundary = max + std::ldexp(1.0, static_cast<int>(std::log2(max)) - digits);  // halfway to 2^(emax+1)
  if (a >= boundary) r = INFINITY;
  return std::copysign(r, x);
}
double ref_half(double x) { return round_binary(x, 11, -14, 65504.0); }
double ref_bf16(double x) { return round_binary(x, 8, -126, std::ldexp(255.0, 120)); }

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits_of_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool same_value(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

}  // namespace

TEST(Float16, DecodesEveryBitPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    double want = decode_half(static_cast<uint16_t>(b));
    double got = static_cast<float>(float16_t::from_bits(static_cast<uint16_t>(b)));
    ASSERT_TRUE(same_value(got, want)) << std::hex << b << ": got " << got << " want " << want;
  }
}

TEST(Float16, RoundTripsEveryValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = float16_t::from_bits(static_cast<uint16_t>(b));
    float16_t back(static_cast<float>(h));
    if (std::isnan(static_cast<float>(h))) {
      ASSERT_TRUE(std::isnan(static_cast<float>(back))) << std::hex << b;
      ASSERT_EQ(back.bits & 0x8000, b & 0x8000) << "NaN keeps its sign";
    } else {
      ASSERT_EQ(back.bits, b) << std::hex << b;
    }
  }
}

TEST(Float16, RoundsToNearestEvenAtEveryMidpoint) {
  // Between each pair of adjacent finite halves (normal and subnormal), the midpoint rounds
  // to the even one and the floats just either side of it round to the nearer.
  for (uint32_t b = 0; b < 0x7bff; ++b) {
    double lo = decode_half(static_cast<uint16_t>(b)), hi = decode_half(static_cast<uint16_t>(b + 1));
    float mid = static_cast<float>((lo + hi) / 2);  // exact in float
    uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    ASSERT_EQ(float16_t(mid).bits, even) << "midpoint after " << std::hex << b;
    ASSERT_EQ(float16_t(-mid).bits, even | 0x8000u) << "negative midpoint after " << std::hex << b;
    ASSERT_EQ(float16_t(std::nextafter(mid, 0.0f)).bits, b) << std::hex << b;
    ASSERT_EQ(float16_t(std::nextafter(mid, INFINITY)).bits, b + 1) << std::hex << b;
  }
}

TEST(Float16, RandomFloatsMatchReference) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns cover every exponent, including float subnormals and huge values.
    float f = float_of_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    double want = ref_half(f);
    double got = static_cast<float>(float16_t(f));
    ASSERT_TRUE(same_value(got, want)) << f << ": got " << got << " want " << want;
  }
}

TEST(Float16, OverflowSubnormalsAndSpecials) {
  EXPECT_EQ(float16_t(65504.0f).bits, 0x7bffu);
  EXPECT_EQ(float16_t(65519.996f).bits, 0x7bffu);  // below the boundary: max finite
  EXPECT_EQ(float16_t(65520.0f).bits, 0x7c00u);  // the boundary ties to even: infinity
  EXPECT_EQ(float16_t(1e10f).bits, 0x7c00u);
  EXPECT_EQ(float16_t(-1e10f).bits, 0xfc00u);
  EXPECT_EQ(float16_t(INFINITY).bits, 0x7c00u);
  EXPECT_EQ(float16_t(-INFINITY).bits, 0xfc00u);
  EXPECT_EQ(float16_t(std::ldexp(1.0f, -24)).bits, 0x0001u);  // smallest subnormal
  EXPECT_EQ(float16_t(std::ldexp(1.0f, -25)).bits, 0x0000u);  // half of it ties to zero
  EXPECT_EQ(float16_t(std::ldexp(1.5f, -25)).bits, 0x0001u);
  EXPECT_EQ(float16_t(std::ldexp(3.0f, -25)).bits, 0x0002u);  // 1.5 ulp ties to even (2)
  EXPECT_EQ(float16_t(std::ldexp(1023.0f, -24)).bits, 0x03ffu);  // largest subnormal
  EXPECT_EQ(float16_t(std::ldexp(2047.0f, -25)).bits, 0x0400u);  // rounds up into the normals
  EXPECT_EQ(float16_t(1e-30f).bits, 0x0000u);
  EXPECT_EQ(float16_t(-1e-30f).bits, 0x8000u);
  EXPECT_EQ(float16_t(-0.0f).bits, 0x8000u);
  EXPECT_EQ(float16_t(std::numeric_limits<float>::denorm_min()).bits, 0x0000u);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x7fbfffffu}) {
    float16_t h(float_of_bits(nan));
    EXPECT_EQ(h.bits & 0x7c00u, 0x7c00u);
    EXPECT_NE(h.bits & 0x03ffu, 0u) << "NaN must not become infinity: " << std::hex << nan;
    EXPECT_EQ(h.bits & 0x8000u, (nan >> 16) & 0x8000u);
  }
}

TEST(BFloat16, DecodesEveryBitPatternAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    auto h = bfloat16_t::from_bits(static_cast<uint16_t>(b));
    float f = h;
    ASSERT_EQ(bits_of_float(f), b << 16);
    bfloat16_t back(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(back)));
    } else {
      ASSERT_EQ(back.bits, b);
    }
  }
}

TEST(BFloat16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t b = 0; b < 0x7f7f; ++b) {
    float mid = float_of_bits((b << 16) | 0x8000u);  // exactly halfway to the next value
    uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    ASSERT_EQ(bfloat16_t(mid).bits, even) << std::hex << b;
    ASSERT_EQ(bfloat16_t(-mid).bits, even | 0x8000u) << std::hex << b;
    ASSERT_EQ(bfloat16_t(std::nextafter(mid, 0.0f)).bits, b) << std::hex << b;
    ASSERT_EQ(bfloat16_t(std::nextafter(mid, INFINITY)).bits, b + 1) << std::hex << b;
  }
}

TEST(BFloat16, RandomFloatsAndSpecials) {
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    float f = float_of_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    double want = ref_bf16(f);
    double got = static_cast<float>(bfloat16_t(f));
    ASSERT_TRUE(same_value(got, want)) << f << ": got " << got << " want " << want;
  }
  EXPECT_EQ(bfloat16_t(std::numeric_limits<float>::max()).bits, 0x7f80u);  // above the boundary
  EXPECT_EQ(bfloat16_t(INFINITY).bits, 0x7f80u);
  EXPECT_EQ(bfloat16_t(-INFINITY).bits, 0xff80u);
  EXPECT_EQ(bfloat16_t(std::numeric_limits<float>::denorm_min()).bits, 0x0000u);
  EXPECT_EQ(bfloat16_t(float_of_bits(0x00018000u)).bits, 0x0002u);  // subnormal tie to even
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    bfloat16_t h(float_of_bits(nan));
    EXPECT_TRUE(std::isnan(static_cast<float>(h))) << "NaN must not become infinity: " << std::hex << nan;
    EXPECT_EQ(h.bits & 0x8000u, (nan >> 16) & 0x8000u);
  }
}

// Converting a double (or a wide integer) straight to a 16-bit float must round once:
// going through float first can land exactly on a tie and round the wrong way.
TEST(Float16, FromDoubleRoundsOnce) {
  double just_above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(float16_t::from_double(just_above_tie), float16_t(1.0f + std::ldexp(1.0f, -10)).bits);
  EXPECT_EQ(float16_t::from_double(-just_above_tie), float16_t(-1.0f - std::ldexp(1.0f, -10)).bits);
  double just_below_tie = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);
  EXPECT_EQ(float16_t::from_double(just_below_tie), float16_t(1.0f).bits);
  EXPECT_EQ(bfloat16_t::from_double(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)),
            bfloat16_t(1.0f + std::ldexp(1.0f, -7)).bits);
  EXPECT_EQ(float16_t::from_double(65519.99999), 0x7bffu);
  EXPECT_EQ(float16_t::from_double(1e300), 0x7c00u);
  EXPECT_EQ(float16_t::from_double(-1e300), 0xfc00u);
  EXPECT_EQ(bfloat16_t::from_double(1e300), 0x7f80u);
  EXPECT_EQ(float16_t::from_double(1e-300), 0x0000u);
  EXPECT_EQ(float16_t::from_double(-1e-300), 0x8000u);
  EXPECT_EQ(float16_t::from_double(std::ldexp(1.0, -25) * (1 + 1e-12)), 0x0001u);  // above the tie to zero
  EXPECT_TRUE(std::isnan(static_cast<float>(float16_t::from_bits(float16_t::from_double(NAN)))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16_t::from_bits(bfloat16_t::from_double(NAN)))));
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-70000, 70000);
  for (int i = 0; i < 100000; ++i) {
    double x = i % 2 ? u(rng) : std::ldexp(u(rng), -30);  // also deep in the subnormals
    ASSERT_TRUE(same_value(decode_half(float16_t::from_double(x)), ref_half(x))) << x;
    double got_bf = static_cast<float>(bfloat16_t::from_bits(bfloat16_t::from_double(x)));
    ASSERT_TRUE(same_value(got_bf, ref_bf16(x))) << x;
  }
}

TEST(BFloat16, FromWideIntegersRoundsOnce) {
  // 2^24 + 2^16 + 1 is just above a bfloat16 tie; as a float it becomes the tie itself.
  int64_t v = (int64_t{1} << 24) + (1 << 16) + 1;
  EXPECT_EQ(bfloat16_t::from_int(v), bfloat16_t(static_cast<float>((1 << 24) + (1 << 17))).bits);
  EXPECT_EQ(bfloat16_t::from_int(-v), bfloat16_t(-static_cast<float>((1 << 24) + (1 << 17))).bits);
  EXPECT_EQ(bfloat16_t::from_int(std::numeric_limits<int64_t>::min()), bfloat16_t(-std::ldexp(1.0f, 63)).bits);
  EXPECT_EQ(bfloat16_t::from_uint(std::numeric_limits<uint64_t>::max()), bfloat16_t(std::ldexp(1.0f, 64)).bits);
  EXPECT_EQ(float16_t::from_int(65519), 0x7bffu);
  EXPECT_EQ(float16_t::from_int(65520), 0x7c00u);
  EXPECT_EQ(float16_t::from_int(-2049), float16_t(-2048.0f).bits);  // tie to even
  EXPECT_EQ(float16_t::from_int(2051), float16_t(2052.0f).bits);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; ++i) {
    auto x = static_cast<int64_t>(rng()) >> (11 + rng() % 52);  // |x| < 2^53: exact as a double
    double want = ref_bf16(static_cast<double>(x));
    double got = static_cast<float>(bfloat16_t::from_bits(bfloat16_t::from_int(x)));
    ASSERT_EQ(got, want) << x;
  }
}
