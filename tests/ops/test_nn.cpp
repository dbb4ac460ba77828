// rms_norm, layer_norm, rope, scaled_dot_product_attention, the dynamic, in-place
// slice_update and the batched step's cache_attention (rope, cache writes, attention) against
// float64 references built in the test, and against golden data from MLX
// (golden/make_llm_ops_golden.py).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "core/stats.h"
#include "golden/llm_ops_golden.h"
#include "nn_ref.h"
#include "ops/nn.h"

using namespace kiln;

namespace {

std::string printed(const Primitive& p) {
  std::ostringstream os;
  p.print(os);
  return os.str();
}

std::vector<double> ones_scale(size_t n) { return std::vector<double>(n, 1.0); }

/* Per-element tolerance scale: |want| plus a floor. */
std::vector<double> magnitude(const std::vector<double>& want, double floor) {
  std::vector<double> s(want.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = std::fabs(want[i]) + floor;
  return s;
}

std::vector<double> rms_norm_ref(const std::vector<double>& x, const std::vector<double>* w, size_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
    double inv = 1 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (size_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * (w ? (*w)[i] : 1.0);
  }
  return y;
}

std::vector<double> layer_norm_ref(const std::vector<double>& x, const std::vector<double>* w,
                                   const std::vector<double>* b, size_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; ++i) mean += x[r * n + i];
    mean /= static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
    double inv = 1 / std::sqrt(var / static_cast<double>(n) + eps);
    for (size_t i = 0; i < n; ++i) {
      y[r * n + i] = (x[r * n + i] - mean) * inv * (w ? (*w)[i] : 1.0) + (b ? (*b)[i] : 0.0);
    }
  }
  return y;
}

}  // namespace

// ---- norms ------------------------------------------------------------------------------
TEST(Norms, AgainstFloat64ShapesDtypesAndLayouts) {
  // On a GPU: rows held in registers up to 4096 values (a block a row), longer ones in passes.
  for (Shape s :
       {Shape{3, 32}, Shape{1, 4096}, Shape{2, 1000}, Shape{2, 3, 4099}, Shape{1, 1}, Shape{5, 1}, Shape{7}}) {
    const size_t n = static_cast<size_t>(s.back());
    for (Dtype d : kt::float_dtypes()) {
      for (kt::Layout l : {kt::Layout::contiguous, kt::Layout::strided}) {
        std::string ctx = detail::shape_str(s) + " " + dtype_name(d) + " " + kt::layout_name(l);
        auto xv = kt::random_values(kt::numel(s), d, 11);
        auto wv = kt::random_values(static_cast<int64_t>(n), d, 12);
        auto bv = kt::random_values(static_cast<int64_t>(n), d, 13);
        Array x = kt::with_layout(xv, s, d, l);
        Array w = kt::from_values(wv, {static_cast<int64_t>(n)}, d),
              b = kt::from_values(bv, {static_cast<int64_t>(n)}, d);
        double tol = std::max(kt::rel_tol(d), 1e-6) * 2;
        auto want = rms_norm_ref(xv, &wv, n, 1e-5);
        kt::expect_within(rms_norm(x, w, 1e-5f), want, magnitude(want, 1e-3), tol, "rms_norm " + ctx);
        want = rms_norm_ref(xv, nullptr, n, 1e-3);
        kt::expect_within(rms_norm(x, std::nullopt, 1e-3f), want, magnitude(want, 1e-3), tol,
                          "rms_norm no weight " + ctx);
        want = layer_norm_ref(xv, &wv, &bv, n, 1e-5);
        kt::expect_within(layer_norm(x, w, b, 1e-5f), want, magnitude(want, 4.0), tol, "layer_norm " + ctx);
        want = layer_norm_ref(xv, nullptr, &bv, n, 1e-5);
        kt::expect_within(layer_norm(x, std::nullopt, b, 1e-5f), want, magnitude(want, 4.0), tol,
                          "layer_norm bias " + ctx);
      }
    }
  }
}

TEST(Norms, MatchMlx) {
  Array x = array(golden::norm_x, {3, 32}), w = array(golden::norm_w, {32}), b = array(golden::norm_b, {32});
  auto want = kt::as_doubles(golden::rms_norm_out);
  kt::expect_within(rms_norm(x, w, 1e-5f), want, magnitude(want, 1e-3), 4e-6, "rms_norm");
  want = kt::as_doubles(golden::layer_norm_out);
  kt::expect_within(layer_norm(x, w, b, 1e-5f), want, magnitude(want, 4.0), 4e-6, "layer_norm");
}

TEST(Norms, NaNAndInfinityStayInTheirRow) {
  auto xv = kt::random_values(3 * 16, float32, 21);
  xv[2] = std::nan("");
  xv[16 + 3] = INFINITY;
  Array x = kt::from_values(xv, {3, 16}, float32);
  for (const Array& y : {rms_norm(x, std::nullopt, 1e-5f), layer_norm(x, std::nullopt, std::nullopt, 1e-5f)}) {
    auto v = y.to_vector<double>();
    for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(v[static_cast<size_t>(i)])) << i;
    for (int i = 32; i < 48; ++i) EXPECT_TRUE(std::isfinite(v[static_cast<size_t>(i)])) << i;
  }
  // As the float64 reference: inf / inf is NaN at the infinity, the rest of its row scaled by 0.
  auto want = rms_norm_ref(xv, nullptr, 16, 1e-5);
  kt::expect_within(rms_norm(x, std::nullopt, 1e-5f), want, magnitude(want, 1e-3), 4e-6, "rms_norm specials");
}

TEST(Norms, OneKernelEagerAndCompiledEqualsEager) {
  auto xv = kt::random_values(4 * 300, float32, 31);
  Array x = kt::from_values(xv, {4, 300}, float32), r = kt::from_values(xv, {4, 300}, float32) * 0.5f;
  Array w = kt::from_values(kt::random_values(300, float32, 32), {300}, float32);
  eval({x, r, w});
  reset_stats();
  rms_norm(x, w, 1e-5f).eval();
  EXPECT_EQ(stats().kernels_launched, 1u);
  for (Dtype d : {float32, bfloat16}) {
    Array xd = astype(x, d), rd = astype(r, d), wd = astype(w, d), bd = astype(w * -0.5f, d);
    auto f = compile([](const Array& a, const Array& b, const Array& c) { return rms_norm(a + b, c, 1e-5f) * 2.0f; });
    kt::expect_same_bits(f(xd, rd, wd), rms_norm(xd + rd, wd, 1e-5f) * 2.0f, std::string("rms ") + dtype_name(d));
    auto g = compile([](const Array& a, const Array& b, const Array& c) { return layer_norm(a, b, c, 1e-6f); });
    kt::expect_same_bits(g(xd, wd, bd), layer_norm(xd, wd, bd, 1e-6f), std::string("layer ") + dtype_name(d));
  }
}

