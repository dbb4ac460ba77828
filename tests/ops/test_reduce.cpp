// Reductions, arg-reductions and cumsum against float64 references computed here,
// over every dtype, several axis sets, keepdims, empty and size-1 axes and
// non-contiguous layouts; plus NaN/inf behaviour, accuracy of long float sums,
// the parallel paths, and every error message.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/config.h"
#include "ops/reduce.h"
#include "reference.h"
#include "spawn_self.h"

using namespace kiln;
using kt::Layout;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::strided};

std::vector<int> normalized(const std::vector<int>& axes, int nd) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < nd; ++i) out.push_back(i);
  }
  for (int a : axes) out.push_back(a < 0 ? a + nd : a);
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    bool r = std::find(axes.begin(), axes.end(), static_cast<int>(i)) != axes.end();
    if (!r)
      out.push_back(s[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

/* For each input element (row-major), the row-major index of its output element. */
std::vector<int64_t> output_index(const Shape& s, const std::vector<int>& axes) {
  size_t nd = s.size();
  std::vector<int64_t> ostride(nd, 0);
  int64_t st = 1;
  for (size_t i = nd; i-- > 0;) {
    if (std::find(axes.begin(), axes.end(), static_cast<int>(i)) != axes.end()) continue;
    ostride[i] = st;
    st *= s[i];
  }
  std::vector<int64_t> out(static_cast<size_t>(kt::numel(s)));
  std::vector<int64_t> idx(nd, 0);
  for (auto& o : out) {
    o = 0;
    for (size_t k = 0; k < nd; ++k) o += idx[k] * ostride[k];
    for (size_t k = nd; k-- > 0;) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

/* Folds the input into its outputs: acc = fold(acc, x) in row-major order. */
template <class Acc, class Fold>
std::vector<Acc> ref_reduce(const std::vector<double>& v, const Shape& s, const std::vector<int>& axes, Acc init,
                            Fold fold) {
  std::vector<Acc> out(static_cast<size_t>(kt::numel(reduced_shape(s, axes, true))), init);
  auto oi = output_index(s, axes);
  for (size_t i = 0; i < v.size(); ++i) out[static_cast<size_t>(oi[i])] = fold(out[static_cast<size_t>(oi[i])], v[i]);
  return out;
}

/* Wraps an integer accumulated modulo 2^64 to dtype d, as a double. */
double wrap_to(uint64_t v, Dtype d) {
  switch (d) {
    case int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case uint32: return static_cast<uint32_t>(v);
    case int64: return static_cast<double>(static_cast<int64_t>(v));
    default: return static_cast<double>(v);
  }
}

/* got matches want within rel_tol(dtype) * scale[i] (exactly for integers and bool);
   NaN and infinities must match. */
void expect_within(const Array& got, const std::vector<double>& want, const std::vector<double>& scale,
                   const std::string& ctx) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << ctx;
  double tol = kt::rel_tol(got.dtype());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    double w = want[i], x = g[i];
    bool ok = std::isnan(w) ? std::isnan(x) : std::isinf(w) ? x == w : std::fabs(x - w) <= tol * scale[i];
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " got " << x << " want " << w << " (" << dtype_name(got.dtype())
                    << ")";
      ++bad;
    }
  }
}

std::string describe(const char* op, Dtype d, const Shape& s, const std::vector<int>& axes, bool keep, Layout l) {
  return std::string(op) + " " + dtype_name(d) + " shape " + detail::shape_str(s) + " axes " + axes_str(axes) +
         (keep ? " keepdims " : " ") + kt::layout_name(l);
}

struct Case {
  Shape shape;
  std::vector<int> axes;
};

// Covers 0-d, 1-d, row/column/strided forms, size-1 and empty axes.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{}, {}},         {{7}, {}},      {{7}, {0}},          {{3, 5}, {1}},         {{3, 5}, {0}},
      {{3, 5}, {}},     {{3, 5}, {-1}}, {{2, 3, 4}, {0, 2}}, {{2, 3, 4}, {1}},      {{2, 3, 4}, {-1, 0}},
      {{2, 1, 4}, {1}}, {{4, 1}, {0}},  {{1, 1}, {}},        {{0, 3}, {0}},         {{0, 3}, {1}},
      {{3, 0}, {1}},    {{6, 40}, {1}}, {{40, 9}, {0}},      {{5, 33, 17}, {0, 2}}, {{3, 20, 10}, {1}},
  };
  return c;
}

bool has_empty_axis(const Shape& s, const std::vector<int>& axes) {
  for (int a : axes) {
    if (s[static_cast<size_t>(a)] == 0) return true;
  }
  return false;
}

Dtype sum_dtype(Dtype d) {
  if (d == bool_ || d == int8 || d == int16) return int32;
  if (d == uint8 || d == uint16) return uint32;
  return d;
}

using ReduceFn = std::function<Array(const Array&, const std::vector<int>&, bool)>;

}  // namespace

// ---- sum and prod --------------------------------------------------------------

