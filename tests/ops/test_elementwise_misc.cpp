// where, clip, astype, the operators with C++ scalars, and eager mode, against
// references computed here over every dtype, layout and broadcasting pattern.
#include <cmath>
#include <cstring>
#include <limits>

#include "reference.h"

using namespace kiln;
using kt::Layout;

namespace {

double limit_lo(Dtype d) {
  switch (d) {
    case int8: return -128;
    case int16: return -32768;
    case int32: return -2147483648.0;
    case int64: return -9223372036854775808.0;
    default: return 0;
  }
}
double limit_hi(Dtype d) {
  switch (d) {
    case uint8: return 255;
    case uint16: return 65535;
    case uint32: return 4294967295.0;
    case uint64: return 18446744073709551615.0;  // rounds to 2^64, as the converted result does
    case int8: return 127;
    case int16: return 32767;
    case int32: return 2147483647.0;
    default: return 9223372036854775807.0;
  }
}

// x correctly rounded to a binary float with `digits` significant bits (ties to even),
// smallest normal exponent emin and largest finite value max.
double round_binary(double x, int digits, int emin, double max) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  double a = std::fabs(x);
  int e;
  std::frexp(a, &e);
  double quantum = std::ldexp(1.0, std::max(e - 1, emin) - (digits - 1));
  double r = std::nearbyint(a / quantum) * quantum;
  double boundary = max + std::ldexp(1.0, static_cast<int>(std::log2(max)) - digits);
  return std::copysign(a >= boundary ? INFINITY : r, x);
}

// The documented conversion of value v (exact in `from`) to `to`.
double ref_convert(double v, Dtype from, Dtype to) {
  if (to == bool_) return v != 0;
  if (to == float16) return round_binary(v, 11, -14, 65504.0);
  if (to == bfloat16) return round_binary(v, 8, -126, std::ldexp(255.0, 120));
  if (to == float32) return static_cast<float>(v);
  if (to == float64) return v;
  if (is_floating(from)) {  // truncate toward zero, saturate, NaN gives 0
    if (std::isnan(v)) return 0;
    return std::min(std::max(std::trunc(v), limit_lo(to)), limit_hi(to));
  }
  auto i = static_cast<int64_t>(v);  // integers wrap (two's complement)
  switch (to) {
    case uint8: return static_cast<uint8_t>(i);
    case uint16: return static_cast<uint16_t>(i);
    case uint32: return static_cast<uint32_t>(i);
    case uint64: return static_cast<double>(static_cast<uint64_t>(i));
    case int8: return static_cast<int8_t>(i);
    case int16: return static_cast<int16_t>(i);
    case int32: return static_cast<int32_t>(i);
    default: return static_cast<double>(i);
  }
}

void expect_same(const Array& got, const std::vector<double>& want, const std::string& ctx) {
  auto g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << ctx;
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    bool ok = std::isnan(want[i]) ? std::isnan(g[i]) : g[i] == want[i];
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " got " << g[i] << " want " << want[i];
      ++bad;
    }
  }
}