TEST(Norms, ErrorsPrintAndEquivalence) {
  kt::expect_error(
      [] {
        rms_norm(ones({2, 4}), ones({3}), 1e-5f);
      },
      "[rms_norm] weight must be a vector as long as the last axis of x (2,4), got (3)");
  kt::expect_error(
      [] {
        rms_norm(ones({2, 4}, int32), std::nullopt, 1e-5f);
      },
      "[rms_norm] x must be a floating-point array, got int32");
  kt::expect_error([] { rms_norm(ones({}), std::nullopt, 1e-5f); }, "[rms_norm] x must have at least 1 dimension");
  kt::expect_error(
      [] {
        layer_norm(ones({2, 4}), ones({4}), ones({2, 4}), 1e-5f);
      },
      "[layer_norm] bias must be a vector as long as the last axis of x (2,4), got (2,4)");
  EXPECT_TRUE(RmsNorm(1e-5f, true).is_equivalent(RmsNorm(1e-5f, true)));
  EXPECT_FALSE(RmsNorm(1e-5f, true).is_equivalent(RmsNorm(1e-6f, true)));
  EXPECT_FALSE(RmsNorm(1e-5f, true).is_equivalent(RmsNorm(1e-5f, false)));
  EXPECT_FALSE(LayerNorm(1e-5f, true, true).is_equivalent(LayerNorm(1e-5f, true, false)));
  EXPECT_FALSE(LayerNorm(1e-5f, true, true).is_equivalent(LayerNorm(1e-5f, false, true)));
  EXPECT_EQ(printed(RmsNorm(0.5f, true)), "rms_norm(eps=0.5,weight)");
  EXPECT_EQ(printed(LayerNorm(0.25f, false, true)), "layer_norm(eps=0.25,bias)");
}

// ---- rope -------------------------------------------------------------------------------
namespace {

/* x [B, H, L, D] row-major; offsets one per batch row (or one for all). */
std::vector<double> rope_ref(const std::vector<double>& x, const Shape& s, int dims, bool traditional, double base,
                             double scale, const std::vector<int>& offsets, const std::vector<double>* freqs) {
  std::vector<double> y = x;
  const int64_t B = s[0], H = s[1], L = s[2], D = s[3], half = dims / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t l = 0; l < L; ++l) {
        const size_t row = static_cast<size_t>(((b * H + h) * L + l) * D);
        const double pos = (offsets[offsets.size() == 1 ? 0 : static_cast<size_t>(b)] + l) * scale;
        for (int64_t i = 0; i < half; ++i) {
          double inv = freqs ? 1.0 / (*freqs)[static_cast<size_t>(i)] : std::pow(base, -2.0 * i / dims);
          size_t a = row + static_cast<size_t>(traditional ? 2 * i : i);
          size_t c = row + static_cast<size_t>(traditional ? 2 * i + 1 : i + half);
          double th = pos * inv;
          y[a] = x[a] * std::cos(th) - x[c] * std::sin(th);
          y[c] = x[a] * std::sin(th) + x[c] * std::cos(th);
        }
      }
    }
  }
  return y;
}

}  // namespace

TEST(Rope, AgainstFloat64) {
  const Shape s{2, 3, 5, 24};
  for (Dtype d : {float32, float16, bfloat16, float64}) {
    for (bool trad : {false, true}) {
      for (int dims : {24, 16}) {
        for (kt::Layout l : {kt::Layout::contiguous, kt::Layout::strided}) {
          std::string ctx = std::string(dtype_name(d)) + (trad ? " trad" : " half") + " dims " + std::to_string(dims) +
                            " " + kt::layout_name(l);
          auto xv = kt::random_values(kt::numel(s), d, 41);
          Array x = kt::with_layout(xv, s, d, l);
          double tol = std::max(kt::rel_tol(d), 1e-6) * 2;
          auto want = rope_ref(xv, s, dims, trad, 10000, 0.5, {9}, nullptr);
          kt::expect_within(rope(x, dims, trad, 10000.0f, 0.5f, 9), want, magnitude(want, 1), tol, "int offset " + ctx);
          want = rope_ref(xv, s, dims, trad, 500, 1, {3, 100}, nullptr);
          kt::expect_within(rope(x, dims, trad, 500.0f, 1.0f, array({3, 100})), want, magnitude(want, 1), tol,
                            "batched offsets " + ctx);
          std::vector<double> fv = kt::random_values(dims / 2, float32, 42, 1, 50);
          want = rope_ref(xv, s, dims, trad, 0, 1, {4}, &fv);
          kt::expect_within(rope(x, dims, trad, std::nullopt, 1.0f, 4, kt::from_values(fv, {dims / 2}, float32)), want,
                            magnitude(want, 1), tol, "freqs " + ctx);
        }
      }
    }
  }
}

TEST(Rope, MatchesMlx) {
  Array x = array(golden::rope_x, {2, 1, 5, 16});
  struct Case {
    bool trad;
    int dims;
    const std::vector<float>* want;
  };
  for (Case c : {Case{false, 16, &golden::rope_half_d16}, Case{false, 8, &golden::rope_half_d8},
                 Case{true, 16, &golden::rope_trad_d16}, Case{true, 8, &golden::rope_trad_d8}}) {
    auto want = kt::as_doubles(*c.want);
    kt::expect_within(rope(x, c.dims, c.trad, 10000.0f, 0.5f, 7), want, ones_scale(want.size()), 2e-6,
                      "dims " + std::to_string(c.dims));
  }
  auto want = kt::as_doubles(golden::rope_with_freqs);
  kt::expect_within(rope(x, 16, false, std::nullopt, 1.0f, 3, array(golden::rope_freqs, {8})), want,
                    ones_scale(want.size()), 2e-6, "freqs");
}

TEST(Rope, CompiledTakesTheOffsetAsAnInput) {
  auto xv = kt::random_values(2 * 4 * 1 * 64, float32, 43);
  Array x = kt::from_values(xv, {2, 4, 1, 64}, float32);
  auto f = compile([](const Array& a, const Array& off) { return rope(a * 1.5f, 64, false, 10000.0f, 1.0f, off); });
  reset_stats();
  for (int t : {0, 1, 4095}) {
    Array off = array(static_cast<int32_t>(t));
    kt::expect_same_bits(f(x, off), rope(x * 1.5f, 64, false, 10000.0f, 1.0f, t), "offset " + std::to_string(t));
  }
  EXPECT_EQ(stats().traces, 1u);
}

TEST(Rope, ErrorsPrintAndEquivalence) {
  Array x = ones({2, 3, 4, 8});
  kt::expect_error([&] { rope(x, 7, false, 10000.0f, 1.0f, 0); },
                   "[rope] dims must be even, positive and at most the last axis of x (2,3,4,8), got 7");
  kt::expect_error([&] { rope(x, 10, false, 10000.0f, 1.0f, 0); },
                   "[rope] dims must be even, positive and at most the last axis of x (2,3,4,8), got 10");
  kt::expect_error([&] { rope(ones({8}), 8, false, 10000.0f, 1.0f, 0); },
                   "[rope] x must have at least 2 dimensions [..., L, D], got (8)");
  kt::expect_error(
      [&] {
        rope(x, 8, false, 10000.0f, 1.0f, array({1, 2, 3}));
      },
      "[rope] offset must be a scalar or hold one position per batch row (x (2,3,4,8)), got shape (3)");
  kt::expect_error([&] { rope(x, 8, false, 10000.0f, 1.0f, array(1.5f)); }, "[rope] offset must be int32, got float32");
  kt::expect_error([&] { rope(x, 8, false, std::nullopt, 1.0f, 0); }, "[rope] give exactly one of base and freqs");
  kt::expect_error([&] { rope(x, 8, false, std::nullopt, 1.0f, 0, ones({3})); },
                   "[rope] freqs must be a vector of dims/2 = 4 values, got shape (3)");
  EXPECT_TRUE(Rope(8, false, 10000.0f, 1.0f, false).is_equivalent(Rope(8, false, 10000.0f, 1.0f, false)));
  EXPECT_FALSE(Rope(8, false, 10000.0f, 1.0f, false).is_equivalent(Rope(8, true, 10000.0f, 1.0f, false)));
  EXPECT_FALSE(Rope(8, false, 10000.0f, 1.0f, false).is_equivalent(Rope(6, false, 10000.0f, 1.0f, false)));
  EXPECT_FALSE(Rope(8, false, 10000.0f, 1.0f, false).is_equivalent(Rope(8, false, 500.0f, 1.0f, false)));
  EXPECT_FALSE(Rope(8, false, 10000.0f, 1.0f, false).is_equivalent(Rope(8, false, 10000.0f, 2.0f, false)));
  EXPECT_FALSE(Rope(8, false, std::nullopt, 1.0f, true).is_equivalent(Rope(8, false, 1.0f, 1.0f, true)));
  EXPECT_EQ(printed(Rope(8, true, 10000.0f, 0.5f, false)), "rope(dims=8,traditional,base=10000,scale=0.5)");
}

