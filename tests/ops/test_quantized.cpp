// quantize, dequantize and quantized_matmul: MLX's format checked against golden data
// from MLX itself (golden/make_llm_ops_golden.py), products against float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "golden/llm_ops_golden.h"
#include "nn_ref.h"
#include "ops/nn.h"
#include "ops/quant_tiles.h"

using namespace kiln;

namespace {

std::vector<double> floats_of(const Array& a) { return a.to_vector<double>(); }
std::vector<uint32_t> words_of(const Array& a) { return a.to_vector<uint32_t>(); }

std::vector<double> plus_one(const std::vector<double>& v) {
  std::vector<double> s(v.size());
  for (size_t i = 0; i < v.size(); ++i) s[i] = std::fabs(v[i]) + 1;
  return s;
}

std::string printed(const Primitive& p) {
  std::ostringstream os;
  p.print(os);
  return os.str();
}

/* x [m, k] @ w^T (w [n, k]) in float64, and the sums of |terms| for tolerances. */
void matmul_t_ref(const std::vector<double>& x, const std::vector<double>& w, size_t m, size_t n, size_t k,
                  std::vector<double>& y, std::vector<double>& mag) {
  y.assign(m * n, 0);
  mag.assign(m * n, 0);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      for (size_t e = 0; e < k; ++e) {
        y[i * n + j] += x[i * k + e] * w[j * k + e];
        mag[i * n + j] += std::fabs(x[i * k + e] * w[j * k + e]);
      }
    }
  }
}

}  // namespace

TEST(Quantize, MatchesMlxPackingScalesAndBiases) {
  Array w = array(golden::quant_w, {4, 128});
  for (const auto& c : golden::quant_cases) {
    std::string ctx = "bits " + std::to_string(c.bits) + " group " + std::to_string(c.group_size);
    auto [packed, scales, biases] = quantize(w, c.group_size, c.bits);
    EXPECT_EQ(packed.dtype(), uint32) << ctx;
    EXPECT_EQ(packed.shape(), (Shape{4, 128 * c.bits / 32})) << ctx;
    EXPECT_EQ(scales.shape(), (Shape{4, 128 / c.group_size})) << ctx;
    EXPECT_EQ(words_of(packed), *c.packed) << ctx;
    EXPECT_EQ(scales.to_vector<float>(), *c.scales) << ctx;
    EXPECT_EQ(biases.to_vector<float>(), *c.biases) << ctx;
  }
}

TEST(Quantize, Bfloat16MatchesMlx) {
  Array w = astype(array(golden::quant_w, {4, 128}), bfloat16);
  auto [packed, scales, biases] = quantize(w, 64, 4);
  EXPECT_EQ(scales.dtype(), bfloat16);
  EXPECT_EQ(words_of(packed), golden::bf16_q4_g64_packed);
  EXPECT_EQ(astype(scales, float32).to_vector<float>(), golden::bf16_q4_g64_scales);
  EXPECT_EQ(astype(biases, float32).to_vector<float>(), golden::bf16_q4_g64_biases);
  Array d = dequantize(packed, scales, biases, 64, 4);
  EXPECT_EQ(d.dtype(), bfloat16);
  EXPECT_EQ(astype(d, float32).to_vector<float>(), golden::bf16_q4_g64_dequantized);
}

