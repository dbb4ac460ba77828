// quantized_matmul with integer activations (QmmActivations::int8 and int16): against a float64
// reference of the same math (x rounded to integer blocks of 32 as kiln/nn.h specifies, then exact
// products), every bit width and group size, rows 1-9 (the decode tiles and their remainders), odd
// output counts, zero, NaN and infinite blocks, and against the float-activation product it
// approximates.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "backend/cpu/quantized_int8.h"
#include "kiln/executable.h"
#include "nn_ref.h"
#include "ops/nn.h"

using namespace kiln;

namespace {

constexpr auto kInt8 = QmmActivations::int8;
constexpr QmmActivations kIntegers[] = {QmmActivations::int8, QmmActivations::int16};

/* The largest code of a block: its largest |x| rounds to it. */
float max_code(QmmActivations a) { return a == QmmActivations::int8 ? 127.0f : 16256.0f; }

/* x [m, k] rounded as the op specifies: codes q and one scale a block (NaN for a block with a
   NaN or an infinity, whose codes are then 0). The steps are float32, as specified. */
void round_rows(const std::vector<double>& x, size_t m, size_t k, QmmActivations a, std::vector<int>& q,
                std::vector<double>& d) {
  q.assign(m * k, 0);
  d.assign(m * k / 32, 0);
  for (size_t b = 0; b < m * k / 32; ++b) {
    float amax = 0;
    bool finite = true;
    for (size_t i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(static_cast<float>(x[b * 32 + i])));
      finite = finite && std::isfinite(x[b * 32 + i]);
    }
    if (!finite) {
      d[b] = NAN;
      continue;
    }
    const float id = amax > 0 ? max_code(a) / amax : 0.0f;
    for (size_t i = 0; i < 32; ++i)
      q[b * 32 + i] = static_cast<int>(std::nearbyint(static_cast<float>(x[b * 32 + i]) * id));
    d[b] = amax / max_code(a);
  }
}

/* The integer product in float64 from the codes: y [m, n] and the sums of |terms| for tolerances. */
void integer_ref(const std::vector<double>& x, const std::vector<uint32_t>& packed, const std::vector<double>& scales,
                 const std::vector<double>& biases, size_t m, size_t n, size_t k, int gs, int bits, QmmActivations a,
                 std::vector<double>& y, std::vector<double>& mag) {
  std::vector<int> q;
  std::vector<double> d;
  round_rows(x, m, k, a, q, d);
  const size_t words = k * static_cast<size_t>(bits) / 32, groups = k / static_cast<size_t>(gs);
  y.assign(m * n, 0);
  mag.assign(m * n, 0);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) {
      for (size_t b = 0; b < k / 32; ++b) {
        const size_t g = j * groups + b * 32 / static_cast<size_t>(gs);
        double dot = 0, sum = 0;
        for (size_t e = 0; e < 32; ++e) {
          const int qx = q[i * k + b * 32 + e];
          dot += static_cast<double>(kt::unpack_value(packed, words, j, b * 32 + e, bits)) * qx;
          sum += qx;
        }
        const double ds = d[i * k / 32 + b];
        y[i * n + j] += scales[g] * ds * dot + biases[g] * ds * sum;
        mag[i * n + j] += std::fabs(scales[g] * ds * dot) + std::fabs(biases[g] * ds * sum);
      }
    }
  }
}

}  // namespace