TEST(Reduce, SumEveryDtypeAxesAndLayout) {
  uint64_t seed = 1;
  for (Dtype d : kt::all_dtypes()) {
    for (auto& c : cases()) {
      auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
      for (Layout l : kLayouts) {
        for (bool keep : {false, true}) {
          auto v = kt::random_values(kt::numel(c.shape), d, seed++);
          Array x = kt::with_layout(v, c.shape, d, l);
          Array y = sum(x, c.axes, keep);
          std::string ctx = describe("sum", d, c.shape, c.axes, keep, l);
          ASSERT_EQ(y.dtype(), sum_dtype(d)) << ctx;
          ASSERT_EQ(y.shape(), reduced_shape(c.shape, axes, keep)) << ctx;
          auto want = ref_reduce<double>(v, c.shape, axes, 0.0, [](double a, double b) { return a + b; });
          auto scale = ref_reduce<double>(v, c.shape, axes, 0.0, [](double a, double b) { return a + std::fabs(b); });
          expect_within(y, want, scale, ctx);
        }
      }
    }
  }
}

TEST(Reduce, ProdEveryDtypeAxesAndLayout) {
  uint64_t seed = 100;
  for (Dtype d : kt::all_dtypes()) {
    for (auto& c : cases()) {
      auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
      if (kt::numel(c.shape) > 100) continue;  // products of long rows leave every range
      for (Layout l : kLayouts) {
        bool keep = l == Layout::strided;
        // Near 1 for floats so nothing overflows; integers wrap and are checked modulo 2^bits.
        auto v = is_floating(d) ? kt::random_values(kt::numel(c.shape), d, seed++, 0.7, 1.4)
                                : kt::random_values(kt::numel(c.shape), d, seed++, -5, 5);
        Array y = prod(kt::with_layout(v, c.shape, d, l), c.axes, keep);
        std::string ctx = describe("prod", d, c.shape, c.axes, keep, l);
        ASSERT_EQ(y.dtype(), sum_dtype(d)) << ctx;
        ASSERT_EQ(y.shape(), reduced_shape(c.shape, axes, keep)) << ctx;
        std::vector<double> want, scale;
        if (is_floating(d)) {
          want = ref_reduce<double>(v, c.shape, axes, 1.0, [](double a, double b) { return a * b; });
          for (double w : want) scale.push_back(8 * std::fabs(w));
        } else {
          auto wrapped = ref_reduce<uint64_t>(v, c.shape, axes, 1, [](uint64_t a, double b) {
            return a * static_cast<uint64_t>(static_cast<int64_t>(b));
          });
          for (auto w : wrapped) want.push_back(wrap_to(w, y.dtype())), scale.push_back(0);
        }
        expect_within(y, want, scale, ctx);
      }
    }
  }
}

TEST(Reduce, IntegerSumsWrapInTheirDtype) {
  Array a = array(std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 1, 1}, {3});
  EXPECT_EQ(sum(a).item<int32_t>(), std::numeric_limits<int32_t>::min() + 1);
  Array u = array(std::vector<uint64_t>{~uint64_t{0}, 3}, {2});
  EXPECT_EQ(sum(u).item<uint64_t>(), 2u);
  // int8 accumulates in int32, so 100 * 3 does not wrap at 8 bits.
  Array i8 = array(std::vector<int8_t>{100, 100, 100}, {3});
  EXPECT_EQ(sum(i8).item<int32_t>(), 300);
  EXPECT_EQ(prod(array(std::vector<int64_t>{int64_t{1} << 62, 4}, {2})).item<int64_t>(), 0);
}

TEST(Reduce, EmptyAxesGiveIdentities) {
  for (Dtype d : {float32, int32, bool_, float16}) {
    Array x = zeros({0, 3}, d);
    Array s = sum(x, {0});
    EXPECT_EQ(s.shape(), (Shape{3}));
    EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 0, 0})) << dtype_name(d);
    EXPECT_EQ(prod(x, {0}).to_vector<double>(), (std::vector<double>{1, 1, 1})) << dtype_name(d);
    EXPECT_EQ(all(x, {0}).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 1, 1}));
    EXPECT_EQ(any(x, {0}).to_vector<uint8_t>(), (std::vector<uint8_t>{0, 0, 0}));
    EXPECT_EQ(sum(x).item<double>(), 0.0);
    EXPECT_EQ(max(x, {1}).shape(), (Shape{0}));  // nothing reduced over an empty axis
  }
}

// ---- max, min, all, any -----------------------------------------------------------

TEST(Reduce, MaxMinAllAnyEveryDtypeAxesAndLayout) {
  struct Op {
    const char* name;
    ReduceFn fn;
    double init;
    std::function<double(double, double)> fold;
    bool logical;
  };
  std::vector<Op> ops = {
      {"max", [](auto& a, auto& ax, bool k) { return max(a, ax, k); }, -kInf,
       [](double a, double b) { return std::max(a, b); }, false},
      {"min", [](auto& a, auto& ax, bool k) { return min(a, ax, k); }, kInf,
       [](double a, double b) { return std::min(a, b); }, false},
      {"all", [](auto& a, auto& ax, bool k) { return all(a, ax, k); }, 1,
       [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; }, true},
      {"any", [](auto& a, auto& ax, bool k) { return any(a, ax, k); }, 0,
       [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; }, true},
  };
  uint64_t seed = 500;
  for (auto& op : ops) {
    for (Dtype d : kt::all_dtypes()) {
      for (auto& c : cases()) {
        auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
        if (!op.logical && has_empty_axis(c.shape, axes)) continue;  // an error, tested below
        for (Layout l : kLayouts) {
          bool keep = (seed & 1) != 0;
          auto v = kt::random_values(kt::numel(c.shape), d, seed++);
          // Some exact zeros so all/any see both outcomes.
          for (size_t i = 3; i < v.size(); i += 7) v[i] = 0;
          Array y = op.fn(kt::with_layout(v, c.shape, d, l), c.axes, keep);
          std::string ctx = describe(op.name, d, c.shape, c.axes, keep, l);
          ASSERT_EQ(y.dtype(), op.logical ? bool_ : d) << ctx;
          ASSERT_EQ(y.shape(), reduced_shape(c.shape, axes, keep)) << ctx;
          auto want = ref_reduce<double>(v, c.shape, axes, op.init, op.fold);
          expect_within(y, want, std::vector<double>(want.size(), 0.0), ctx);
        }
      }
    }
  }
}