TEST(Dequantize, EqualsFloat64UnpackingAndBoundsTheError) {
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int gs : {32, 64, 128}) {
      std::string ctx = "bits " + std::to_string(bits) + " group " + std::to_string(gs);
      auto v = kt::random_values(3 * 256, float32, static_cast<uint64_t>(bits * 1000 + gs));
      Array w = kt::from_values(v, {3, 256}, float32);
      auto [packed, scales, biases] = quantize(w, gs, bits);
      auto s = floats_of(scales), b = floats_of(biases);
      auto want = kt::dequantize_ref(words_of(packed), s, b, 3, 256, gs, bits);
      Array d = dequantize(packed, scales, biases, gs, bits);
      EXPECT_EQ(d.shape(), (Shape{3, 256}));
      // Two float32 roundings of s * q + b, relative to the terms' size.
      std::vector<double> terms(want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        size_t g = i / static_cast<size_t>(gs);
        terms[i] = std::fabs(b[g]) + std::fabs(s[g]) * ((1 << bits) - 1);
      }
      kt::expect_within(d, want, terms, 2.5e-7, ctx);
      // Every value is the level of its group nearest to w (MLX's levels may not reach both
      // ends of a group: the end of larger magnitude is exact, the other may be clipped).
      auto got = floats_of(d);
      for (size_t i = 0; i < got.size(); ++i) {
        size_t g = i / static_cast<size_t>(gs);
        double nearest = INFINITY;
        for (int q = 0; q < (1 << bits); ++q) nearest = std::min(nearest, std::fabs(s[g] * q + b[g] - v[i]));
        ASSERT_LE(std::fabs(got[i] - v[i]), nearest + 1e-6 * terms[i]) << ctx << " element " << i;
      }
    }
  }
}

TEST(QuantizedMatmul, MatchesMlx) {
  Array w = array(golden::quant_w, {4, 128});
  Array x = array(golden::qmm_x, {3, 128});
  struct Case {
    int bits, gs;
    const std::vector<float>* want;
  };
  for (Case c :
       {Case{4, 64, &golden::qmm_t_q4_g64}, Case{8, 32, &golden::qmm_t_q8_g32}, Case{3, 128, &golden::qmm_t_q3_g128}}) {
    auto [packed, scales, biases] = quantize(w, c.gs, c.bits);
    Array y = quantized_matmul(x, packed, scales, biases, true, c.gs, c.bits);
    auto want = kt::as_doubles(*c.want);
    kt::expect_within(y, want, plus_one(want), 1e-5, "bits " + std::to_string(c.bits));
  }
  auto [packed, scales, biases] = quantize(array(golden::qmm_wn, {64, 32}), 32, 4);
  Array y = quantized_matmul(array(golden::qmm_x2, {2, 64}), packed, scales, biases, false, 32, 4);
  auto want = kt::as_doubles(golden::qmm_n_q4_g32);
  kt::expect_within(y, want, plus_one(want), 1e-5, "not transposed");
}