TEST(QuantizedMatmulIntegers, AgainstFloat64AllBitsGroupsRowsAndDtypes) {
  struct Case {
    int64_t m, n, k;
  };
  std::vector<Case> cases;
  for (int64_t m = 1; m <= 9; ++m) cases.push_back({m, m % 2 ? 17 : 8, 128});
  for (Case c : {Case{1, 1, 32}, Case{2, 33, 64}, Case{3, 9, 96}, Case{1, 8, 160}, Case{5, 20, 384}, Case{12, 40, 256},
                 Case{1, 70, 576}})
    cases.push_back(c);
  for (Case sh : cases) {
    for (int bits : {2, 3, 4, 5, 6, 8}) {
      for (int gs : {32, 64, 128}) {
        if (sh.k % gs != 0) continue;
        for (auto [d, act] : {std::pair{float32, kInt8},
                              {float16, kInt8},
                              {bfloat16, kInt8},
                              {float32, kIntegers[1]},
                              {bfloat16, kIntegers[1]}}) {
          std::ostringstream ctx;
          ctx << "m " << sh.m << " n " << sh.n << " k " << sh.k << " bits " << bits << " group " << gs << " "
              << dtype_name(d) << " " << kQmmActivationNames[static_cast<int>(act)];
          auto wv = kt::random_values(sh.n * sh.k, float32, 11 + static_cast<uint64_t>(bits));
          auto [packed, scales, biases] = quantize(kt::from_values(wv, {sh.n, sh.k}, d), gs, bits);
          auto xv = kt::random_values(sh.m * sh.k, d, 21 + static_cast<uint64_t>(sh.m), -3, 3);
          Array y = quantized_matmul(kt::from_values(xv, {sh.m, sh.k}, d), packed, scales, biases, true, gs, bits, act);
          ASSERT_EQ(y.shape(), (Shape{sh.m, sh.n})) << ctx.str();
          ASSERT_EQ(y.dtype(), d);
          std::vector<double> want, mag;
          integer_ref(xv, packed.to_vector<uint32_t>(), scales.to_vector<double>(), biases.to_vector<double>(),
                      static_cast<size_t>(sh.m), static_cast<size_t>(sh.n), static_cast<size_t>(sh.k), gs, bits, act,
                      want, mag);
          for (size_t i = 0; i < want.size(); ++i) mag[i] += std::fabs(want[i]) * kt::rel_tol(d) / 1e-5;
          kt::expect_within(y, want, mag, 1e-5, ctx.str());
        }
      }
    }
  }
}

// The rounding moves each product by at most half a code step of x a block: close to the
// float-activation product on smooth data, and equal where x is already on the int8 grid.
TEST(QuantizedMatmulIntegers, ApproximatesTheFloatProductAndIsExactOnTheGrid) {
  auto wv = kt::random_values(48 * 256, float32, 5);
  auto [packed, scales, biases] = quantize(kt::from_values(wv, {48, 256}, float32), 32, 4);
  auto xv = kt::random_values(3 * 256, float32, 6, -2, 2);
  Array x = kt::from_values(xv, {3, 256}, float32);
  std::vector<double> exact = quantized_matmul(x, packed, scales, biases, true, 32, 4).to_vector<double>();
  for (QmmActivations act : kIntegers) {
    std::vector<double> rounded = quantized_matmul(x, packed, scales, biases, true, 32, 4, act).to_vector<double>();
    auto deq = kt::dequantize_ref(packed.to_vector<uint32_t>(), scales.to_vector<double>(), biases.to_vector<double>(),
                                  48, 256, 32, 4);
    for (size_t i = 0; i < 3; ++i) {
      for (size_t j = 0; j < 48; ++j) {
        double bound = 0;  // |w| times half a step (max|x| / (2 max_code)) of each block
        for (size_t b = 0; b < 8; ++b) {
          double amax = 0;
          for (size_t e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(xv[i * 256 + b * 32 + e]));
          for (size_t e = 0; e < 32; ++e) bound += std::fabs(deq[j * 256 + b * 32 + e]) * amax / (2 * max_code(act));
        }
        const double tol = act == kInt8 ? 1e-4 : 2e-5;  // the float32 sums' own rounding
        EXPECT_LE(std::fabs(rounded[i * 48 + j] - exact[i * 48 + j]), bound * 1.001 + tol) << i << " " << j;
      }
    }
    // Multiples of max / 127 with the max present: the codes are exact (int16's are 128 times them).
    std::vector<double> grid(256);
    for (size_t e = 0; e < 256; ++e)
      grid[e] = e % 32 == 0 ? 127.0 / 64 : static_cast<double>(static_cast<int>(e * 37 % 255) - 127) / 64;
    Array xg = kt::from_values(grid, {1, 256}, float32);
    kt::expect_within(quantized_matmul(xg, packed, scales, biases, true, 32, 4, act),
                      quantized_matmul(xg, packed, scales, biases, true, 32, 4).to_vector<double>(),
                      std::vector<double>(48, 1.0), 1e-4, "on the grid");
  }
}