TEST(Reduce, MaxMinPropagateNaN) {
  for (Dtype d : kt::float_dtypes()) {
    // Positions chosen to land in the lane loop, the tail, and column form.
    for (int64_t pos : {0, 5, 17, 39}) {
      auto v = kt::random_values(40 * 9, d, 7);
      std::vector<double> row = v;
      row[static_cast<size_t>(pos)] = kNaN;
      for (Layout l : kLayouts) {
        Array x = kt::with_layout(row, {9, 40}, d, l);
        auto mx = max(x, {1}).to_vector<double>();
        auto mn = min(x, {1}).to_vector<double>();
        EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mn[0])) << dtype_name(d) << " " << pos;
        EXPECT_FALSE(std::isnan(mx[1]) || std::isnan(mn[1]));
        auto cmx = max(x, {0}).to_vector<double>();  // the NaN's column only
        auto cmn = min(x, {0}).to_vector<double>();
        for (int64_t j = 0; j < 40; ++j) {
          EXPECT_EQ(std::isnan(cmx[static_cast<size_t>(j)]), j == pos) << dtype_name(d) << " column " << j;
          EXPECT_EQ(std::isnan(cmn[static_cast<size_t>(j)]), j == pos) << dtype_name(d) << " column " << j;
        }
      }
    }
    Array inf = kt::from_values({-kInf, -kInf}, {2}, d);
    EXPECT_EQ(max(inf).item<double>(), -kInf);
    EXPECT_EQ(min(kt::from_values({kInf, 2}, {2}, d)).item<double>(), 2);
  }
}

TEST(Reduce, SumAndProdWithInfAndNaN) {
  for (Dtype d : kt::float_dtypes()) {
    EXPECT_EQ(sum(kt::from_values({1, kInf, 2}, {3}, d)).item<double>(), kInf);
    EXPECT_TRUE(std::isnan(sum(kt::from_values({kInf, -kInf}, {2}, d)).item<double>()));
    EXPECT_TRUE(std::isnan(sum(kt::from_values({1, kNaN, 2}, {3}, d)).item<double>()));
    EXPECT_TRUE(std::isnan(prod(kt::from_values({0, kInf}, {2}, d)).item<double>()));
    EXPECT_EQ(prod(kt::from_values({-2, kInf}, {2}, d)).item<double>(), -kInf);
    EXPECT_TRUE(all(kt::from_values({kNaN, 1}, {2}, d)).item<bool>());  // NaN is nonzero
    EXPECT_TRUE(any(kt::from_values({0, kNaN}, {2}, d)).item<bool>());
  }
}

TEST(Reduce, BroadcastInputsCountEveryRepeat) {
  Array row = array(std::vector<float>{1, 2, 3}, {1, 3});
  Array b = broadcast_to(row, {4, 3});
  EXPECT_EQ(sum(b, {0}).to_vector<float>(), (std::vector<float>{4, 8, 12}));
  EXPECT_EQ(sum(b).item<float>(), 24.0f);
  EXPECT_EQ(prod(b, {0}).to_vector<float>(), (std::vector<float>{1, 16, 81}));
}

// ---- large inputs: accuracy and the parallel paths ----------------------------------

TEST(Reduce, LongFloat32SumsStayAccurate) {
  // A naive float32 running sum of 2^24 copies of 0.1 stalls near 2^21.
  Array x = full({int64_t{1} << 24}, 0.1, float32);
  double want = 16777216.0 * static_cast<double>(0.1f);
  EXPECT_NEAR(sum(x).item<double>(), want, want * 1e-6);
  EXPECT_NEAR(mean(x).item<double>(), static_cast<double>(0.1f), 1e-6);
  // Column sums over 2^18 rows.
  auto cols = sum(reshape(x, {1 << 18, 64}), {0}).to_vector<double>();
  for (double c : cols) EXPECT_NEAR(c, 262144.0 * static_cast<double>(0.1f), 262144.0 * 0.1 * 1e-6);
  // Strided (per-output) form over 2^22 rows.
  auto few = sum(reshape(x, {1 << 22, 4}), {0}).to_vector<double>();
  for (double c : few) EXPECT_NEAR(c, 4194304.0 * static_cast<double>(0.1f), 4194304.0 * 0.1 * 1e-6);
}