// Rows of x pick the decode path (up to 8) or the tiled sgemm path; K = 32 at 4 bits has
// fewer than 8 words a row and takes the portable loop.
TEST(QuantizedMatmul, AgainstFloat64AllBitsShapesAndDtypes) {
  struct Case {
    int64_t m, n, k;
  };
  for (Case sh : {Case{1, 7, 256}, Case{3, 5, 128}, Case{8, 9, 512}, Case{9, 6, 256}, Case{33, 300, 128},
                  Case{2, 3, 32}, Case{5, 64, 256}, Case{40, 32, 128}, Case{1, 48, 512}}) {
    for (int bits : {2, 3, 4, 5, 6, 8}) {
      for (int gs : {32, 128}) {
        if (sh.k % gs != 0) continue;
        for (bool transpose : {true, false}) {
          for (Dtype d : {float32, bfloat16, float16}) {
            std::ostringstream ctx;
            ctx << "m " << sh.m << " n " << sh.n << " k " << sh.k << " bits " << bits << " group " << gs
                << (transpose ? " T " : " N ") << dtype_name(d);
            const int64_t rows = transpose ? sh.n : sh.k, cols = transpose ? sh.k : sh.n;
            if (cols % gs != 0) continue;
            auto wv = kt::random_values(rows * cols, float32, 7 + static_cast<uint64_t>(bits));
            auto [packed, scales, biases] = quantize(kt::from_values(wv, {rows, cols}, float32), gs, bits);
            auto deq = kt::dequantize_ref(words_of(packed), floats_of(scales), floats_of(biases),
                                          static_cast<size_t>(rows), static_cast<size_t>(cols), gs, bits);
            // As [n, k] for the reference.
            std::vector<double> wt(deq.size());
            for (int64_t r = 0; r < rows; ++r) {
              for (int64_t c = 0; c < cols; ++c) {
                size_t at = static_cast<size_t>(r * cols + c);
                wt[transpose ? at : static_cast<size_t>(c * rows + r)] = deq[at];
              }
            }
            auto xv = kt::random_values(sh.m * sh.k, d, 99, -2, 2);
            Array x = kt::from_values(xv, {sh.m, sh.k}, d);
            Array y = quantized_matmul(x, packed, scales, biases, transpose, gs, bits);
            ASSERT_EQ(y.shape(), (Shape{sh.m, sh.n})) << ctx.str();
            ASSERT_EQ(y.dtype(), d);
            std::vector<double> want, mag;
            matmul_t_ref(xv, wt, static_cast<size_t>(sh.m), static_cast<size_t>(sh.n), static_cast<size_t>(sh.k), want,
                         mag);
            // On a GPU, more than 8 rows (or w untransposed) multiply w rounded to x's dtype, as
            // MLX and a bfloat16 PyTorch model do, and so do 4-bit products of 2 to 32 rows of 16-bit x
            // (whole chunks of 128 values, whole tiles of 32 weight rows) on the tensor cores:
            // each term may carry that rounding.
            const bool mma =
                transpose && bits == 4 && d != float32 && sh.m >= 2 && sh.m <= 32 && sh.k % 128 == 0 && sh.n % 32 == 0;
            const bool w_rounded = kiln::default_device().type == Device::Type::cuda && (sh.m > 8 || !transpose || mma);
            const double w_unit = !w_rounded ? 0 : d == bfloat16 ? 0x1p-8 : d == float16 ? 0x1p-11 : 0;
            for (size_t i = 0; i < want.size(); ++i)
              mag[i] += std::fabs(want[i]) * kt::rel_tol(d) / 1e-5 + mag[i] * w_unit / 1e-5;
            kt::expect_within(y, want, mag, 1e-5, ctx.str());
          }
        }
      }
    }
  }
}

