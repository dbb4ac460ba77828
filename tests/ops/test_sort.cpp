// Sorting and selection against a reference computed here (a stable sort in float64 with
// NaN last, as numpy.sort): every dtype family, every axis, empty and size-1 axes,
// non-contiguous layouts, ties, NaN and infinities; compiled against eager; a
// vocabulary-wide topk; every error message.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "reference.h"

using namespace kiln;
using kt::Layout;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

bool before(double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); }
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

/* Flat row-major indices of each line of `shape` along `axis`. */
std::vector<std::vector<size_t>> lines(const Shape& shape, int axis) {
  int64_t outer = 1, inner = 1;
  const int64_t n = shape[static_cast<size_t>(axis)];
  for (int i = 0; i < axis; ++i) outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  std::vector<std::vector<size_t>> out;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<size_t> line;
      for (int64_t j = 0; j < n; ++j) line.push_back(static_cast<size_t>((o * n + j) * inner + i));
      out.push_back(line);
    }
  }
  return out;
}

/* Values with ties (halves of small integers), and for floats NaN and infinities. */
std::vector<double> tied_values(int64_t n, Dtype d, uint64_t seed) {
  auto v = kt::random_values(n, d, seed, -6, 6);
  std::mt19937_64 rng(seed);
  for (auto& x : v) {
    if (is_floating(d)) {
      x = std::round(2 * x) / 2;
      const uint64_t r = rng() % 16;
      if (r == 0) x = kNaN;
      if (r == 1) x = kInf;
      if (r == 2) x = -kInf;
    } else if (d != bool_) {
      x = std::round(x / 3);  // fewer distinct values: ties
      if (is_unsigned(d)) x = std::fabs(x);
    }
  }
  return v;
}

/* Positions of a line in stable ascending order (NaN last), or descending with ties in
   position order. */
std::vector<int> order(const std::vector<double>& line, bool descending) {
  std::vector<int> p(line.size());
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(), [&](int a, int b) {
    return descending ? before(line[static_cast<size_t>(b)], line[static_cast<size_t>(a)])
                      : before(line[static_cast<size_t>(a)], line[static_cast<size_t>(b)]);
  });
  return p;
}

struct Case {
  Shape shape;
  int axis;
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {{{0}, 0},       {{1}, -1},      {{9}, 0},        {{3, 0}, 1},      {{0, 4}, 1},
                                      {{4, 9}, 1},    {{4, 9}, 0},    {{2, 3, 17}, 1}, {{2, 3, 17}, -1}, {{5, 64}, -1},
                                      {{1, 1, 1}, 2}, {{3, 700}, -1}, {{700, 3}, 0}};  // long rows: radix
  return c;
}

const std::vector<Dtype>& dtypes() {
  static const std::vector<Dtype> d = {float32, float64, float16, bfloat16, int32, int8, uint8, int64, uint64, bool_};
  return d;
}

std::string describe(const char* op, Dtype d, const Case& c, Layout l) {
  return std::string(op) + " " + dtype_name(d) + " " + ::testing::PrintToString(c.shape) + " axis " +
         std::to_string(c.axis) + " " + kt::layout_name(l);
}

/* Runs check(values, input line, output line index map, ctx) for every case, dtype and layout. */
template <class Check>
void for_each_case(uint64_t seed, Check&& check) {
  for (Dtype d : dtypes()) {
    for (const Case& c : cases()) {
      for (Layout l : {Layout::contiguous, Layout::transposed, Layout::strided}) {
        auto v = tied_values(kt::numel(c.shape), d, seed++);
        Array x = kt::with_layout(v, c.shape, d, l);
        const int axis = c.axis < 0 ? c.axis + static_cast<int>(c.shape.size()) : c.axis;
        check(x, v, c, axis, d, l);
      }
    }
  }
}

std::vector<double> gather(const std::vector<double>& v, const std::vector<size_t>& at) {
  std::vector<double> out;
  for (size_t i : at) out.push_back(v[i]);
  return out;
}

}  // namespace

TEST(Sort, SortAndArgsortEveryDtype) {
  for_each_case(100, [](const Array& x, const std::vector<double>& v, const Case& c, int axis, Dtype d, Layout l) {
    const std::string ctx = describe("sort", d, c, l);
    Array s = sort(x, c.axis), a = argsort(x, c.axis);
    ASSERT_EQ(s.dtype(), d) << ctx;
    ASSERT_EQ(a.dtype(), int32) << ctx;
    ASSERT_EQ(s.shape(), c.shape) << ctx;
    ASSERT_EQ(a.shape(), c.shape) << ctx;
    auto sv = s.to_vector<double>();
    auto av = a.to_vector<int>();
    for (auto& at : lines(c.shape, axis)) {
      auto line = gather(v, at);
      auto p = order(line, false);
      for (size_t j = 0; j < at.size(); ++j) {
        ASSERT_TRUE(same(sv[at[j]], line[static_cast<size_t>(p[j])])) << ctx << " position " << j;
        ASSERT_EQ(av[at[j]], p[j]) << ctx << " position " << j << " (stable)";
      }
    }
  });
}