// Values exact in d that reach each conversion's interesting regions.
std::vector<double> astype_values(Dtype d, uint64_t seed) {
  std::vector<double> v;
  if (is_floating(d)) {
    v = kt::random_values(40, d, seed, -300, 300);  // past the 8-bit ranges: saturation
    for (double x : {static_cast<double>(NAN),
                     static_cast<double>(INFINITY),
                     -static_cast<double>(INFINITY),
                     0.0,
                     -0.0,
                     0.9999,
                     -0.9999,
                     2.5,
                     -2.5,
                     127.5,
                     128.0,
                     -129.0,
                     255.9,
                     256.0,
                     65504.0,
                     70000.0,
                     -40000.0,
                     3e9,
                     -3e9,
                     5e9,
                     1e10,
                     -1e10,
                     2147483648.0,
                     9.3e18,
                     -9.3e18,
                     2e19,
                     1e30,
                     1e-6,
                     1.00048828125 /* float16 tie */,
                     1.00390625 /* bfloat16 tie */}) {
      v.push_back(kt::round_to(x, d));
    }
    if (d == float64) {  // doubles between 16-bit ties: must round once
      v.push_back(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
      v.push_back(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -45));
      v.push_back(-(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)));
      v.push_back(0.1);
      v.push_back(1.0 / 3.0);
    }
  } else if (d == bool_) {
    v = {1, 0, 1, 1, 0};
  } else {
    double lo = is_unsigned(d) ? 0 : -1000, hi = 1000;
    if (size_of(d) >= 4) lo = is_unsigned(d) ? 0 : -3e9, hi = 3e9;  // wraps into 16 and 8 bits
    if (size_of(d) == 4) lo = is_unsigned(d) ? 0 : -2e9, hi = is_unsigned(d) ? 4e9 : 2e9;
    v = kt::random_values(40, d, seed, lo, hi);
    for (double x :
         {0.0, 1.0, 127.0, 128.0, 255.0, 256.0, 65535.0, 65536.0, 2049.0, 2051.0, -1.0, -128.0, -129.0, -2049.0,
          65519.0, 65520.0, 16777217.0, 16842753.0 /* 2^24 + 2^16 + 1: above a bfloat16 tie */, -16842753.0}) {
      if (x >= limit_lo(d) && x <= limit_hi(d)) v.push_back(x);  // only values d holds
    }
  }
  return v;
}

}  // namespace

TEST(AsType, EveryPairOfDtypes) {
  uint64_t seed = 1;
  for (Dtype from : kt::all_dtypes()) {
    auto x = astype_values(from, ++seed);
    auto n = static_cast<int64_t>(x.size());
    Array a = kt::from_values(x, {n}, from);
    for (Dtype to : kt::all_dtypes()) {
      std::vector<double> want;
      for (double v : x) want.push_back(ref_convert(v, from, to));
      Array y = astype(a, to);
      std::string ctx = std::string("astype ") + dtype_name(from) + " -> " + dtype_name(to);
      ASSERT_EQ(y.dtype(), to) << ctx;
      expect_same(y, want, ctx);
    }
  }
}