// ---- scaled_dot_product_attention ---------------------------------------------------------
namespace {

struct AttnCase {
  int64_t b, hq, hkv, lq, lk, d, dv;
};

/* Naive float64 attention; mask_at(b, h, i, j) gives {seen, added}. */
template <class MaskAt>
std::vector<double> attention_ref(const AttnCase& c, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, double scale, bool causal,
                                  const std::vector<int>* lengths, MaskAt&& mask_at) {
  std::vector<double> out(static_cast<size_t>(c.b * c.hq * c.lq * c.dv), 0.0);
  const int64_t group = c.hq / c.hkv;
  for (int64_t b = 0; b < c.b; ++b) {
    const int64_t valid = lengths ? (*lengths)[static_cast<size_t>(b)] : c.lk;
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < c.lq; ++i) {
        std::vector<double> s(static_cast<size_t>(c.lk), -INFINITY);
        double mx = -INFINITY;
        for (int64_t j = 0; j < valid; ++j) {
          if (causal && j > i + valid - c.lq) continue;
          auto [seen, added] = mask_at(b, h, i, j);
          if (!seen) continue;
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e) {
            dot += q[static_cast<size_t>(((b * c.hq + h) * c.lq + i) * c.d + e)] *
                   k[static_cast<size_t>(((b * c.hkv + hk) * c.lk + j) * c.d + e)];
          }
          s[static_cast<size_t>(j)] = dot * scale + added;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        if (mx == -INFINITY) continue;
        double sum = 0;
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < c.lk; ++j) {
          for (int64_t e = 0; e < c.dv; ++e) {
            out[static_cast<size_t>(((b * c.hq + h) * c.lq + i) * c.dv + e)] +=
                s[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(((b * c.hkv + hk) * c.lk + j) * c.dv + e)];
          }
        }
      }
    }
  }
  return out;
}

std::pair<bool, double> no_mask(int64_t, int64_t, int64_t, int64_t) { return {true, 0.0}; }

}  // namespace

TEST(Attention, AgainstFloat64GroupedCausalLengthsAndMasks) {
  for (AttnCase c :
       {AttnCase{1, 4, 2, 1, 70, 8, 8}, AttnCase{2, 4, 4, 5, 9, 16, 8}, AttnCase{1, 2, 1, 130, 130, 8, 8},
        AttnCase{2, 8, 2, 3, 200, 32, 32}, AttnCase{1, 1, 1, 1, 1, 4, 4},
        // Heads of 64 and 128 (the GPU's tensor-core kernel): decoding, short and long prompts.
        AttnCase{1, 8, 2, 1, 300, 128, 128}, AttnCase{2, 4, 4, 9, 70, 128, 128}, AttnCase{1, 4, 2, 37, 150, 64, 64},
        // Over 512 keys: the GPU splits the keys between blocks and merges the splits (decoding
        // on sm_90: a cluster of 16 blocks a head for 2 heads, of 8 for 12).
        AttnCase{1, 8, 2, 1, 1300, 128, 128}, AttnCase{2, 4, 2, 2, 1100, 16, 16},
        AttnCase{1, 12, 12, 1, 600, 64, 64}}) {
    for (Dtype d : {float32, bfloat16, float16}) {
      std::ostringstream ctx;
      ctx << "B" << c.b << " Hq" << c.hq << " Hkv" << c.hkv << " Lq" << c.lq << " Lk" << c.lk << " " << dtype_name(d);
      auto qv = kt::random_values(c.b * c.hq * c.lq * c.d, d, 51, -1, 1);
      auto kv = kt::random_values(c.b * c.hkv * c.lk * c.d, d, 52, -1, 1);
      auto vv = kt::random_values(c.b * c.hkv * c.lk * c.dv, d, 53);
      Array q = kt::from_values(qv, {c.b, c.hq, c.lq, c.d}, d);
      Array k = kt::from_values(kv, {c.b, c.hkv, c.lk, c.d}, d);
      Array v = kt::from_values(vv, {c.b, c.hkv, c.lk, c.dv}, d);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.d)), tol = std::max(kt::rel_tol(d), 2e-6) * 4;
      auto mag = [&](const std::vector<double>& w) { return magnitude(w, 1.0); };
      auto want = attention_ref(c, qv, kv, vv, scale, false, nullptr, no_mask);
      kt::expect_within(scaled_dot_product_attention(q, k, v, static_cast<float>(scale)), want, mag(want), tol,
                        "plain " + ctx.str());
      want = attention_ref(c, qv, kv, vv, scale, true, nullptr, no_mask);
      kt::expect_within(scaled_dot_product_attention(q, k, v, static_cast<float>(scale), std::nullopt, true), want,
                        mag(want), tol, "causal " + ctx.str());
      std::vector<int> lengths;
      for (int64_t b = 0; b < c.b; ++b) lengths.push_back(static_cast<int>(std::max<int64_t>(c.lk - 3 * b - 1, 1)));
      Array kl = array(std::vector<int32_t>(lengths.begin(), lengths.end()), {c.b});
      want = attention_ref(c, qv, kv, vv, scale, true, &lengths, no_mask);
      kt::expect_within(scaled_dot_product_attention(q, k, v, static_cast<float>(scale), std::nullopt, true, kl), want,
                        mag(want), tol, "causal lengths " + ctx.str());
      // A boolean mask [Lq, Lk] and an additive one [B, 1, Lq, Lk], broadcast over the rest.
      auto keep = kt::random_values(c.lq * c.lk, bool_, 54);
      auto add = kt::random_values(c.b * c.lq * c.lk, d, 55, -2, 2);
      want = attention_ref(c, qv, kv, vv, scale, false, nullptr, [&](int64_t, int64_t, int64_t i, int64_t j) {
        return std::pair{keep[static_cast<size_t>(i * c.lk + j)] != 0, 0.0};
      });
      Array keep_a = astype(kt::from_values(keep, {c.lq, c.lk}, float32), bool_);
      kt::expect_within(scaled_dot_product_attention(q, k, v, static_cast<float>(scale), keep_a), want, mag(want), tol,
                        "bool mask " + ctx.str());
      want = attention_ref(c, qv, kv, vv, scale, false, &lengths, [&](int64_t b, int64_t, int64_t i, int64_t j) {
        return std::pair{true, add[static_cast<size_t>((b * c.lq + i) * c.lk + j)]};
      });
      kt::expect_within(scaled_dot_product_attention(q, k, v, static_cast<float>(scale),
                                                     kt::from_values(add, {c.b, 1, c.lq, c.lk}, d), false, kl),
                        want, mag(want), tol * 2, "additive mask lengths " + ctx.str());
    }
  }
}

