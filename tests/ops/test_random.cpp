// Random numbers: bits, keys, splits and uniforms bit for bit against MLX and JAX (golden
// data from tests/ops/golden/random_golden.py), compiled against eager with the key as an
// input, and each distribution's moments or frequencies against their expected values
// within bounds derived from the sample size (fixed keys: deterministic, never flaky).
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/common/threefry.h"
#include "golden/random_golden.h"
#include "reference.h"

using namespace kiln;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

Array key_of(const std::vector<uint32_t>& k) { return array(k, Shape{2}); }

/* Sample mean and variance. */
std::pair<double, double> moments(const std::vector<double>& v) {
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double mean = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - mean) * (x - mean);
  return {mean, s2 / static_cast<double>(v.size())};
}

/* A count of n Bernoulli(p) trials within 6 standard deviations of n p. */
void expect_count(double count, double n, double p, const std::string& ctx) {
  EXPECT_NEAR(count, n * p, 6 * std::sqrt(n * p * (1 - p)) + 1e-9) << ctx;
}

}  // namespace

// ---- bits against MLX and JAX -------------------------------------------------------------

TEST(Random, KeysMatchMlx) {
  for (auto& c : golden::keys) {
    Array k = random::key(c.seed);
    EXPECT_EQ(k.dtype(), uint32);
    EXPECT_EQ(k.shape(), Shape{2});
    EXPECT_EQ(k.to_vector<uint32_t>(), c.key) << "seed " << c.seed;
  }
}

TEST(Random, BitsMatchJax) {
  for (auto& c : golden::bits) {
    Array b = random::bits({c.n}, key_of(c.key));
    EXPECT_EQ(b.dtype(), uint32);
    EXPECT_EQ(b.to_vector<uint32_t>(), c.bits) << "key " << c.key[0] << "," << c.key[1] << " n " << c.n;
  }
}

TEST(Random, LongDrawsMatchThePairByPairHash) {
  // Long draws take the kernels' blocked and threaded paths; the hash one pair at a time
  // (checked against JAX above) is the reference.
  for (int64_t n : {int64_t{100003}, int64_t{1} << 17, int64_t{70001}}) {
    std::vector<uint32_t> want(static_cast<size_t>(n));
    for (int64_t j = 0; j < (n + 1) / 2; ++j) threefry::pair(7, 0xdeadbeef, n, static_cast<uint64_t>(j), want.data());
    EXPECT_EQ(random::bits({n}, key_of({7, 0xdeadbeef})).to_vector<uint32_t>(), want) << n;
  }
}

TEST(Random, BitsDependOnTheSizeNotTheShape) {
  // The words are laid out over the flattened draw: a shape is a reshape of them.
  auto& c = golden::bits.back();
  EXPECT_EQ(random::bits({3, 11}, key_of(c.key)).to_vector<uint32_t>(), c.bits);
}

TEST(Random, SplitsMatchMlx) {
  for (auto& c : golden::splits) {
    Array s = random::split(key_of(c.key), c.num);
    EXPECT_EQ(s.shape(), (Shape{c.num, 2}));
    EXPECT_EQ(s.to_vector<uint32_t>(), c.keys) << "num " << c.num;
  }
}

TEST(Random, UniformMatchesJax) {
  for (auto& c : golden::uniforms) {
    const int64_t n = static_cast<int64_t>(c.f32.size());
    EXPECT_EQ(random::uniform({n}, key_of(c.key)).to_vector<double>(), c.f32);
    EXPECT_EQ(random::uniform({n}, key_of(c.key), float64).to_vector<double>(), c.f64);
  }
}

TEST(Random, EmptyAndScalarDraws) {
  Array k = random::key(3);
  EXPECT_EQ(random::bits({0}, k).size(), 0);
  EXPECT_EQ(random::uniform({2, 0}, k).shape(), (Shape{2, 0}));
  EXPECT_EQ(random::normal({0, 3}, k).to_vector<float>().size(), 0u);
  // A 0-d draw is the first word of a draw of one.
  EXPECT_EQ(random::bits({}, k).item<uint32_t>(), random::bits({1}, k).to_vector<uint32_t>()[0]);
}