TEST(AsType, IntegerExtremes) {
  using L64 = std::numeric_limits<int64_t>;
  Array a = array(std::vector<int64_t>{L64::min(), L64::max(), -1, 0x123456789abcdefLL}, {4});
  EXPECT_EQ(astype(a, int8).to_vector<int8_t>(), (std::vector<int8_t>{0, -1, -1, static_cast<int8_t>(0xef)}));
  EXPECT_EQ(astype(a, uint16).to_vector<uint16_t>(), (std::vector<uint16_t>{0, 0xffff, 0xffff, 0xcdef}));
  EXPECT_EQ(astype(a, uint64).to_vector<uint64_t>(),
            (std::vector<uint64_t>{uint64_t{1} << 63, L64::max(), ~uint64_t{0}, 0x123456789abcdefULL}));
  EXPECT_EQ(astype(a, bool_).to_vector<int>(), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(astype(a, float32).to_vector<float>(),
            (std::vector<float>{-9.223372e18f, 9.223372e18f, -1, static_cast<float>(0x123456789abcdefLL)}));
  Array u = array(std::vector<uint64_t>{~uint64_t{0}, uint64_t{1} << 63}, {2});
  EXPECT_EQ(astype(u, int64).to_vector<int64_t>(), (std::vector<int64_t>{-1, L64::min()}));
  EXPECT_EQ(astype(u, float64).to_vector<double>(),
            (std::vector<double>{18446744073709551616.0, 9223372036854775808.0}));
  EXPECT_EQ(astype(u, bfloat16).to_vector<float>(),
            (std::vector<float>{18446744073709551616.0f, 9223372036854775808.0f}));
  // Float to integer saturates at the exact limits.
  Array f = array(std::vector<double>{9223372036854775807.0, -9223372036854775808.0, 1.8446744073709552e19, -1.0}, {4});
  EXPECT_EQ(astype(f, int64).to_vector<int64_t>(), (std::vector<int64_t>{L64::max(), L64::min(), L64::max(), -1}));
  EXPECT_EQ(astype(f, uint64).to_vector<uint64_t>(), (std::vector<uint64_t>{uint64_t{1} << 63, 0, ~uint64_t{0}, 0}));
  Array g = array(std::vector<float>{2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f}, {4});
  EXPECT_EQ(astype(g, int32).to_vector<int32_t>(),
            (std::vector<int32_t>{2147483520, 2147483647, -2147483647 - 1, -2147483647 - 1}));
}

TEST(AsType, LayoutsEmptyAndLarge) {
  uint64_t seed = 300;
  for (Dtype from : {float32, int16, bfloat16, uint8, float64}) {
    for (Dtype to : {int32, float16, bool_, float64}) {
      for (Layout l : {Layout::contiguous, Layout::transposed, Layout::strided}) {
        Shape s = {4, 5};
        auto x = kt::random_values(20, from, ++seed, -200, 200);
        Array y = astype(kt::with_layout(x, s, from, l), to);
        std::vector<double> want;
        for (double v : x) want.push_back(ref_convert(v, from, to));
        ASSERT_EQ(y.shape(), s);
        expect_same(y, want,
                    std::string("astype ") + dtype_name(from) + " -> " + dtype_name(to) + " " + kt::layout_name(l));
      }
      EXPECT_EQ(astype(zeros({0, 3}, from), to).shape(), (Shape{0, 3}));
      EXPECT_EQ(astype(zeros({3, 0}, from), to).to_vector<double>().size(), 0u);
    }
  }
  Shape big = {400, 250};
  auto x = kt::random_values(100000, float32, 77, -1e5, 1e5);
  Array y = astype(kt::with_layout(x, big, float32, Layout::transposed), int16);
  std::vector<double> want;
  for (double v : x) want.push_back(ref_convert(v, float32, int16));
  expect_same(y, want, "astype large");
  // Same dtype is the identity (no new node).
  Array a = ones({2});
  EXPECT_EQ(astype(a, float32).id(), a.id());
}

TEST(AsType, Errors) {
  kt::expect_error([] { astype(Array(), int32); }, "[astype] operation on an empty Array handle");
}

// ---- where ------------------------------------------------------------------------

namespace {
size_t source_index(const Shape& out, const Shape& in, size_t flat) {
  size_t idx = 0, stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {  // k counts axes from the last one
    auto extent = static_cast<size_t>(out[out.size() - 1 - k]);
    size_t coord = flat % extent;
    flat /= extent;
    auto dim = static_cast<size_t>(in[in.size() - 1 - k]);
    if (dim != 1) idx += coord * stride;
    stride *= dim;
  }
  return idx;
}
}  // namespace

TEST(Where, EveryDtypeLayoutAndBroadcast) {
  struct Case {
    Shape c, a, b, out;
    Layout lc, la, lb;
  };
  const Case cases[] = {
      {{4, 5}, {4, 5}, {4, 5}, {4, 5}, Layout::contiguous, Layout::contiguous, Layout::contiguous},
      {{4, 5}, {4, 5}, {4, 5}, {4, 5}, Layout::transposed, Layout::strided, Layout::transposed},
      {{3, 1}, {1, 4}, {}, {3, 4}, Layout::contiguous, Layout::contiguous, Layout::contiguous},
      {{3, 1}, {1, 4}, {3, 4}, {3, 4}, Layout::transposed, Layout::strided, Layout::strided},
      {{}, {2, 3}, {3}, {2, 3}, Layout::contiguous, Layout::transposed, Layout::contiguous},
      {{2, 1, 3}, {4, 1}, {1}, {2, 4, 3}, Layout::strided, Layout::contiguous, Layout::contiguous},
      {{0, 3}, {3}, {0, 1}, {0, 3}, Layout::contiguous, Layout::contiguous, Layout::contiguous},
      {{}, {}, {}, {}, Layout::contiguous, Layout::contiguous, Layout::contiguous},
  };
  uint64_t seed = 500;
  for (Dtype d : kt::all_dtypes()) {
    for (const Case& k : cases) {
      auto cv = kt::random_values(kt::numel(k.c), bool_, ++seed);
      auto av = kt::random_values(kt::numel(k.a), d, ++seed, -50, 50);
      auto bv = kt::random_values(kt::numel(k.b), d, ++seed, -50, 50);
      Array y = where(kt::with_layout(cv, k.c, bool_, k.lc), kt::with_layout(av, k.a, d, k.la),
                      kt::with_layout(bv, k.b, d, k.lb));
      ASSERT_EQ(y.shape(), k.out);
      ASSERT_EQ(y.dtype(), d);
      std::vector<double> want(static_cast<size_t>(kt::numel(k.out)));
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] =
            cv[source_index(k.out, k.c, i)] != 0 ? av[source_index(k.out, k.a, i)] : bv[source_index(k.out, k.b, i)];
      }
      expect_same(y, want, std::string("where ") + dtype_name(d));
    }
  }
}

