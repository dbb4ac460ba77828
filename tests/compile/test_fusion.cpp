// Fusion: kernel counts, exact agreement with eager results, the interpreter fallback.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "backend/cpu/jit.h"
#include "../../bench/workloads.h"
#include "fused_kernels.h"
#include "reference.h"
#include <kiln/kiln.h>

using namespace kiln;

namespace {

// These tests compare generated kernels with eager ones: every call uses them.
[[maybe_unused]] ::testing::Environment* const wait_env =
    ::testing::AddGlobalTestEnvironment(new kt::WaitForFusedKernels);

Array rand_of(const Shape& s, Dtype d, uint64_t seed) {
  return kt::from_values(kt::random_values(kt::numel(s), d, seed), s, d);
}

void expect_bits_equal(const Array& a, const Array& b, const std::string& ctx) {
  ASSERT_EQ(a.shape(), b.shape()) << ctx;
  ASSERT_EQ(a.dtype(), b.dtype()) << ctx;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(y[i])) {
      EXPECT_TRUE(std::isnan(x[i])) << ctx << " at " << i;
    } else {
      EXPECT_EQ(x[i], y[i]) << ctx << " at " << i;
    }
  }
}

using bench::chain10;  // the benchmarks' ten-op chain

uint64_t kernels_for(const std::function<void()>& f) {
  reset_stats();
  f();
  return stats().kernels_launched;
}

}  // namespace

TEST(Fusion, TenOpChainIsOneKernel) {
  auto f = compile(std::function<Array(const Array&)>(chain10));
  Array x = rand_of({1000}, float32, 1);
  x.eval();
  f(x).eval();  // trace and compile
  EXPECT_EQ(kernels_for([&] { f(x).eval(); }), 1u);
  EXPECT_EQ(kernels_for([&] { chain10(x).eval(); }), 10u);
  expect_bits_equal(f(x), chain10(x), "chain");
}

TEST(Fusion, FusedResultsEqualEagerBitForBitInEveryDtype) {
  auto fn = [](const std::vector<Array>& in) {
    Array a = in[0], b = in[1];
    Array t = exp(a * 0.5) - b / (abs(a) + 1.0);
    return std::vector<Array>{t * t + maximum(a, b), where(a > b, t, -t), astype(t, float32) * 3.0f};
  };
  for (Dtype d : {float16, bfloat16, float32, float64}) {
    auto f = compile(fn);
    Array a = rand_of({7, 9}, d, 2), b = rand_of({9}, d, 3);
    auto got = f({a, b});
    auto want = fn({a, b});
    for (size_t i = 0; i < got.size(); ++i)
      expect_bits_equal(got[i], want[i], std::string(dtype_name(d)) + " out " + std::to_string(i));
  }
  auto g = compile([](const std::vector<Array>& in) {
    Array a = in[0], b = in[1];
    return std::vector<Array>{(a * b + 7) % 5, (a << 2) ^ b, floor_divide(a - b, b) * 3};
  });
  for (Dtype d : {int8, uint16, int32, int64}) {
    Array a = rand_of({5, 6}, d, 4), b = rand_of({5, 6}, d, 5);
    auto got = g({a, b});
    expect_bits_equal(got[0], (a * b + 7) % 5, dtype_name(d));
    expect_bits_equal(got[1], (a << 2) ^ b, dtype_name(d));
    expect_bits_equal(got[2], floor_divide(a - b, b) * 3, dtype_name(d));
  }
}

