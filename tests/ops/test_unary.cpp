// Every unary op over every dtype it accepts, against float64 references computed here:
// random data in three layouts, empty and size-1 shapes, NaN and infinities, integer
// wrap-around, a size past the thread pool's threshold, output dtypes and errors.
#include <cmath>
#include <limits>
#include <map>

#include "ops/registry_cases.h"
#include "reference.h"

using namespace kiln;
using kt::Layout;

namespace {

enum class Out { same, floating, boolean };  // output dtype: input's, to_floating(input), bool
enum class Accept { all, no_bool, ints_and_bool };  // which input dtypes the op takes

using UnaryFn = Array (*)(const Array&);

// The front end of every unary row of the op registry, by name.
UnaryFn registry_fn(const std::string& name) {
  static const std::map<std::string, UnaryFn> fns = {
#define KILN_UNARY(F, n, ...) {#n, static_cast<UnaryFn>(&kiln::n)},
#include "ops/op_table.def"
  };
  auto it = fns.find(name);
  return it == fns.end() ? nullptr : it->second;
}

// One row per unary op of the registry (Unary.EveryRegistryRowHasACase checks it).
struct UnaryCase {
  const char* name;
  double (*ref)(double x, Dtype in);  // exact result, before rounding or wrapping to the output dtype
  Out out;
  Accept accept;
  double lo, hi;  // domain of the random inputs
};

double sigmoid_ref(double x) { return 0.5 * (1 + std::tanh(x / 2)); }
// The GELUs in long double, with 1 + erf(z) written erfc(-z) and 1 + tanh(u) written
// 2 / (1 + e^-2u) so that the left tails keep their digits; -inf gives the limit, -0.
double gelu_ref(double x) {
  if (x == -INFINITY) return -0.0;
  long double v = x;
  return static_cast<double>(0.5L * v * std::erfc(-v / std::sqrt(2.0L)));
}
double gelu_tanh_ref(double x) {
  if (x == -INFINITY) return -0.0;
  long double v = x, k = std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  long double u = k * (v + 0.044715L * v * v * v);
  return static_cast<double>(0.5L * v * (2.0L / (1.0L + std::exp(-2.0L * u))));
}

// erfinv by bisection on erf (erfc above 0.5, where 1 - |y| is exact) in long double:
// slow, and plainly right.
double erfinv_ref(double y) {
  if (std::isnan(y) || std::fabs(y) > 1) return NAN;
  if (std::fabs(y) == 1) return std::copysign(INFINITY, y);
  const long double a = std::fabs(static_cast<long double>(y)), q = 1 - a;
  // Below 1e-8 the series' second term, pi a^2 / 12, is under 3e-17 of the first.
  if (a < 1e-8L) return static_cast<double>(0.886226925452758013649083741671L * static_cast<long double>(y));
  long double lo = 0, hi = 10;  // erfc(10) ~ 2e-45, below any 1 - |y| > 0 of a double
  for (int i = 0; i < 200; ++i) {
    const long double mid = (lo + hi) / 2;
    const bool below = a > 0.5L ? std::erfc(mid) > q : std::erf(mid) < a;
    (below ? lo : hi) = mid;
  }
  return std::copysign(static_cast<double>((lo + hi) / 2), y);
}
// log(1 + e^x) in long double, split at 0 so that neither side overflows or cancels.
double softplus_ref(double x) {
  const long double v = x;
  return static_cast<double>(v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)));
}

