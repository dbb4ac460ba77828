// Every binary op over every dtype it accepts, against references computed here: float64
// math for float results, exact 128-bit integer math (then wrapped) for integer results.
// Random data in three layouts, broadcasting, empty and 0-d shapes, mixed dtypes, NaN and
// infinities, integer edge cases (MIN / -1, x // 0, x % 0, shifts past the width), a size
// past the thread pool's threshold, output dtypes and errors.
#include <cmath>
#include <limits>
#include <map>

#include "ops/registry_cases.h"
#include "reference.h"

using namespace kiln;
using kt::Layout;

namespace {

using I128 = __int128;

enum class Res { promoted, floating, boolean };  // output dtype from the promoted input dtype
enum class Accept { all, no_bool, ints_and_bool };  // input dtypes the op takes

using BinaryFn = Array (*)(const Array&, const Array&);

// The front end of every binary row of the op registry, by name.
BinaryFn registry_fn(const std::string& name) {
  static const std::map<std::string, BinaryFn> fns = {
#define KILN_BINARY(F, n, ...) {#n, static_cast<BinaryFn>(&kiln::n)},
#include "ops/op_table.def"
  };
  auto it = fns.find(name);
  return it == fns.end() ? nullptr : it->second;
}

// One row per binary op of the registry (Binary.EveryRegistryRowHasACase checks it).
struct BinaryCase {
  const char* name;
  double (*fref)(double a, double b);  // float math (also integers computing in float32)
  I128 (*iref)(I128 a, I128 b, int bits);  // exact integer result, before wrapping to the dtype
  Res res;
  Accept accept;
  double lo_a, hi_a, lo_b, hi_b;  // float input domain
  double ilo_a, ihi_a, ilo_b, ihi_b;  // integer input domain
};

const double kNan = std::numeric_limits<double>::quiet_NaN();

I128 floor_div(I128 a, I128 b) {
  return static_cast<I128>(std::floor(static_cast<double>(a) / static_cast<double>(b)));
}

// Python's // and % on floats: the floor of the exact quotient, the remainder with b's sign.
double py_floordiv(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNan;
  if (b == 0) return a / b;
  if (std::isinf(a)) return kNan;
  if (std::isinf(b)) return (a == 0 || (a > 0) == (b > 0)) ? 0.0 : -1.0;
  return static_cast<double>(std::floor(static_cast<long double>(a) / b));
}
double py_mod(double a, double b) {
  if (std::isnan(a) || std::isnan(b) || b == 0 || std::isinf(a)) return kNan;
  if (std::isinf(b)) return (a == 0 || (a > 0) == (b > 0)) ? a : b;
  long double q = std::floor(static_cast<long double>(a) / b);
  return static_cast<double>(static_cast<long double>(a) - q * b);
}
double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNan : std::min(a, b); }

I128 ipow(I128 a, I128 b, int) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;  // documented: 0 unless |a| == 1
  I128 r = 1;
  for (I128 i = 0; i < b; ++i) r *= a;
  return r;
}

// log(e^a + e^b) in long double around the larger argument; equal arguments (equal
// infinities among them) give a + log 2.
double logaddexp_ref(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNan;
  const long double x = a, y = b;
  if (x == y) return static_cast<double>(x + std::log(2.0L));
  const long double m = std::max(x, y);
  return static_cast<double>(m + std::log1p(std::exp(-std::fabs(x - y))));
}