TEST(Attention, MatchesMlx) {
  Array q = array(golden::sdpa_q, {1, 4, 3, 8}), k = array(golden::sdpa_k, {1, 2, 6, 8}),
        v = array(golden::sdpa_v, {1, 2, 6, 8});
  auto want = kt::as_doubles(golden::sdpa_causal);
  kt::expect_within(scaled_dot_product_attention(q, k, v, 0.4f, std::nullopt, true), want, ones_scale(want.size()),
                    4e-6, "causal");
  want = kt::as_doubles(golden::sdpa_additive);
  kt::expect_within(scaled_dot_product_attention(q, k, v, 0.4f, array(golden::sdpa_mask, {3, 6})), want,
                    ones_scale(want.size()), 4e-6, "additive");
}

TEST(Attention, KeysPastTheLengthAreNeverReadAndNaNStaysInItsRow) {
  AttnCase c{2, 2, 1, 2, 100, 8, 8};
  auto qv = kt::random_values(c.b * c.hq * c.lq * c.d, float32, 61);
  auto kv = kt::random_values(c.b * c.hkv * c.lk * c.d, float32, 62);
  auto vv = kt::random_values(c.b * c.hkv * c.lk * c.dv, float32, 63);
  std::vector<int> lengths{40, 100};
  auto clean = attention_ref(c, qv, kv, vv, 0.3, false, &lengths, no_mask);
  for (int64_t j = 40; j < c.lk; ++j) {  // garbage past batch row 0's length
    for (int64_t e = 0; e < c.d; ++e) kv[static_cast<size_t>(j * c.d + e)] = std::nan("");
    for (int64_t e = 0; e < c.dv; ++e) vv[static_cast<size_t>(j * c.dv + e)] = INFINITY;
  }
  qv[static_cast<size_t>((1 * c.hq + 1) * c.lq * c.d)] = std::nan("");  // batch 1, head 1, row 0
  Array out = scaled_dot_product_attention(
      kt::from_values(qv, {c.b, c.hq, c.lq, c.d}, float32), kt::from_values(kv, {c.b, c.hkv, c.lk, c.d}, float32),
      kt::from_values(vv, {c.b, c.hkv, c.lk, c.dv}, float32), 0.3f, std::nullopt, false, array({40, 100}));
  auto got = out.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool nan_row = i / static_cast<size_t>(c.dv) == static_cast<size_t>((1 * c.hq + 1) * c.lq);
    if (nan_row) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
    } else {
      EXPECT_NEAR(got[i], clean[i], 1e-5 * (std::fabs(clean[i]) + 4)) << i;
    }
  }
}

TEST(Attention, CompiledEqualsEagerAndErrors) {
  AttnCase c{1, 4, 2, 6, 6, 8, 8};
  Array q = kt::from_values(kt::random_values(c.b * c.hq * c.lq * c.d, float32, 71), {1, 4, 6, 8}, float32);
  Array k = kt::from_values(kt::random_values(c.b * c.hkv * c.lk * c.d, float32, 72), {1, 2, 6, 8}, float32);
  Array v = kt::from_values(kt::random_values(c.b * c.hkv * c.lk * c.dv, float32, 73), {1, 2, 6, 8}, float32);
  auto f = compile([](const Array& a, const Array& b, const Array& e) {
    return scaled_dot_product_attention(a * 2.0f, b, e, 0.25f, std::nullopt, true) + 1.0f;
  });
  kt::expect_same_bits(f(q, k, v), scaled_dot_product_attention(q * 2.0f, k, v, 0.25f, std::nullopt, true) + 1.0f,
                       "causal");
  const char* op = "[scaled_dot_product_attention] ";
  kt::expect_error(
      [&] {
        scaled_dot_product_attention(ones({4, 6, 8}), k, v, 1.0f);
      },
      std::string(op) + "q, k and v must be 4-D [B, H, L, D], got (4,6,8), (1,2,6,8), (1,2,6,8)");
  kt::expect_error(
      [&] {
        scaled_dot_product_attention(ones({1, 3, 6, 8}), k, v, 1.0f);
      },
      std::string(op) + "the query heads (3) must be a multiple of the key/value heads (2)");
  kt::expect_error(
      [&] {
        scaled_dot_product_attention(q, ones({1, 2, 6, 4}), v, 1.0f);
      },
      std::string(op) +
          "shapes do not agree: q (1,4,6,8), k (1,2,6,4), v (1,2,6,8) (batch and head size "
          "of q and k, heads and length of k and v must match)");
  kt::expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, 1.0f, ones({5, 6}));
      },
      std::string(op) + "mask of shape (5,6) does not broadcast to the scores' shape (1,4,6,6)");
  kt::expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, 1.0f, ones({6, 6}, int32));
      },
      std::string(op) + "mask must be boolean or floating-point, got int32");
  kt::expect_error(
      [&] {
        scaled_dot_product_attention(q, k, v, 1.0f, std::nullopt, false, array({1, 2}));
      },
      std::string(op) + "key_lengths must hold one length per batch row (1), got shape (2)");
  kt::expect_error([&] { scaled_dot_product_attention(q, astype(k, float16), v, 1.0f); },
                   std::string(op) + "q, k and v must share a dtype, got float32, float16, float32");
  using S = ScaledDotProductAttention;
  EXPECT_TRUE(S(0.5f, S::Mask::none, true, false).is_equivalent(S(0.5f, S::Mask::none, true, false)));
  EXPECT_FALSE(S(0.5f, S::Mask::none, true, false).is_equivalent(S(0.25f, S::Mask::none, true, false)));
  EXPECT_FALSE(S(0.5f, S::Mask::none, true, false).is_equivalent(S(0.5f, S::Mask::keep, true, false)));
  EXPECT_FALSE(S(0.5f, S::Mask::none, true, false).is_equivalent(S(0.5f, S::Mask::none, false, false)));
  EXPECT_FALSE(S(0.5f, S::Mask::none, true, false).is_equivalent(S(0.5f, S::Mask::none, true, true)));
  EXPECT_EQ(printed(S(0.5f, S::Mask::additive, true, true)),
            "scaled_dot_product_attention(scale=0.5,mask=add,causal,key_lengths)");
}