TEST(Fusion, BroadcastTransposedAndSlicedInputs) {
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{tanh(in[0]) * in[1] + in[2]}; });
  std::vector<double> v = kt::random_values(12, float32, 6);
  for (kt::Layout l : {kt::Layout::contiguous, kt::Layout::transposed, kt::Layout::strided}) {
    Array x = kt::with_layout(v, {3, 4}, float32, l);
    Array col = rand_of({3, 1}, float32, 7), row = rand_of({4}, float32, 8);
    expect_bits_equal(f({x, col, row})[0], tanh(x) * col + row, kt::layout_name(l));
  }
  Array big = rand_of({300, 301}, float32, 9);  // above the thread-pool threshold
  Array bias = rand_of({301}, float32, 10), scale = rand_of({300, 1}, float32, 11);
  expect_bits_equal(f({big, scale, bias})[0], tanh(big) * scale + bias, "large");
  // Transposed inputs at least 32 x 32 go in blocks: batched, sides no block divides, with a
  // broadcast column and row beside them.
  Array batch = rand_of({3, 70, 45}, float32, 12);
  Array batch_col = rand_of({3, 45, 1}, float32, 13), batch_row = rand_of({70}, float32, 14);
  Array xt = transpose(batch, {0, 2, 1});
  expect_bits_equal(f({xt, batch_col, batch_row})[0], tanh(xt) * batch_col + batch_row, "batched transposed");
  Array plain = rand_of({45, 70}, float32, 15);
  expect_bits_equal(f({plain, xt, batch_row})[0], tanh(plain) * xt + batch_row, "transposed second");
  Array empty = zeros({0, 4}, float32);
  EXPECT_EQ(f({empty, empty, empty})[0].shape(), (Shape{0, 4}));
}

TEST(Fusion, SeveralOutputsAndIntermediatesUsedOutside) {
  auto f = compile([](const std::vector<Array>& in) {
    Array a = exp(in[0]);
    Array b = a * 2.0f;
    Array c = b + in[0];
    Array s = sum(b, {0});  // b is read by a reduction outside the region
    return std::vector<Array>{c, s, a};
  });
  Array x = rand_of({64, 8}, float32, 12);
  auto r = f({x});
  expect_bits_equal(r[0], exp(x) * 2.0f + x, "c");
  kt::expect_close(r[1], sum(exp(x) * 2.0f, {0}).to_vector<double>(), "s");
  expect_bits_equal(r[2], exp(x), "a");
}

TEST(Fusion, DiamondsFuseWithoutCycles) {
  // x -> (exp, sin) -> add, with a reduction path that must stay outside.
  auto f = compile([](const std::vector<Array>& in) {
    Array x = in[0];
    Array m = max(x, {1}, true);
    Array d = exp(x - m) + sin(x);
    return std::vector<Array>{d * 2.0f};
  });
  Array x = rand_of({5, 6}, float32, 13);
  Array m = max(x, {1}, true);
  expect_bits_equal(f({x})[0], (exp(x - m) + sin(x)) * 2.0f, "diamond");
}

TEST(Fusion, InterpreterFallbackWithoutCompiler) {
  cpu::reset_jit_for_tests("/nonexistent/compiler");
  auto f = compile(std::function<Array(const Array&)>(chain10));
  Array x = rand_of({5000}, float32, 14);
  expect_bits_equal(f(x), chain10(x), "interpreted chain");
  EXPECT_EQ(kernels_for([&] { f(x).eval(); }), 1u);
  cpu::reset_jit_for_tests("");
}

namespace {

Array rmsnorm(const Array& x, const Array& w) { return x * rsqrt(mean(x * x, {-1}, true) + 1e-5f) * w; }
Array layernorm(const Array& x, const Array& w, const Array& b) {
  Array m = mean(x, {-1}, true);
  Array d = x - m;
  return d * rsqrt(mean(d * d, {-1}, true) + 1e-5f) * w + b;
}

}  // namespace

TEST(RowFusion, NormsAndSoftmaxAreOneKernel) {
  Array x = rand_of({33, 64}, float32, 20), w = rand_of({64}, float32, 21), b = rand_of({64}, float32, 22);
  auto frms = compile(std::function<Array(const Array&, const Array&)>(rmsnorm));
  auto fsm = compile(std::function<Array(const Array&)>([](const Array& a) { return softmax(a, {-1}); }));
  auto fln = compile(std::function<Array(const Array&, const Array&, const Array&)>(layernorm));
  auto fss = compile(std::function<Array(const Array&)>([](const Array& a) { return sum(a * a); }));
  kt::expect_close(frms(x, w), rmsnorm(x, w).to_vector<double>(), "rmsnorm", 4);
  kt::expect_close(fsm(x), softmax(x, {-1}).to_vector<double>(), "softmax", 4);
  kt::expect_close(fln(x, w, b), layernorm(x, w, b).to_vector<double>(), "layernorm", 8, 1e-3);
  kt::expect_close(fss(x), sum(x * x).to_vector<double>(), "sum of squares", 4);
  EXPECT_EQ(kernels_for([&] { frms(x, w).eval(); }), 1u);
  EXPECT_EQ(kernels_for([&] { fsm(x).eval(); }), 1u);
  EXPECT_EQ(kernels_for([&] { fln(x, w, b).eval(); }), 1u);
  EXPECT_EQ(kernels_for([&] { fss(x).eval(); }), 1u);
}