TEST(Reduce, LargeShapesMatchReferenceOnEveryPath) {
  // Many outputs, few long outputs (rows and columns), and one huge output.
  const std::vector<Case> big = {{{300, 300}, {0}}, {{300, 300}, {1}}, {{3, 40000}, {1}}, {{40000, 3}, {0}},
                                 {{9000, 12}, {0}}, {{100003}, {}},    {{4, 20000}, {0}}, {{50, 30, 60}, {0, 2}}};
  uint64_t seed = 900;
  for (Dtype d : {float32, int32, float16}) {
    for (auto& c : big) {
      auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
      auto v = kt::random_values(kt::numel(c.shape), d, seed++);
      Array x = kt::with_layout(v, c.shape, d, Layout::contiguous);
      std::string ctx = describe("sum", d, c.shape, c.axes, false, Layout::contiguous);
      auto want = ref_reduce<double>(v, c.shape, axes, 0.0, [](double a, double b) { return a + b; });
      auto scale = ref_reduce<double>(v, c.shape, axes, 0.0, [](double a, double b) { return a + std::fabs(b); });
      expect_within(sum(x, c.axes), want, scale, ctx);
      auto mx = ref_reduce<double>(v, c.shape, axes, -kInf, [](double a, double b) { return std::max(a, b); });
      expect_within(max(x, c.axes), mx, std::vector<double>(mx.size(), 0.0), "max " + ctx);
      // argmax along the first listed axis
      int ax = axes[0];
      Array am = argmax(x, ax);
      auto got = am.to_vector<int32_t>();
      Shape s = c.shape;
      int64_t outer = 1, n = s[static_cast<size_t>(ax)], inner = 1;
      for (int i = 0; i < ax; ++i) outer *= s[static_cast<size_t>(i)];
      for (size_t i = static_cast<size_t>(ax) + 1; i < s.size(); ++i) inner *= s[i];
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          int64_t best = 0;
          for (int64_t k = 1; k < n; ++k) {
            if (v[static_cast<size_t>((o * n + k) * inner + j)] > v[static_cast<size_t>((o * n + best) * inner + j)])
              best = k;
          }
          ASSERT_EQ(got[static_cast<size_t>(o * inner + j)], best) << "argmax " << ctx;
        }
      }
    }
  }
}

// ---- mean and var ------------------------------------------------------------------

TEST(Reduce, MeanAndVarEveryDtype) {
  uint64_t seed = 1500;
  for (Dtype d : kt::all_dtypes()) {
    Dtype out = is_floating(d) ? d : float32;
    for (auto& c : cases()) {
      auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
      if (has_empty_axis(c.shape, axes)) continue;  // tested below
      for (Layout l : kLayouts) {
        bool keep = l == Layout::transposed;
        auto v = kt::random_values(kt::numel(c.shape), d, seed++);
        Array x = kt::with_layout(v, c.shape, d, l);
        std::string ctx = describe("mean", d, c.shape, c.axes, keep, l);
        auto s = ref_reduce<double>(v, c.shape, axes, 0.0, [](double a, double b) { return a + b; });
        auto sabs = ref_reduce<double>(v, c.shape, axes, 0.0, [](double a, double b) { return a + std::fabs(b); });
        double count = static_cast<double>(kt::numel(c.shape)) / static_cast<double>(std::max<size_t>(s.size(), 1));
        std::vector<double> want, scale;
        for (size_t i = 0; i < s.size(); ++i) want.push_back(s[i] / count), scale.push_back(2 * sabs[i] / count);
        Array m = mean(x, c.axes, keep);
        ASSERT_EQ(m.dtype(), out) << ctx;
        ASSERT_EQ(m.shape(), reduced_shape(c.shape, axes, keep)) << ctx;
        expect_within(m, want, scale, ctx);

        for (int ddof : {0, 1}) {
          auto oi = output_index(c.shape, axes);
          std::vector<double> ss(want.size(), 0.0), sq(want.size(), 0.0);
          for (size_t i = 0; i < v.size(); ++i) {
            double dev = v[i] - want[static_cast<size_t>(oi[i])];
            ss[static_cast<size_t>(oi[i])] += dev * dev;
            sq[static_cast<size_t>(oi[i])] += v[i] * v[i];
          }
          std::vector<double> vw, vs;
          for (size_t i = 0; i < ss.size(); ++i) {
            double div = std::max(0.0, count - ddof);
            vw.push_back(ss[i] / div);  // 0/0 is NaN, like numpy
            vs.push_back(8 * sq[i] / std::max(div, 1.0) + 1e-30);
          }
          Array var_ = var(x, c.axes, keep, ddof);
          ASSERT_EQ(var_.dtype(), out) << ctx;
          expect_within(var_, vw, vs, "var ddof " + std::to_string(ddof) + " " + ctx);
        }
      }
    }
  }
}

TEST(Reduce, MeanAndVarOfEmptyAndSpecialValues) {
  EXPECT_TRUE(std::isnan(mean(zeros({0})).item<float>()));
  EXPECT_TRUE(std::isnan(var(zeros({0, 2}), {0}).to_vector<float>()[1]));
  EXPECT_TRUE(std::isnan(var(array(std::vector<float>{3}, {1}), {}, false, 1).item<float>()));  // 0 / 0
  EXPECT_EQ(var(array(std::vector<float>{3, 5}, {2}), {}, false, 1).item<float>(), 2.0f);
  EXPECT_EQ(mean(array(std::vector<float>{1, static_cast<float>(kInf)}, {2})).item<float>(), static_cast<float>(kInf));
  EXPECT_TRUE(std::isnan(var(array(std::vector<float>{1, static_cast<float>(kInf)}, {2})).item<float>()));
  // float16 means accumulate in float32: the sum would overflow float16.
  Array h = full({100000}, 1.0, float16);
  EXPECT_EQ(mean(h).item<float>(), 1.0f);
  EXPECT_EQ(mean(h).dtype(), float16);
  EXPECT_EQ(var(h).item<float>(), 0.0f);
}