TEST(Where, PromotesAndTakesNonBoolConditions) {
  Array c = array(std::vector<float>{0.0f, NAN, -0.0f, 2.0f, INFINITY}, {5});  // NaN is true, -0 is false
  Array a = array(std::vector<int8_t>{1, 2, 3, 4, 5}, {5});
  Array b = array(std::vector<float>{10.5f, 20.5f, 30.5f, 40.5f, 50.5f}, {5});
  Array y = where(c, a, b);
  EXPECT_EQ(y.dtype(), float32);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10.5f, 2, 30.5f, 4, 5}));
  Array ci = array(std::vector<int32_t>{0, -7, 3}, {3});
  Array z = where(ci, array(std::vector<uint8_t>{1, 2, 3}, {3}), array(std::vector<int8_t>{-1, -2, -3}, {3}));
  EXPECT_EQ(z.dtype(), int16);
  EXPECT_EQ(z.to_vector<int16_t>(), (std::vector<int16_t>{-1, 2, 3}));
  // NaN and infinities pass through unchanged.
  Array n = where(array(std::vector<bool>{true, false, true}, {3}), array(std::vector<double>{NAN, 1, -INFINITY}, {3}),
                  array(2.0));
  auto nv = n.to_vector<double>();
  EXPECT_TRUE(std::isnan(nv[0]));
  EXPECT_EQ(nv[1], 2);
  EXPECT_EQ(nv[2], -INFINITY);
}

TEST(Where, Large) {
  auto cv = kt::random_values(100000, bool_, 1);
  auto av = kt::random_values(100000, float16, 2);
  Shape s = {400, 250};
  Array y = where(kt::with_layout(cv, s, bool_, Layout::transposed), kt::with_layout(av, s, float16, Layout::strided),
                  array(std::vector<float>{-1.0f}, {1}));
  std::vector<double> want;
  for (size_t i = 0; i < cv.size(); ++i) want.push_back(cv[i] != 0 ? av[i] : -1.0);
  EXPECT_EQ(y.dtype(), float32);
  expect_same(y, want, "where large");
}

TEST(Where, Errors) {
  kt::expect_error([] { where(ones({2}, bool_), ones({3}), ones({4})); },
                   "[where] shapes (2) and (3) and (4) cannot be broadcast together");
  kt::expect_error(
      [] {
        where(ones({2, 1}, bool_), ones({3}), ones({2, 2}));
      },
      "[where] shapes (2,1) and (3) and (2,2) cannot be broadcast together");
  kt::expect_error([] { where(Array(), ones({1}), ones({1})); }, "[where] operation on an empty Array handle");
  kt::expect_error([] { where(ones({1}), Array(), ones({1})); }, "[where] operation on an empty Array handle");
  kt::expect_error([] { where(ones({1}), ones({1}), Array()); }, "[where] operation on an empty Array handle");
}

// ---- clip -------------------------------------------------------------------------