// A compiled decode layer's products with what they join (the norm in front, the residual add
// behind, or the gated unit behind) against float64, for 1 to 40 rows of 16-bit x: on a GPU these
// run as one kernel each (the tensor-core product from 2 to 32 rows); 40 rows take cuBLASLt.
TEST(QuantizedMatmul, JoinedNormResidualAndGateAgainstFloat64) {
  const int64_t k = 256, f = 64;
  auto wv = kt::random_values(2 * f * k, float32, 41), nv = kt::random_values(k, float32, 42, 0.5, 1.5);
  auto [packed, scales, biases] = quantize(kt::from_values(wv, {2 * f, k}, float32), 64, 4);
  const auto wd = kt::dequantize_ref(words_of(packed), floats_of(scales), floats_of(biases), 2 * f, k, 64, 4);
  for (Dtype d : {bfloat16, float16}) {
    const Array nw = kt::from_values(nv, {k}, d);
    for (int64_t m : {1, 3, 8, 17, 40}) {
      const std::string ctx = std::string(dtype_name(d)) + " rows " + std::to_string(m);
      auto xv = kt::random_values(m * k, d, 43, -2, 2), rv = kt::random_values(m * 2 * f, d, 44, -2, 2);
      auto f1 = compile([&](const std::vector<Array>& in) {
        const Array y = quantized_matmul(rms_norm(in[0], nw, 1e-5f), packed, scales, biases, true, 64, 4);
        const Array gate = slice(y, {0, 0}, {m, f}), up = slice(y, {0, f}, {m, 2 * f});
        return std::vector<Array>{in[1] + y, gate * sigmoid(gate) * up};
      });
      // The residual and the gate each read the product, so each output's product stands alone.
      auto f2 = compile([&](const std::vector<Array>& in) {
        return std::vector<Array>{in[1] +
                                  quantized_matmul(rms_norm(in[0], nw, 1e-5f), packed, scales, biases, true, 64, 4)};
      });
      auto f3 = compile([&](const std::vector<Array>& in) {
        const Array y = quantized_matmul(rms_norm(in[0], nw, 1e-5f), packed, scales, biases, true, 64, 4);
        const Array gate = slice(y, {0, 0}, {m, f}), up = slice(y, {0, f}, {m, 2 * f});
        return std::vector<Array>{gate * sigmoid(gate) * up};
      });
      const std::vector<Array> in{kt::from_values(xv, {m, k}, d), kt::from_values(rv, {m, 2 * f}, d)};
      // float64: h = rms_norm(x) * nw, y = h @ w^T; the tolerance covers x, h and w rounded to d.
      std::vector<double> h(static_cast<size_t>(m * k)), y, mag, residual(rv.size()), gated(static_cast<size_t>(m * f));
      std::vector<double> res_mag(rv.size()), gate_mag(gated.size());
      for (int64_t r = 0; r < m; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < k; ++i) ss += xv[r * k + i] * xv[r * k + i];
        const double inv = 1 / std::sqrt(ss / k + 1e-5);
        for (int64_t i = 0; i < k; ++i) h[r * k + i] = xv[r * k + i] * inv * nv[i];
      }
      matmul_t_ref(h, wd, static_cast<size_t>(m), static_cast<size_t>(2 * f), static_cast<size_t>(k), y, mag);
      for (size_t i = 0; i < y.size(); ++i) {
        residual[i] = rv[i] + y[i];
        res_mag[i] = mag[i] + std::fabs(rv[i]) + std::fabs(residual[i]) + 1;
      }
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t j = 0; j < f; ++j) {
          const double g = y[r * 2 * f + j], u = y[r * 2 * f + f + j], sig = 1 / (1 + std::exp(-g));
          gated[r * f + j] = g * sig * u;
          // d(g * sig(g) * u) is at most about (|u| + |g sig(g)|) times the error of either.
          gate_mag[r * f + j] = (std::fabs(u) + std::fabs(g) + 1) * (mag[r * 2 * f + j] + mag[r * 2 * f + f + j] + 1);
        }
      }
      const double unit = d == bfloat16 ? 0x1p-6 : 0x1p-9;  // a few roundings of each term
      kt::expect_within(f1(in)[0], residual, res_mag, unit, ctx + " residual (product read twice)");
      kt::expect_within(f1(in)[1], gated, gate_mag, unit, ctx + " gate (product read twice)");
      kt::expect_within(f2(in)[0], residual, res_mag, unit, ctx + " norm and residual joined");
      kt::expect_within(f3(in)[0], gated, gate_mag, unit, ctx + " norm and gate joined");
    }
  }
}