// ---- logsumexp and softmax -------------------------------------------------------------

TEST(Reduce, LogsumexpEveryDtype) {
  uint64_t seed = 2500;
  for (Dtype d : kt::all_dtypes()) {
    Dtype out = is_floating(d) ? d : float32;
    for (auto& c : cases()) {
      auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
      for (Layout l : kLayouts) {
        bool keep = l != Layout::contiguous;
        auto v = kt::random_values(kt::numel(c.shape), d, seed++, -20, 20);
        Array y = logsumexp(kt::with_layout(v, c.shape, d, l), c.axes, keep);
        std::string ctx = describe("logsumexp", d, c.shape, c.axes, keep, l);
        ASSERT_EQ(y.dtype(), out) << ctx;
        ASSERT_EQ(y.shape(), reduced_shape(c.shape, axes, keep)) << ctx;
        auto m = ref_reduce<double>(v, c.shape, axes, -kInf, [](double a, double b) { return std::max(a, b); });
        auto oi = output_index(c.shape, axes);
        std::vector<double> se(m.size(), 0.0);
        for (size_t i = 0; i < v.size(); ++i)
          se[static_cast<size_t>(oi[i])] += std::exp(v[i] - m[static_cast<size_t>(oi[i])]);
        std::vector<double> want, scale;
        for (size_t i = 0; i < m.size(); ++i) {
          want.push_back(std::isinf(m[i]) ? m[i] : std::log(se[i]) + m[i]);  // empty: -inf
          scale.push_back(4 * (std::fabs(m[i]) + 1));
        }
        expect_within(y, want, scale, ctx);
      }
    }
  }
}

TEST(Reduce, LogsumexpSpecialValues) {
  for (Dtype d : kt::float_dtypes()) {
    Array x = kt::from_values({-kInf, -kInf, 1, -kInf, kInf, 0, kNaN, 1, 2}, {3, 3}, d);
    auto r = logsumexp(x, {1}).to_vector<double>();
    EXPECT_EQ(r[0], 1.0) << dtype_name(d);  // -inf rows terms vanish
    EXPECT_EQ(r[1], kInf) << dtype_name(d);
    EXPECT_TRUE(std::isnan(r[2])) << dtype_name(d);
    EXPECT_EQ(logsumexp(kt::from_values({-kInf, -kInf}, {2}, d)).item<double>(), -kInf);
    // Large values would overflow exp without the shift.
    EXPECT_NEAR(logsumexp(kt::from_values({1000, 1000}, {2}, kt::rel_tol(d) > 1e-3 ? float32 : d)).item<double>(),
                1000 + std::log(2.0), 1e-3);
  }
  EXPECT_EQ(logsumexp(zeros({2, 0}), {1}).to_vector<float>(), (std::vector<float>{-INFINITY, -INFINITY}));
}

TEST(Reduce, SoftmaxEveryDtype) {
  uint64_t seed = 3500;
  const std::vector<Case> sc = {{{}, {}},         {{7}, {-1}},   {{3, 5}, {-1}}, {{3, 5}, {0}}, {{2, 3, 4}, {0, 2}},
                                {{2, 1, 4}, {1}}, {{6, 40}, {}}, {{0, 3}, {1}},  {{3, 0}, {-1}}};
  for (Dtype d : kt::all_dtypes()) {
    Dtype out = is_floating(d) ? d : float32;
    for (auto& c : sc) {
      auto axes = normalized(c.axes, static_cast<int>(c.shape.size()));
      for (Layout l : kLayouts) {
        auto v = kt::random_values(kt::numel(c.shape), d, seed++, -30, 30);
        Array y = softmax(kt::with_layout(v, c.shape, d, l), c.axes);
        std::string ctx = describe("softmax", d, c.shape, c.axes, false, l);
        ASSERT_EQ(y.dtype(), out) << ctx;
        ASSERT_EQ(y.shape(), c.shape) << ctx;
        auto m = ref_reduce<double>(v, c.shape, axes, -kInf, [](double a, double b) { return std::max(a, b); });
        auto oi = output_index(c.shape, axes);
        std::vector<double> se(m.size(), 0.0), want, scale;
        for (size_t i = 0; i < v.size(); ++i)
          se[static_cast<size_t>(oi[i])] += std::exp(v[i] - m[static_cast<size_t>(oi[i])]);
        for (size_t i = 0; i < v.size(); ++i) {
          size_t o = static_cast<size_t>(oi[i]);
          want.push_back(std::exp(v[i] - m[o]) / se[o]);
          scale.push_back(4 * want.back() + 1e-4);  // float16 subnormals are 6e-8 apart
        }
        expect_within(y, want, scale, ctx);
      }
    }
  }
}

TEST(Reduce, SoftmaxSpecialValues) {
  Array x = array(std::vector<float>{-INFINITY, 0, -INFINITY, 1000, 1000, -INFINITY}, {2, 3});
  auto s = softmax(x).to_vector<float>();
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_FLOAT_EQ(s[3], 0.5f);  // no overflow from exp(1000)
  EXPECT_EQ(s[5], 0.0f);
  EXPECT_TRUE(std::isnan(softmax(array(std::vector<float>{1, NAN}, {2})).to_vector<float>()[0]));
}

// ---- argmax and argmin ----------------------------------------------------------------