const BinaryCase kCases[] = {
    {"add", [](double a, double b) { return a + b; }, [](I128 a, I128 b, int) { return a + b; },
     Res::promoted, Accept::all, -4, 4, -4, 4, -100, 100, -100, 100},
    {"subtract", [](double a, double b) { return a - b; }, [](I128 a, I128 b, int) { return a - b; },
     Res::promoted, Accept::no_bool, -4, 4, -4, 4, -100, 100, -100, 100},
    {"multiply", [](double a, double b) { return a * b; }, [](I128 a, I128 b, int) { return a * b; },
     Res::promoted, Accept::all, -4, 4, -4, 4, -100, 100, -100, 100},
    {"divide", [](double a, double b) { return a / b; }, nullptr, Res::floating, Accept::all, -4, 4, -4,
     4, -100, 100, -100, 100},
    {"floor_divide", py_floordiv,
     [](I128 a, I128 b, int) { return b == 0 ? I128(0) : floor_div(a, b); }, Res::promoted, Accept::all, -9, 9, -4, 4,
     -100, 100, -12, 12},
    {"remainder", py_mod,
     [](I128 a, I128 b, int) { return b == 0 ? I128(0) : a - b * floor_div(a, b); }, Res::promoted, Accept::all, -9,
     9, -4, 4, -100, 100, -12, 12},
    {"power", [](double a, double b) { return std::pow(a, b); }, ipow, Res::promoted, Accept::all, 0.1,
     4, -3, 3, -9, 9, 0, 5},
    {"maximum", nan_max, [](I128 a, I128 b, int) { return std::max(a, b); }, Res::promoted,
     Accept::all, -4, 4, -4, 4, -100, 100, -100, 100},
    {"minimum", nan_min, [](I128 a, I128 b, int) { return std::min(a, b); }, Res::promoted,
     Accept::all, -4, 4, -4, 4, -100, 100, -100, 100},
    {"arctan2", [](double a, double b) { return std::atan2(a, b); }, nullptr, Res::floating,
     Accept::all, -4, 4, -4, 4, -100, 100, -100, 100},
    // Comparisons draw from a narrow range so that equal pairs occur.
    {"equal", [](double a, double b) { return double(a == b); },
     [](I128 a, I128 b, int) { return I128(a == b); }, Res::boolean, Accept::all, -2, 2, -2, 2, -2, 2, -2, 2},
    {"not_equal", [](double a, double b) { return double(a != b); },
     [](I128 a, I128 b, int) { return I128(a != b); }, Res::boolean, Accept::all, -2, 2, -2, 2, -2, 2, -2, 2},
    {"less", [](double a, double b) { return double(a < b); },
     [](I128 a, I128 b, int) { return I128(a < b); }, Res::boolean, Accept::all, -2, 2, -2, 2, -2, 2, -2, 2},
    {"less_equal", [](double a, double b) { return double(a <= b); },
     [](I128 a, I128 b, int) { return I128(a <= b); }, Res::boolean, Accept::all, -2, 2, -2, 2, -2, 2, -2, 2},
    {"greater", [](double a, double b) { return double(a > b); },
     [](I128 a, I128 b, int) { return I128(a > b); }, Res::boolean, Accept::all, -2, 2, -2, 2, -2, 2, -2, 2},
    {"greater_equal", [](double a, double b) { return double(a >= b); },
     [](I128 a, I128 b, int) { return I128(a >= b); }, Res::boolean, Accept::all, -2, 2, -2, 2, -2, 2, -2, 2},
    {"logical_and", [](double a, double b) { return double(a != 0 && b != 0); },
     [](I128 a, I128 b, int) { return I128(a != 0 && b != 0); }, Res::boolean, Accept::all, -1, 1, -1, 1, -1, 1, -1, 1},
    {"logical_or", [](double a, double b) { return double(a != 0 || b != 0); },
     [](I128 a, I128 b, int) { return I128(a != 0 || b != 0); }, Res::boolean, Accept::all, -1, 1, -1, 1, -1, 1, -1, 1},
    {"bitwise_and", nullptr, [](I128 a, I128 b, int) { return a & b; }, Res::promoted,
     Accept::ints_and_bool, 0, 0, 0, 0, -100, 100, -100, 100},
    {"bitwise_or", nullptr, [](I128 a, I128 b, int) { return a | b; }, Res::promoted,
     Accept::ints_and_bool, 0, 0, 0, 0, -100, 100, -100, 100},
    {"bitwise_xor", nullptr, [](I128 a, I128 b, int) { return a ^ b; }, Res::promoted,
     Accept::ints_and_bool, 0, 0, 0, 0, -100, 100, -100, 100},
    // Shift counts span negative values and counts past the width (bounds set per dtype below).
    {"left_shift", nullptr,
     [](I128 a, I128 b, int bits) { return b < 0 || b >= bits ? I128(0) : a * (I128(1) << static_cast<int>(b)); },
     Res::promoted, Accept::ints_and_bool, 0, 0, 0, 0, -100, 100, -3, 3},
    {"right_shift", nullptr,
     [](I128 a, I128 b, int bits) {
       if (b < 0 || b >= bits) return a < 0 ? I128(-1) : I128(0);
       return floor_div(a, I128(1) << static_cast<int>(b));
     },
     Res::promoted, Accept::ints_and_bool, 0, 0, 0, 0, -100, 100, -3, 3},
    {"logaddexp", logaddexp_ref, nullptr, Res::floating, Accept::all, -30, 30, -30, 30, -100, 100, -100, 100},
};