const UnaryCase kCases[] = {
    {"abs", [](double x, Dtype) { return std::fabs(x); }, Out::same, Accept::all, -50, 50},
    {"negative", [](double x, Dtype) { return -x; }, Out::same, Accept::no_bool, -50, 50},
    {"sign", [](double x, Dtype) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); }, Out::same, Accept::all, -3,
     3},
    {"exp", [](double x, Dtype) { return std::exp(x); }, Out::floating, Accept::all, -4, 4},
    {"expm1", [](double x, Dtype) { return std::expm1(x); }, Out::floating, Accept::all, -4, 4},
    {"log", [](double x, Dtype) { return std::log(x); }, Out::floating, Accept::all, 0.05, 20},
    {"log1p", [](double x, Dtype) { return std::log1p(x); }, Out::floating, Accept::all, -0.9, 20},
    {"log2", [](double x, Dtype) { return std::log(x) / std::log(2.0); }, Out::floating, Accept::all, 0.05, 20},
    {"sqrt", [](double x, Dtype) { return std::sqrt(x); }, Out::floating, Accept::all, 0, 20},
    {"rsqrt", [](double x, Dtype) { return 1 / std::sqrt(x); }, Out::floating, Accept::all, 0.05, 20},
    {"square", [](double x, Dtype) { return x * x; }, Out::same, Accept::all, -50, 50},
    {"reciprocal", [](double x, Dtype) { return 1 / x; }, Out::floating, Accept::all, -5, 5},
    {"sin", [](double x, Dtype) { return std::sin(x); }, Out::floating, Accept::all, -7, 7},
    {"cos", [](double x, Dtype) { return std::cos(x); }, Out::floating, Accept::all, -7, 7},
    {"tan", [](double x, Dtype) { return std::tan(x); }, Out::floating, Accept::all, -1.5, 1.5},
    {"tanh", [](double x, Dtype) { return std::tanh(x); }, Out::floating, Accept::all, -5, 5},
    {"sigmoid", [](double x, Dtype) { return sigmoid_ref(x); }, Out::floating, Accept::all, -8, 8},
    {"erf", [](double x, Dtype) { return std::erf(x); }, Out::floating, Accept::all, -3, 3},
    {"gelu", [](double x, Dtype) { return gelu_ref(x); }, Out::floating, Accept::all, -6, 6},
    {"gelu_tanh", [](double x, Dtype) { return gelu_tanh_ref(x); }, Out::floating, Accept::all, -6, 6},
    {"floor", [](double x, Dtype) { return std::floor(x); }, Out::same, Accept::all, -9, 9},
    {"ceil", [](double x, Dtype) { return std::ceil(x); }, Out::same, Accept::all, -9, 9},
    // Half to even, written out rather than borrowed from the rounding mode.
    {"round",
     [](double x, Dtype) {
       if (!std::isfinite(x)) return x;
       double f = std::floor(x), d = x - f;
       double r = d > 0.5 ? f + 1 : d < 0.5 ? f : (std::fmod(f, 2) == 0 ? f : f + 1);
       return std::copysign(r, x);
     },
     Out::same, Accept::all, -9, 9},
    {"isnan", [](double x, Dtype) { return double(std::isnan(x)); }, Out::boolean, Accept::all, -9, 9},
    {"isinf", [](double x, Dtype) { return double(std::isinf(x)); }, Out::boolean, Accept::all, -9, 9},
    {"isfinite", [](double x, Dtype) { return double(std::isfinite(x)); }, Out::boolean, Accept::all, -9, 9},
    {"logical_not", [](double x, Dtype) { return double(x == 0); }, Out::boolean, Accept::all, -2, 2},
    {"bitwise_not", [](double x, Dtype d) { return d == bool_ ? double(x == 0) : -x - 1; }, Out::same,
     Accept::ints_and_bool, -50, 50},
    {"erfinv", [](double x, Dtype) { return erfinv_ref(x); }, Out::floating, Accept::all, -0.9999, 0.9999},
    {"softplus", [](double x, Dtype) { return softplus_ref(x); }, Out::floating, Accept::all, -40, 40},
};

bool accepts(const UnaryCase& c, Dtype d) {
  switch (c.accept) {
    case Accept::all: return true;
    case Accept::no_bool: return d != bool_;
    case Accept::ints_and_bool: return !is_floating(d);
  }
  return false;
}

Dtype out_dtype(const UnaryCase& c, Dtype in) {
  switch (c.out) {
    case Out::same: return in;
    case Out::floating: return to_floating(in);
    case Out::boolean: return bool_;
  }
  return in;
}

