// Fusion: kernel counts, exact agreement with eager results, the interpreter fallback.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/jit.h"
#include "reference.h"
#include <kiln/kiln.h>

using namespace kiln;

namespace {

Array rand_of(const Shape& s, Dtype d, uint64_t seed) { return kt::from_values(kt::random_values(kt::numel(s), d, seed), s, d); }

void expect_bits_equal(const Array& a, const Array& b, const std::string& ctx) {
  ASSERT_EQ(a.shape(), b.shape()) << ctx;
  ASSERT_EQ(a.dtype(), b.dtype()) << ctx;
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(y[i])) EXPECT_TRUE(std::isnan(x[i])) << ctx << " at " << i;
    else EXPECT_EQ(x[i], y[i]) << ctx << " at " << i;
  }
}

Array chain10(const Array& x) {
  Array y = sin(x);
  y = y * 1.5f;
  y = y + x;
  y = sin(y);
  y = y * x;
  y = y + 0.25f;
  y = sin(y);
  y = y * 2.0f;
  y = y + x;
  return sin(y);
}

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
    for (size_t i = 0; i < got.size(); ++i) expect_bits_equal(got[i], want[i], std::string(dtype_name(d)) + " out " + std::to_string(i));
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