TEST(Reduce, ArgmaxArgminEveryDtypeAxisAndLayout) {
  struct AxisCase {
    Shape shape;
    std::optional<int> axis;
  };
  const std::vector<AxisCase> ac = {{{}, std::nullopt}, {{7}, std::nullopt},    {{7}, 0},       {{3, 5}, 1},
                                    {{3, 5}, -2},       {{3, 5}, std::nullopt}, {{2, 3, 4}, 1}, {{2, 1, 4}, 1},
                                    {{0, 3}, 1},        {{40, 9}, 0},           {{6, 40}, -1},  {{4, 20, 10}, 1}};
  uint64_t seed = 4000;
  for (bool is_max : {true, false}) {
    for (Dtype d : kt::all_dtypes()) {
      for (auto& c : ac) {
        for (Layout l : kLayouts) {
          for (bool keep : {false, true}) {
            // A narrow range makes ties, which must resolve to the first index.
            auto v = kt::random_values(kt::numel(c.shape), d, seed++, -3, 3);
            Array x = kt::with_layout(v, c.shape, d, l);
            Array y = is_max ? argmax(x, c.axis, keep) : argmin(x, c.axis, keep);
            std::string ctx = std::string(is_max ? "argmax " : "argmin ") + dtype_name(d) + " " +
                              detail::shape_str(c.shape) + " axis " + (c.axis ? std::to_string(*c.axis) : "none") +
                              (keep ? " keepdims " : " ") + kt::layout_name(l);
            ASSERT_EQ(y.dtype(), int32) << ctx;
            int nd = static_cast<int>(c.shape.size());
            Shape flat = c.axis ? c.shape : Shape{kt::numel(c.shape)};
            int ax = c.axis ? (*c.axis < 0 ? *c.axis + nd : *c.axis) : 0;
            Shape want_shape =
                c.axis ? reduced_shape(c.shape, {ax}, keep) : (keep ? Shape(static_cast<size_t>(nd), 1) : Shape{});
            ASSERT_EQ(y.shape(), want_shape) << ctx;
            int64_t outer = 1, n = flat[static_cast<size_t>(ax)], inner = 1;
            for (int i = 0; i < ax; ++i) outer *= flat[static_cast<size_t>(i)];
            for (size_t i = static_cast<size_t>(ax) + 1; i < flat.size(); ++i) inner *= flat[i];
            std::vector<double> want;
            for (int64_t o = 0; o < outer; ++o) {
              for (int64_t j = 0; j < inner; ++j) {
                int64_t best = 0;
                for (int64_t k = 1; k < n; ++k) {
                  double e = v[static_cast<size_t>((o * n + k) * inner + j)];
                  double b = v[static_cast<size_t>((o * n + best) * inner + j)];
                  if (is_max ? e > b : e < b) best = k;
                }
                want.push_back(static_cast<double>(best));
              }
            }
            expect_within(y, want, std::vector<double>(want.size(), 0.0), ctx);
          }
        }
      }
    }
  }
}

TEST(Reduce, ArgmaxArgminTreatNaNAsExtreme) {
  for (Dtype d : kt::float_dtypes()) {
    Array x = kt::from_values({1, kNaN, 5, kNaN, -kInf, kInf}, {6}, d);
    EXPECT_EQ(argmax(x).item<int32_t>(), 1) << dtype_name(d);
    EXPECT_EQ(argmin(x).item<int32_t>(), 1) << dtype_name(d);
    Array y = kt::from_values({1, -kInf, kInf, 7}, {4}, d);
    EXPECT_EQ(argmax(y).item<int32_t>(), 2);
    EXPECT_EQ(argmin(y).item<int32_t>(), 1);
    // Column form: NaN in later rows of some columns.
    auto v = kt::random_values(20 * 16, d, 11);
    v[5 * 16 + 3] = kNaN;
    v[7 * 16 + 3] = kNaN;
    v[19 * 16 + 15] = kNaN;
    for (Layout l : kLayouts) {
      Array c = kt::with_layout(v, {20, 16}, d, l);
      auto am = argmax(c, 0).to_vector<int32_t>();
      auto an = argmin(c, 0).to_vector<int32_t>();
      EXPECT_EQ(am[3], 5) << kt::layout_name(l);
      EXPECT_EQ(an[3], 5) << kt::layout_name(l);
      EXPECT_EQ(am[15], 19);
      EXPECT_EQ(an[15], 19);
    }
  }
  // A long row split across threads keeps the first NaN and the first of equal maxima.
  std::vector<float> big(200000, 1.0f);
  big[150000] = 9.0f;
  big[170000] = 9.0f;
  EXPECT_EQ(argmax(array(big, {200000})).item<int32_t>(), 150000);
  big[120000] = NAN;
  big[190000] = NAN;
  EXPECT_EQ(argmax(array(big, {200000})).item<int32_t>(), 120000);
  EXPECT_EQ(argmin(array(big, {200000})).item<int32_t>(), 120000);
  EXPECT_EQ(argmin(array(big, {2, 100000}), 1).to_vector<int32_t>(), (std::vector<int32_t>{0, 20000}));
}

// ---- cumsum -----------------------------------------------------------------------