// An exact integer result as the integer dtype d holds it (two's complement wrap-around).
double wrap_to(double r, Dtype d) {
  if (d == bool_) return r != 0;
  auto i = static_cast<int64_t>(r);  // callers keep |r| well below 2^63
  switch (d) {
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

std::vector<double> expected(const UnaryCase& c, const std::vector<double>& x, Dtype in) {
  Dtype out = out_dtype(c, in);
  std::vector<double> want;
  for (double v : x) {
    if (!is_floating(in)) v += 0.0;  // an integer has no -0 (random_values can round to -0.0)
    double r = c.ref(v, in);
    if (out == bool_)
      want.push_back(r != 0);
    else if (is_floating(out))
      want.push_back(kt::round_to(r, out));
    else
      want.push_back(wrap_to(r, out));
  }
  return want;
}

void check(const Array& got, const std::vector<double>& want, const std::string& ctx) {
  if (is_floating(got.dtype())) {
    kt::expect_close(got, want, ctx);
  } else {
    EXPECT_EQ(got.to_vector<double>(), want) << ctx;
  }
}

void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.name; }

class UnaryOp : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryOp, RandomValuesEveryDtypeAndLayout) {
  const UnaryCase& c = GetParam();
  const std::vector<Shape> layout_shapes = {{5, 7}, {2, 1, 3}};
  const std::vector<Shape> plain_shapes = {{}, {0}, {3, 0}, {1, 1}, {1}};
  uint64_t seed = 1;
  for (Dtype d : kt::all_dtypes()) {
    if (!accepts(c, d)) continue;
    for (const Shape& s : layout_shapes) {
      for (Layout l : {Layout::contiguous, Layout::transposed, Layout::strided}) {
        auto x = kt::random_values(kt::numel(s), d, ++seed, c.lo, c.hi);
        Array a = kt::with_layout(x, s, d, l);
        Array y = registry_fn(c.name)(a);
        std::string ctx = std::string(c.name) + " " + dtype_name(d) + " " + kt::layout_name(l);
        ASSERT_EQ(y.dtype(), out_dtype(c, d)) << ctx;
        ASSERT_EQ(y.shape(), s) << ctx;
        check(y, expected(c, x, d), ctx);
      }
    }
    for (const Shape& s : plain_shapes) {
      auto x = kt::random_values(kt::numel(s), d, ++seed, c.lo, c.hi);
      Array y = registry_fn(c.name)(kt::from_values(x, s, d));
      std::string ctx = std::string(c.name) + " " + dtype_name(d) + " shape " + std::to_string(s.size()) + "-d";
      ASSERT_EQ(y.shape(), s) << ctx;
      ASSERT_EQ(y.dtype(), out_dtype(c, d)) << ctx;
      check(y, expected(c, x, d), ctx);
    }
  }
}

TEST_P(UnaryOp, NanInfinitiesZerosAndTies) {
  const UnaryCase& c = GetParam();
  if (c.accept == Accept::ints_and_bool) GTEST_SKIP() << "takes no floats";
  const double inf = INFINITY;
  const std::vector<double> special = {NAN, inf,  -inf, 0.0, -0.0, 0.5,   -0.5, 1.5,
                                       2.5, -2.5, 1,    -1,  3,    0.125, 100,  -100};
  for (Dtype d : kt::float_dtypes()) {
    std::vector<double> x;
    for (double v : special) x.push_back(kt::round_to(v, d));
    for (Layout l : {Layout::contiguous, Layout::strided}) {
      Array y = registry_fn(c.name)(kt::with_layout(x, {static_cast<int64_t>(x.size())}, d, l));
      check(y, expected(c, x, d), std::string(c.name) + " specials " + dtype_name(d) + " " + kt::layout_name(l));
    }
  }
}

TEST_P(UnaryOp, EmptyHandleIsAnError) {
  const UnaryCase& c = GetParam();
  kt::expect_error([&] { registry_fn(c.name)(Array()); },
                   std::string("[") + c.name + "] operation on an empty Array handle");
}