TEST(RowFusion, HalfPrecisionNaNInfAndLongRows) {
  auto fsm = compile(std::function<Array(const Array&)>([](const Array& a) { return softmax(a, {-1}); }));
  for (Dtype d : {float16, bfloat16, float64}) {
    Array x = rand_of({4, 40}, d, 23);
    kt::expect_close(fsm(x), softmax(x, {-1}).to_vector<double>(), dtype_name(d), 2);
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Array special = kt::from_values({1, 2, inf, 0, -inf, -inf, -inf, -inf, nan, 1, 2, 3}, {3, 4}, float32);
  kt::expect_close(fsm(special), softmax(special, {-1}).to_vector<double>(), "special values");
  Array wide = rand_of({3, 70000}, float32, 24);  // rows longer than one accumulation block
  auto fss = compile(std::function<Array(const Array&)>([](const Array& a) { return sum(a * a, {-1}); }));
  kt::expect_close(fss(wide), sum(wide * wide, {-1}).to_vector<double>(), "long rows", 8);
}

TEST(RowFusion, ShapelessReplayAtOtherSizes) {
  auto f = compile(std::function<Array(const Array&, const Array&)>(rmsnorm), {.shapeless = true});
  for (int64_t rows : {3, 7}) {
    for (int64_t cols : {16, 48}) {
      Array x = rand_of({rows, cols}, float32, static_cast<uint64_t>(rows * cols)), w = rand_of({cols}, float32, 25);
      kt::expect_close(f(x, w), rmsnorm(x, w).to_vector<double>(), "shapeless rmsnorm", 4);
    }
  }
  // Reductions over axes of size 1 at trace time stay correct at other sizes.
  auto g = compile(std::function<Array(const Array&)>([](const Array& a) { return sum(a, {1}) + mean(a, {1}); }),
                   {.shapeless = true});
  Array one = rand_of({4, 1}, float32, 26), many = rand_of({4, 6}, float32, 27);
  kt::expect_close(g(one), (sum(one, {1}) + mean(one, {1})).to_vector<double>(), "size 1");
  kt::expect_close(g(many), (sum(many, {1}) + mean(many, {1})).to_vector<double>(), "size 6");
}

TEST(RowFusion, TransposedInputsAndSeveralOutputs) {
  auto f = compile([](const std::vector<Array>& in) {
    Array x = in[0];
    Array m = max(x, {-1}, true);
    Array e = exp(x - m);
    Array s = sum(e, {-1}, true);
    return std::vector<Array>{e / s, s, m};
  });
  std::vector<double> v = kt::random_values(6 * 9, float32, 28);
  for (kt::Layout l : {kt::Layout::contiguous, kt::Layout::transposed, kt::Layout::strided}) {
    Array x = kt::with_layout(v, {6, 9}, float32, l);
    auto r = f({x});
    Array m = max(x, {-1}, true);
    Array e = exp(x - m);
    kt::expect_close(r[0], (e / sum(e, {-1}, true)).to_vector<double>(), kt::layout_name(l), 4);
    kt::expect_close(r[1], sum(e, {-1}, true).to_vector<double>(), kt::layout_name(l), 4);
    kt::expect_close(r[2], m.to_vector<double>(), kt::layout_name(l));
  }
}

// Compiled row programs equal eager bit for bit: their sums fold in the eager order
// (whole rows, pairwise halves past 2048, pieces of few long rows), and softmax's last pass
// keeps exp(x - max) in the output for the output pass to read back. With a second output
// of the same values, RMS and layer norms, special values, and bfloat16 (whose compute
// type differs: not kept).
TEST(RowFusion, RowsEqualEagerBitForBit) {
  kt::DefaultDevice cpu;  // the CPU fold order; GPU rows agree with eager within rounding (test_cuda)
  auto body = [](const std::vector<Array>& in) {
    Array x = in[0];
    Array e = exp(x - max(x, {-1}, true));
    Array d = x - mean(x, {-1}, true);
    return std::vector<Array>{e / sum(e, {-1}, true), e, softmax(x * 0.5f, {-1}),
                              x * rsqrt(mean(x * x, {-1}, true) + 1e-6f), d * rsqrt(mean(d * d, {-1}, true) + 1e-5f)};
  };
  auto f = compile(body);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (Dtype d : {float32, float64, bfloat16}) {
    for (int64_t n : {1, 7, 64, 1000, 4096, 4100, 70000}) {
      std::vector<double> v = kt::random_values(5 * n, d, 31 + static_cast<uint64_t>(n), -20, 20);
      v[static_cast<size_t>(n)] = inf;  // row 1: an infinity
      v[static_cast<size_t>(2 * n)] = nan;  // row 2: a NaN
      for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(3 * n + j)] = -inf;  // row 3: all -inf
      Array x = kt::from_values(v, {5, n}, d);
      auto got = f({x});
      auto want = body({x});
      const std::string what = std::string(dtype_name(d)) + " n=" + std::to_string(n);
      for (size_t i = 0; i < got.size(); ++i) expect_bits_equal(got[i], want[i], what + " output " + std::to_string(i));
    }
  }
}