TEST(Sort, TopkEveryDtype) {
  for_each_case(200, [](const Array& x, const std::vector<double>& v, const Case& c, int axis, Dtype d, Layout l) {
    const int64_t n = c.shape[static_cast<size_t>(axis)];
    for (int64_t k : {int64_t{0}, std::min<int64_t>(n, 1), std::min<int64_t>(n, 3), n}) {
      const std::string ctx = describe("topk", d, c, l) + " k " + std::to_string(k);
      auto [vals, idx] = topk(x, static_cast<int>(k), c.axis);
      Shape want = c.shape;
      want[static_cast<size_t>(axis)] = k;
      ASSERT_EQ(vals.shape(), want) << ctx;
      ASSERT_EQ(idx.dtype(), int32) << ctx;
      ASSERT_EQ(vals.dtype(), d) << ctx;
      auto vv = vals.to_vector<double>();
      auto iv = idx.to_vector<int>();
      auto in_lines = lines(c.shape, axis), out_lines = lines(want, axis);
      for (size_t r = 0; r < in_lines.size(); ++r) {
        auto line = gather(v, in_lines[r]);
        auto p = order(line, true);
        for (size_t j = 0; j < out_lines[r].size(); ++j) {
          ASSERT_EQ(iv[out_lines[r][j]], p[j]) << ctx << " row " << r << " position " << j;
          ASSERT_TRUE(same(vv[out_lines[r][j]], line[static_cast<size_t>(p[j])])) << ctx;
        }
      }
    }
  });
}

TEST(Sort, PartitionAndArgpartitionEveryDtype) {
  for_each_case(300, [](const Array& x, const std::vector<double>& v, const Case& c, int axis, Dtype d, Layout l) {
    const int64_t n = c.shape[static_cast<size_t>(axis)];
    if (n == 0) return;  // no kth exists
    for (int64_t kth : {int64_t{0}, n / 2, n - 1}) {
      const std::string ctx = describe("partition", d, c, l) + " kth " + std::to_string(kth);
      // A negative kth counts from the end.
      Array ap = argpartition(x, static_cast<int>(kth % 2 ? kth - n : kth), c.axis);
      Array pv = partition(x, static_cast<int>(kth), c.axis);
      ASSERT_EQ(ap.dtype(), int32) << ctx;
      ASSERT_EQ(pv.dtype(), d) << ctx;
      ASSERT_EQ(ap.shape(), c.shape) << ctx;
      auto iv = ap.to_vector<int>();
      auto pvv = pv.to_vector<double>();
      for (auto& at : lines(c.shape, axis)) {
        auto line = gather(v, at);
        const double pivot = line[static_cast<size_t>(order(line, false)[static_cast<size_t>(kth)])];
        std::vector<int> seen(static_cast<size_t>(n), 0);
        for (size_t j = 0; j < at.size(); ++j) {
          const int i = iv[at[j]];
          ASSERT_TRUE(i >= 0 && i < n && !seen[static_cast<size_t>(i)]++) << ctx << ": not a permutation";
          // Both results: the pivot at kth, nothing larger before it, nothing smaller after it.
          for (double got : {line[static_cast<size_t>(i)], pvv[at[j]]}) {
            const int64_t pos = static_cast<int64_t>(j);
            if (pos == kth) {
              ASSERT_TRUE(same(got, pivot)) << ctx;
            }
            if (pos < kth) {
              ASSERT_FALSE(before(pivot, got)) << ctx << " position " << j;
            }
            if (pos > kth) {
              ASSERT_FALSE(before(got, pivot)) << ctx << " position " << j;
            }
          }
        }
        // partition's values are the line's values.
        auto part = gather(pvv, at), sorted_part = part, sorted_line = line;
        std::sort(sorted_part.begin(), sorted_part.end(), before);
        std::sort(sorted_line.begin(), sorted_line.end(), before);
        for (size_t j = 0; j < at.size(); ++j) ASSERT_TRUE(same(sorted_part[j], sorted_line[j])) << ctx;
      }
    }
  });
}