// ---- slice_update with an array start, in place -------------------------------------------
TEST(DynamicSliceUpdate, ValuesCastsAndErrors) {
  auto av = kt::random_values(2 * 3 * 10 * 4, float32, 81);
  auto uv = kt::random_values(2 * 3 * 2 * 4, float16, 82);
  Array a = kt::from_values(av, {2, 3, 10, 4}, float32);
  Array u = kt::from_values(uv, {2, 3, 2, 4}, float16);  // cast to a's dtype
  Array y = slice_update(a, u, array({7}), {-2});
  auto want = av;
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t e = 0; e < 4; ++e) {
        want[static_cast<size_t>((i * 10 + 7 + t) * 4 + e)] = uv[static_cast<size_t>((i * 2 + t) * 4 + e)];
      }
    }
  }
  kt::expect_within(y, want, ones_scale(want.size()), 0, "values");
  EXPECT_EQ(a.to_vector<double>(), av);  // the input is still held here: copied, not overwritten
  kt::expect_error([&] { slice_update(a, u, array({9}), {2}).eval(); },
                   "[slice_update] start 9 on axis 2 puts the update of length 2 outside the axis of length 10");
  kt::expect_error(
      [&] {
        slice_update(a, u, array({1, 2}), {2});
      },
      "[slice_update] start must be a vector of one index per axis (1), got shape (2)");
  kt::expect_error([&] { slice_update(a, u, array({1}), {4}); },
                   "[slice_update] axis 4 is out of range for an array of rank 4");
  kt::expect_error([&] { slice_update(a, u, array({1.0f}), {2}); }, "[slice_update] start must be int32, got float32");
  kt::expect_error(
      [&] {
        slice_update(a, ones({3, 2, 4}), array({1}), {2});
      },
      "[slice_update] the update of shape (3,2,4) must have the rank of the array (2,3,10,4)");
  EXPECT_EQ(printed(DynamicSliceUpdate({0, 2})), "dynamic_slice_update(0,2)");
  EXPECT_FALSE(DynamicSliceUpdate({0, 2}).is_equivalent(DynamicSliceUpdate({2})));
}

// Appending one token to a 4096-token cache moves one token's bytes, eagerly and compiled.
TEST(DynamicSliceUpdate, AppendsInPlace) {
  const Shape cache_shape{1, 8, 4096, 64}, token{1, 8, 1, 64};
  const uint64_t token_bytes = 8 * 64 * 4;
  Array cache = kt::from_values(kt::random_values(kt::numel(cache_shape), float32, 91), cache_shape, float32);
  cache.eval();
  const void* data = cache.tensor().buffer->data();
  for (int t = 0; t < 3; ++t) {
    Array tok = full(token, static_cast<double>(t + 1));
    tok.eval();
    detail::counters().layout_bytes_copied = 0;
    cache = slice_update(cache, tok, array({t}), {2});
    cache.eval();
    EXPECT_EQ(cache.tensor().buffer->data(), data) << t;
    EXPECT_EQ(detail::counters().layout_bytes_copied.load(), token_bytes) << t;
  }
  auto step = compile([](const Array& c, const Array& tk, const Array& pos) {
    return slice_update(c, tk * 2.0f, reshape(pos, {1}), {2});
  });
  for (int t = 3; t < 6; ++t) {
    Array tok = full(token, static_cast<double>(t + 1));
    tok.eval();
    detail::counters().layout_bytes_copied = 0;
    cache = step(cache, tok, array(static_cast<int32_t>(t)));
    cache.eval();
    EXPECT_EQ(cache.tensor().buffer->data(), data) << t;
    // A call replayed as a CUDA graph runs no host code that could count its bytes.
    const uint64_t counted = detail::counters().layout_bytes_copied.load();
    EXPECT_TRUE(counted == token_bytes || (cache.device().type == Device::Type::cuda && counted == 0))
        << t << ": " << counted;
  }
  auto v = slice(cache, {0, 0, 0, 0}, {1, 1, 6, 1}).to_vector<float>();
  EXPECT_EQ(v, (std::vector<float>{1, 2, 3, 8, 10, 12}));
  // The static slice_update is in place too.
  detail::counters().layout_bytes_copied = 0;
  cache = slice_update(cache, full(token, 7.0), {0, 0, 9, 0}, {1, 8, 10, 64});
  cache.eval();
  EXPECT_EQ(cache.tensor().buffer->data(), data);
  EXPECT_EQ(detail::counters().layout_bytes_copied.load(), token_bytes);
}

// ---- the batched step: cache_attention --------------------------------------------------------
namespace {

/* Row b of `values` (rows of `per` values each). */
std::vector<double> row_of(const std::vector<double>& values, int64_t b, int64_t per) {
  return std::vector<double>(values.begin() + b * per, values.begin() + (b + 1) * per);
}

/* B arrays of shape `cache`, each its own buffer, from `values` (the B caches one after another). */
std::vector<Array> caches_of(const std::vector<double>& values, int64_t batch, const Shape& cache, Dtype d) {
  std::vector<Array> out;
  for (int64_t b = 0; b < batch; ++b) out.push_back(kt::from_values(row_of(values, b, kt::numel(cache)), cache, d));
  eval(out);
  return out;
}

/* Positions that differ by row: the first and last rows at the ends of the room L rows leave. */
std::vector<int32_t> positions_of(int64_t batch, int64_t room) {
  std::vector<int32_t> p;
  for (int64_t b = 0; b < batch; ++b) p.push_back(static_cast<int32_t>((b * 7 + 3) % (room + 1)));
  p.front() = 0;
  p.back() = static_cast<int32_t>(room);
  return p;
}

struct UpdateCase {
  int64_t b, h, l, cap, d, dv;
};

/* The caches ([B, H, cap, D], one after another) with rows [B, H, L, D] written at the positions. */
std::vector<double> updated_ref(std::vector<double> caches, const std::vector<double>& rows, const UpdateCase& c,
                                int64_t d, const std::vector<int32_t>& pos) {
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.h; ++h)
      for (int64_t t = 0; t < c.l; ++t)
        for (int64_t e = 0; e < d; ++e)
          caches[static_cast<size_t>(((b * c.h + h) * c.cap + pos[static_cast<size_t>(b)] + t) * d + e)] =
              rows[static_cast<size_t>(((b * c.h + h) * c.l + t) * d + e)];
  return caches;
}

/* [B, H, L, D] values as the model makes them: a transposed view of [B, L, H, D]. */
Array heads_view(const std::vector<double>& bhld, int64_t b, int64_t h, int64_t l, int64_t d, Dtype dt) {
  std::vector<double> blhd(bhld.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t t = 0; t < l; ++t)
        for (int64_t e = 0; e < d; ++e)
          blhd[static_cast<size_t>(((i * l + t) * h + j) * d + e)] =
              bhld[static_cast<size_t>(((i * h + j) * l + t) * d + e)];
  return transpose(kt::from_values(blhd, {b, l, h, d}, dt), {0, 2, 1, 3});
}

}  // namespace

/* q [B, H, L, D] for a cache_attention whose keys have H heads (its result is not looked at). */
Array any_q(const UpdateCase& c, Dtype d) {
  return kt::from_values(kt::random_values(c.b * c.h * c.l * c.d, d, 100), {c.b, c.h, c.l, c.d}, d);
}