TEST(Reduce, CumsumEveryDtypeAxisDirectionAndLayout) {
  struct ScanCase {
    Shape shape;
    int axis;
  };
  const std::vector<ScanCase> sc = {{{7}, 0},       {{3, 5}, 1}, {{3, 5}, 0}, {{3, 5}, -1}, {{2, 3, 4}, 1},
                                    {{2, 1, 4}, 1}, {{0, 3}, 0}, {{3, 0}, 1}, {{1}, 0},     {{5, 1100}, 0}};
  uint64_t seed = 6000;
  for (Dtype d : kt::all_dtypes()) {
    for (auto& c : sc) {
      for (Layout l : kLayouts) {
        for (int mode = 0; mode < 4; ++mode) {
          bool reverse = mode & 1, inclusive = (mode & 2) == 0;
          auto v = kt::random_values(kt::numel(c.shape), d, seed++);
          Array y = cumsum(kt::with_layout(v, c.shape, d, l), c.axis, reverse, inclusive);
          std::string ctx = std::string("cumsum ") + dtype_name(d) + " " + detail::shape_str(c.shape) + " axis " +
                            std::to_string(c.axis) + (reverse ? " reverse" : "") + (inclusive ? "" : " exclusive") +
                            " " + kt::layout_name(l);
          ASSERT_EQ(y.dtype(), sum_dtype(d)) << ctx;
          ASSERT_EQ(y.shape(), c.shape) << ctx;
          int nd = static_cast<int>(c.shape.size());
          int ax = c.axis < 0 ? c.axis + nd : c.axis;
          int64_t outer = 1, n = c.shape[static_cast<size_t>(ax)], inner = 1;
          for (int i = 0; i < ax; ++i) outer *= c.shape[static_cast<size_t>(i)];
          for (size_t i = static_cast<size_t>(ax) + 1; i < c.shape.size(); ++i) inner *= c.shape[i];
          std::vector<double> want(v.size()), scale(v.size());
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t j = 0; j < inner; ++j) {
              double acc = 0, acc_abs = 0;
              for (int64_t i = 0; i < n; ++i) {
                int64_t k = reverse ? n - 1 - i : i;
                size_t at = static_cast<size_t>((o * n + k) * inner + j);
                if (inclusive) acc += v[at], acc_abs += std::fabs(v[at]);
                want[at] = acc;
                scale[at] = 2 * acc_abs * static_cast<double>(std::max<int64_t>(1, n / 64));
                if (!inclusive) acc += v[at], acc_abs += std::fabs(v[at]);
              }
            }
          }
          expect_within(y, want, scale, ctx);
        }
      }
    }
  }
}

TEST(Reduce, CumsumSpecialValuesAndWrapping) {
  Array x = array(std::vector<float>{1, INFINITY, 2, NAN, 3}, {5});
  auto c = cumsum(x, 0).to_vector<float>();
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], INFINITY);
  EXPECT_EQ(c[2], INFINITY);
  EXPECT_TRUE(std::isnan(c[3]) && std::isnan(c[4]));
  Array w = array(std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 1}, {2});
  EXPECT_EQ(cumsum(w, 0).to_vector<int32_t>()[1], std::numeric_limits<int32_t>::min());
  // float16 accumulates in float32: 4096 ones do not stall at 2048.
  Array h = full({4096}, 1.0, float16);
  EXPECT_EQ(cumsum(h, 0).to_vector<float>().back(), 4096.0f);
  // A 0-d input has no axis to scan.
  kt::expect_error([] { cumsum(array(1.0f), 0); }, "[cumsum] axis 0 is out of range for an array of rank 0");
}

// ---- errors ---------------------------------------------------------------------