INSTANTIATE_TEST_SUITE_P(All, UnaryOp, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace

// The per-op cases and the registry list the same ops, so a new row cannot go untested.
TEST(Unary, EveryRegistryRowHasACase) {
  kt::expect_cases_match_registry(
      kCases, OpCategory::unary, [](const std::string& n) { return registry_fn(n) != nullptr; },
      "tests/ops/test_unary.cpp");
}

namespace {

const UnaryCase& find_case(const std::string& name) {
  for (auto& c : kCases) {
    if (name == c.name) return c;
  }
  throw std::runtime_error("no case " + name);
}

}  // namespace

// One op of each family over 100000 elements, so the work is split across the thread pool.
TEST(UnaryLarge, AboveThreadPoolThreshold) {
  struct Big {
    const char* op;
    Dtype d;
    Shape shape;
    Layout layout;
  };
  const Big bigs[] = {
      {"exp", float32, {100000}, Layout::contiguous},
      {"sigmoid", bfloat16, {400, 250}, Layout::transposed},
      {"abs", int32, {250, 400}, Layout::strided},
      {"isnan", float16, {100000}, Layout::contiguous},
      {"bitwise_not", uint16, {400, 250}, Layout::transposed},
      {"sqrt", int64, {100000}, Layout::contiguous},
      {"gelu", bfloat16, {400, 250}, Layout::strided},
      {"gelu_tanh", float32, {100000}, Layout::contiguous},
  };
  uint64_t seed = 100;
  for (auto& b : bigs) {
    const UnaryCase& c = find_case(b.op);
    auto x = kt::random_values(kt::numel(b.shape), b.d, ++seed, c.lo, c.hi);
    Array y = registry_fn(c.name)(kt::with_layout(x, b.shape, b.d, b.layout));
    check(y, expected(c, x, b.d), std::string(b.op) + " large " + dtype_name(b.d));
  }
}

TEST(Unary, OutputDtypes) {
  EXPECT_EQ(exp(zeros({2}, int32)).dtype(), float32);
  EXPECT_EQ(sqrt(zeros({2}, uint8)).dtype(), float32);
  EXPECT_EQ(sin(zeros({2}, bool_)).dtype(), float32);
  EXPECT_EQ(log(zeros({2}, int64)).dtype(), float32);
  EXPECT_EQ(tanh(zeros({2}, float16)).dtype(), float16);
  EXPECT_EQ(erf(zeros({2}, bfloat16)).dtype(), bfloat16);
  EXPECT_EQ(gelu(zeros({2}, int32)).dtype(), float32);
  EXPECT_EQ(gelu_tanh(zeros({2}, bool_)).dtype(), float32);
  EXPECT_EQ(gelu_tanh(zeros({2}, float16)).dtype(), float16);
  EXPECT_EQ(rsqrt(zeros({2}, float64)).dtype(), float64);
  EXPECT_EQ(abs(zeros({2}, int8)).dtype(), int8);
  EXPECT_EQ(floor(zeros({2}, int16)).dtype(), int16);
  EXPECT_EQ(round(zeros({2}, uint32)).dtype(), uint32);
  EXPECT_EQ(square(zeros({2}, uint64)).dtype(), uint64);
  EXPECT_EQ(isnan(zeros({2}, float32)).dtype(), bool_);
  EXPECT_EQ(logical_not(zeros({2}, int32)).dtype(), bool_);
  EXPECT_EQ(bitwise_not(zeros({2}, bool_)).dtype(), bool_);
}

namespace {
template <class T>
std::vector<T> run1(Array (*fn)(const Array&), std::vector<T> x) {
  auto n = static_cast<int64_t>(x.size());
  return fn(array(x, {n})).template to_vector<T>();
}
}  // namespace

// Relative accuracy far into the tails (no absolute floor), where 1 + erf(x/sqrt2) and
// 1 + tanh(u) cancel, and at magnitudes where x^3 overflows.
TEST(Unary, GeluTailsAndHugeValues) {
  const std::vector<double> x = {-40, -30, -12, -9, -6, -3, -1e-30, 0, 1e-30, 0.75, 3, 9, 1e10, -1e10, 1e30, -1e30};
  for (Dtype d : {float32, float64}) {
    std::vector<double> xs, want_gelu, want_tanh;
    for (double v : x) {
      xs.push_back(kt::round_to(v, d));
      want_gelu.push_back(kt::round_to(gelu_ref(xs.back()), d));
      want_tanh.push_back(kt::round_to(gelu_tanh_ref(xs.back()), d));
    }
    Array a = kt::from_values(xs, {static_cast<int64_t>(xs.size())}, d);
    kt::expect_close(gelu(a), want_gelu, std::string("gelu tails ") + dtype_name(d), 1.0, 1e-300);
    kt::expect_close(gelu_tanh(a), want_tanh, std::string("gelu_tanh tails ") + dtype_name(d), 1.0, 1e-300);
  }
  // The two agree to about 1e-3 (the approximation's own error).
  Array r = kt::from_values(kt::random_values(1000, float64, 7, -6, 6), {1000}, float64);
  EXPECT_LT(max(abs(gelu(r) - gelu_tanh(r))).item<double>(), 1e-3);
}

// erfinv where 1 - |y| is a few units of the last place (the answer near 5.9 in float64)
// and softplus far out on both sides, to full relative accuracy.
TEST(Unary, ErfinvNearOneAndSoftplusTails) {
  auto check = [](UnaryFn fn, double (*ref)(double), const std::vector<double>& values, const char* what) {
    for (Dtype d : {float32, float64}) {
      std::vector<double> xs, want;
      for (double v : values) {
        xs.push_back(kt::round_to(v, d));
        want.push_back(kt::round_to(ref(xs.back()), d));
      }
      Array a = kt::from_values(xs, {static_cast<int64_t>(xs.size())}, d);
      kt::expect_close(fn(a), want, std::string(what) + " " + dtype_name(d), 1.0, 1e-300);
    }
  };
  const double e = std::ldexp(1.0, -53);
  check(erfinv, erfinv_ref, {1 - e, -(1 - e), 1 - 4 * e, 1 - 1e-10, -0.999999, 0.75, 1e-300, -1e-20, 0.5 + e},
        "erfinv near 1");
  check(softplus, softplus_ref, {-745, -700, -100, -30, -1e-10, 1e-10, 30, 100, 1e4, 1e300}, "softplus tails");
}

TEST(Unary, IntegerEdgesWrapAround) {
  using L8 = std::numeric_limits<int8_t>;
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  // abs and negative of the most negative value wrap to itself, as in two's complement.
  EXPECT_EQ(run1<int8_t>(abs, {L8::min(), -127, 0, 127}), (std::vector<int8_t>{L8::min(), 127, 0, 127}));
  EXPECT_EQ(run1<int64_t>(abs, {L64::min(), -5}), (std::vector<int64_t>{L64::min(), 5}));
  EXPECT_EQ(run1<int32_t>(negative, {L32::min(), L32::max(), 0}), (std::vector<int32_t>{L32::min(), -L32::max(), 0}));
  EXPECT_EQ(run1<uint8_t>(negative, {1, 0, 255}), (std::vector<uint8_t>{255, 0, 1}));
  EXPECT_EQ(run1<uint64_t>(negative, {1}), (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()}));
  EXPECT_EQ(run1<int32_t>(square, {65536, 46341, -46340}), (std::vector<int32_t>{0, -2147479015, 2147395600}));
  EXPECT_EQ(run1<int8_t>(square, {L8::min(), 16, 11}), (std::vector<int8_t>{0, 0, 121}));
  EXPECT_EQ(run1<uint16_t>(square, {65535, 256}), (std::vector<uint16_t>{1, 0}));
  EXPECT_EQ(run1<uint64_t>(square, {uint64_t{1} << 32, (uint64_t{1} << 32) + 1}),
            (std::vector<uint64_t>{0, (uint64_t{1} << 33) + 1}));
  EXPECT_EQ(run1<int64_t>(sign, {L64::min(), -3, 0, 7, L64::max()}), (std::vector<int64_t>{-1, -1, 0, 1, 1}));
  EXPECT_EQ(run1<uint32_t>(sign, {0, 9, 4000000000u}), (std::vector<uint32_t>{0, 1, 1}));
  EXPECT_EQ(run1<uint8_t>(bitwise_not, {0, 255, 0x5a}), (std::vector<uint8_t>{255, 0, 0xa5}));
  EXPECT_EQ(run1<int64_t>(bitwise_not, {0, -1, L64::min()}), (std::vector<int64_t>{-1, 0, L64::max()}));
  EXPECT_EQ(run1<int64_t>(floor, {L64::min(), L64::max()}), (std::vector<int64_t>{L64::min(), L64::max()}));
  EXPECT_EQ(run1<uint64_t>(round, {std::numeric_limits<uint64_t>::max()}),
            (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()}));
}