// ---- compile ------------------------------------------------------------------------------

TEST(Random, CompiledEqualsEagerWithTheKeyAsInput) {
  auto draws = [](const std::vector<Array>& in) {
    Array k = in[0];
    Array ks = random::split(k, 3);
    auto key_at = [&](int i) { return reshape(slice(ks, {i, 0}, {i + 1, 2}), {2}); };
    return std::vector<Array>{random::uniform({5, 7}, key_at(0)), random::normal({33}, key_at(1), float64, 1, 2),
                              random::bernoulli(full({4, 4}, 0.5), key_at(2)), random::categorical(in[1], k),
                              random::bits({9}, k)};
  };
  auto compiled = compile(draws);
  Array logits = kt::from_values(kt::random_values(6 * 50, float32, 11), {6, 50}, float32);
  for (uint64_t seed : {1u, 2u, 77u}) {  // one trace, several keys: the key is not a constant
    Array k = random::key(seed);
    auto want = draws({k, logits});
    auto got = compiled({k, logits});
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].dtype(), want[i].dtype()) << i;
      EXPECT_EQ(got[i].to_vector<double>(), want[i].to_vector<double>()) << "output " << i << " seed " << seed;
    }
  }
  // Different keys give different numbers through the same compiled function.
  EXPECT_NE(compiled({random::key(1), logits})[4].to_vector<uint32_t>(),
            compiled({random::key(2), logits})[4].to_vector<uint32_t>());
}

TEST(Random, ShapelessReplaysDrawForTheShapeGiven) {
  // categorical's and bernoulli's draws take their input's shape at every call, not the
  // traced one: one noise row traced must not be broadcast over three rows later.
  auto fn = compile(
      [](const std::vector<Array>& in) {
        return std::vector<Array>{random::categorical(in[0], in[1]), random::bernoulli(sigmoid(in[0]), in[1])};
      },
      {.shapeless = true});
  Array k = random::key(12);
  fn({zeros({1, 50}), k});
  Array logits = zeros({3, 50});
  auto got = fn({logits, k});
  EXPECT_EQ(got[0].to_vector<int>(), random::categorical(logits, k).to_vector<int>());
  EXPECT_EQ(got[1].to_vector<int>(), random::bernoulli(sigmoid(logits), k).to_vector<int>());
  auto rows = got[0].to_vector<int>();
  EXPECT_FALSE(rows[0] == rows[1] && rows[1] == rows[2]) << "the rows drew the same noise";
}

TEST(Random, DrawsMergeOnlyWithEqualKeysAndShapes) {
  auto fn = [](const std::vector<Array>& in) {
    Array a = random::bits({8}, in[0]), b = random::bits({8}, in[0]);  // the same numbers: merged
    Array c = random::bits({8}, in[1]);  // another key
    Array d = random::bits({9}, in[0]);  // another shape
    return std::vector<Array>{a, b, c, d};
  };
  auto out = compile(fn)({random::key(5), random::key(6)});
  EXPECT_EQ(out[0].to_vector<uint32_t>(), out[1].to_vector<uint32_t>());
  EXPECT_NE(out[0].to_vector<uint32_t>(), out[2].to_vector<uint32_t>());
  EXPECT_EQ(out[3].to_vector<uint32_t>(), random::bits({9}, random::key(5)).to_vector<uint32_t>());
}

// ---- distributions ------------------------------------------------------------------------