// One row of 16-bit x against 4-bit weights with float or 16-bit scales. On a GPU, whole chunks of
// 256 values and whole 16-row tiles take the one-row tensor-core product, its warps splitting a
// tile 8, 4, 2 or 1 ways as the tiles grow (16 to 32768 rows on 132 SMs); weights and x enter it
// exactly, so only its float sums round.
TEST(QuantizedMatmul, OneRowAgainstFloat64) {
  const int64_t k = 512;
  for (int64_t n : {16, 48, 8192, 16384, 32768}) {
    auto wv = kt::random_values(n * k, float32, 50 + static_cast<uint64_t>(n));
    for (int gs : {32, 64}) {
      auto [packed, s32, b32] = quantize(kt::from_values(wv, {n, k}, float32), gs, 4);
      for (Dtype sd : {float32, bfloat16, float16}) {
        const Array scales = astype(s32, sd), biases = astype(b32, sd);
        const auto wd = kt::dequantize_ref(words_of(packed), floats_of(scales), floats_of(biases),
                                           static_cast<size_t>(n), static_cast<size_t>(k), gs, 4);
        for (Dtype d : {bfloat16, float16}) {
          const std::string ctx = "n " + std::to_string(n) + " group " + std::to_string(gs) + " scales " +
                                  dtype_name(sd) + " x " + dtype_name(d);
          auto xv = kt::random_values(k, d, 51, -2, 2);
          std::vector<double> want, mag;
          matmul_t_ref(xv, wd, 1, static_cast<size_t>(n), static_cast<size_t>(k), want, mag);
          for (size_t i = 0; i < want.size(); ++i) mag[i] += std::fabs(want[i]) * kt::rel_tol(d) / 1e-5;
          Array y = quantized_matmul(kt::from_values(xv, {1, k}, d), packed, scales, biases, true, gs, 4);
          ASSERT_EQ(y.shape(), (Shape{1, n})) << ctx;
          kt::expect_within(y, want, mag, 1e-5, ctx);
        }
      }
    }
  }
}

TEST(QuantizedMatmul, BatchAxesNonContiguousXEmptyAndNaN) {
  auto wv = kt::random_values(16 * 128, float32, 3);
  auto [packed, scales, biases] = quantize(kt::from_values(wv, {16, 128}, float32), 64, 4);
  // [2, 3, 128] through a transposed layout: equal to the contiguous product.
  auto xv = kt::random_values(2 * 3 * 128, float32, 4);
  Array xs = kt::with_layout(xv, {2, 3, 128}, float32, kt::Layout::transposed);
  Array xc = kt::from_values(xv, {2, 3, 128}, float32);
  Array ys = quantized_matmul(xs, packed, scales, biases);
  EXPECT_EQ(ys.shape(), (Shape{2, 3, 16}));
  kt::expect_same_bits(ys, quantized_matmul(xc, packed, scales, biases), "transposed x");
  // 40 sessions' rows [40, 1, K] (a batched decode step): the same bits as [40, K].
  auto xb = kt::random_values(40 * 128, bfloat16, 5);
  kt::expect_same_bits(
      quantized_matmul(kt::from_values(xb, {40, 1, 128}, bfloat16), packed, scales, biases),
      reshape(quantized_matmul(kt::from_values(xb, {40, 128}, bfloat16), packed, scales, biases), {40, 1, 16}),
      "rows of sessions");
  // One row and a 1-D x.
  Array x1 = kt::from_values(std::vector<double>(xv.begin(), xv.begin() + 128), {128}, float32);
  EXPECT_EQ(quantized_matmul(x1, packed, scales, biases).shape(), (Shape{16}));
  // No rows.
  Array y0 = quantized_matmul(zeros({0, 128}), packed, scales, biases);
  EXPECT_EQ(y0.shape(), (Shape{0, 16}));
  EXPECT_EQ(y0.size(), 0);
  // NaN and infinity in a row of x reach that row's outputs only.
  auto xn = xv;
  xn[5] = std::nan("");
  xn[128 + 7] = INFINITY;
  for (int64_t m : {2, 20}) {  // decode and tiled paths
    std::vector<double> rows(xn.begin(), xn.begin() + 2 * 128);
    rows.resize(static_cast<size_t>(m * 128), 0.5);
    auto y = quantized_matmul(kt::from_values(rows, {m, 128}, float32), packed, scales, biases).to_vector<double>();
    for (int j = 0; j < 16; ++j) EXPECT_TRUE(std::isnan(y[static_cast<size_t>(j)])) << m;
    for (int j = 0; j < 16; ++j)
      EXPECT_TRUE(std::isinf(y[static_cast<size_t>(16 + j)]) || std::isnan(y[static_cast<size_t>(16 + j)])) << m;
    if (m > 2) {
      EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(2 * 16)])) << m;
    }
  }
}