// The VNNI kernels (vpdpbusd, vpdpwssd) against the AVX2 ones: the integer sums are exact and
// the float steps the same, so every output has the same bits. Odd shapes reach every tile and
// remainder (decode rows of 8 and 1, pairs of blocks and a last one, prefill tiles of 2 x 4 and
// single rows); x spans codes from 0 to +-16256, with NaN and infinite blocks.
TEST(QuantizedMatmulIntegers, VnniGivesTheAvx2Bits) {
  if (!detail::cpu_has_vnni()) GTEST_SKIP() << "this CPU has no AVX-VNNI";
  struct Case {
    int64_t m, n, k;
  };
  const Case cases[] = {{1, 1, 32},  {1, 17, 96}, {1, 33, 576}, {2, 9, 160},  {3, 25, 64},
                        {4, 8, 128}, {5, 40, 96}, {9, 23, 288}, {1, 70, 1536}};
  const bool before = detail::use_cpu_vnni(true);
  for (Case c : cases) {
    for (int bits : {4, 8}) {
      for (int gs : {32, 64, 128}) {
        if (c.k % gs != 0) continue;
        for (Dtype d : {float32, float16, bfloat16}) {
          auto wv = kt::random_values(c.n * c.k, float32, 31 + static_cast<uint64_t>(bits + gs));
          auto [packed, scales, biases] = quantize(kt::from_values(wv, {c.n, c.k}, d), gs, bits);
          auto xv = kt::random_values(c.m * c.k, float32, 41 + static_cast<uint64_t>(c.m + c.k), -3, 3);
          for (size_t e = 0; e < xv.size(); e += 7) xv[e] *= 1e3;  // blocks of wide range: small codes beside large
          if (c.m > 2) xv[static_cast<size_t>(c.k + 5)] = NAN, xv[static_cast<size_t>(2 * c.k)] = -INFINITY;
          Array x = kt::from_values(xv, {c.m, c.k}, float32);
          for (QmmActivations act : kIntegers) {
            std::ostringstream ctx;
            ctx << "m " << c.m << " n " << c.n << " k " << c.k << " bits " << bits << " group " << gs << " "
                << dtype_name(d) << " " << kQmmActivationNames[static_cast<int>(act)];
            detail::use_cpu_vnni(true);
            Array vnni = quantized_matmul(x, packed, scales, biases, true, gs, bits, act);
            vnni.eval();
            detail::use_cpu_vnni(false);
            Array avx2 = quantized_matmul(x, packed, scales, biases, true, gs, bits, act);
            avx2.eval();
            kt::expect_same_bits(vnni, avx2, ctx.str());
          }
        }
      }
    }
  }
  detail::use_cpu_vnni(before);
}

TEST(QuantizedMatmulIntegers, ZeroNanAndInfiniteBlocks) {
  for (auto [bits, act] : {std::pair{4, kInt8}, {8, kInt8}, {3, kInt8}, {4, kIntegers[1]}, {8, kIntegers[1]}}) {
    auto wv = kt::random_values(16 * 128, float32, 3);
    auto [packed, scales, biases] = quantize(kt::from_values(wv, {16, 128}, float32), 32, bits);
    std::vector<double> xv = kt::random_values(5 * 128, float32, 4);
    for (size_t e = 0; e < 32; ++e) xv[e] = 0;  // row 0: a block of zeros contributes nothing
    xv[128 + 40] = NAN;  // row 1: NaN
    xv[256 + 127] = INFINITY;  // row 2: infinity
    xv[384 + 3] = -INFINITY;  // row 3: -infinity; row 4 stays finite
    Array y = quantized_matmul(kt::from_values(xv, {5, 128}, float32), packed, scales, biases, true, 32, bits, act);
    std::vector<double> got = y.to_vector<double>(), want, mag;
    integer_ref(xv, packed.to_vector<uint32_t>(), scales.to_vector<double>(), biases.to_vector<double>(), 5, 16, 128,
                32, bits, act, want, mag);
    for (size_t j = 0; j < 16; ++j) {
      EXPECT_NEAR(got[j], want[j], 1e-5 * mag[j]) << bits;
      for (size_t r : {1, 2, 3}) EXPECT_TRUE(std::isnan(got[r * 16 + j])) << bits << " row " << r;
      EXPECT_TRUE(std::isfinite(got[4 * 16 + j])) << bits;
    }
  }
}

