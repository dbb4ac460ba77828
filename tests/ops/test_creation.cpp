// Creation ops over every dtype: zeros, ones, full (and their _like forms), arange,
// linspace and eye, against values computed here; shapes with zero and one extents,
// sizes past the thread pool's threshold, conversion of fill values, and errors.
#include <cmath>
#include <limits>

#include "reference.h"

using namespace kiln;

namespace {

const std::vector<Shape> kShapes = {{}, {0}, {1}, {3}, {2, 0, 3}, {1, 1}, {2, 3, 4}};

// `value` as dtype d holds it: saturating, NaN to 0 for integers; != 0 for bool.
double as_dtype(double value, Dtype d) {
  if (d == bool_) return value != 0;
  if (is_floating(d)) return kt::round_to(value, d);
  if (std::isnan(value)) return 0;
  double lo, hi;
  switch (d) {
    case uint8: lo = 0, hi = 255; break;
    case uint16: lo = 0, hi = 65535; break;
    case uint32: lo = 0, hi = 4294967295.0; break;
    case uint64: lo = 0, hi = 18446744073709551615.0; break;
    case int8: lo = -128, hi = 127; break;
    case int16: lo = -32768, hi = 32767; break;
    case int32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: lo = -9223372036854775808.0, hi = 9223372036854775807.0; break;
  }
  return std::min(std::max(std::trunc(value), lo), hi);
}

void expect_filled(const Array& a, const Shape& shape, Dtype d, double value, const std::string& ctx) {
  ASSERT_EQ(a.shape(), shape) << ctx;
  ASSERT_EQ(a.dtype(), d) << ctx;
  auto got = a.to_vector<double>();
  ASSERT_EQ(got.size(), static_cast<size_t>(kt::numel(shape))) << ctx;
  double want = as_dtype(value, d);
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i])) << ctx << " element " << i;
    } else {
      ASSERT_EQ(got[i], want) << ctx << " element " << i;
    }
  }
}

}  // namespace

TEST(Creation, ZerosOnesFullEveryDtypeAndShape) {
  for (Dtype d : kt::all_dtypes()) {
    for (const Shape& s : kShapes) {
      std::string ctx = std::string(dtype_name(d)) + " rank " + std::to_string(s.size());
      expect_filled(zeros(s, d), s, d, 0, "zeros " + ctx);
      expect_filled(ones(s, d), s, d, 1, "ones " + ctx);
      expect_filled(full(s, 7.75, d), s, d, 7.75, "full " + ctx);
      expect_filled(full(s, -3.0, d), s, d, -3.0, "full negative " + ctx);
    }
  }
  EXPECT_EQ(zeros({2}).dtype(), float32);
  EXPECT_EQ(ones({2}).dtype(), float32);
  EXPECT_EQ(full({2}, 1.0).dtype(), float32);
}

TEST(Creation, FullConvertsTheValueToTheDtype) {
  const double inf = INFINITY;
  for (Dtype d : kt::all_dtypes()) {
    for (double v : {300.7, -300.7, 1e10, -1e10, 65520.0, 1e300, inf, -inf, static_cast<double>(NAN), 0.1, -0.0}) {
      std::string ctx = std::string("full ") + dtype_name(d) + " " + std::to_string(v);
      expect_filled(full({3}, v, d), {3}, d, v, ctx);
    }
  }
  // Spot checks of the rules written out: saturation, truncation toward zero, NaN to 0.
  EXPECT_EQ(full({1}, 300.0, int8).item<int8_t>(), 127);
  EXPECT_EQ(full({1}, -1.0, uint8).item<uint8_t>(), 0);
  EXPECT_EQ(full({1}, -2.9, int32).item<int32_t>(), -2);
  EXPECT_EQ(full({1}, NAN, int64).item<int64_t>(), 0);
  EXPECT_EQ(full({1}, 0.5, bool_).item<bool>(), true);
  EXPECT_TRUE(std::isinf(full({1}, 1e5, float16).item<float>()));
}

TEST(Creation, FullFromAnArrayValue) {
  for (Dtype d : kt::all_dtypes()) {
    Array v = astype(array(5.0), d);
    expect_filled(full({2, 3}, v), {2, 3}, d, 5.0, std::string("full(array) ") + dtype_name(d));
    // A one-element array of any rank is accepted.
    Array v1 = astype(array(std::vector<double>{2.0}, {1, 1}), d);
    expect_filled(full({4}, v1), {4}, d, 2.0, std::string("full(1x1) ") + dtype_name(d));
  }
  // A lazy (unevaluated) value and a strided view work too.
  Array lazy = add(array(1.5f), array(2.0f));
  expect_filled(full({3, 2}, lazy), {3, 2}, float32, 3.5, "lazy value");
  Array view = slice(array(std::vector<int32_t>{9, 8, 7, 6}, {4}), {{2, 3, 1}});
  expect_filled(full({5}, view), {5}, int32, 7, "sliced value");
}