/* Weights in tile order on the default device (the permutation runs on the host). */
std::tuple<Array, Array, Array> on_default(std::tuple<Array, Array, Array> t) {
  auto& [w, s, b] = t;
  return {to(w, default_device()), to(s, default_device()), to(b, default_device())};
}

// Tile order is a permutation inside each block of 16 rows: every word and every group lands
// once, it comes back to row order, and whole tiles concatenate as rows do.
TEST(QuantTiles, PermutesWithinTilesAndBack) {
  for (int gs : {32, 64, 128}) {
    const int64_t n = 48, k = 512;
    std::vector<int> words_seen(static_cast<size_t>(n * k / 32)), groups_seen(static_cast<size_t>(n * k / gs));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t w = 0; w < k / 32; ++w) {
        const int64_t at = tile_order::word_at(r, w, k);
        ASSERT_EQ(at / (16 * k / 32), r / 16) << "word " << w << " of row " << r << " left its tile";
        ++words_seen[static_cast<size_t>(at)];
      }
      for (int64_t j = 0; j < k / gs; ++j)
        ++groups_seen[static_cast<size_t>(tile_order::group_at(r, j, k, tile_order::group_bits_of(gs)))];
    }
    for (int c : words_seen) ASSERT_EQ(c, 1);
    for (int at = 0; at < 128; ++at) {  // a step's words in stored order, as the kernels stream them
      int row = -1, word = -1;
      tile_order::in_step(at, row, word);
      for (int64_t tile : {0, 2})
        for (int64_t step : {0, 1})
          ASSERT_EQ(tile_order::word_at(tile * 16 + row, step * 8 + word, k),
                    tile_order::word_at(tile * 16, step * 8, k) + at)
              << "word " << at << " of step " << step << " of tile " << tile;
    }
    for (int c : groups_seen) ASSERT_EQ(c, 1);
    auto [packed, scales, biases] = quantize(
        kt::from_values(kt::random_values(n * k, float32, 60 + static_cast<uint64_t>(gs)), {n, k}, float32), gs, 4);
    auto [tw, ts, tb] = quant_tiles::tiled(packed, scales, biases, gs);
    EXPECT_NE(words_of(tw), words_of(packed)) << gs;
    detail::Tensor w2, s2, b2;
    quant_tiles::permute("test", tw.tensor(), ts.tensor(), tb.tensor(), gs, false, w2, s2, b2);
    kt::expect_same_bits(Array::from_tensor(w2, Device::cpu()), to(packed, Device::cpu()), "packed back");
    kt::expect_same_bits(Array::from_tensor(s2, Device::cpu()), to(scales, Device::cpu()), "scales back");
    kt::expect_same_bits(Array::from_tensor(b2, Device::cpu()), to(biases, Device::cpu()), "biases back");
    auto [top_w, top_s, top_b] =
        quant_tiles::tiled(slice(packed, {0, 0}, {16, k / 8}), slice(scales, {0, 0}, {16, k / gs}),
                           slice(biases, {0, 0}, {16, k / gs}), gs);
    kt::expect_same_bits(top_w, slice(tw, {0, 0}, {16, k / 8}), "the first tile alone");
    kt::expect_same_bits(top_s, slice(ts, {0, 0}, {16, k / gs}), "its scales");
  }
}