TEST(Clip, EveryDtypeWithBoundsAndBroadcasting) {
  uint64_t seed = 700;
  for (Dtype d : kt::all_dtypes()) {
    if (d == bool_) continue;
    for (Layout l : {Layout::contiguous, Layout::transposed, Layout::strided}) {
      auto x = kt::random_values(12, d, ++seed, -20, 20);
      Array a = kt::with_layout(x, {3, 4}, d, l);
      double lo = is_unsigned(d) ? 3 : -5, hi = 9;
      Array lo_a = kt::from_values({lo}, {}, d), hi_a = kt::from_values({hi}, {}, d);
      std::vector<double> both, lower, upper;
      for (double v : x) {
        both.push_back(std::min(std::max(v, lo), hi));
        lower.push_back(std::max(v, lo));
        upper.push_back(std::min(v, hi));
      }
      std::string ctx = std::string("clip ") + dtype_name(d) + " " + kt::layout_name(l);
      Array y = clip(a, lo_a, hi_a);
      ASSERT_EQ(y.dtype(), d) << ctx;
      expect_same(y, both, ctx);
      expect_same(clip(a, lo_a, std::nullopt), lower, ctx + " lower only");
      expect_same(clip(a, std::nullopt, hi_a), upper, ctx + " upper only");
      // Per-column bounds broadcast against the array.
      std::vector<double> col_lo = {0, 1, 2, 3}, col_hi = {5, 6, 7, 8};
      Array yc = clip(a, kt::from_values(col_lo, {1, 4}, d), kt::from_values(col_hi, {4}, d));
      std::vector<double> want;
      for (size_t i = 0; i < x.size(); ++i) want.push_back(std::min(std::max(x[i], col_lo[i % 4]), col_hi[i % 4]));
      expect_same(yc, want, ctx + " broadcast bounds");
    }
  }
}

TEST(Clip, NanEmptyCrossedBoundsAndPromotion) {
  Array a = array(std::vector<float>{NAN, -INFINITY, INFINITY, 0.5f}, {4});
  auto v = clip(a, array(0.0f), array(1.0f)).to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));  // NaN propagates through maximum and minimum
  EXPECT_EQ(v[1], 0);
  EXPECT_EQ(v[2], 1);
  EXPECT_EQ(v[3], 0.5f);
  auto w = clip(array(std::vector<float>{1, 2}, {2}), array(NAN), std::nullopt).to_vector<float>();
  EXPECT_TRUE(std::isnan(w[0]) && std::isnan(w[1]));
  // lo > hi gives hi everywhere (min(max(a, lo), hi)).
  EXPECT_EQ(clip(array(std::vector<int32_t>{-5, 0, 5}, {3}), array(3), array(1)).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(clip(zeros({0, 2}), array(0.0f), array(1.0f)).shape(), (Shape{0, 2}));
  Array p = clip(array(std::vector<int8_t>{-100, 0, 100}, {3}), array(-1.5f), array(2.5f));
  EXPECT_EQ(p.dtype(), float32);
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{-1.5f, 0, 2.5f}));
  Array big = clip(arange(0.0, 100000.0, 1.0, float32), array(10.0f), array(99990.0f));
  auto bv = big.to_vector<float>();
  EXPECT_EQ(bv[0], 10);
  EXPECT_EQ(bv[500], 500);
  EXPECT_EQ(bv[99999], 99990);
}

TEST(Clip, Errors) {
  kt::expect_error([] { clip(ones({2}), std::nullopt, std::nullopt); },
                   "[clip] at least one of the bounds must be given");
  kt::expect_error([] { clip(Array(), array(0.0f), std::nullopt); }, "[clip] operation on an empty Array handle");
  kt::expect_error(
      [] {
        clip(ones({2, 3}), ones({4}), std::nullopt);
      },
      "[clip] shapes (2,3) and (4) cannot be broadcast together");
  kt::expect_error(
      [] {
        clip(ones({2, 3}), std::nullopt, ones({2, 1, 2}));
      },
      "[clip] shapes (2,3) and (2,1,2) cannot be broadcast together");
  kt::expect_error([] { clip(ones({2}), Array(), std::nullopt); }, "[clip] operation on an empty Array handle");
  kt::expect_error([] { clip(ones({2}), ones({1}), Array()); }, "[clip] operation on an empty Array handle");
}