TEST(Unary, RoundsHalfToEven) {
  std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, 0.49999997f, 8388609.0f};
  EXPECT_EQ(round(array(x, {9})).to_vector<float>(), (std::vector<float>{0, 2, 2, -0.0f, -2, -2, 4, 0, 8388609.0f}));
  EXPECT_TRUE(std::signbit(round(array(-0.4f)).item<float>()));
  EXPECT_TRUE(std::signbit(ceil(array(-0.5)).item<double>()));
}

TEST(Unary, BoolInputs) {
  Array b = array(std::vector<bool>{true, false}, {2});
  EXPECT_EQ(exp(b).to_vector<float>(), (std::vector<float>{std::exp(1.0f), 1.0f}));
  EXPECT_EQ(abs(b).to_vector<int>(), (std::vector<int>{1, 0}));
  EXPECT_EQ(bitwise_not(b).to_vector<int>(), (std::vector<int>{0, 1}));
  EXPECT_EQ(logical_not(b).to_vector<int>(), (std::vector<int>{0, 1}));
  EXPECT_EQ(sign(b).to_vector<int>(), (std::vector<int>{1, 0}));
}

TEST(Unary, Errors) {
  kt::expect_error([] { negative(zeros({2}, bool_)); }, "[negative] not supported for bool arrays; use logical_not");
  kt::expect_error([] { -zeros({2}, bool_); }, "[negative] not supported for bool arrays; use logical_not");
  for (Dtype d : kt::float_dtypes()) {
    kt::expect_error([&] { bitwise_not(zeros({2}, d)); },
                     std::string("[bitwise_not] requires an integer or bool array, got ") + dtype_name(d));
  }
  kt::expect_error([] { ~ones({3}); }, "[bitwise_not] requires an integer or bool array, got float32");
}