// Products of weights in tile order give the bits of the same weights in row order: every
// group size, scale dtype and activation dtype; one row (on a GPU the tiled one-row kernel),
// 3 and 20 rows (its tensor-core product), 40 (the expanded weights), a gated, normalized and
// residual product compiled into one node, non-contiguous x and a row holding NaN.
TEST(QuantizedMatmul, TileOrderGivesTheBitsOfRowOrder) {
  const int64_t k = 512;
  for (int64_t n : {32, 96, 8192}) {
    auto wv = kt::random_values(n * k, float32, 70 + static_cast<uint64_t>(n));
    for (int gs : {32, 64, 128}) {
      auto [packed, s32, b32] = quantize(kt::from_values(wv, {n, k}, float32), gs, 4);
      for (Dtype sd : {float32, bfloat16, float16}) {
        if (n == 8192 && (sd != float16 || gs == 128)) continue;  // the large product: its main kinds only
        const Array scales = astype(s32, sd), biases = astype(b32, sd);
        auto [tw, ts, tb] = on_default(quant_tiles::tiled(packed, scales, biases, gs));
        for (Dtype d : {bfloat16, float16}) {
          for (int64_t m : {1, 3, 20, 40}) {
            const std::string ctx = "n " + std::to_string(n) + " group " + std::to_string(gs) + " scales " +
                                    dtype_name(sd) + " x " + dtype_name(d) + " rows " + std::to_string(m);
            auto xv = kt::random_values(m * k, d, 71, -2, 2);
            xv[static_cast<size_t>(k / 2)] = std::nan("");  // row 0
            const Array x = kt::with_layout(xv, {m, k}, d, kt::Layout::transposed);
            kt::expect_same_bits(quantized_matmul_tiled(x, tw, ts, tb, gs),
                                 quantized_matmul(x, packed, scales, biases, true, gs, 4), ctx);
          }
        }
      }
    }
  }
  const int64_t f = 64;
  auto [packed, scales, biases] =
      quantize(kt::from_values(kt::random_values(2 * f * k, float32, 72), {2 * f, k}, float32), 64, 4);
  auto [tw, ts, tb] = on_default(quant_tiles::tiled(packed, scales, biases, 64));
  const Array nw = kt::from_values(kt::random_values(k, float32, 73, 0.5, 1.5), {k}, bfloat16);
  for (int64_t m : {1, 4, 12}) {
    auto joined = [&](const Array& w, const Array& s, const Array& b, bool tiled) {
      return compile([&, tiled](const std::vector<Array>& in) {
        const Array h = rms_norm(in[0], nw, 1e-5f);
        const Array y = tiled ? quantized_matmul_tiled(h, w, s, b, 64) : quantized_matmul(h, w, s, b, true, 64, 4);
        const Array gate = slice(y, {0, 0}, {m, f}), up = slice(y, {0, f}, {m, 2 * f});
        const Array r =
            tiled ? quantized_matmul_tiled(in[0], w, s, b, 64) : quantized_matmul(in[0], w, s, b, true, 64, 4);
        return std::vector<Array>{gate * sigmoid(gate) * up, in[1] + r};
      });
    };
    const std::vector<Array> in{
        kt::from_values(kt::random_values(m * k, bfloat16, 74, -2, 2), {m, k}, bfloat16),
        kt::from_values(kt::random_values(m * 2 * f, bfloat16, 75, -2, 2), {m, 2 * f}, bfloat16)};
    const std::vector<Array> got = joined(tw, ts, tb, true)(in), want = joined(packed, scales, biases, false)(in);
    kt::expect_same_bits(got[0], want[0], "gated, rows " + std::to_string(m));
    kt::expect_same_bits(got[1], want[1], "residual, rows " + std::to_string(m));
  }
}

TEST(QuantizedMatmul, CompiledEqualsEager) {
  auto wv = kt::random_values(64 * 256, float32, 5);
  auto [packed, scales, biases] = quantize(kt::from_values(wv, {64, 256}, float32), 64, 4);
  for (int64_t m : {1, 4, 16}) {
    Array x = kt::from_values(kt::random_values(m * 256, bfloat16, 6), {m, 256}, bfloat16);
    auto f = compile([&](const Array& a) { return quantized_matmul(a * 2.0f, packed, scales, biases) + 1.0f; });
    kt::expect_same_bits(f(x), quantized_matmul(x * 2.0f, packed, scales, biases) + 1.0f, "m " + std::to_string(m));
  }
}