TEST(Creation, LikeFormsKeepShapeAndDtype) {
  for (Dtype d : kt::all_dtypes()) {
    // A transposed source: only its logical shape matters.
    Array src = transpose(zeros({2, 3}, d));
    std::string ctx = dtype_name(d);
    expect_filled(zeros_like(src), {3, 2}, d, 0, "zeros_like " + ctx);
    expect_filled(ones_like(src), {3, 2}, d, 1, "ones_like " + ctx);
    expect_filled(full_like(src, 4.5), {3, 2}, d, 4.5, "full_like " + ctx);
    expect_filled(full_like(zeros({0, 2}, d), 4.5), {0, 2}, d, 4.5, "full_like empty " + ctx);
    expect_filled(ones_like(zeros({}, d)), {}, d, 1, "ones_like 0-d " + ctx);
  }
}

TEST(Creation, LargeFillsUseThePool) {
  expect_filled(full({100000}, 2.5, float32), {100000}, float32, 2.5, "large full");
  expect_filled(ones({300, 400}, int16), {300, 400}, int16, 1, "large ones");
  expect_filled(zeros_like(ones({100001}, bfloat16)), {100001}, bfloat16, 0, "large zeros_like");
}

TEST(Creation, Arange) {
  struct Case {
    double start, stop, step;
    std::vector<double> want;
  };
  const Case cases[] = {
      {0, 5, 1, {0, 1, 2, 3, 4}},
      {0, 10, 3, {0, 3, 6, 9}},
      {10, 0, -3, {10, 7, 4, 1}},
      {-2, 2, 0.5, {-2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5}},
      {1, 1, 1, {}},
      {5, 0, 1, {}},
      {0, 5, -1, {}},
      {0.5, 3, 1, {0.5, 1.5, 2.5}},
  };
  for (const Case& c : cases) {
    for (Dtype d : {uint8, int8, int16, int32, int64, uint64, float16, bfloat16, float32, float64}) {
      bool negative = false;
      for (double w : c.want) negative = negative || w < 0;
      if (is_unsigned(d) && negative) continue;
      Array a = arange(c.start, c.stop, c.step, d);
      std::string ctx = "arange(" + std::to_string(c.start) + "," + std::to_string(c.stop) + "," +
                        std::to_string(c.step) + ") " + dtype_name(d);
      ASSERT_EQ(a.dtype(), d) << ctx;
      ASSERT_EQ(a.shape(), (Shape{static_cast<int64_t>(c.want.size())})) << ctx;
      std::vector<double> want;
      for (double w : c.want) want.push_back(as_dtype(w, d));
      EXPECT_EQ(a.to_vector<double>(), want) << ctx;
    }
  }
  // arange(stop) defaults to int32; the float form defaults to float32.
  Array a = arange(4);
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(arange(0.0, 1.0, 0.25).dtype(), float32);
  EXPECT_EQ(arange(-3).size(), 0);
  EXPECT_EQ(arange(0, 1, 0.1, float64).size(), 10);  // ceil((1 - 0) / 0.1), as numpy
}

TEST(Creation, ArangeLarge) {
  const int64_t n = 100000;
  Array a = arange(n, int32);
  Array f = arange(0.0, 50000.0, 0.5, float64);
  auto av = a.to_vector<int32_t>();
  auto fv = f.to_vector<double>();
  ASSERT_EQ(av.size(), static_cast<size_t>(n));
  ASSERT_EQ(fv.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(av[static_cast<size_t>(i)], i);
    ASSERT_EQ(fv[static_cast<size_t>(i)], 0.5 * static_cast<double>(i));
  }
}

TEST(Creation, Linspace) {
  struct Case {
    double start, stop;
    int64_t num;
  };
  const Case cases[] = {{0, 1, 5},  {0.3, 0.9, 4}, {2.5, -3.3, 9}, {1, 10, 10},
                        {-1, 1, 2}, {4, 8, 1},     {4, 8, 0},      {3, 3, 4}};
  for (const Case& c : cases) {
    for (Dtype d : kt::float_dtypes()) {
      Array a = linspace(c.start, c.stop, c.num, d);
      std::string ctx = "linspace(" + std::to_string(c.start) + "," + std::to_string(c.stop) + "," +
                        std::to_string(c.num) + ") " + dtype_name(d);
      ASSERT_EQ(a.dtype(), d) << ctx;
      ASSERT_EQ(a.shape(), (Shape{c.num})) << ctx;
      std::vector<double> want;
      for (int64_t i = 0; i < c.num; ++i) {
        // Reference: the exact fraction of the way from start to stop.
        double t = c.num > 1 ? static_cast<double>(i) / static_cast<double>(c.num - 1) : 0.0;
        want.push_back(kt::round_to(c.start * (1 - t) + c.stop * t, d));
      }
      kt::expect_close(a, want, ctx, 1.0, 1e-3);
      auto got = a.to_vector<double>();
      if (c.num > 0) {
        EXPECT_EQ(got.front(), kt::round_to(c.start, d)) << ctx << ": first element is start";
      }
      if (c.num > 1) {
        EXPECT_EQ(got.back(), kt::round_to(c.stop, d)) << ctx << ": last element is stop";
      }
    }
  }
  EXPECT_EQ(linspace(0, 1, 3).dtype(), float32);
  Array big = linspace(-1, 1, 100001, float64);
  auto v = big.to_vector<double>();
  EXPECT_EQ(v.front(), -1);
  EXPECT_EQ(v.back(), 1);
  EXPECT_NEAR(v[50000], 0, 1e-15);
  EXPECT_NEAR(v[12345], -1 + 2.0 * 12345 / 100000, 1e-15);
}