TEST(QuantizedMatmulIntegers, BatchAxesCompiledAndEmpty) {
  auto [packed, scales, biases] =
      quantize(kt::from_values(kt::random_values(24 * 64, float32, 8), {24, 64}, float32), 32, 4);
  auto xv = kt::random_values(2 * 3 * 64, float32, 9);
  for (QmmActivations act : kIntegers) {
    Array xs = kt::with_layout(xv, {2, 3, 64}, float32, kt::Layout::transposed);
    Array y = quantized_matmul(xs, packed, scales, biases, true, 32, 4, act);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 24}));
    Array flat = quantized_matmul(kt::from_values(xv, {6, 64}, float32), packed, scales, biases, true, 32, 4, act);
    kt::expect_same_bits(y, reshape(flat, {2, 3, 24}), "batch axes");
    auto f =
        compile([&](const Array& a) { return quantized_matmul(a * 2.0f, packed, scales, biases, true, 32, 4, act); });
    Array x = kt::from_values(xv, {6, 64}, float32);
    kt::expect_same_bits(f(x), quantized_matmul(x * 2.0f, packed, scales, biases, true, 32, 4, act), "compiled");
    EXPECT_EQ(quantized_matmul(zeros({0, 64}), packed, scales, biases, true, 32, 4, act).shape(), (Shape{0, 24}));
  }
}

TEST(QuantizedMatmulIntegers, ErrorsPrintAndEquivalence) {
  // Not transposed, the groups run along N: K may be any length, so int8 blocks of K are refused.
  auto [p, s, b] = quantize(ones({33, 64}), 32, 4);
  kt::expect_error(
      [&] {
        quantized_matmul(ones({2, 33}), p, s, b, false, 32, 4, kInt8);
      },
      "[quantized_matmul] int8 activations need transpose (weights [N, K], groups along K)");
  QuantizedMatmul exact({32, 4}, true), int8({32, 4}, true, kInt8);
  EXPECT_FALSE(exact.is_equivalent(int8));
  EXPECT_TRUE(int8.is_equivalent(QuantizedMatmul({32, 4}, true, kInt8)));
  std::ostringstream os;
  int8.print(os);
  EXPECT_EQ(os.str(), "quantized_matmul(group_size=32,bits=4,transpose=true,activations=int8)");
  QuantizedMatmul int16({32, 4}, true, kIntegers[1]);
  EXPECT_FALSE(int16.is_equivalent(int8));
  kt::expect_error(
      [&] {
        quantized_matmul(ones({2, 33}), p, s, b, false, 32, 4, kIntegers[1]);
      },
      "[quantized_matmul] int16 activations need transpose (weights [N, K], groups along K)");
}

// kgraph spells the choice as the C++ argument: activations=exact|int8|int16.
TEST(QuantizedMatmulIntegers, KgraphAttribute) {
  auto [w, s, b] = quantize(kt::from_values(kt::random_values(24 * 64, float32, 12), {24, 64}, float32), 32, 4);
  Array x = kt::from_values(kt::random_values(2 * 64, float32, 13), {2, 64}, float32);
  auto text = [](const std::string& act) {
    return "kgraph 1\ngraph g {\n  input x : float32[2, 64]\n  input w : uint32[24, 8]\n  input s : float32[24, 2]\n"
           "  input b : float32[24, 2]\n  y = quantized_matmul(x, w, s, b) {group_size=32, bits=4, activations=" +
           act + "}\n  output y\n}\n";
  };
  for (QmmActivations act : kIntegers) {
    const char* name = kQmmActivationNames[static_cast<int>(act)];
    Executable exe(parse_graph(text(name)), ExecMode::lazy, default_device());  // where the op below runs
    Array y = exe.run_typed({{"x", x}, {"w", w}, {"s", s}, {"b", b}})[0];
    kt::expect_same_bits(y, quantized_matmul(x, w, s, b, true, 32, 4, act), name);
  }
  try {
    parse_graph(text("fast"), "q.kgraph");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "[quantized_matmul] attribute 'activations': 'fast' is not one of exact, int8, int16"),
              std::string::npos)
        << e.what();
  }
}