TEST(Quantized, Errors) {
  Array w = ones({4, 64});
  kt::expect_error([&] { quantize(w, 16, 4); }, "[quantize] group_size must be 32, 64 or 128, got 16");
  kt::expect_error([&] { quantize(w, 64, 7); }, "[quantize] bits must be 2, 3, 4, 5, 6 or 8, got 7");
  kt::expect_error(
      [&] {
        quantize(ones({4, 96}), 64, 4);
      },
      "[quantize] the last axis (96 in (4,96)) must be a multiple of group_size 64");
  kt::expect_error(
      [&] {
        quantize(ones({4, 64}, int32), 64, 4);
      },
      "[quantize] w must be float32, float16 or bfloat16, got int32");
  auto [p, s, b] = quantize(w, 64, 4);
  kt::expect_error([&] { dequantize(astype(p, int32), s, b); },
                   "[dequantize] packed weights must be uint32, got int32");
  kt::expect_error([&] { dequantize(p, s, b, 32, 4); },
                   "[dequantize] packed weights (4,8) hold 64 values per row at 4 bits, which does not match scales "
                   "(4,1) with groups of 32");
  kt::expect_error(
      [&] {
        dequantize(p, s, ones({4, 2}));
      },
      "[dequantize] scales (4,1) and biases (4,2) differ in shape");
  kt::expect_error(
      [&] {
        quantized_matmul(ones({2, 32}), p, s, b);
      },
      "[quantized_matmul] inner dimensions differ: x (2,32) against 64 (weights (4,8) transposed at 4 bits)");
  kt::expect_error(
      [&] {
        quantized_matmul(ones({2, 64}, float64), p, s, b);
      },
      "[quantized_matmul] x must be float32, float16 or bfloat16, got float64");
  kt::expect_error(
      [&] {
        quantized_matmul(ones({2, 64}), reshape(p, {32}), s, b);
      },
      "[quantized_matmul] the packed weights must be 2-D, got (32)");
  auto [p24, s24, b24] = quantize(ones({24, 256}), 64, 4);
  kt::expect_error(
      [&] {
        quantized_matmul_tiled(ones({1, 256}), p24, s24, b24, 64);
      },
      "[quantized_matmul] tile order needs transposed 4-bit weights of whole tiles (rows a multiple of 16, values "
      "of 256), got (24,32) at 4 bits");
  kt::expect_error(
      [&] { quant_tiles::tiled(p24, s24, b24, 64); },
      "[quant_tiles] tile order needs 4-bit weights of whole tiles: rows a multiple of 16 and values of 256, got "
      "packed (24,32) with scales (24,4) in groups of 64");
}

TEST(Quantized, PrintAndEquivalence) {
  QuantizedMatmul a({64, 4}, true), b({64, 4}, true), c({64, 8}, true), d({64, 4}, false), e({32, 4}, true);
  EXPECT_TRUE(a.is_equivalent(b));
  EXPECT_FALSE(a.is_equivalent(c));
  EXPECT_FALSE(a.is_equivalent(d));
  EXPECT_FALSE(a.is_equivalent(e));
  EXPECT_EQ(printed(a), "quantized_matmul(group_size=64,bits=4,transpose=true)");
  EXPECT_EQ(printed(Quantize({32, 3})), "quantize(group_size=32,bits=3)");
  EXPECT_FALSE(Quantize({32, 3}).is_equivalent(Quantize({32, 4})));
  EXPECT_FALSE(Dequantize({32, 3}).is_equivalent(Dequantize({64, 3})));
  EXPECT_EQ(printed(Dequantize({128, 8})), "dequantize(group_size=128,bits=8)");
  QuantizedMatmul tiled({64, 4, true}, true);
  EXPECT_FALSE(a.is_equivalent(tiled));
  EXPECT_EQ(printed(tiled), "quantized_matmul(group_size=64,bits=4,tiled,transpose=true)");
}