TEST(CacheAttention, WritesEveryRowAtItsOwnPositionAndLeavesHeldCachesAlone) {
  // 70 rows: two launches of at most 64 on the GPU; heads of 64 with one position take its
  // tensor-core kernel, which writes the keys itself.
  for (UpdateCase c : {UpdateCase{1, 2, 1, 16, 8, 8}, UpdateCase{3, 2, 3, 20, 8, 4}, UpdateCase{70, 1, 1, 9, 4, 4},
                       UpdateCase{5, 2, 1, 40, 64, 64}}) {
    for (Dtype d : {float32, bfloat16, float16}) {
      std::ostringstream os;
      os << "B" << c.b << " L" << c.l << " D" << c.d << " " << dtype_name(d);
      const std::string ctx = os.str();
      const auto kc = kt::random_values(c.b * c.h * c.cap * c.d, d, 101),
                 vc = kt::random_values(c.b * c.h * c.cap * c.dv, d, 102);
      const auto kr = kt::random_values(c.b * c.h * c.l * c.d, d, 103),
                 vr = kt::random_values(c.b * c.h * c.l * c.dv, d, 104);
      const std::vector<int32_t> pos = positions_of(c.b, c.cap - c.l);
      std::vector<Array> caches = caches_of(kc, c.b, {1, c.h, c.cap, c.d}, d);
      const std::vector<Array> values = caches_of(vc, c.b, {1, c.h, c.cap, c.dv}, d);
      caches.insert(caches.end(), values.begin(), values.end());
      const std::vector<Array> out =
          cache_attention(any_q(c, d), heads_view(kr, c.b, c.h, c.l, c.d, d),
                          kt::from_values(vr, {c.b, c.h, c.l, c.dv}, d), array(pos, {c.b}), caches, 1.0f, false);
      ASSERT_EQ(out.size(), static_cast<size_t>(1 + 2 * c.b)) << ctx;
      const auto want_k = updated_ref(kc, kr, c, c.d, pos), want_v = updated_ref(vc, vr, c, c.dv, pos);
      for (int64_t b = 0; b < c.b; ++b) {
        const int64_t per_k = c.h * c.cap * c.d, per_v = c.h * c.cap * c.dv;
        const auto& k_out = out[static_cast<size_t>(1 + b)];
        const auto& v_out = out[static_cast<size_t>(1 + c.b + b)];
        EXPECT_EQ(k_out.to_vector<double>(), row_of(want_k, b, per_k)) << ctx << " keys of row " << b;
        EXPECT_EQ(v_out.to_vector<double>(), row_of(want_v, b, per_v)) << ctx << " values of row " << b;
        // The caches are still held here: copied, not overwritten.
        EXPECT_EQ(caches[static_cast<size_t>(b)].to_vector<double>(), row_of(kc, b, per_k)) << ctx;
        EXPECT_EQ(caches[static_cast<size_t>(c.b + b)].to_vector<double>(), row_of(vc, b, per_v)) << ctx;
      }
    }
  }
}

// Given up by their holder, the caches are written where they lie, eagerly and compiled: only
// the new rows' bytes move.
TEST(CacheAttention, WritesInPlaceWhereTheCachesAreDonated) {
  const UpdateCase c{3, 2, 1, 64, 8, 8};
  std::vector<Array> caches =
      caches_of(kt::random_values(2 * c.b * c.h * c.cap * c.d, float32, 111), 2 * c.b, {1, c.h, c.cap, c.d}, float32);
  std::vector<const void*> data;
  for (const Array& a : caches) data.push_back(a.tensor().buffer->data());
  const uint64_t row_bytes = 2 * c.b * c.h * c.l * c.d * 4;
  const auto expect_in_place = [&](const std::vector<Array>& out, const std::string& ctx) {
    for (size_t i = 1; i < out.size(); ++i)
      EXPECT_EQ(out[i].tensor().buffer->data(), data[i - 1]) << ctx << " cache " << i - 1;
  };
  Array q = any_q(c, float32), keys = full({c.b, c.h, c.l, c.d}, 1.0), values = full({c.b, c.h, c.l, c.d}, 2.0);
  eval({q, keys, values});
  detail::counters().layout_bytes_copied = 0;
  std::vector<Array> out = cache_attention(q, keys, values, array({0, 1, 2}), caches, 1.0f, false);
  caches.clear();
  eval(out);
  expect_in_place(out, "eager");
  EXPECT_EQ(detail::counters().layout_bytes_copied.load(), row_bytes);
  auto step = compile([](const std::vector<Array>& in) {
    return cache_attention(in[0], in[1] * 2.0f, in[2], in[3], std::vector<Array>(in.begin() + 4, in.end()), 1.0f,
                           false);
  });
  std::vector<Array> in{q, keys, values, array({5, 6, 7})};
  in.insert(in.end(), out.begin() + 1, out.end());
  out.clear();
  detail::counters().layout_bytes_copied = 0;
  out = step(in);
  in.clear();
  eval(out);
  expect_in_place(out, "compiled");
  // A call replayed as a CUDA graph runs no host code that could count its bytes.
  const uint64_t counted = detail::counters().layout_bytes_copied.load();
  EXPECT_TRUE(counted == row_bytes || (out[0].device().type == Device::Type::cuda && counted == 0)) << counted;
  for (int64_t b = 0; b < c.b; ++b) {
    const auto k = slice(out[static_cast<size_t>(1 + b)], {0, 0, 0, 0}, {1, 1, 8, 1}).to_vector<float>();
    EXPECT_EQ(k[static_cast<size_t>(b)], 1.0f) << b;  // the eager step's row
    EXPECT_EQ(k[static_cast<size_t>(5 + b)], 2.0f) << b;  // the compiled step's
  }
}

TEST(CacheAttention, EachRowOverItsOwnCachesAgainstFloat64) {
  // Heads of 64 and 128 take the GPU's tensor-core kernel (with one query position, the one that
  // also rotates and writes the keys); 70 rows take two launches there, and caches over 512 keys
  // split the keys between blocks (decoding on sm_90: clusters of 16 blocks a head for 4 rows and
  // heads, of 8 for 12).
  for (AttnCase c :
       {AttnCase{1, 4, 2, 1, 40, 8, 8}, AttnCase{3, 4, 2, 1, 70, 8, 8}, AttnCase{3, 4, 4, 5, 30, 16, 16},
        AttnCase{2, 8, 2, 1, 300, 128, 128}, AttnCase{2, 4, 2, 9, 80, 64, 64}, AttnCase{70, 2, 1, 1, 12, 8, 8},
        AttnCase{2, 8, 2, 1, 1100, 128, 128}, AttnCase{3, 4, 2, 2, 700, 16, 16}, AttnCase{3, 6, 2, 1, 90, 64, 64},
        AttnCase{3, 8, 4, 1, 520, 64, 64}}) {
    for (Dtype d : {float32, bfloat16, float16}) {
      for (int rope_kind : {0, 1, 2}) {  // none, half (over 3/4 of the dims), traditional
        for (bool causal : {false, true}) {
          if (causal && c.lq == 1) continue;  // one query sees every key either way
          std::ostringstream ctx;
          ctx << "B" << c.b << " Hq" << c.hq << " Hkv" << c.hkv << " L" << c.lq << " cap" << c.lk << " "
              << dtype_name(d) << (causal ? " causal" : "") << " rope " << rope_kind;
          const auto qv = kt::random_values(c.b * c.hq * c.lq * c.d, d, 121, -1, 1);
          auto kv = kt::random_values(c.b * c.hkv * c.lk * c.d, d, 122, -1, 1);
          auto vv = kt::random_values(c.b * c.hkv * c.lk * c.dv, d, 123);
          const auto kr = kt::random_values(c.b * c.hkv * c.lq * c.d, d, 124, -1, 1),
                     vr = kt::random_values(c.b * c.hkv * c.lq * c.dv, d, 125);
          const std::vector<int32_t> pos = positions_of(c.b, c.lk - c.lq);
          std::vector<int> offsets, lengths;
          for (int32_t p : pos) offsets.push_back(p), lengths.push_back(p + static_cast<int>(c.lq));
          std::optional<CacheRope> rope;
          std::vector<double> q_want = qv, k_want = kr;
          if (rope_kind != 0) {
            const int dims = rope_kind == 1 ? static_cast<int>(c.d * 3 / 4 / 2 * 2) : static_cast<int>(c.d);
            rope = CacheRope{dims, rope_kind == 2, 500.0f, 0.5f, std::nullopt};
            q_want = rope_ref(qv, {c.b, c.hq, c.lq, c.d}, dims, rope_kind == 2, 500, 0.5, offsets, nullptr);
            k_want = rope_ref(kr, {c.b, c.hkv, c.lq, c.d}, dims, rope_kind == 2, 500, 0.5, offsets, nullptr);
          }
          const double scale = 1.0 / std::sqrt(static_cast<double>(c.d)), tol = std::max(kt::rel_tol(d), 2e-6) * 4;
          const UpdateCase u{c.b, c.hkv, c.lq, c.lk, c.d, c.dv};
          const auto want = attention_ref(c, q_want, updated_ref(kv, k_want, u, c.d, pos),
                                          updated_ref(vv, vr, u, c.dv, pos), scale, causal, &lengths, no_mask);
          // Past each row's new keys the caches hold garbage that must never be read.
          for (int64_t b = 0; b < c.b; ++b)
            for (int64_t h = 0; h < c.hkv; ++h)
              for (int64_t j = lengths[static_cast<size_t>(b)]; j < c.lk; ++j) {
                for (int64_t e = 0; e < c.d; ++e) kv[static_cast<size_t>(((b * c.hkv + h) * c.lk + j) * c.d + e)] = NAN;
                for (int64_t e = 0; e < c.dv; ++e)
                  vv[static_cast<size_t>(((b * c.hkv + h) * c.lk + j) * c.dv + e)] = NAN;
              }
          std::vector<Array> caches = caches_of(kv, c.b, {1, c.hkv, c.lk, c.d}, d);
          const std::vector<Array> values = caches_of(vv, c.b, {1, c.hkv, c.lk, c.dv}, d);
          caches.insert(caches.end(), values.begin(), values.end());
          const std::vector<Array> got =
              cache_attention(kt::from_values(qv, {c.b, c.hq, c.lq, c.d}, d), heads_view(kr, c.b, c.hkv, c.lq, c.d, d),
                              kt::from_values(vr, {c.b, c.hkv, c.lq, c.dv}, d), array(pos, {c.b}), caches,
                              static_cast<float>(scale), causal, rope);
          kt::expect_within(got[0], want, magnitude(want, 1.0), tol, ctx.str());
        }
      }
    }
  }
}