bool accepts(const BinaryCase& c, Dtype d) {
  switch (c.accept) {
    case Accept::all: return true;
    case Accept::no_bool: return d != bool_;
    case Accept::ints_and_bool: return !is_floating(d);
  }
  return false;
}
bool accepts(const BinaryCase& c, Dtype da, Dtype db) {
  if (c.accept == Accept::ints_and_bool) return !is_floating(promote_types(da, db));
  if (c.accept == Accept::no_bool) return !(da == bool_ && db == bool_);
  return true;
}
bool is_shift(const BinaryCase& c) {
  return c.name == std::string("left_shift") || c.name == std::string("right_shift");
}

Dtype out_dtype(const BinaryCase& c, Dtype da, Dtype db) {
  Dtype p = promote_types(da, db);
  switch (c.res) {
    case Res::promoted: return p;
    case Res::floating: return to_floating(p);
    case Res::boolean: return bool_;
  }
  return p;
}

int bits_of(Dtype d) { return d == bool_ ? 1 : 8 * size_of(d); }

// An exact integer as dtype d holds it: the low bits, in two's complement.
double wrap_to(I128 v, Dtype d) {
  if (d == bool_) return v != 0;
  auto u = static_cast<uint64_t>(v);
  switch (d) {
    case uint8: return static_cast<uint8_t>(u);
    case uint16: return static_cast<uint16_t>(u);
    case uint32: return static_cast<uint32_t>(u);
    case uint64: return static_cast<double>(u);
    case int8: return static_cast<int8_t>(u);
    case int16: return static_cast<int16_t>(u);
    case int32: return static_cast<int32_t>(u);
    default: return static_cast<double>(static_cast<int64_t>(u));
  }
}

// The expected element for inputs a and b (exact in their dtypes) of the op on dtypes da, db.
double expected_one(const BinaryCase& c, double a, double b, Dtype da, Dtype db) {
  if (!is_floating(da)) a += 0.0;  // an integer has no -0 (random_values can round to -0.0)
  if (!is_floating(db)) b += 0.0;
  Dtype p = promote_types(da, db), out = out_dtype(c, da, db);
  if (is_floating(out) || (out == bool_ && is_floating(p))) {
    double r = c.fref(a, b);
    return out == bool_ ? double(r != 0) : kt::round_to(r, out);
  }
  I128 r = c.iref(static_cast<I128>(a), static_cast<I128>(b), bits_of(p));
  return out == bool_ ? double(r != 0) : wrap_to(r, out);
}

// Element i of `out` read from an input of shape `in` broadcast against it.
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

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1, y = k < b.size() ? b[b.size() - 1 - k] : 1;
    out[out.size() - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

std::vector<double> expected(const BinaryCase& c, const std::vector<double>& a, const Shape& sa, Dtype da,
                             const std::vector<double>& b, const Shape& sb, Dtype db) {
  Shape so = broadcast(sa, sb);
  std::vector<double> want(static_cast<size_t>(kt::numel(so)));
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = expected_one(c, a[source_index(so, sa, i)], b[source_index(so, sb, i)], da, db);
  }
  return want;
}

void check(const Array& got, const std::vector<double>& want, const std::string& ctx) {
  if (is_floating(got.dtype()))
    kt::expect_close(got, want, ctx);
  else
    EXPECT_EQ(got.to_vector<double>(), want) << ctx;
}