// ---- operators with C++ scalars -------------------------------------------------------

TEST(ScalarOperators, ScalarsNeverWidenTheArrayDtype) {
  uint64_t seed = 900;
  for (Dtype d : kt::all_dtypes()) {
    auto x = kt::random_values(6, d, ++seed, 1, 9);
    Array a = kt::from_values(x, {2, 3}, d);
    std::string ctx = dtype_name(d);
    Dtype int_scalar = d == bool_ ? int32 : d;  // an integer scalar only lifts bool
    Dtype float_scalar = is_floating(d) ? d : float32;
    auto expect_values = [&](const Array& y, Dtype want_dtype, double (*f)(double), const std::string& what) {
      ASSERT_EQ(y.dtype(), want_dtype) << ctx << " " << what;
      std::vector<double> want;
      for (double v : x) want.push_back(f(v));
      kt::expect_close(y, want, ctx + " " + what);
    };
    expect_values(
        a + 3, int_scalar, [](double v) { return v + 3; }, "a + 3");
    expect_values(
        3 + a, int_scalar, [](double v) { return 3 + v; }, "3 + a");
    expect_values(
        a * 2, int_scalar, [](double v) { return v * 2; }, "a * 2");
    expect_values(
        a * 2.5, float_scalar, [](double v) { return v * 2.5; }, "a * 2.5");
    expect_values(
        2.5f * a, float_scalar, [](double v) { return 2.5 * v; }, "2.5f * a");
    expect_values(
        a - 0.5, float_scalar, [](double v) { return v - 0.5; }, "a - 0.5");
    expect_values(
        a / 2, to_floating(int_scalar), [](double v) { return v / 2; }, "a / 2");
    expect_values(
        10.0 / a, float_scalar, [](double v) { return 10 / v; }, "10.0 / a");
    expect_values(
        a < 4.5, bool_, [](double v) { return double(v < 4.5); }, "a < 4.5");  // not truncated to 4
    expect_values(
        a >= 4, bool_, [](double v) { return double(v >= 4); }, "a >= 4");
    expect_values(
        a == 1, bool_, [](double v) { return double(v == 1); }, "a == 1");
    expect_values(
        a != 1, bool_, [](double v) { return double(v != 1); }, "a != 1");
    expect_values(
        maximum(a, 5), int_scalar, [](double v) { return std::max(v, 5.0); }, "maximum(a, 5)");
    expect_values(
        minimum(a, 5), int_scalar, [](double v) { return std::min(v, 5.0); }, "minimum(a, 5)");
    expect_values(
        power(a, 2), int_scalar, [](double v) { return v * v; }, "power(a, 2)");
    if (d != bool_) {
      expect_values(
          a - 1, d, [](double v) { return v - 1; }, "a - 1");
      expect_values(
          a % 4, d, [](double v) { return std::fmod(v, 4); }, "a % 4");  // positive operands
      expect_values(
          a + true, d, [](double v) { return v + 1; }, "a + true");  // bool scalars never widen
    }
    if (!is_floating(d)) {
      expect_values(
          a & 1, int_scalar, [](double v) { return double(static_cast<int64_t>(v) & 1); }, "a & 1");
      expect_values(
          a | 2, int_scalar, [](double v) { return double(static_cast<int64_t>(v) | 2); }, "a | 2");
      expect_values(
          a ^ 3, int_scalar, [](double v) { return double(static_cast<int64_t>(v) ^ 3); }, "a ^ 3");
      expect_values(
          a >> 1, int_scalar, [](double v) { return double(static_cast<int64_t>(v) >> 1); }, "a >> 1");
    }
    if (is_integral(d))
      expect_values(
          a << 2, d, [](double v) { return v * 4; }, "a << 2");
    if (is_signed_integer(d))
      expect_values(
          ~a, d, [](double v) { return -v - 1; }, "~a");
  }
}