// Rotating inside the op agrees with rotating first (on the GPU: the tensor-core kernel's rotation,
// its frequencies from the host, against the rope kernel's), for the results and the caches.
namespace {

/* Random caches for case c: B of keys, then B of values. */
std::vector<Array> random_caches(const AttnCase& c, Dtype d, uint64_t seed) {
  std::vector<Array> caches =
      caches_of(kt::random_values(c.b * c.hkv * c.lk * c.d, d, seed, -1, 1), c.b, {1, c.hkv, c.lk, c.d}, d);
  const std::vector<Array> values =
      caches_of(kt::random_values(c.b * c.hkv * c.lk * c.dv, d, seed + 1), c.b, {1, c.hkv, c.lk, c.dv}, d);
  caches.insert(caches.end(), values.begin(), values.end());
  return caches;
}

}  // namespace

TEST(CacheAttention, RopeInsideEqualsRopeFirst) {
  struct Case {
    AttnCase c;
    int dims;
    bool traditional, freqs;
  };
  for (Case k : {Case{{4, 8, 2, 1, 300, 128, 128}, 128, false, false}, Case{{3, 9, 3, 1, 50, 64, 64}, 64, true, false},
                 Case{{2, 4, 1, 1, 1100, 64, 64}, 32, false, true}, Case{{2, 4, 2, 1, 40, 128, 128}, 96, true, true},
                 Case{{2, 4, 2, 3, 40, 64, 64}, 64, false, false}}) {
    const AttnCase& c = k.c;
    for (Dtype d : {bfloat16, float16}) {
      std::ostringstream ctx;
      ctx << "B" << c.b << " Hq" << c.hq << " L" << c.lq << " cap" << c.lk << " D" << c.d << " dims " << k.dims
          << (k.traditional ? " traditional" : "") << (k.freqs ? " freqs" : "") << " " << dtype_name(d);
      const Array q =
          kt::from_values(kt::random_values(c.b * c.hq * c.lq * c.d, d, 141, -1, 1), {c.b, c.hq, c.lq, c.d}, d);
      const Array keys =
          heads_view(kt::random_values(c.b * c.hkv * c.lq * c.d, d, 142, -1, 1), c.b, c.hkv, c.lq, c.d, d);
      const Array values =
          kt::from_values(kt::random_values(c.b * c.hkv * c.lq * c.dv, d, 143), {c.b, c.hkv, c.lq, c.dv}, d);
      const std::vector<Array> caches = random_caches(c, d, 144);
      std::vector<int32_t> pos = positions_of(c.b, c.lk - c.lq);
      pos[0] = static_cast<int32_t>(c.lk - c.lq) / 2 + 3;
      const Array positions = array(pos, {c.b});
      CacheRope rope{k.dims, k.traditional, 10000.0f, 1.0f, std::nullopt};
      if (k.freqs) {
        rope.base = std::nullopt;
        rope.freqs = kt::from_values(kt::random_values(k.dims / 2, float32, 146, 1, 50), {k.dims / 2}, float32);
      }
      auto rotate = [&](const Array& x) {
        return kiln::rope(x, rope.dims, rope.traditional, rope.base, rope.scale, positions, rope.freqs);
      };
      const std::vector<Array> inside = cache_attention(q, keys, values, positions, caches, 0.125f, c.lq > 1, rope);
      const std::vector<Array> first =
          cache_attention(rotate(q), rotate(keys), values, positions, caches, 0.125f, c.lq > 1);
      ASSERT_EQ(inside.size(), first.size());
      for (size_t i = 0; i < inside.size(); ++i) {
        const std::vector<double> want = first[i].to_vector<double>();
        kt::expect_within(inside[i], want, magnitude(want, 1.0), kt::rel_tol(d),
                          ctx.str() + " output " + std::to_string(i));
      }
    }
  }
}

TEST(CacheAttention, CompiledStepEqualsEager) {
  const AttnCase c{3, 4, 2, 2, 24, 16, 16};
  const Array q =
      kt::from_values(kt::random_values(c.b * c.hq * c.lq * c.d, float32, 131, -1, 1), {c.b, c.hq, c.lq, c.d}, float32);
  const Array k =
      kt::from_values(kt::random_values(c.b * c.hkv * c.lq * c.d, float32, 134), {c.b, c.hkv, c.lq, c.d}, float32);
  const std::vector<Array> caches = random_caches(c, float32, 132);
  auto decode = [](const Array& q, const Array& k, const Array& pos, const std::vector<Array>& caches) {
    return cache_attention(q * 2.0f, k, k * 0.5f, pos, caches, 0.25f, true, CacheRope{12, false, 10000.0f, 1.0f, {}});
  };
  auto step = compile([&](const std::vector<Array>& in) {
    return decode(in[0], in[1], in[2], std::vector<Array>(in.begin() + 3, in.end()));
  });
  const Array pos = array({0, 9, 22});
  std::vector<Array> in{q, k, pos};
  in.insert(in.end(), caches.begin(), caches.end());
  const std::vector<Array> compiled = step(in), eager = decode(q, k, pos, caches);
  for (size_t i = 0; i < eager.size(); ++i) kt::expect_same_bits(compiled[i], eager[i], "output " + std::to_string(i));
}