std::vector<double> values_for(const BinaryCase& c, bool is_b, int64_t n, Dtype d, uint64_t seed) {
  if (is_floating(d)) return kt::random_values(n, d, seed, is_b ? c.lo_b : c.lo_a, is_b ? c.hi_b : c.hi_a);
  if (!is_b) return kt::random_values(n, d, seed, c.ilo_a, c.ihi_a);
  if (is_shift(c)) return kt::random_values(n, d, seed, -3, bits_of(d) + 3);
  return kt::random_values(n, d, seed, c.ilo_b, c.ihi_b);
}

std::string shape_text(const Shape& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) t += ',';  // appended apart: GCC 12 warns falsely (-Wrestrict) on "," + std::to_string
    t += std::to_string(s[i]);
  }
  return t + ")";
}

void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

class BinaryOp : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinaryOp, RandomValuesEveryDtypeLayoutAndBroadcast) {
  const BinaryCase& c = GetParam();
  struct Pair {
    Shape a, b;
    Layout la, lb;
  };
  const Pair pairs[] = {
      {{5, 7}, {5, 7}, Layout::contiguous, Layout::contiguous},
      {{5, 7}, {5, 7}, Layout::transposed, Layout::strided},
      {{5, 7}, {5, 7}, Layout::strided, Layout::transposed},
      {{2, 3, 4}, {2, 3, 4}, Layout::transposed, Layout::transposed},
      {{3, 1}, {1, 4}, Layout::contiguous, Layout::contiguous},
      {{3, 1}, {1, 4}, Layout::transposed, Layout::strided},
      {{2, 3, 4}, {4}, Layout::strided, Layout::contiguous},
      {{4, 1, 3}, {1, 1}, Layout::transposed, Layout::contiguous},
      {{5, 7}, {}, Layout::transposed, Layout::contiguous},
      {{}, {5, 7}, Layout::contiguous, Layout::strided},
      {{}, {}, Layout::contiguous, Layout::contiguous},
      {{1}, {3}, Layout::contiguous, Layout::contiguous},
      {{0}, {0}, Layout::contiguous, Layout::contiguous},
      {{0, 3}, {1, 3}, Layout::contiguous, Layout::transposed},
      {{2, 0}, {}, Layout::contiguous, Layout::contiguous},
  };
  uint64_t seed = 1000;
  for (Dtype d : kt::all_dtypes()) {
    if (!accepts(c, d) || !accepts(c, d, d)) continue;
    for (const Pair& p : pairs) {
      auto a = values_for(c, false, kt::numel(p.a), d, ++seed);
      auto b = values_for(c, true, kt::numel(p.b), d, ++seed);
      Array x = kt::with_layout(a, p.a, d, p.la), y = kt::with_layout(b, p.b, d, p.lb);
      Array z = registry_fn(c.name)(x, y);
      std::string ctx = std::string(c.name) + " " + dtype_name(d) + " " + shape_text(p.a) + kt::layout_name(p.la) +
                        " with " + shape_text(p.b) + kt::layout_name(p.lb);
      ASSERT_EQ(z.dtype(), out_dtype(c, d, d)) << ctx;
      ASSERT_EQ(z.shape(), broadcast(p.a, p.b)) << ctx;
      check(z, expected(c, a, p.a, d, b, p.b, d), ctx);
    }
  }
}

TEST_P(BinaryOp, MixedDtypesPromote) {
  const BinaryCase& c = GetParam();
  const std::pair<Dtype, Dtype> mixed[] = {
      {int8, float32}, {uint8, int8},    {bool_, int32},  {float16, bfloat16}, {uint64, int64}, {int32, float16},
      {uint32, int16}, {bool_, float64}, {uint16, uint8}, {float32, float64},  {int64, uint8},  {bfloat16, int16},
  };
  uint64_t seed = 5000;
  for (auto [da, db] : mixed) {
    for (int swap = 0; swap < 2; ++swap) {
      if (swap) std::swap(da, db);
      if (!accepts(c, da, db)) continue;
      Shape sa = {3, 4}, sb = {4};
      auto a = values_for(c, false, 12, da, ++seed);
      auto b = values_for(c, true, 4, db, ++seed);
      Array z = registry_fn(c.name)(kt::from_values(a, sa, da), kt::from_values(b, sb, db));
      std::string ctx = std::string(c.name) + " " + dtype_name(da) + " with " + dtype_name(db);
      ASSERT_EQ(z.dtype(), out_dtype(c, da, db)) << ctx;
      check(z, expected(c, a, sa, da, b, sb, db), ctx);
    }
  }
}