TEST(Random, UniformMomentsAndRange) {
  const int64_t n = 200000;
  for (Dtype d : kt::float_dtypes()) {
    auto v = random::uniform({n}, random::key(10), d, -2, 3).to_vector<double>();
    const auto [mean, var] = moments(v);
    // Standard errors of the mean (sigma / sqrt n) and variance (about sigma^2 sqrt(0.8 / n)).
    const double sigma2 = 25.0 / 12;
    const double grid = d == bfloat16 ? 5.0 / 128 : d == float16 ? 5.0 / 1024 : 0;  // coarse mantissa grids
    EXPECT_NEAR(mean, 0.5, 6 * std::sqrt(sigma2 / n) + grid) << dtype_name(d);
    EXPECT_NEAR(var, sigma2, 6 * sigma2 * std::sqrt(0.8 / n) + 2 * grid) << dtype_name(d);
    int below_zero = 0;
    for (double x : v) {
      ASSERT_GE(x, -2) << dtype_name(d);
      ASSERT_LT(x, 3) << dtype_name(d);
      below_zero += x < 0;
    }
    expect_count(below_zero, n, 0.4, dtype_name(d));
  }
}

TEST(Random, UniformStaysBelowHighAfterRounding) {
  // float16 from 1 to 1 + 4 ulps: 1 + u (4 ulps) rounds up to the high end for the top u,
  // which becomes the largest float16 below it instead; every value of the range occurs.
  const double ulp = std::ldexp(1.0, -10);
  auto v = random::uniform({4000}, random::key(1), float16, 1, 1 + 4 * ulp).to_vector<double>();
  std::vector<int> seen(4, 0);
  for (double x : v) {
    const double steps = (x - 1) / ulp;
    ASSERT_TRUE(steps == 0 || steps == 1 || steps == 2 || steps == 3) << x;
    seen[static_cast<size_t>(steps)] += 1;
  }
  for (int s : seen) EXPECT_GT(s, 0);
}

TEST(Random, NormalMoments) {
  const int64_t n = 200000;
  for (Dtype d : kt::float_dtypes()) {
    auto v = random::normal({n}, random::key(20), d, 1.5, 2).to_vector<double>();
    const auto [mean, var] = moments(v);
    const double tol16 = d == bfloat16 ? 0.02 : d == float16 ? 0.003 : 0;  // the rounding of each value
    EXPECT_NEAR(mean, 1.5, 6 * 2 / std::sqrt(n) + tol16) << dtype_name(d);
    EXPECT_NEAR(var, 4, 6 * 4 * std::sqrt(2.0 / n) + 4 * tol16) << dtype_name(d);
    int within = 0;  // one sigma: 68.27%
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x)) << dtype_name(d);
      within += std::fabs(x - 1.5) < 2;
    }
    expect_count(within, n, std::erf(1 / std::sqrt(2.0)), dtype_name(d));
  }
}

TEST(Random, NormalTailsAndSymmetry) {
  const int64_t n = 400000;
  auto v = random::normal({n}, random::key(21)).to_vector<double>();
  int beyond2 = 0, positive = 0;
  for (double x : v) beyond2 += std::fabs(x) > 2, positive += x > 0;
  expect_count(beyond2, n, std::erfc(2 / std::sqrt(2.0)), "beyond 2 sigma");
  expect_count(positive, n, 0.5, "positive");
}

TEST(Random, BernoulliFrequencies) {
  const int64_t n = 100000;
  const std::vector<double> ps = {0, 0.3, 0.75, 1};
  for (Dtype d : {float32, float16, float64}) {
    Array p = broadcast_to(kt::from_values(ps, {1, 4}, d), {n, 4});
    Array b = random::bernoulli(p, random::key(30));
    ASSERT_EQ(b.dtype(), bool_);
    ASSERT_EQ(b.shape(), (Shape{n, 4}));
    auto v = b.to_vector<double>();
    for (size_t j = 0; j < ps.size(); ++j) {
      double count = 0;
      for (int64_t i = 0; i < n; ++i) count += v[static_cast<size_t>(i * 4) + j];
      expect_count(count, n, ps[j], std::string(dtype_name(d)) + " p " + std::to_string(ps[j]));
    }
  }
  // Integer and bool probabilities are 0 or 1.
  EXPECT_EQ(random::bernoulli(array({0, 1, 1}), random::key(1)).to_vector<int>(), (std::vector<int>{0, 1, 1}));
}