TEST(RowFusion, FallbackWithoutCompilerMatchesEager) {
  cpu::reset_jit_for_tests("/nonexistent/compiler");
  Array x = rand_of({5, 12}, float32, 29), w = rand_of({12}, float32, 30);
  auto f = compile(std::function<Array(const Array&, const Array&)>(rmsnorm));
  expect_bits_equal(f(x, w), rmsnorm(x, w), "unfused row region");
  cpu::reset_jit_for_tests("");
}

namespace {

// The patterns of the fuse_matmul_epilogue pass, by activation (0: none, 1: gelu, 2: gelu_tanh).
Array linear(const Array& x, const Array& w, const Array& b, int act) {
  Array s = matmul(x, w) + b;
  return act == 0 ? s : act == 1 ? gelu(s) : gelu_tanh(s);
}

std::string dot_of(const CompiledFunction& f, const std::vector<Array>& in) {
  std::ostringstream os;
  export_to_dot(os, f, in);
  return os.str();
}

bool on_gpu() { return default_device().type != Device::Type::cpu; }

// Compiled against eager: bit for bit on the CPU. On a GPU (KILN_TEST_DEVICE=cuda)
// cuBLASLt's epilogue rounds once, after bias and its own tanh GELU, so within rounding
// there (test_cuda checks the GPU against float64 more tightly).
void expect_epilogue_equal(const Array& got, const Array& want, int act, const std::string& ctx) {
  if (!on_gpu()) return expect_bits_equal(got, want, ctx);
  ASSERT_EQ(got.shape(), want.shape()) << ctx;
  ASSERT_EQ(got.dtype(), want.dtype()) << ctx;
  double scale = act == 2 ? std::max(4.0, 2e-3 / kt::rel_tol(want.dtype())) : 4.0;
  kt::expect_close(got, want.to_vector<double>(), ctx, scale, 1.0);
}

}  // namespace

TEST(MatmulEpilogue, CompiledEqualsEagerBitForBit) {
  struct Case {
    Shape x, w, b;
    kt::Layout layout;
  };
  const Case cases[] = {
      {{7, 5}, {5, 9}, {9}, kt::Layout::contiguous},
      {{2, 3, 4}, {4, 6}, {1, 6}, kt::Layout::transposed},  // x a transposed view, w shared by the batch
      {{3, 4, 5}, {3, 5, 6}, {6}, kt::Layout::strided},  // batched w
      {{1, 8}, {8, 1}, {1}, kt::Layout::contiguous},
      {{40, 64}, {64, 300}, {300}, kt::Layout::contiguous},  // above the thread-pool threshold
      {{0, 4}, {4, 3}, {3}, kt::Layout::contiguous},
  };
  uint64_t seed = 40;
  for (Dtype d : {float16, bfloat16, float32, float64}) {
    for (auto& c : cases) {
      Array x = kt::with_layout(kt::random_values(kt::numel(c.x), d, ++seed, -2, 2), c.x, d, c.layout);
      Array w = rand_of(c.w, d, ++seed), b = rand_of(c.b, d, ++seed);
      for (int act = 0; act < 3; ++act) {
        auto fn = [act](const std::vector<Array>& in) { return std::vector<Array>{linear(in[0], in[1], in[2], act)}; };
        CompiledFunction f = compile(fn);
        std::string ctx = std::string(dtype_name(d)) + " " + kt::layout_name(c.layout) + " x" +
                          std::to_string(c.x.size()) + "-d act " + std::to_string(act);
        EXPECT_NE(dot_of(f, {x, w, b}).find("matmul_epilogue"), std::string::npos) << ctx;
        expect_epilogue_equal(f({x, w, b})[0], linear(x, w, b, act), act, ctx);
        if (c.x[0] > 0) {
          EXPECT_EQ(kernels_for([&] { f({x, w, b})[0].eval(); }), 1u) << ctx;
        }
      }
    }
  }
}