TEST_P(BinaryOp, NanInfinitiesAndZeros) {
  const BinaryCase& c = GetParam();
  if (!c.fref || c.accept == Accept::ints_and_bool) GTEST_SKIP() << "takes no floats";
  const double inf = INFINITY;
  const std::vector<double> special = {kNan, inf, -inf, 0.0, -0.0, 1, -1, 2.5, -3};
  const auto n = static_cast<int64_t>(special.size());
  for (Dtype d : kt::float_dtypes()) {
    // Every pair: a varies along rows, b along columns.
    Array z = registry_fn(c.name)(kt::from_values(special, {n, 1}, d), kt::from_values(special, {1, n}, d));
    check(z, expected(c, special, {n, 1}, d, special, {1, n}, d), std::string(c.name) + " specials " + dtype_name(d));
  }
}

TEST_P(BinaryOp, EmptyHandleIsAnError) {
  const BinaryCase& c = GetParam();
  std::string msg = std::string("[") + c.name + "] operation on an empty Array handle";
  Dtype d = c.accept == Accept::all ? float32 : int32;
  kt::expect_error([&] { registry_fn(c.name)(Array(), ones({2}, d)); }, msg);
  kt::expect_error([&] { registry_fn(c.name)(ones({2}, d), Array()); }, msg);
}

TEST_P(BinaryOp, ShapesThatDoNotBroadcast) {
  const BinaryCase& c = GetParam();
  Dtype d = c.accept == Accept::all ? float32 : int32;
  std::string tag = std::string("[") + c.name + "] shapes ";
  kt::expect_error(
      [&] {
        registry_fn(c.name)(ones({2, 3}, d), ones({4}, d));
      },
      tag + "(2,3) and (4) cannot be broadcast together");
  kt::expect_error(
      [&] {
        registry_fn(c.name)(ones({3, 2}, d), ones({2, 1, 4}, d));
      },
      tag + "(3,2) and (2,1,4) cannot be broadcast together");
  kt::expect_error([&] { registry_fn(c.name)(ones({0}, d), ones({2}, d)); },
                   tag + "(0) and (2) cannot be broadcast together");
}

INSTANTIATE_TEST_SUITE_P(All, BinaryOp, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

const BinaryCase& find_case(const std::string& name) {
  for (auto& c : kCases) {
    if (name == c.name) return c;
  }
  throw std::runtime_error("no case " + name);
}

}  // namespace

// The per-op cases and the registry list the same ops, so a new row cannot go untested.
TEST(Binary, EveryRegistryRowHasACase) {
  kt::expect_cases_match_registry(
      kCases, OpCategory::binary, [](const std::string& n) { return registry_fn(n) != nullptr; },
      "tests/ops/test_binary.cpp");
}

// One op per family over 100000 elements, so the work is split across the thread pool:
// contiguous, broadcast row, scalar, and transposed operands.
TEST(BinaryLarge, AboveThreadPoolThreshold) {
  struct Big {
    const char* op;
    Dtype d;
    Shape a, b;
    Layout la, lb;
  };
  const Big bigs[] = {
      {"add", float32, {100000}, {100000}, Layout::contiguous, Layout::contiguous},
      {"multiply", bfloat16, {400, 250}, {250}, Layout::transposed, Layout::contiguous},
      {"floor_divide", int32, {250, 400}, {250, 1}, Layout::strided, Layout::transposed},
      {"power", float64, {100000}, {}, Layout::contiguous, Layout::contiguous},
      {"less", int16, {}, {100000}, Layout::contiguous, Layout::contiguous},
      {"not_equal", float16, {400, 250}, {400, 250}, Layout::transposed, Layout::strided},
      {"bitwise_xor", uint16, {100000}, {100000}, Layout::strided, Layout::contiguous},
      {"right_shift", int64, {400, 250}, {400, 250}, Layout::contiguous, Layout::transposed},
  };
  uint64_t seed = 9000;
  for (auto& g : bigs) {
    const BinaryCase& c = find_case(g.op);
    auto a = values_for(c, false, kt::numel(g.a), g.d, ++seed);
    auto b = values_for(c, true, kt::numel(g.b), g.d, ++seed);
    Array z = registry_fn(c.name)(kt::with_layout(a, g.a, g.d, g.la), kt::with_layout(b, g.b, g.d, g.lb));
    check(z, expected(c, a, g.a, g.d, b, g.b, g.d), std::string(g.op) + " large " + dtype_name(g.d));
  }
}