TEST(Random, CategoricalFrequencies) {
  const int64_t n = 100000;
  const std::vector<double> logits = {0.5, -1, 2, -kInf, 0, 1.25};
  double total = 0;
  for (double l : logits) total += std::exp(l);
  for (Dtype d : {float32, bfloat16, float64}) {
    for (int axis : {1, 0}) {  // n rows of logits, or n columns
      Array x = broadcast_to(kt::from_values(logits, {6}, d), {n, 6});
      if (axis == 0) x = transpose(x);
      Array s = random::categorical(x, random::key(40), axis);
      ASSERT_EQ(s.dtype(), int32);
      ASSERT_EQ(s.shape(), Shape{n});
      std::vector<double> count(6, 0);
      for (int i : s.to_vector<int>()) count[static_cast<size_t>(i)] += 1;
      const std::string ctx = std::string(dtype_name(d)) + " axis " + std::to_string(axis);
      EXPECT_EQ(count[3], 0) << ctx << ": a -inf logit is never drawn";
      for (size_t j = 0; j < logits.size(); ++j) {
        expect_count(count[j], n, std::exp(logits[j]) / total, ctx + " category " + std::to_string(j));
      }
    }
  }
}

TEST(Random, CategoricalIndependentRows) {
  // Rows draw from their own logits: one certain row beside uniform ones.
  Array logits = concatenate({full({1, 8}, -kInf), full({199, 8}, 0.0)}, 0);
  logits = slice_update(logits, full({1, 1}, 0.0), {0, 5}, {1, 6});
  auto v = random::categorical(logits, random::key(41)).to_vector<int>();
  EXPECT_EQ(v[0], 5);
  double fives = 0;
  for (size_t i = 1; i < v.size(); ++i) fives += v[i] == 5;
  expect_count(fives, 199, 1.0 / 8, "uniform rows");
}

// ---- errors -------------------------------------------------------------------------------

TEST(Random, Errors) {
  Array k = random::key(0);
  kt::expect_error([] { random::bits({2}, zeros({2}, int32)); },
                   "[bits] a key is a uint32 array of shape (2); got int32 (2)");
  kt::expect_error([] { random::uniform({2}, zeros({3}, uint32)); },
                   "[uniform] a key is a uint32 array of shape (2); got uint32 (3)");
  kt::expect_error([&] { random::bits({2, -1}, k); }, "[bits] negative dimension in shape (2,-1)");
  kt::expect_error(
      [&] {
        random::bits({1 << 20, 1 << 12}, k);
      },
      "[bits] a draw holds at most 2^32 - 1 words; got 4294967296");
  kt::expect_error([&] { random::split(k, 0); }, "[split] num must be at least 1; got 0");
  kt::expect_error([&] { random::uniform({2}, k, int32); }, "[uniform] dtype must be a floating type; got int32");
  kt::expect_error([&] { random::normal({2}, k, bool_); }, "[normal] dtype must be a floating type; got bool");
  kt::expect_error([&] { random::uniform({2}, k, float32, 1, 1); },
                   "[uniform] needs low < high with a finite range; got low 1, high 1");
  kt::expect_error([&] { random::uniform({2}, k, float32, -3e38, 3e38); },
                   "[uniform] needs low < high with a finite range; got low -3e+38, high 3e+38");
  kt::expect_error(
      [&] {
        random::categorical(zeros({2, 0}), k);
      },
      "[categorical] cannot draw from an empty axis (axis 1 of shape (2,0))");
  kt::expect_error([&] { random::categorical(zeros({2}), k, 1); },
                   "[categorical] axis 1 is out of range for an array of rank 1");
  kt::expect_error([&] { random::bernoulli(Array(), k); }, "[bernoulli] operation on an empty Array handle");
  kt::expect_error([&] { random::bernoulli(zeros({2}), Array()); }, "[bernoulli] operation on an empty Array handle");
}