TEST(CacheAttention, ErrorsPrintAndEquivalence) {
  Array q = ones({2, 4, 1, 8}), k = ones({2, 2, 1, 8}), pos = array({0, 3});
  auto caches = [](int64_t n, const Shape& s) { return std::vector<Array>(static_cast<size_t>(n), zeros(s)); };
  const Shape cache{1, 2, 16, 8};
  const char* op = "[cache_attention] ";
  auto attend = [&](const std::vector<Array>& c) { return cache_attention(q, k, k, pos, c, 1.0f, false); };
  kt::expect_error([&] { attend(caches(3, cache)); },
                   std::string(op) + "needs 4 caches (a key cache and a value cache for each of 2 batch rows), got 3");
  std::vector<Array> mixed = caches(4, cache);
  mixed[1] = zeros({1, 2, 32, 8});
  kt::expect_error([&] { attend(mixed); }, std::string(op) +
                                               "cache 1 has shape (1,2,32,8), not (1,2,16,8) as the first of its kind "
                                               "(caches of other sizes go to separate calls)");
  kt::expect_error(
      [&] {
        attend(caches(4, {1, 2, 16, 4}));
      },
      std::string(op) +
          "keys (2,2,1,8) and values (2,2,1,8) do not fit q (2,4,1,8) and caches (1,2,16,4) "
          "and (1,2,16,4)");
  kt::expect_error(
      [&] {
        cache_attention(q, ones({2, 2, 1, 4}), k, pos, caches(4, cache), 1.0f, false);
      },
      std::string(op) +
          "keys (2,2,1,4) and values (2,2,1,8) do not fit q (2,4,1,8) and caches (1,2,16,8) "
          "and (1,2,16,8)");
  kt::expect_error(
      [&] {
        cache_attention(ones({2, 4, 1, 4}), k, k, pos, caches(4, cache), 1.0f, false);
      },
      std::string(op) + "q (2,4,1,4) and key caches (1,2,16,8) differ in head size");
  kt::expect_error(
      [&] {
        cache_attention(ones({2, 3, 1, 8}), k, k, pos, caches(4, cache), 1.0f, false);
      },
      std::string(op) + "the query heads (3) must be a multiple of the caches' heads (2)");
  kt::expect_error(
      [&] {
        attend(caches(4, {2, 2, 16, 8}));
      },
      std::string(op) +
          "caches must be [1, heads, capacity, dims] with the keys' heads and capacity, got "
          "keys (2,2,16,8) and values (2,2,16,8)");
  kt::expect_error([&] { cache_attention(q, k, k, array({1}), caches(4, cache), 1.0f, false); },
                   std::string(op) + "positions must hold one entry per batch row (2), got shape (1)");
  kt::expect_error(
      [&] {
        cache_attention(q, k, k, array({0.0f, 3.0f}), caches(4, cache), 1.0f, false);
      },
      std::string(op) + "positions must be int32, got float32");
  kt::expect_error([&] { cache_attention(astype(q, float16), k, k, pos, caches(4, cache), 1.0f, false); },
                   std::string(op) + "q and the caches must share a dtype, got float16 and float32");
  std::vector<Array> f16 = caches(4, cache);
  f16[3] = astype(f16[3], float16);
  kt::expect_error([&] { attend(f16); }, std::string(op) + "cache 3 is float16, not float32 as cache 0");
  kt::expect_error([&] { attend({}); }, std::string(op) + "needs the caches of at least one batch row");
  kt::expect_error(
      [&] {
        cache_attention(q, k, k, pos, caches(4, cache), 1.0f, false, CacheRope{8, false, {}, 1.0f, {}});
      },
      std::string(op) + "give the rope exactly one of base and freqs");
  kt::expect_error(
      [&] {
        cache_attention(q, k, k, pos, caches(4, cache), 1.0f, false, CacheRope{10, false, 1e4f, 1.0f, {}});
      },
      "[rope] dims must be even, positive and at most the last axis of x (2,4,1,8), got 10");
  for (int32_t bad : {16, -1}) {
    kt::expect_error(
        [&] {
          eval(cache_attention(q, k, k, array({0, bad}), caches(4, cache), 1.0f, false));
        },
        std::string(op) + "position " + std::to_string(bad) +
            " of batch row 1 puts 1 keys outside caches of capacity 16");
  }
  auto rope = std::make_shared<Rope>(8, true, 10000.0f, 0.5f, false);
  EXPECT_EQ(printed(CacheAttention(0.5f, true, nullptr)), "cache_attention(scale=0.5,causal)");
  EXPECT_EQ(printed(CacheAttention(0.5f, false, rope)),
            "cache_attention(scale=0.5,rope(dims=8,traditional,base=10000,scale=0.5))");
  EXPECT_TRUE(CacheAttention(0.5f, true, nullptr).is_equivalent(CacheAttention(0.5f, true, nullptr)));
  EXPECT_TRUE(CacheAttention(0.5f, true, rope)
                  .is_equivalent(CacheAttention(0.5f, true, std::make_shared<Rope>(8, true, 10000.0f, 0.5f, false))));
  EXPECT_FALSE(CacheAttention(0.5f, true, rope).is_equivalent(CacheAttention(0.5f, true, nullptr)));
  EXPECT_FALSE(CacheAttention(0.5f, true, nullptr).is_equivalent(CacheAttention(0.5f, true, rope)));
  EXPECT_FALSE(CacheAttention(0.5f, true, rope)
                   .is_equivalent(CacheAttention(0.5f, true, std::make_shared<Rope>(8, false, 10000.0f, 0.5f, false))));
  EXPECT_FALSE(CacheAttention(0.5f, true, nullptr).is_equivalent(CacheAttention(0.5f, false, nullptr)));
  EXPECT_FALSE(CacheAttention(0.5f, true, nullptr).is_equivalent(CacheAttention(0.25f, true, nullptr)));
}

TEST(LanguageModelOps, EmptyShapes) {
  EXPECT_EQ(rms_norm(zeros({0, 8}), ones({8}), 1e-5f).shape(), (Shape{0, 8}));
  EXPECT_EQ(layer_norm(zeros({2, 0, 8}), std::nullopt, ones({8}), 1e-5f).size(), 0);
  EXPECT_EQ(rope(zeros({1, 2, 0, 8}), 8, false, 10000.0f, 1.0f, 3).shape(), (Shape{1, 2, 0, 8}));
  Array q = ones({1, 2, 0, 4}), k = ones({1, 1, 5, 4});
  EXPECT_EQ(scaled_dot_product_attention(q, k, k, 1.0f).shape(), (Shape{1, 2, 0, 4}));
  // No keys at all: every query sees none and gives zeros.
  Array none = scaled_dot_product_attention(ones({1, 2, 3, 4}), zeros({1, 1, 0, 4}), zeros({1, 1, 0, 4}), 1.0f);
  EXPECT_EQ(none.to_vector<float>(), std::vector<float>(24, 0.0f));
  auto [p, s, b] = quantize(zeros({0, 64}), 64, 4);
  EXPECT_EQ(p.shape(), (Shape{0, 8}));
  EXPECT_EQ(dequantize(p, s, b).shape(), (Shape{0, 64}));
  Array a = kt::from_values(kt::random_values(12, float32, 5), {3, 4}, float32);
  kt::expect_same_bits(slice_update(a, zeros({0, 4}), array({3}), {0}), a, "empty update");
}