TEST(Binary, OutputDtypes) {
  EXPECT_EQ(divide(ones({2}, int32), ones({2}, int32)).dtype(), float32);
  EXPECT_EQ(divide(ones({2}, uint8), ones({2}, int64)).dtype(), float32);
  EXPECT_EQ(divide(ones({2}, bool_), ones({2}, bool_)).dtype(), float32);
  EXPECT_EQ(divide(ones({2}, float16), ones({2}, int32)).dtype(), float16);
  EXPECT_EQ(arctan2(ones({2}, int8), ones({2}, int8)).dtype(), float32);
  EXPECT_EQ(floor_divide(ones({2}, int32), ones({2}, int32)).dtype(), int32);
  EXPECT_EQ(power(ones({2}, uint8), ones({2}, int8)).dtype(), int16);
  EXPECT_EQ(add(ones({2}, bool_), ones({2}, bool_)).dtype(), bool_);
  EXPECT_EQ(less(ones({2}, float64), ones({2}, int8)).dtype(), bool_);
  EXPECT_EQ(logical_and(ones({2}, float32), ones({2}, int8)).dtype(), bool_);
  EXPECT_EQ(bitwise_or(ones({2}, bool_), ones({2}, uint16)).dtype(), uint16);
  EXPECT_EQ(left_shift(ones({2}, int8), ones({2}, uint8)).dtype(), int16);
}