TEST(ScalarOperators, BoolArraysAndUnaryOperators) {
  Array t = array(std::vector<bool>{true, false}, {2});
  EXPECT_EQ((t + true).dtype(), bool_);
  EXPECT_EQ((t + true).to_vector<int>(), (std::vector<int>{1, 1}));
  EXPECT_EQ((t & true).to_vector<int>(), (std::vector<int>{1, 0}));
  EXPECT_EQ((t + 1).dtype(), int32);
  EXPECT_EQ((t + 1).to_vector<int>(), (std::vector<int>{2, 1}));
  EXPECT_EQ((t * 1.5).to_vector<float>(), (std::vector<float>{1.5f, 0}));
  EXPECT_EQ((!t).to_vector<int>(), (std::vector<int>{0, 1}));
  EXPECT_EQ((~t).to_vector<int>(), (std::vector<int>{0, 1}));
  Array f = array(std::vector<float>{1.5f, -2}, {2});
  EXPECT_EQ((-f).to_vector<float>(), (std::vector<float>{-1.5f, 2}));
  EXPECT_EQ((!f).to_vector<int>(), (std::vector<int>{0, 0}));
}

TEST(ScalarOperators, ScalarIsConvertedToTheArrayDtype) {
  // The scalar takes the array's dtype, so arithmetic wraps there (docs/dtypes.md).
  Array u = array(std::vector<uint8_t>{250, 3}, {2});
  EXPECT_EQ((u + 10).to_vector<uint8_t>(), (std::vector<uint8_t>{4, 13}));
  EXPECT_EQ((u - 4).to_vector<uint8_t>(), (std::vector<uint8_t>{246, 255}));
  EXPECT_EQ((1 - u).to_vector<uint8_t>(), (std::vector<uint8_t>{7, 254}));
  Array i = array(std::vector<int8_t>{100, -100}, {2});
  EXPECT_EQ((i * 2).to_vector<int8_t>(), (std::vector<int8_t>{-56, 56}));
  Array h = array(std::vector<float>{1, 2}, {2});
  Array hb = astype(h, bfloat16);
  EXPECT_EQ((hb + 1e-3).dtype(), bfloat16);
  EXPECT_EQ((hb * 3.0).to_vector<float>(), (std::vector<float>{3, 6}));
  // A 0-d array is an array: it promotes like any other.
  EXPECT_EQ((i + array(int32_t{1})).dtype(), int32);
  EXPECT_EQ((hb + array(1.0f)).dtype(), float32);
  // Float16 overflow from a large scalar gives infinity, not a wider dtype.
  Array f16 = astype(h, float16);
  EXPECT_EQ((f16 * 1e5).dtype(), float16);
  EXPECT_TRUE(std::isinf((f16 * 1e5).to_vector<float>()[0]));
}

// ---- eager mode -----------------------------------------------------------------

namespace {
struct EagerScope {  // restores lazy mode even when an assertion fails
  EagerScope() { set_eager(true); }
  ~EagerScope() { set_eager(false); }
};
}  // namespace

TEST(Eager, EvaluatesAtCreation) {
  Array a = array(std::vector<float>{1, 2, 3}, {3});
  {
    EagerScope scope;
    EXPECT_TRUE(eager());
    reset_stats();
    Array b = exp(a) + 1.0f;
    EXPECT_TRUE(b.is_evaluated());
    EXPECT_EQ(stats().kernels_launched, 2u);
    auto v = b.to_vector<float>();
    EXPECT_FLOAT_EQ(v[2], std::exp(3.0f) + 1.0f);
    Array c = where(a > 1.5f, a, zeros({3}));
    EXPECT_TRUE(c.is_evaluated());
    EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 2, 3}));
    Array z = arange(4, int32);
    EXPECT_TRUE(z.is_evaluated());
    // Errors still surface at the call that is wrong.
    kt::expect_error([&] { add(a, ones({2})); }, "[add] shapes (3) and (2) cannot be broadcast together");
  }
  EXPECT_FALSE(eager());
  Array d = exp(a);
  EXPECT_FALSE(d.is_evaluated());
  EXPECT_FLOAT_EQ(d.to_vector<float>()[0], std::exp(1.0f));
}