TEST(Sort, TopkOfAVocabularyRow) {
  const int64_t vocab = 49152;
  auto v = kt::random_values(2 * vocab, float32, 7, -30, 30);
  v[100] = v[200] = 31;  // a tie at the top: the earlier position first
  Array x = kt::from_values(v, {2, vocab}, float32);
  auto [vals, idx] = topk(x, 40);
  auto iv = idx.to_vector<int>();
  auto vv = vals.to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    std::vector<double> line(v.begin() + r * vocab, v.begin() + (r + 1) * vocab);
    auto p = order(line, true);
    for (size_t j = 0; j < 40; ++j) {
      ASSERT_EQ(iv[static_cast<size_t>(r) * 40 + j], p[j]) << "row " << r << " position " << j;
      ASSERT_EQ(vv[static_cast<size_t>(r) * 40 + j], line[static_cast<size_t>(p[j])]);
    }
  }
  EXPECT_EQ(iv[0], 100);
  EXPECT_EQ(iv[1], 200);
}

TEST(Sort, SpecialValuesOrderAsNumpy) {
  Array x = array(std::vector<float>{NAN, 1, -INFINITY, INFINITY, -0.0f, NAN, 0, -1}, Shape{8});
  auto s = sort(x).to_vector<float>();
  EXPECT_EQ(std::vector<float>(s.begin(), s.begin() + 6), (std::vector<float>{-INFINITY, -1, 0, 0, 1, INFINITY}));
  EXPECT_TRUE(std::isnan(s[6]) && std::isnan(s[7]));
  EXPECT_EQ(argsort(x).to_vector<int>(), (std::vector<int>{2, 7, 4, 6, 1, 3, 0, 5}));
  EXPECT_EQ(topk(x, 3).second.to_vector<int>(), (std::vector<int>{0, 5, 3}));  // NaN counts as largest
}

TEST(Sort, CompiledEqualsEager) {
  auto fn = [](const std::vector<Array>& in) {
    auto [v, i] = topk(in[0], 5);
    return std::vector<Array>{sort(in[0], 0),       argsort(in[0]),        v, i, argpartition(in[0], 3, 0),
                              partition(in[0], -2), sort(exp(in[0]) + 1.0)};
  };
  Array x = kt::from_values(tied_values(6 * 40, float32, 9), {6, 40}, float32);
  auto want = fn({x});
  for (bool shapeless : {false, true}) {
    auto got = compile(fn, {.shapeless = shapeless})({x});
    for (size_t i = 0; i < want.size(); ++i) {
      auto g = got[i].to_vector<double>(), w = want[i].to_vector<double>();
      ASSERT_EQ(g.size(), w.size()) << i;
      for (size_t j = 0; j < g.size(); ++j) ASSERT_TRUE(same(g[j], w[j])) << "output " << i << " element " << j;
    }
  }
  // A shapeless replay checks kth and k against the new shape.
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{topk(in[0], 4).first}; },
                   {.shapeless = true});
  f({zeros({2, 8})})[0].eval();
  kt::expect_error(
      [&] {
        f({zeros({2, 3})})[0].eval();
      },
      "[topk] k 4 is more than the axis holds (3) (a shapeless function replays the sizes its trace "
      "fixed, such as a reshape target or topk's k; derive them from the inputs' shapes, or give "
      "reshape -1)");
}

TEST(Sort, Errors) {
  Array x = zeros({3, 4});
  kt::expect_error([&] { topk(x, 5); }, "[topk] k 5 is out of range for an axis of size 4");
  kt::expect_error([&] { topk(x, -1, 0); }, "[topk] k -1 is out of range for an axis of size 3");
  kt::expect_error([&] { argpartition(x, 4); }, "[argpartition] kth 4 is out of range for an axis of size 4");
  kt::expect_error([&] { partition(x, -4, 0); }, "[partition] kth -4 is out of range for an axis of size 3");
  kt::expect_error([&] { partition(zeros({2, 0}), 0); }, "[partition] kth 0 is out of range for an axis of size 0");
  kt::expect_error([] { sort(scalar(1.0, float32)); }, "[sort] axis -1 is out of range for an array of rank 0");
  kt::expect_error([&] { argsort(x, 2); }, "[argsort] axis 2 is out of range for an array of rank 2");
  kt::expect_error([] { sort(Array()); }, "[sort] operation on an empty Array handle");
  kt::expect_error([] { topk(Array(), 1); }, "[topk] operation on an empty Array handle");
  kt::expect_error([] { argpartition(Array(), 0); }, "[argpartition] operation on an empty Array handle");
}