namespace {

template <class T>
std::vector<T> run2(Array (*fn)(const Array&, const Array&), std::vector<T> a, std::vector<T> b) {
  auto n = static_cast<int64_t>(a.size());
  return fn(array(a, {n}), array(b, {n})).template to_vector<T>();
}

// The integer edge cases for one C++ integer type, with results written out by hand.
template <class T>
void integer_edges() {
  using L = std::numeric_limits<T>;
  constexpr T mn = L::min(), mx = L::max();
  constexpr int bits = L::digits + L::is_signed;
  constexpr T twice_max = L::is_signed ? T(-2) : T(mx - 1);  // mx + mx, wrapped
  constexpr T top = L::is_signed ? mn : T(mx / 2 + 1);  // 1 << (bits - 1)
  SCOPED_TRACE(dtype_name(dtype_of_v<T>));
  using V = std::vector<T>;
  // Wrap-around of add, subtract, multiply.
  EXPECT_EQ(run2<T>(add, {mx, mx, mn}, {1, mx, mn}), (V{mn, twice_max, T(0)}));
  EXPECT_EQ(run2<T>(subtract, {mn, 0, mx}, {1, 1, mn}), (V{mx, T(T(0) - T(1)), T(T(-1))}));
  EXPECT_EQ(run2<T>(multiply, {mx, mn, T(1) << (bits / 2)}, {2, T(-1), T(1) << (bits / 2)}), (V{twice_max, mn, 0}));
  // x // 0 and x % 0 give 0; floor division rounds toward negative infinity.
  EXPECT_EQ(run2<T>(floor_divide, {7, mx, mn, 0}, {0, 0, 0, 0}), (V{0, 0, 0, 0}));
  EXPECT_EQ(run2<T>(remainder, {7, mx, mn, 0}, {0, 0, 0, 0}), (V{0, 0, 0, 0}));
  EXPECT_EQ(run2<T>(floor_divide, {7, mx, 9}, {2, mx, 10}), (V{3, 1, 0}));
  EXPECT_EQ(run2<T>(remainder, {7, mx, 9}, {2, mx, 10}), (V{1, 0, 9}));
  EXPECT_EQ(run2<T>(power, {2, 3, 0, 1, mx}, {T(bits), 0, 0, T(bits + 7), 2}), (V{0, 1, 1, 1, 1}));
  EXPECT_EQ(run2<T>(power, {2, 3}, {T(bits - 1), 4}), (V{top, 81}));
  // Shifts: counts at or past the width give 0.
  EXPECT_EQ(run2<T>(left_shift, {1, 1, 1, 5, mx}, {T(bits - 1), T(bits), T(bits + 5), 0, 1}),
            (V{top, 0, 0, 5, twice_max}));
  EXPECT_EQ(run2<T>(right_shift, {mx, 5, 5, mx, 96}, {T(bits - 1), T(bits), T(bits + 9), 0, 5}),
            (V{T(L::is_signed ? 0 : 1), 0, 0, mx, 3}));
  EXPECT_EQ(run2<T>(maximum, {mn, mx}, {mx, mn}), (V{mx, mx}));
  EXPECT_EQ(run2<T>(minimum, {mn, mx}, {mx, mn}), (V{mn, mn}));
  EXPECT_EQ(run2<T>(bitwise_xor, {mx, mn}, {mn, mn}), (V{T(mx ^ mn), 0}));
  auto n = static_cast<int64_t>(3);
  EXPECT_EQ(less(array(V{mn, mx, mx}, {n}), array(V{mx, mn, mx}, {n})).template to_vector<int>(),
            (std::vector<int>{1, 0, 0}));
  if constexpr (L::is_signed) {
    // MIN / -1 overflows in C++; here it wraps (floor_divide) and the remainder is 0.
    EXPECT_EQ(run2<T>(floor_divide, {mn, mx, -7, 7, -8, -1}, {-1, -1, 2, -2, 2, mx}), (V{mn, T(-mx), -4, -4, -4, -1}));
    EXPECT_EQ(run2<T>(remainder, {mn, mx, -7, 7, -8, -1}, {-1, -1, 2, -2, 2, mx}), (V{0, 0, 1, -1, 0, T(mx - 1)}));
    EXPECT_EQ(run2<T>(multiply, {mn}, {-1}), (V{mn}));
    EXPECT_EQ(run2<T>(power, {-2, -1, -1, 1, 3, 0, mn}, {3, -3, -2, -5, -1, -2, 2}), (V{-8, -1, 1, 1, 0, 0, 0}));
    // Negative counts shift out everything; right shifts keep the sign.
    EXPECT_EQ(run2<T>(left_shift, {1, -1}, {-1, T(-bits)}), (V{0, 0}));
    EXPECT_EQ(run2<T>(right_shift, {-8, -1, -5, 5, -5, mn}, {1, T(bits), 100, 100, -1, T(bits - 1)}),
              (V{-4, -1, -1, 0, -1, -1}));
    EXPECT_EQ(run2<T>(left_shift, {-1}, {T(bits - 1)}), (V{mn}));
  } else {
    EXPECT_EQ(run2<T>(subtract, {0}, {mx}), (V{1}));
    EXPECT_EQ(run2<T>(right_shift, {mx}, {T(bits - 1)}), (V{1}));
  }
}

}  // namespace

TEST(Binary, IntegerEdgeCases) {
  integer_edges<uint8_t>();
  integer_edges<uint16_t>();
  integer_edges<uint32_t>();
  integer_edges<uint64_t>();
  integer_edges<int8_t>();
  integer_edges<int16_t>();
  integer_edges<int32_t>();
  integer_edges<int64_t>();
}

TEST(Binary, WideIntegersCompareExactly) {
  // Values that a float64 detour would merge.
  int64_t big = int64_t{1} << 60;
  Array a = array(std::vector<int64_t>{big, big + 1, -big}, {3});
  Array b = array(std::vector<int64_t>{big + 1, big + 1, -big - 1}, {3});
  EXPECT_EQ(equal(a, b).to_vector<int>(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(less(a, b).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(subtract(b, a).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, -1}));
  EXPECT_EQ(maximum(a, b).to_vector<int64_t>(), (std::vector<int64_t>{big + 1, big + 1, -big}));
  uint64_t ubig = std::numeric_limits<uint64_t>::max();
  Array u = array(std::vector<uint64_t>{ubig, ubig - 1}, {2});
  EXPECT_EQ(floor_divide(u, array(std::vector<uint64_t>{ubig - 1, 2}, {2})).to_vector<uint64_t>(),
            (std::vector<uint64_t>{1, (ubig - 1) / 2}));
  // uint64 with a signed type promotes to int64 (docs/dtypes.md): the value wraps.
  Array s = add(u, array(std::vector<int8_t>{0, 1}, {2}));
  EXPECT_EQ(s.dtype(), int64);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{-1, -1}));
}