TEST(MatmulEpilogue, NaNInfinitiesAndUsesOutsideTheEpilogue) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Array x = kt::from_values({1, -2, inf, 0.5, nan, 3, -inf, 1e30, -1e30, 2, 0, -1}, {4, 3}, float32);
  Array w = rand_of({3, 5}, float32, 60);
  Array b = kt::from_values({0, -inf, 1, nan, 2}, {5}, float32);
  for (int act = 0; act < 3; ++act) {
    if (act == 2 && on_gpu()) continue;  // cuBLASLt's own GELU decides its infinities and NaNs
    auto f =
        compile([act](const std::vector<Array>& in) { return std::vector<Array>{linear(in[0], in[1], in[2], act)}; });
    expect_epilogue_equal(f({x, w, b})[0], linear(x, w, b, act), act, "specials act " + std::to_string(act));
  }
  // The product also returned: no epilogue, and the same values.
  auto g = compile([](const std::vector<Array>& in) {
    Array p = matmul(in[0], in[1]);
    return std::vector<Array>{gelu_tanh(p + in[2]), p * 2.0f};
  });
  Array y = rand_of({6, 3}, float32, 61);
  EXPECT_EQ(dot_of(g, {y, w, rand_of({5}, float32, 62)}).find("matmul_epilogue"), std::string::npos);
  Array c = rand_of({5}, float32, 63);
  auto r = g({y, w, c});
  expect_bits_equal(r[0], gelu_tanh(matmul(y, w) + c), "product used twice");
  expect_bits_equal(r[1], matmul(y, w) * 2.0f, "product used twice, second output");
}

TEST(MatmulEpilogue, ShapelessReplaysIncludingABiasThatBroadcastsTheProduct) {
  auto fn = [](const std::vector<Array>& in) { return std::vector<Array>{linear(in[0], in[1], in[2], 2)}; };
  CompiledFunction f = compile(fn, {.shapeless = true});
  Array x = rand_of({5, 3}, bfloat16, 70), w = rand_of({3, 4}, bfloat16, 71), b = rand_of({4}, bfloat16, 72);
  EXPECT_NE(dot_of(f, {x, w, b}).find("matmul_epilogue"), std::string::npos);
  expect_epilogue_equal(f({x, w, b})[0], linear(x, w, b, 2), 2, "traced shapes");
  Array x2 = rand_of({9, 7}, bfloat16, 73), w2 = rand_of({7, 2}, bfloat16, 74), b2 = rand_of({2}, bfloat16, 75);
  expect_epilogue_equal(f({x2, w2, b2})[0], linear(x2, w2, b2, 2), 2, "other shapes");
  // Here the product is (9, 1) and the bias (4,): the result is (9, 4), as eagerly.
  Array w3 = rand_of({7, 1}, bfloat16, 76);
  expect_epilogue_equal(f({x2, w3, b})[0], linear(x2, w3, b, 2), 2, "bias broadcasts the product");
}

TEST(Fusion, GeluRegionsEqualEagerBitForBit) {
  auto fn = [](const std::vector<Array>& in) {
    Array a = in[0];
    return std::vector<Array>{gelu(a * 2.0f + 1.0f) - gelu_tanh(a), gelu_tanh(exp(a) - 3.0f) * a};
  };
  for (Dtype d : {float16, bfloat16, float32, float64}) {
    auto f = compile(fn);
    Array a = kt::from_values(kt::random_values(5000, d, 80, -9, 9), {50, 100}, d);
    auto got = f({a});
    auto want = fn({a});
    for (size_t i = 0; i < got.size(); ++i)
      expect_bits_equal(got[i], want[i], std::string(dtype_name(d)) + " out " + std::to_string(i));
  }
}