TEST(Creation, Eye) {
  for (Dtype d : kt::all_dtypes()) {
    for (auto [n, m, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 3, 0},
                                                                             {3, 5, 0},
                                                                             {4, 2, 0},
                                                                             {3, 4, 1},
                                                                             {4, 3, -2},
                                                                             {3, 3, 3},
                                                                             {3, 3, -5},
                                                                             {0, 0, 0},
                                                                             {0, 3, 0},
                                                                             {1, 1, 0}}) {
      Array e = eye(n, m, k, d);
      std::string ctx =
          "eye(" + std::to_string(n) + "," + std::to_string(m) + "," + std::to_string(k) + ") " + dtype_name(d);
      ASSERT_EQ(e.dtype(), d) << ctx;
      ASSERT_EQ(e.shape(), (Shape{n, m})) << ctx;
      std::vector<double> want;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) want.push_back(j - i == k ? 1 : 0);
      }
      EXPECT_EQ(e.to_vector<double>(), want) << ctx;
    }
  }
  EXPECT_EQ(eye(2).dtype(), float32);
  EXPECT_EQ(eye(2).to_vector<float>(), (std::vector<float>{1, 0, 0, 1}));
  EXPECT_EQ(eye(2, std::nullopt, 1).to_vector<float>(), (std::vector<float>{0, 1, 0, 0}));
}

TEST(Creation, Errors) {
  kt::expect_error([] { zeros({2, -1}); }, "[zeros] negative dimension in shape (2,-1)");
  kt::expect_error([] { ones({-3}, int8); }, "[ones] negative dimension in shape (-3)");
  kt::expect_error([] { full({-1, 2}, 1.0); }, "[full] negative dimension in shape (-1,2)");
  kt::expect_error([] { full({-1}, array(1.0f)); }, "[full] negative dimension in shape (-1)");
  kt::expect_error([] { full({2}, Array()); }, "[full] operation on an empty Array handle");
  kt::expect_error(
      [] {
        full({2}, array(std::vector<float>{1, 2}, {2}));
      },
      "[full] fill value must have one element, got shape (2)");
  kt::expect_error([] { full({2}, zeros({0})); }, "[full] fill value must have one element, got shape (0)");
  kt::expect_error([] { zeros_like(Array()); }, "[zeros_like] operation on an empty Array handle");
  kt::expect_error([] { ones_like(Array()); }, "[ones_like] operation on an empty Array handle");
  kt::expect_error([] { full_like(Array(), 2.0); }, "[full_like] operation on an empty Array handle");
  kt::expect_error([] { arange(0, 5, 0); }, "[arange] step cannot be zero");
  kt::expect_error([] { arange(0, INFINITY, 1); }, "[arange] start, stop and step must be finite");
  kt::expect_error([] { arange(NAN, 1, 1); }, "[arange] start, stop and step must be finite");
  kt::expect_error([] { arange(0, 1, NAN); }, "[arange] start, stop and step must be finite");
  kt::expect_error([] { arange(3, bool_); }, "[arange] bool is not a valid dtype for arange");
  kt::expect_error([] { arange(-1e300, 1e300, 1.0); },
                   "[arange] range from -1e+300 to 1e+300 in steps of 1 is too long");
  kt::expect_error([] { arange(0, 1e19, 1.0); }, "[arange] range from 0 to 1e+19 in steps of 1 is too long");
  kt::expect_error([] { linspace(0, 1, -1); }, "[linspace] number of samples must be non-negative, got -1");
  kt::expect_error([] { linspace(0, 1, 3, int32); }, "[linspace] needs a floating dtype, got int32");
  kt::expect_error([] { linspace(0, 1, 3, bool_); }, "[linspace] needs a floating dtype, got bool");
  kt::expect_error([] { eye(-1); }, "[eye] dimensions must be non-negative, got -1 x -1");
  kt::expect_error([] { eye(2, -3); }, "[eye] dimensions must be non-negative, got 2 x -3");
}