TEST(Binary, FloatFloorDivideAndRemainder) {
  // Python semantics, including the cases where the quotient rounds across an integer.
  std::vector<double> a = {7, -7, 7, -7, 0.5, 1, -1, 3.0, 1e300};
  std::vector<double> b = {2, 2, -2, -2, 0.1, 0, 0, 0.1, 1e-300};
  std::vector<double> fd = floor_divide(array(a, {9}), array(b, {9})).to_vector<double>();
  std::vector<double> rm = remainder(array(a, {9}), array(b, {9})).to_vector<double>();
  EXPECT_EQ(fd[0], 3);
  EXPECT_EQ(fd[1], -4);
  EXPECT_EQ(fd[2], -4);
  EXPECT_EQ(fd[3], 3);
  EXPECT_EQ(fd[4], 4);  // 0.5 / 0.1 is 5.000000000000000x but 0.1 is slightly more than 1/10
  EXPECT_EQ(rm[4], 0.5 - 4 * 0.1);
  EXPECT_EQ(fd[5], INFINITY);
  EXPECT_EQ(fd[6], -INFINITY);
  EXPECT_EQ(fd[7], 29);  // 3.0 // 0.1 in Python
  EXPECT_EQ(rm[0], 1);
  EXPECT_EQ(rm[1], 1);
  EXPECT_EQ(rm[2], -1);
  EXPECT_EQ(rm[3], -1);
  EXPECT_TRUE(std::isnan(rm[5]));
  EXPECT_TRUE(std::isinf(fd[8]));
}

TEST(Binary, BoolArithmetic) {
  Array t = array(std::vector<bool>{true, true, false, false}, {4});
  Array u = array(std::vector<bool>{true, false, true, false}, {4});
  EXPECT_EQ(add(t, u).to_vector<int>(), (std::vector<int>{1, 1, 1, 0}));
  EXPECT_EQ(multiply(t, u).to_vector<int>(), (std::vector<int>{1, 0, 0, 0}));
  EXPECT_EQ(maximum(t, u).to_vector<int>(), (std::vector<int>{1, 1, 1, 0}));
  EXPECT_EQ(power(t, u).to_vector<int>(), (std::vector<int>{1, 1, 0, 1}));
  EXPECT_EQ(bitwise_xor(t, u).to_vector<int>(), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(left_shift(t, u).to_vector<int>(), (std::vector<int>{0, 1, 0, 0}));
  auto q = divide(t, u).to_vector<float>();
  EXPECT_EQ(q[0], 1);
  EXPECT_EQ(q[1], INFINITY);
  EXPECT_EQ(q[2], 0);
  EXPECT_TRUE(std::isnan(q[3]));
}

TEST(Binary, Errors) {
  kt::expect_error([] { subtract(ones({2}, bool_), zeros({2}, bool_)); },
                   "[subtract] not supported for bool arrays; use bitwise_xor");
  kt::expect_error([] { bitwise_and(ones({2}, float32), ones({2}, int32)); },
                   "[bitwise_and] requires integer or bool arrays, got float32 and int32");
  kt::expect_error([] { bitwise_or(ones({2}, int8), ones({2}, bfloat16)); },
                   "[bitwise_or] requires integer or bool arrays, got int8 and bfloat16");
  kt::expect_error([] { bitwise_xor(ones({2}, float64), ones({2}, float64)); },
                   "[bitwise_xor] requires integer or bool arrays, got float64 and float64");
  kt::expect_error([] { left_shift(ones({2}, int32), ones({2}, float16)); },
                   "[left_shift] requires integer or bool arrays, got int32 and float16");
  kt::expect_error([] { right_shift(ones({2}, float32), ones({2}, uint8)); },
                   "[right_shift] requires integer or bool arrays, got float32 and uint8");
  kt::expect_error([] { ones({2, 3}) + ones({4}); }, "[add] shapes (2,3) and (4) cannot be broadcast together");
}