TEST(Reduce, AxisErrors) {
  Array x = zeros({2, 3});
  kt::expect_error([&] { sum(x, {2}); }, "[sum] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { prod(x, {-3}); }, "[prod] axis -3 is out of range for an array of rank 2");
  kt::expect_error([&] { sum(x, {1, -1}); }, "[sum] axis 1 repeated in axes (1,-1)");
  kt::expect_error([&] { mean(x, {0, 0}); }, "[mean] axis 0 repeated in axes (0,0)");
  kt::expect_error([&] { var(x, {5}); }, "[var] axis 5 is out of range for an array of rank 2");
  kt::expect_error([&] { max(x, {0, -2}); }, "[max] axis 0 repeated in axes (0,-2)");
  kt::expect_error([&] { all(x, {3}); }, "[all] axis 3 is out of range for an array of rank 2");
  kt::expect_error([&] { logsumexp(x, {-1, 1}); }, "[logsumexp] axis 1 repeated in axes (-1,1)");
  kt::expect_error([&] { softmax(x, {2}); }, "[softmax] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { argmax(x, 2); }, "[argmax] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { argmin(x, -3); }, "[argmin] axis -3 is out of range for an array of rank 2");
  kt::expect_error([&] { cumsum(x, 2); }, "[cumsum] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { sum(array(1.0f), {0}); }, "[sum] axis 0 is out of range for an array of rank 0");
}

TEST(Reduce, EmptyAxisErrors) {
  Array x = zeros({0, 3});
  kt::expect_error([&] { max(x); }, "[max] cannot reduce over an empty axis (axis 0 of shape (0,3))");
  kt::expect_error([&] { min(x, {0}, true); }, "[min] cannot reduce over an empty axis (axis 0 of shape (0,3))");
  kt::expect_error([&] { argmax(x); }, "[argmax] cannot reduce over an empty axis (axis 0 of shape (0))");
  kt::expect_error(
      [&] {
        argmin(zeros({2, 0}), 1);
      },
      "[argmin] cannot reduce over an empty axis (axis 1 of shape (2,0))");
}

TEST(Reduce, EmptyHandleErrors) {
  Array e;
  kt::expect_error([&] { sum(e); }, "[sum] operation on an empty Array handle");
  kt::expect_error([&] { prod(e); }, "[prod] operation on an empty Array handle");
  kt::expect_error([&] { max(e); }, "[max] operation on an empty Array handle");
  kt::expect_error([&] { min(e); }, "[min] operation on an empty Array handle");
  kt::expect_error([&] { all(e); }, "[all] operation on an empty Array handle");
  kt::expect_error([&] { any(e); }, "[any] operation on an empty Array handle");
  kt::expect_error([&] { mean(e); }, "[mean] operation on an empty Array handle");
  kt::expect_error([&] { var(e); }, "[var] operation on an empty Array handle");
  kt::expect_error([&] { logsumexp(e); }, "[logsumexp] operation on an empty Array handle");
  kt::expect_error([&] { softmax(e); }, "[softmax] operation on an empty Array handle");
  kt::expect_error([&] { argmax(e); }, "[argmax] operation on an empty Array handle");
  kt::expect_error([&] { argmin(e); }, "[argmin] operation on an empty Array handle");
  kt::expect_error([&] { cumsum(e, 0); }, "[cumsum] operation on an empty Array handle");
}

TEST(Reduce, PrimitivesRecheckShapesOnReplay) {
  // A shapeless replay re-runs output_shapes on new shapes.
  Reduce<math::Max> mx({1});
  EXPECT_EQ(mx.output_shapes({{4, 5}})[0], (Shape{4, 1}));
  kt::expect_error(
      [&] {
        mx.output_shapes({{4, 0}});
      },
      "[max] cannot reduce over an empty axis (axis 1 of shape (4,0))");
  kt::expect_error([&] { mx.output_shapes({{4}}); }, "[max] axis 1 is out of range for an array of rank 1");
  Reduce<math::Sum> sm({0, 1});
  EXPECT_EQ(sm.output_shapes({{0, 3}})[0], (Shape{1, 1}));
  ArgMax am(1);
  kt::expect_error([&] { am.output_shapes({{3}}); }, "[argmax] axis 1 is out of range for an array of rank 1");
  kt::expect_error([&] { ArgMin(0).output_shapes({{0}}); },
                   "[argmin] cannot reduce over an empty axis (axis 0 of shape (0))");
  kt::expect_error([&] { CumSum(1, false, true).output_shapes({{3}}); },
                   "[cumsum] axis 1 is out of range for an array of rank 1");
  EXPECT_TRUE(sm.is_equivalent(Reduce<math::Sum>({0, 1})));
  EXPECT_FALSE(sm.is_equivalent(Reduce<math::Sum>({0})));
  EXPECT_FALSE(sm.is_equivalent(Reduce<math::Prod>({0, 1})));
  std::ostringstream os;
  sm.print(os);
  EXPECT_EQ(os.str(), "sum(0,1)");
}

namespace {

// The bits of float32 sums whose form (whole outputs, or pieces of every output combined)
// once depended on the thread count: few long rows, some rows, and columns.
std::vector<uint32_t> sums_of_fixed_arrays() {
  kt::DefaultDevice cpu;  // the CPU kernels' thread pool is what varies
  std::vector<uint32_t> bits;
  struct Case {
    int64_t rows, cols;
    int axis;
  };
  for (Case c : {Case{1, 300000, 1}, Case{3, 300000, 1}, Case{16, 60000, 1}, Case{20000, 600, 0}}) {
    Array x = kt::from_values(kt::random_values(c.rows * c.cols, float32, 40 + static_cast<uint64_t>(c.rows)),
                              {c.rows, c.cols}, float32);
    for (float f : sum(x, {c.axis}).to_vector<float>()) {
      uint32_t b;
      std::memcpy(&b, &f, sizeof b);
      bits.push_back(b);
    }
  }
  return bits;
}

std::vector<uint32_t> read_bits(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint32_t> bits;
  for (uint32_t b; f.read(reinterpret_cast<char*>(&b), sizeof b);) bits.push_back(b);
  return bits;
}

}  // namespace

// A sum rounds the same whatever the number of threads (KILN_NUM_THREADS is read once per
// process, so each count runs in a child).
TEST(Reduce, SumsRoundTheSameAtEveryThreadCount) {
  const std::vector<uint32_t> here = sums_of_fixed_arrays();
  for (int threads : {1, 3}) {
    const std::string out =
        ::testing::TempDir() + "kiln_sums_" + std::to_string(threads) + "_" + std::to_string(::getpid());
    pid_t child = kt::spawn_self("ReduceChild.DISABLED_WriteSums",
                                 {"KILN_NUM_THREADS=" + std::to_string(threads), "KILN_TEST_REDUCE_OUT=" + out});
    ASSERT_GT(child, 0);
    ASSERT_EQ(kt::wait_exit_code(child), 0) << threads << " threads";
    EXPECT_TRUE(read_bits(out) == here) << threads << " threads";
    std::remove(out.c_str());
  }
}

// Run by the test above in a child process; skipped when run directly.
TEST(ReduceChild, DISABLED_WriteSums) {
  const std::string out = config::text(config::Knob::test_reduce_out);
  if (out.empty()) GTEST_SKIP();
  const std::vector<uint32_t> bits = sums_of_fixed_arrays();
  std::ofstream f(out, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bits.data()), static_cast<std::streamsize>(bits.size() * sizeof(uint32_t)));
  ASSERT_TRUE(f.good());
}
