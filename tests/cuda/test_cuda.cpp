// The CUDA backend against the CPU: every op for the main dtypes, views, layouts,
// matmul, compile (fused and row-fused regions), random graphs, the allocator and
// streams. Without a GPU every test skips, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "backend/common/math.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/plan_graph.h"
#include "backend/cuda/allocator.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/streams.h"
#include "core/config.h"
#include "kiln/half.h"
#include "ops/nn.h"
#include "fused_kernels.h"
#include "fuzz/random_graph.h"
#include "reference.h"

using namespace kiln;

namespace {

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device (" << cuda::unavailable_reason() << "): CUDA tests skipped";
  }
  void TearDown() override { set_default_device(Device::cpu()); }
};

const Device gpu = Device::cuda(0);

// These tests count compiles and graph replays from a function's first calls: its kernels then,
// not the interpreter of the interim tier (tests/cuda/test_cuda_tiers.cpp checks that).
const auto* const wait_env = ::testing::AddGlobalTestEnvironment(new kt::WaitForFusedKernels);

double tol(Dtype d) {
  switch (d) {
    case float16: return 2e-3;
    case bfloat16: return 1.6e-2;
    case float32: return 2e-5;
    case float64: return 1e-12;
    default: return 0;
  }
}

// GPU result against the CPU's: same shape and dtype, values within rounding.
::testing::AssertionResult close(const Array& g, const Array& c, double scale = 1e-3) {
  if (g.device() != gpu) return ::testing::AssertionFailure() << "result is on " << g.device().str();
  if (g.shape() != c.shape()) return ::testing::AssertionFailure() << "shape differs";
  if (g.dtype() != c.dtype()) return ::testing::AssertionFailure() << "dtype differs";
  auto a = g.to_vector<double>(), b = c.to_vector<double>();
  double t = tol(c.dtype());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] == b[i]) continue;
    if (t > 0 && std::fabs(a[i] - b[i]) <= t * (std::fabs(b[i]) + scale)) continue;
    return ::testing::AssertionFailure() << "element " << i << ": gpu " << a[i] << " cpu " << b[i] << " ("
                                         << dtype_name(c.dtype()) << ")";
  }
  return ::testing::AssertionSuccess();
}

const std::vector<Dtype> kMain = {bool_, int32, int64, float16, bfloat16, float32};
const std::vector<Dtype> kAll = {bool_, uint8,  int8,    int16,    uint32,  int32,
                                 int64, uint64, float16, bfloat16, float32, float64};

Array input(const Shape& s, Dtype d, uint64_t seed, double lo = -4, double hi = 4) {
  return kt::from_values(kt::random_values(kt::numel(s), d, seed, lo, hi), s, d);
}

// Runs f on CPU inputs and on the same inputs moved to the GPU.
template <class F>
::testing::AssertionResult both(const std::vector<Array>& in, F f, double scale = 1e-3) {
  std::vector<Array> gin;
  for (auto& a : in) gin.push_back(to(a, gpu));
  Array c = f(in);
  Array g;
  try {
    g = f(gin);
    g.eval();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "gpu threw: " << e.what();
  }
  return close(g, c, scale);
}

// Compiled against eager: equal values with equal signs (any NaN equals any NaN).
::testing::AssertionResult same_bits(const Array& compiled, const Array& eager) {
  if (compiled.shape() != eager.shape()) return ::testing::AssertionFailure() << "shape differs";
  auto x = compiled.to_vector<double>(), y = eager.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i] || std::signbit(x[i]) != std::signbit(y[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": compiled " << x[i] << " eager " << y[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// f on CPU inputs, and on the same inputs on the GPU eagerly and compiled: both bit-equal to
// the CPU's result.
::testing::AssertionResult equal_everywhere(const std::vector<Array>& in,
                                            const std::function<Array(const std::vector<Array>&)>& f) {
  std::vector<Array> g;
  for (auto& a : in) g.push_back(to(a, gpu));
  auto fn = compile([&](const std::vector<Array>& v) { return std::vector<Array>{f(v)}; });
  const Array want = f(in), eager = f(g), compiled = fn(g)[0];
  if (auto r = same_bits(eager, want); !r) return r << " (eager)";
  if (auto r = same_bits(compiled, want); !r) return r << " (compiled)";
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST_F(Cuda, DeviceBasics) {
  EXPECT_GE(cuda_device_count(), 1);
  Array a = to(array({1.0f, 2.0f, 3.0f}), gpu);
  EXPECT_EQ(a.device(), gpu);
  EXPECT_EQ(to(a, Device::cpu()).device(), Device::cpu());
  EXPECT_EQ((a * 2.0f).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  set_default_device(gpu);
  Array b = array({1, 2, 3});
  EXPECT_EQ(b.device(), gpu);
  EXPECT_EQ(sum(b).item<int>(), 6);
  EXPECT_THROW(set_default_device(Device::cuda(99)), Error);
}

// Runs f on CPU and GPU inputs unless the front end refuses these dtypes (then on neither).
template <class F>
::testing::AssertionResult both_if_accepted(const std::vector<Array>& in, F f) {
  try {
    f(in);
  } catch (const Error&) {
    return ::testing::AssertionSuccess();
  }
  return both(in, f);
}

// Arithmetic left out for bool inputs (the front end refuses or promotes it there; the
// other dtypes check it).
const std::set<std::string> kNotOnBool = {"negative",     "sign",      "abs",     "square", "subtract", "divide",
                                          "floor_divide", "remainder", "arctan2", "add",    "multiply"};

// Every unary row of the op registry, on a wide input and on one inside (0, 1), where the
// logarithms, roots and erfinv are defined.
TEST_F(Cuda, Unary) {
  using U = Array (*)(const Array&);
  const std::vector<std::pair<const char*, U>> fns = {
#define KILN_UNARY(F, n, ...) {#n, static_cast<U>(&kiln::n)},
#include "ops/op_table.def"
  };
  for (Dtype d : kMain) {
    const std::vector<Array> inputs = {input({3, 17}, d, 11), input({3, 17}, d, 12, 0.1, 0.9)};
    for (auto& [name, f] : fns) {
      if (d == bool_ && kNotOnBool.count(name)) continue;
      for (const Array& x : inputs)
        EXPECT_TRUE(both_if_accepted({x}, [&](auto& v) { return f(v[0]); })) << name << " " << dtype_name(d);
    }
  }
}

// Every binary row of the op registry, broadcasting, on a wide pair and a pair in [0, 3]
// (powers of positive bases, shift counts).
TEST_F(Cuda, Binary) {
  using B = Array (*)(const Array&, const Array&);
  const std::vector<std::pair<const char*, B>> fns = {
#define KILN_BINARY(F, n, ...) {#n, static_cast<B>(&kiln::n)},
#include "ops/op_table.def"
  };
  for (Dtype d : kMain) {
    const std::vector<std::vector<Array>> pairs = {{input({4, 1, 9}, d, 21), input({3, 9}, d, 22)},
                                                   {input({4, 1, 9}, d, 23, 0, 3), input({3, 9}, d, 24, 0, 3)}};
    for (auto& [name, f] : fns) {
      if (d == bool_ && kNotOnBool.count(name)) continue;
      for (const auto& ab : pairs)
        EXPECT_TRUE(both_if_accepted(ab, [&](auto& v) { return f(v[0], v[1]); })) << name << " " << dtype_name(d);
    }
  }
}

// bfloat16 add, subtract and multiply run as native bf16 math on the GPU; they must round
// exactly as the CPU does (float result, rounded once more) for every bfloat16 value, paired
// with random values, with its neighbour (cancellation, ties) and with values of its exponent.
TEST_F(Cuda, Bfloat16ArithmeticRoundsExactlyAsTheCpu) {
  std::vector<float> all(65536), shuffled, neighbour(65536), same_exponent(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = std::bit_cast<float>(b << 16);
  shuffled = all;
  std::mt19937 rng(5);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  for (uint32_t b = 0; b < 65536; ++b) {
    neighbour[b] = all[b ^ 1];
    same_exponent[b] = std::bit_cast<float>(((b & 0xFF80u) | (static_cast<uint32_t>(rng()) & 0x7Fu)) << 16);
  }
  Array a = astype(array(all, {65536}), bfloat16);
  for (auto* other : {&shuffled, &neighbour, &same_exponent}) {
    Array b = astype(array(*other, {65536}), bfloat16);
    for (auto f : {add, subtract, multiply}) {
      auto cpu = f(a, b).to_vector<float>();
      auto gpu_values = f(to(a, gpu), to(b, gpu)).to_vector<float>();
      size_t wrong = 0, first = 0;
      for (size_t i = 0; i < cpu.size(); ++i) {
        bool same = std::bit_cast<uint32_t>(cpu[i]) == std::bit_cast<uint32_t>(gpu_values[i]) ||
                    (std::isnan(cpu[i]) && std::isnan(gpu_values[i]));
        if (!same && wrong++ == 0) first = i;
      }
      EXPECT_EQ(wrong, 0u) << "first at " << all[first] << " and " << (*other)[first] << ": cpu " << cpu[first]
                           << " gpu " << gpu_values[first];
    }
  }
}

// sin and cos of float16 and bfloat16 run in a short float form (kiln_sin_narrow and
// kiln_cos_narrow in the generated source; in flat vectors kiln_sin_fast and kiln_cos_fast, a
// vector with an argument past 2^20, inf or NaN computed again with the full forms) for every
// input of the type: eager and compiled (fused) results are the same bits, and each is within
// 1 ulp of the type of the rounded double result (NaN where that is NaN).
TEST_F(Cuda, SixteenBitSinCosOverEveryValue) {
  for (Dtype d : {bfloat16, float16}) {
    std::vector<float> all(65536);
    for (uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<uint16_t>(b);
      all[b] =
          d == bfloat16 ? static_cast<float>(bfloat16_t::from_bits(h)) : static_cast<float>(float16_t::from_bits(h));
    }
    Array x = to(astype(array(all, {65536}), d), gpu);
    auto fused = compile([](const std::vector<Array>& v) {
      return std::vector<Array>{sin(v[0]), cos(v[0]), sin(cos(v[0]))};
    });
    std::vector<Array> c = fused({x});
    std::vector<Array> e = {sin(x), cos(x), sin(cos(x))};
    for (size_t k = 0; k < c.size(); ++k) {
      auto cv = c[k].to_vector<float>(), ev = e[k].to_vector<float>();
      size_t differ = 0, first = 0;
      for (size_t i = 0; i < cv.size(); ++i) {
        bool same = std::bit_cast<uint32_t>(cv[i]) == std::bit_cast<uint32_t>(ev[i]) ||
                    (std::isnan(cv[i]) && std::isnan(ev[i]));
        if (!same && differ++ == 0) first = i;
      }
      EXPECT_EQ(differ, 0u) << dtype_name(d) << " output " << k << ", first at x = " << all[first] << ": compiled "
                            << cv[first] << " eager " << ev[first];
      if (k == 2) continue;
      // Distance in ulps of d between two of its values (the bits of either 16-bit type are
      // ordered as sign and magnitude).
      auto bits = [&](double v) { return d == bfloat16 ? bfloat16_t::from_double(v) : float16_t::from_double(v); };
      auto order = [](uint16_t b) { return (b & 0x8000) ? -static_cast<int>(b & 0x7FFF) : static_cast<int>(b); };
      size_t wrong = 0, at = 0;
      for (size_t i = 0; i < ev.size(); ++i) {
        const double ref = k == 0 ? std::sin(double(all[i])) : std::cos(double(all[i]));
        bool ok = std::isnan(ref) ? std::isnan(ev[i])
                                  : !std::isnan(ev[i]) && std::abs(order(bits(ev[i])) - order(bits(ref))) <= 1;
        if (!ok && wrong++ == 0) at = i;
      }
      EXPECT_EQ(wrong, 0u) << dtype_name(d) << (k == 0 ? " sin" : " cos") << ", first at x = " << all[at] << ": "
                           << ev[at];
    }
  }
}

// float32 sin and cos on the GPU are math.h's sincos_fma_f32, plain float and fma code, so
// for |x| < 105615 (where they reduce themselves) they equal its host run bit for bit: the
// host sweep of FastMath.SinCosGpuFloat32 then holds for the GPU. Eager (flat vectors, the
// fallback-free forms) and compiled results agree, with inf and NaN in some vectors.
TEST_F(Cuda, Float32SinCosEqualTheirHostTranscription) {
  std::mt19937 rng(17);
  std::vector<float> xs;
  std::uniform_real_distribution<float> wide(-105614.0f, 105614.0f);
  while (xs.size() < (1u << 20)) {
    const float bits = std::bit_cast<float>(static_cast<uint32_t>(rng()));  // every magnitude
    if (std::fabs(bits) < 105615.0f) xs.push_back(bits);
    xs.push_back(wide(rng));
    xs.push_back(static_cast<float>(static_cast<int>(rng() % 60000) - 30000) * 1.5707963267948966f);  // near k pi/2
  }
  std::vector<float> with_specials = xs;
  for (size_t i = 0; i < with_specials.size(); i += 4099) with_specials[i] = i % 2 ? INFINITY : NAN;
  Array x = to(array(xs, {static_cast<int64_t>(xs.size())}), gpu);
  Array xsp = to(array(with_specials, {static_cast<int64_t>(with_specials.size())}), gpu);
  auto both_ways = compile([](const std::vector<Array>& v) { return std::vector<Array>{sin(v[0]), cos(v[0])}; });
  for (unsigned quadrant : {0u, 1u}) {
    auto gpu_values = (quadrant ? cos(x) : sin(x)).to_vector<float>();
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (std::bit_cast<uint32_t>(gpu_values[i]) != std::bit_cast<uint32_t>(math::sincos_fma_f32(xs[i], quadrant)) &&
          wrong++ == 0)
        first = i;
    }
    EXPECT_EQ(wrong, 0u) << (quadrant ? "cos" : "sin") << " first at x = " << xs[first] << ": gpu " << gpu_values[first]
                         << " host " << math::sincos_fma_f32(xs[first], quadrant);
    auto eager = (quadrant ? cos(xsp) : sin(xsp)).to_vector<float>();
    auto compiled = both_ways({xsp})[quadrant].to_vector<float>();
    size_t differ = 0;
    for (size_t i = 0; i < eager.size(); ++i) {
      differ += std::bit_cast<uint32_t>(eager[i]) != std::bit_cast<uint32_t>(compiled[i]) &&
                !(std::isnan(eager[i]) && std::isnan(compiled[i]));
    }
    EXPECT_EQ(differ, 0u) << (quadrant ? "cos" : "sin") << ": eager and compiled differ";
  }
}

TEST_F(Cuda, WhereAstypeAndEveryDtype) {
  for (Dtype d : kAll) {
    Array c = input({5, 6}, bool_, 31), a = input({5, 6}, d, 32), b = input({6}, d, 33);
    EXPECT_TRUE(both({c, a, b}, [&](auto& v) { return where(v[0], v[1], v[2]); })) << dtype_name(d);
    for (Dtype to_d : kAll) {
      Array x = input({5, 6}, d, 34, -300, 300);
      EXPECT_TRUE(both({x}, [&](auto& v) { return astype(v[0], to_d); })) << dtype_name(d) << "->" << dtype_name(to_d);
    }
    EXPECT_TRUE(both({a, b}, [&](auto& v) { return add(v[0], v[1]); })) << dtype_name(d);
  }
}

TEST_F(Cuda, Reductions) {
  for (Dtype d : kMain) {
    Array x = input({4, 5, 33}, d, 41, -2, 2);
    for (std::vector<int> axes : {std::vector<int>{}, {0}, {1}, {2}, {0, 2}, {1, 2}}) {
      EXPECT_TRUE(both(
          {x}, [&](auto& v) { return sum(v[0], axes); }, 1.0))
          << "sum " << dtype_name(d);
      EXPECT_TRUE(both({x}, [&](auto& v) { return max(v[0], axes); })) << "max " << dtype_name(d);
      EXPECT_TRUE(both({x}, [&](auto& v) { return min(v[0], axes, true); })) << "min " << dtype_name(d);
      EXPECT_TRUE(both({x}, [&](auto& v) { return all(v[0], axes); })) << "all " << dtype_name(d);
      EXPECT_TRUE(both({x}, [&](auto& v) { return any(v[0], axes); })) << "any " << dtype_name(d);
    }
    Array small = input({3, 4}, d, 42, -2, 2);
    EXPECT_TRUE(both(
        {small}, [&](auto& v) { return prod(v[0], {1}); }, 1.0))
        << "prod " << dtype_name(d);
    for (int axis : {0, 1, 2}) {
      EXPECT_TRUE(both({x}, [&](auto& v) { return argmax(v[0], axis); })) << "argmax " << dtype_name(d);
      EXPECT_TRUE(both({x}, [&](auto& v) { return argmin(v[0], axis, true); })) << "argmin " << dtype_name(d);
      if (d != bool_) {
        EXPECT_TRUE(both(
            {x}, [&](auto& v) { return cumsum(v[0], axis); }, 1.0))
            << "cumsum " << dtype_name(d);
        EXPECT_TRUE(both(
            {x}, [&](auto& v) { return cumsum(v[0], axis, true, false); }, 1.0))
            << dtype_name(d);
      }
    }
    if (is_floating(d)) {
      EXPECT_TRUE(both(
          {x}, [&](auto& v) { return mean(v[0], {2}); }, 1.0))
          << dtype_name(d);
      EXPECT_TRUE(both(
          {x},
          [&](auto& v) {
            return var(v[0], {0, 2});
          },
          1.0))
          << dtype_name(d);
      EXPECT_TRUE(both(
          {x}, [&](auto& v) { return logsumexp(v[0], {2}); }, 1.0))
          << dtype_name(d);
      EXPECT_TRUE(both({x}, [&](auto& v) { return softmax(v[0]); })) << dtype_name(d);
    }
  }
  // A long row and many short rows (block-wide reductions either way).
  Array big = input({3, 100000}, float32, 43);
  EXPECT_TRUE(both(
      {big}, [&](auto& v) { return sum(v[0], {1}); }, 10.0));
  EXPECT_TRUE(both(
      {big}, [&](auto& v) { return sum(v[0], {0}); }, 10.0));
  Array nan = array(std::vector<float>{1, NAN, 3, 2}, {4});
  EXPECT_TRUE(both({nan}, [&](auto& v) { return argmax(v[0], 0); }));
  EXPECT_TRUE(both({nan}, [&](auto& v) { return max(v[0]); }));
}

TEST_F(Cuda, ViewsAndLayouts) {
  for (Dtype d : kMain) {
    Array x = input({4, 6, 5}, d, 51);
    auto eq = [&](auto f) { return both({x}, f); };
    EXPECT_TRUE(eq([](auto& v) { return copy(transpose(v[0], {2, 0, 1})); })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) { return reshape(transpose(v[0], {1, 0, 2}), {24, 5}); })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) {
      return slice(v[0], {1, 0, 4}, {4, 6, 0}, {2, 2, -1}) * astype(slice(v[0], {0, 0, 0}, {1, 1, 1}), v[0].dtype());
    })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) { return broadcast_to(expand_dims(v[0], 0), {2, 4, 6, 5}) * v[0]; })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) { return squeeze(slice(v[0], {0, 0, 0}, {1, 6, 5})); })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) { return concatenate({v[0], transpose(v[0], {0, 1, 2}), v[0]}, 1); })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) { return stack({v[0], v[0]}, 2); })) << dtype_name(d);
    EXPECT_TRUE(eq([](auto& v) { return pad(v[0], {{1, 0}, {0, 2}, {3, 1}}, 1.0); })) << dtype_name(d);
    EXPECT_TRUE(eq([&](auto& v) {
      return slice_update(v[0], slice(v[0], {0, 0, 0}, {1, 3, 5}), {2, 0, 0}, {3, 6, 5}, {1, 2, 1});
    })) << dtype_name(d);
    Array idx = array(std::vector<int32_t>{3, -1, 0, 2, 2}, {5});
    EXPECT_TRUE(both({x, idx}, [](auto& v) { return take(v[0], v[1], 1); })) << dtype_name(d);
    Array idx2 = array(std::vector<int64_t>{0, 4, 1, 3, 2, 2}, {1, 6, 1});
    EXPECT_TRUE(both({x, idx2}, [](auto& v) { return take_along_axis(v[0], v[1], 2); })) << dtype_name(d);
    EXPECT_TRUE(eq([d](auto& v) {
      return full({3, 4}, 2.5, d) + astype(slice(v[0], {0, 0, 0}, {1, 1, 1}), d);
    })) << dtype_name(d);
  }
  set_default_device(gpu);
  EXPECT_TRUE(close(arange(-3.0, 7.0, 0.5, float32), [] {
    set_default_device(Device::cpu());
    Array c = arange(-3.0, 7.0, 0.5, float32);
    set_default_device(gpu);
    return c;
  }()));
  Array x = array(std::vector<float>{1, 2, 3}, {3});
  EXPECT_THROW(take(x, array(std::vector<int32_t>{5}, {1}), 0).eval(), Error);
}

TEST_F(Cuda, Matmul) {
  for (Dtype d : {float32, float16, bfloat16, float64, int32, int64}) {
    Array a = input({3, 1, 17, 33}, d, 61, -1, 1), b = input({4, 33, 9}, d, 62, -1, 1);
    EXPECT_TRUE(both(
        {a, b}, [](auto& v) { return matmul(v[0], v[1]); }, 1.0))
        << dtype_name(d);
    Array c = input({40, 24}, d, 63, -1, 1), e = input({32, 24}, d, 64, -1, 1);
    EXPECT_TRUE(both(
        {c, e}, [](auto& v) { return matmul(v[0], transpose(v[1])); }, 1.0))
        << dtype_name(d);
    EXPECT_TRUE(both(
        {c, e}, [](auto& v) { return matmul(transpose(v[0]), v[0]); }, 1.0))
        << dtype_name(d);
    Array f = input({2, 1, 8, 5}, d, 65, -1, 1), g = input({3, 5, 7}, d, 66, -1, 1), h = input({5, 7}, d, 69, -1, 1);
    EXPECT_TRUE(both(
        {f, g}, [](auto& v) { return matmul(v[0], v[1]); }, 1.0))
        << dtype_name(d);
    EXPECT_TRUE(both(
        {f, h}, [](auto& v) { return matmul(v[0], v[1]); }, 1.0))
        << dtype_name(d);
    EXPECT_TRUE(both(
        {h, g}, [](auto& v) { return matmul(transpose(v[0]), v[1]); }, 1.0))
        << dtype_name(d);
    EXPECT_TRUE(both({c, e}, [](auto& v) {
      return matmul(slice(v[0], {0, 0}, {0, 24}), transpose(v[1]));
    })) << dtype_name(d);
  }
  // TF32 is off by default: a float32 product rounds like float32 arithmetic.
  Array a = input({64, 256}, float32, 67), b = input({256, 64}, float32, 68);
  EXPECT_FALSE(cuda_matmul_allow_tf32());
  auto ref = matmul(astype(a, float64), astype(b, float64)).to_vector<double>();
  auto max_err = [&](const Array& y) {
    auto v = y.to_vector<double>();
    double e = 0;
    for (size_t i = 0; i < v.size(); ++i) e = std::max(e, std::fabs(v[i] - ref[i]));
    return e;
  };
  double cpu_err = max_err(matmul(a, b)), fp32_err = max_err(matmul(to(a, gpu), to(b, gpu)));
  set_cuda_matmul_allow_tf32(true);
  double tf32_err = max_err(matmul(to(a, gpu), to(b, gpu)));
  set_cuda_matmul_allow_tf32(false);
  std::printf("float32 matmul max error vs float64: cpu %.3g, gpu %.3g, gpu with tf32 %.3g\n", cpu_err, fp32_err,
              tf32_err);
  EXPECT_LT(fp32_err, 4 * cpu_err + 1e-5);  // float32 rounding, like the CPU's
  EXPECT_GT(tf32_err, 10 * fp32_err);  // TF32 (10-bit mantissa) is visibly coarser
  EXPECT_LT(tf32_err, 0.5);
}

namespace {

// act(x @ w + b): the patterns of the fuse_matmul_epilogue pass (0: none, 1: gelu, 2: gelu_tanh).
Array linear(const Array& x, const Array& w, const Array& b, int act) {
  Array s = matmul(x, w) + b;
  return act == 0 ? s : act == 1 ? gelu(s) : gelu_tanh(s);
}

}  // namespace

// The compiled epilogue on the GPU: the pass fires, cuBLASLt runs bias (and tanh GELU) in
// the product's epilogue, and results match a float64 reference computed on the CPU from
// the same inputs within the output dtype's rounding (the GPU rounds once, after bias and
// GELU in float32; cuBLASLt's GELU is its own tanh approximation, hence the looser bound
// for gelu_tanh in float32). The exact GELU runs as a kernel after cuBLASLt's bias epilogue.
TEST_F(Cuda, MatmulEpilogueInCublasLt) {
  struct Case {
    Shape x, w, b;
  };
  const Case cases[] = {{{64, 96}, {96, 80}, {80}}, {{3, 40, 96}, {96, 72}, {1, 72}}, {{2, 16, 32}, {2, 32, 24}, {24}}};
  uint64_t seed = 130;
  for (Dtype d : {bfloat16, float16, float32}) {
    for (int act = 0; act < 3; ++act) {
      double worst = 0;
      for (auto& c : cases) {
        Array x = input(c.x, d, ++seed, -1, 1), w = input(c.w, d, ++seed, -1, 1), b = input(c.b, d, ++seed, -1, 1);
        std::vector<Array> gin = {to(x, gpu), to(w, gpu), to(b, gpu)};
        auto f =
            compile([act](const std::vector<Array>& v) { return std::vector<Array>{linear(v[0], v[1], v[2], act)}; });
        std::string ctx =
            std::string(dtype_name(d)) + " act " + std::to_string(act) + " x rank " + std::to_string(c.x.size());
        std::ostringstream dot;
        export_to_dot(dot, f, gin);
        EXPECT_NE(dot.str().find("matmul_epilogue"), std::string::npos) << ctx << ": the pass did not fire";
        auto before = cuda::matmul_epilogue_stats();
        Array y = f(gin)[0];
        y.eval();
        auto after = cuda::matmul_epilogue_stats();
        EXPECT_EQ(after.in_cublaslt - before.in_cublaslt, 1u) << ctx << ": cuBLASLt did not run the epilogue";
        EXPECT_EQ(after.declined, before.declined) << ctx << ": cuBLASLt had no algorithm for the epilogue";
        ASSERT_EQ(y.device(), gpu) << ctx;
        ASSERT_EQ(y.dtype(), d) << ctx;
        Array ref = linear(astype(x, float64), astype(w, float64), astype(b, float64), act);
        ASSERT_EQ(y.shape(), ref.shape()) << ctx;
        auto got = y.to_vector<double>(), want = ref.to_vector<double>();
        double rtol = tol(d), atol = d == float32 ? 1e-4 : 4 * tol(d);
        if (d == float32 && act == 2) rtol = 2e-3, atol = 5e-3;
        for (size_t i = 0; i < got.size(); ++i) {
          double err = std::fabs(got[i] - want[i]);
          worst = std::max(worst, err / (std::fabs(want[i]) + atol / rtol));
          if (err > rtol * std::fabs(want[i]) + atol) {
            ADD_FAILURE() << ctx << ": element " << i << " gpu " << got[i] << " float64 " << want[i];
            break;
          }
        }
      }
      std::printf("matmul epilogue %s act %d: worst error %.3g relative (against float64)\n", dtype_name(d), act,
                  worst);
    }
  }
  // Where cuBLASLt is not used or cannot take the bias, the product and one elementwise
  // kernel give the same values: float64 (epilogue support varies), a broadcast bias (a
  // packed copy is made for cuBLASLt), and a shapeless replay where the bias broadcasts
  // the product.
  Array x = input({20, 12}, float64, 150, -1, 1), w = input({12, 9}, float64, 151, -1, 1), b = input({9}, float64, 152);
  for (int act = 0; act < 3; ++act) {
    auto f = compile([act](const std::vector<Array>& v) { return std::vector<Array>{linear(v[0], v[1], v[2], act)}; });
    EXPECT_TRUE(close(f({to(x, gpu), to(w, gpu), to(b, gpu)})[0], linear(x, w, b, act), 1.0)) << "float64 act " << act;
  }
  Array xs = input({20, 12}, float32, 153, -1, 1), ws = input({12, 9}, float32, 154, -1, 1);
  auto fb = compile([](const std::vector<Array>& v) {
    return std::vector<Array>{gelu_tanh(matmul(v[0], v[1]) + broadcast_to(v[2], {9}))};
  });
  Array one = input({1}, float32, 155);
  EXPECT_TRUE(
      close(fb({to(xs, gpu), to(ws, gpu), to(one, gpu)})[0], gelu_tanh(matmul(xs, ws) + broadcast_to(one, {9})), 100.0))
      << "broadcast bias";
  auto fs = compile([](const std::vector<Array>& v) { return std::vector<Array>{linear(v[0], v[1], v[2], 1)}; },
                    {.shapeless = true});
  Array bs = input({9}, float32, 156), w1 = input({12, 1}, float32, 157);
  EXPECT_TRUE(close(fs({to(xs, gpu), to(ws, gpu), to(bs, gpu)})[0], linear(xs, ws, bs, 1), 1.0)) << "shapeless";
  EXPECT_TRUE(close(fs({to(xs, gpu), to(w1, gpu), to(bs, gpu)})[0], linear(xs, w1, bs, 1), 1.0))
      << "shapeless, the bias broadcasts the product";
}

// gelu_tanh(x @ W + b) in bfloat16 at 4096^3 (KILN_TEST_EPILOGUE_N changes the size) runs in
// cuBLASLt's epilogue, not declined into the fallback. The times are printed for a look;
// the speed target (within 5% of the bare product) is measured by bench/gpu_peers.
TEST_F(Cuda, MatmulEpilogueAtScaleRunsInCublasLt) {
  const int64_t n = config::integer(config::Knob::test_epilogue_n);
  Array x = to(input({n, n}, bfloat16, 160, -1, 1), gpu), w = to(input({n, n}, bfloat16, 161, -1, 1), gpu);
  Array b = to(input({n}, bfloat16, 162, -1, 1), gpu);
  auto bare = compile([](const std::vector<Array>& v) { return std::vector<Array>{matmul(v[0], v[1])}; });
  auto fused = compile([](const std::vector<Array>& v) { return std::vector<Array>{linear(v[0], v[1], v[2], 2)}; });
  const bool one_run = config::flag(config::Knob::test_epilogue_one_run);
  auto time_ms = [&](const std::function<Array()>& call) {
    for (int i = 0; i < (one_run ? 1 : 3); ++i) call().eval();
    std::vector<double> runs;
    for (int r = 0; r < (one_run ? 1 : 5); ++r) {
      std::vector<Array> ys;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < (one_run ? 1 : 10); ++i) ys.push_back(call());
      eval(ys);
      runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                     static_cast<double>(ys.size()));
    }
    std::sort(runs.begin(), runs.end());
    return runs[runs.size() / 2];
  };
  double t_bare = time_ms([&] { return bare({x, w, b})[0]; });
  auto before = cuda::matmul_epilogue_stats();
  double t_fused = time_ms([&] { return fused({x, w, b})[0]; });
  auto after = cuda::matmul_epilogue_stats();
  double t_eager = time_ms([&] { return linear(x, w, b, 2); });
  std::printf("bfloat16 %lld^3: matmul %.3f ms, compiled gelu_tanh(x@W+b) %.3f ms (%.3fx), eager %.3f ms (%.3fx)\n",
              static_cast<long long>(n), t_bare, t_fused, t_fused / t_bare, t_eager, t_eager / t_bare);
  EXPECT_GT(after.in_cublaslt, before.in_cublaslt);
  EXPECT_EQ(after.declined, before.declined);
}

TEST_F(Cuda, CompiledAgainstEager) {
  auto rms = [](const Array& x, const Array& w) { return x * rsqrt(mean(square(x), {-1}, true) + 1e-6f) * w; };
  auto body = [&](const std::vector<Array>& v) -> std::vector<Array> {
    Array y = sigmoid(v[0] * 2.0f + 1.0f) * tanh(v[0]);
    return {y, rms(v[0], v[1]), softmax(v[0]), sum(exp(v[0] - 1.0f), {-1})};
  };
  auto fn = compile(body);
  Array x = input({8, 300}, float32, 71), w = input({300}, float32, 72);
  auto eager = body({to(x, gpu), to(w, gpu)});
  auto compiled = fn({to(x, gpu), to(w, gpu)});
  auto cpu_out = body({x, w});
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_TRUE(close(compiled[i], eager[i], 1.0)) << "output " << i;
    EXPECT_TRUE(close(compiled[i], cpu_out[i], 1.0)) << "output " << i;
  }
  // Replays reuse the plan; shapeless replays at another size too.
  auto again = fn({to(x, gpu), to(w, gpu)});
  EXPECT_TRUE(close(again[1], eager[1], 1.0));
  auto shapeless = compile(body, {.shapeless = true});
  Array x2 = input({5, 300}, float32, 73);
  auto s = shapeless({to(x2, gpu), to(w, gpu)});
  auto se = body({x2, w});
  for (size_t i = 0; i < s.size(); ++i) EXPECT_TRUE(close(s[i], se[i], 1.0)) << "shapeless output " << i;
  // Half-precision regions.
  for (Dtype d : {float16, bfloat16}) {
    Array h = input({6, 70}, d, 74), hw = input({70}, d, 75);
    auto ce = body({h, hw});
    auto cg = fn({to(h, gpu), to(hw, gpu)});
    for (size_t i = 0; i < ce.size(); ++i) EXPECT_TRUE(close(cg[i], ce[i], 1.0)) << dtype_name(d) << " output " << i;
  }
}

// Compiled row regions at every kind of row kernel: rows held in registers (whole or partial
// last chunk, vector or strided loads), staged rows (too long for registers; past 48 KB of
// shared memory from 16384 floats) and rows too long to stage (60000 floats). Rows hold
// NaN and infinities, and values too small or too large for the one-reciprocal division, so
// x / max|x| (an order-free reduction) must equal eager bit for bit.
TEST_F(Cuda, RowRegionsMatchEagerAtEveryLengthLayoutAndValue) {
  auto body = [](const std::vector<Array>& v) -> std::vector<Array> {
    Array d = v[0] - mean(v[0], {-1}, true);
    return {v[0] / max(abs(v[0]), {-1}, true), softmax(v[0]), d * rsqrt(mean(d * d, {-1}, true) + 1e-5f)};
  };
  auto fn = compile(body);
  for (Dtype d : {float32, bfloat16, float16}) {
    for (int64_t n : {1, 7, 300, 4096, 4100, 16384, 40000, 60000}) {
      const int64_t rows = 5;
      std::vector<double> v = kt::random_values(rows * n, d, 131 + static_cast<uint64_t>(n), -3, 3);
      const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
      for (int64_t j = 0; j < n && j < 5; ++j) v[static_cast<size_t>(n + j * 2 % n)] = specials[j];  // row 1
      v[static_cast<size_t>(2 * n)] = -0.0;  // row 2: signed zeros among ordinary values
      for (int64_t j = 0; j < n; ++j) {
        v[static_cast<size_t>(3 * n + j)] *= 1e-25;  // row 3: below the fast division's range
        v[static_cast<size_t>(4 * n + j)] *= 1e25;  // row 4: above it
      }
      Array x = kt::from_values(v, {rows, n}, d);
      auto cpu_out = body({x});
      for (bool strided : {false, true}) {
        // strided: the same values as a (rows, n) view of a contiguous (n, rows) array
        Array xg = strided ? transpose(copy(transpose(to(x, gpu)))) : to(x, gpu);
        xg.eval();
        if (strided && n > 1 && xg.tensor().strides.back() == 1) ADD_FAILURE() << "expected a strided view";
        auto compiled = fn({xg});
        auto eager = body({xg});
        const std::string what = std::string(dtype_name(d)) + " n=" + std::to_string(n) + (strided ? " strided" : "");
        EXPECT_TRUE(same_bits(compiled[0], eager[0])) << what;
        for (size_t i = 0; i < eager.size(); ++i) {
          EXPECT_TRUE(close(compiled[i], eager[i], 1.0)) << what << " output " << i;
          EXPECT_TRUE(close(compiled[i], cpu_out[i], 1.0)) << what << " output " << i << " against the CPU";
        }
      }
    }
  }
}

// Few long rows are reduced in parts (a kernel of partials, then one folding them per row),
// and reductions over leading axes a thread a column: full reductions, a small batch of long
// rows, a strided view, a length no vector divides, NaN and infinities; fused reductions
// compiled equal eager bit for bit (same parts).
TEST_F(Cuda, ReductionsSplitIntoParts) {
  for (Dtype d : {float32, bfloat16, float16, float64, int32, int64}) {
    const std::string name = dtype_name(d);
    Array x = input({1000003}, d, 51, -4, 4);
    EXPECT_TRUE(both(
        {x}, [&](auto& v) { return sum(v[0]); }, 10.0))
        << "sum " << name;
    EXPECT_TRUE(both({x}, [&](auto& v) { return max(v[0]); })) << "max " << name;
    EXPECT_TRUE(both({x}, [&](auto& v) { return min(v[0], {0}, true); })) << "min " << name;
    Array rows = input({3, 262144}, d, 52, -4, 4);
    EXPECT_TRUE(both(
        {rows}, [&](auto& v) { return sum(v[0], {1}); }, 10.0))
        << "row sums " << name;
    EXPECT_TRUE(both({rows}, [&](auto& v) { return max(v[0], {-1}, true); })) << "row maxima " << name;
    EXPECT_TRUE(both({rows}, [&](auto& v) { return any(v[0] > 3.99, {1}); })) << "any " << name;
    EXPECT_TRUE(both({rows}, [&](auto& v) { return all(v[0] > -3.99, {1}); })) << "all " << name;
    if (is_floating(d)) {
      EXPECT_TRUE(both(
          {rows}, [&](auto& v) { return mean(v[0], {1}); }, 1.0))
          << "mean " << name;
      EXPECT_TRUE(both(
          {rows}, [&](auto& v) { return logsumexp(v[0], {1}); }, 1.0))
          << "logsumexp " << name;
      EXPECT_TRUE(both(
          {rows}, [&](auto& v) { return sum(transpose(v[0]), {0}); }, 10.0))
          << "strided " << name;
    }
  }
  // A float product of many values near 1 drifts by ~1e-3 with the order of its roundings;
  // a product of ±1, 2 and 0.5 is exact in any order: 2^10 here.
  std::vector<double> signs(524288, 1.0);
  for (size_t i = 0; i < signs.size(); i += 3) signs[i] = -1.0;
  for (size_t i = 0; i < 100; ++i) signs[i * 4099 + 1] = 2.0;
  for (size_t i = 0; i < 90; ++i) signs[i * 5003 + 2] = 0.5;
  Array exact = kt::from_values(signs, {524288}, float32);
  EXPECT_TRUE(both({exact}, [&](auto& v) { return prod(v[0]); })) << "prod";
  EXPECT_EQ(prod(to(exact, gpu)).item<float>(), 1024.0f);
  std::vector<double> vals = kt::random_values(300000, float32, 54, -2, 2);
  vals[123457] = NAN;
  vals[7] = INFINITY;
  Array special = kt::from_values(vals, {300000}, float32);
  EXPECT_TRUE(both({special}, [&](auto& v) { return max(v[0]); })) << "max with NaN";
  EXPECT_TRUE(both({special}, [&](auto& v) { return sum(v[0]); })) << "sum with NaN";
  vals[123457] = 0.0;
  special = kt::from_values(vals, {300000}, float32);
  EXPECT_TRUE(both({special}, [&](auto& v) { return sum(v[0]); })) << "sum with inf";
  // Over the first axes: a thread a column, in parts of the column.
  for (Dtype d : {float32, bfloat16, int32}) {
    const std::string name = dtype_name(d);
    Array tall = input({20000, 300}, d, 57, -4, 4);
    EXPECT_TRUE(both(
        {tall}, [&](auto& v) { return sum(v[0], {0}); }, 10.0))
        << "column sums " << name;
    EXPECT_TRUE(both({tall}, [&](auto& v) { return max(v[0], {0}, true); })) << "column maxima " << name;
    Array cube = input({50, 40, 30}, d, 58, -4, 4);
    EXPECT_TRUE(both({cube}, [&](auto& v) { return min(v[0], {0, 1}); })) << "two leading axes " << name;
    EXPECT_TRUE(both(
        {cube}, [&](auto& v) { return sum(v[0], {0}); }, 10.0))
        << "first of three " << name;
    Array narrow = input({300000, 3}, d, 59, -4, 4);
    EXPECT_TRUE(both(
        {narrow}, [&](auto& v) { return sum(v[0], {0}); }, 10.0))
        << "three long columns " << name;
    if (is_floating(d)) {
      EXPECT_TRUE(both(
          {tall}, [&](auto& v) { return mean(v[0], {0}); }, 1.0))
          << "column means " << name;
    }
    for (int64_t len : {0, 1}) {  // empty and single-element columns
      Array flat = input({len, 300}, d, 60, -4, 4);
      EXPECT_TRUE(both({flat}, [&](auto& v) { return sum(v[0], {0}); })) << "columns of " << len << " " << name;
      EXPECT_TRUE(both({flat}, [&](auto& v) { return any(v[0], {0}); })) << "columns of " << len << " " << name;
      if (len > 0) {
        EXPECT_TRUE(both({flat}, [&](auto& v) { return max(v[0], {0}); })) << "columns of 1 " << name;
      }
    }
  }
  // Columns whose rows are aligned to vectors: a lane a vector of columns, 8 warps down each
  // part; widths no block divides, an offset view (one column a thread), mixed dtypes.
  for (Dtype d : {float32, bfloat16, float16, float64, int32, int64, uint8}) {
    const std::string name = dtype_name(d);
    Array x = input({3000, 1000}, d, 80, -4, 4);
    EXPECT_TRUE(both(
        {x}, [&](auto& v) { return sum(v[0], {0}); }, 10.0))
        << "vector columns " << name;
    EXPECT_TRUE(both({x}, [&](auto& v) { return max(v[0], {0}); })) << "vector column maxima " << name;
    EXPECT_TRUE(both({x}, [&](auto& v) { return min(v[0] * v[0], {0}, true); })) << "vector column minima " << name;
    EXPECT_TRUE(both(
        {x},
        [&](auto& v) {
          return sum(slice(v[0], {0, 8}, {3000, 1000}), {0});
        },
        10.0))
        << "aligned view " << name;
    EXPECT_TRUE(both(
        {x},
        [&](auto& v) {
          return sum(slice(v[0], {0, 1}, {3000, 1000}), {0});
        },
        10.0))
        << "offset view " << name;
    const Array gx = to(x, gpu);
    const auto compiled = compile([](const std::vector<Array>& v) {
      return std::vector<Array>{sum(v[0], {0}), max(v[0], {0})};
    })({gx});
    EXPECT_TRUE(same_bits(compiled[0], sum(gx, {0}))) << "compiled vector columns " << name;
    EXPECT_TRUE(same_bits(compiled[1], max(gx, {0}))) << "compiled vector column maxima " << name;
    if (is_floating(d)) {
      Array y = input({3000, 1000}, float32, 81);
      EXPECT_TRUE(both(
          {x, y}, [&](auto& v) { return mean(v[0] * v[1], {0}); }, 1.0))
          << "mixed dtypes " << name;
    }
  }
  {
    std::vector<double> vals = kt::random_values(4000 * 512, bfloat16, 82, -2, 2);
    vals[static_cast<size_t>(1234 * 512 + 7)] = NAN;  // column 7
    vals[static_cast<size_t>(17 * 512 + 300)] = INFINITY;  // column 300
    vals[static_cast<size_t>(3999 * 512 + 511)] = -INFINITY;  // the last column's last element
    Array special = kt::from_values(vals, {4000, 512}, bfloat16);
    EXPECT_TRUE(both(
        {special}, [&](auto& v) { return sum(v[0], {0}); }, 10.0))
        << "column sums with NaN and infinities";
    EXPECT_TRUE(both({special}, [&](auto& v) { return max(v[0], {0}); })) << "column maxima with NaN and infinities";
  }
  auto body = [](const std::vector<Array>& v) -> std::vector<Array> {
    return {sum(v[0] * v[1]), mean(exp(v[0] * 0.25f), {1}), max(abs(v[0] - v[1]), {1}), sum(v[0] * v[1], {0})};
  };
  auto fn = compile(body);
  Array a = to(input({4, 300000}, float32, 55), gpu), b = to(input({4, 300000}, float32, 56), gpu);
  auto compiled = fn({a, b});
  auto eager = body({a, b});
  auto cpu = body({to(a, Device::cpu()), to(b, Device::cpu())});
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_TRUE(same_bits(compiled[i], eager[i])) << "output " << i;
    EXPECT_TRUE(close(compiled[i], cpu[i], 10.0)) << "output " << i << " against the CPU";
  }
}

// Copies of transposes go through 32 x 32 tiles in shared memory, and a fused program
// reading a large transposed input copies it so first: 2-D and batched, every element size,
// edges no tile divides, views at an offset and with negative strides; eager and compiled
// equal to the CPU bit for bit.
TEST_F(Cuda, TransposedCopiesInTiles) {
  for (Dtype d : {float32, bfloat16, float64, uint8, bool_, int64, int16}) {
    const std::string name = dtype_name(d);
    Array x = input({333, 1000}, d, 70, -4, 4);
    EXPECT_TRUE(equal_everywhere({x}, [](auto& v) { return copy(transpose(v[0])); })) << "2-D " << name;
    EXPECT_TRUE(equal_everywhere({x},
                                 [](auto& v) {
                                   return copy(transpose(slice(v[0], {1, 3}, {333, 1000})));
                                 }))
        << "offset " << name;
    EXPECT_TRUE(equal_everywhere({x},
                                 [](auto& v) {
                                   return copy(transpose(slice(v[0], {332, 0}, {0, 1000}, {-1, 1})));
                                 }))
        << "rows reversed " << name;
    Array b = input({3, 65, 97}, d, 71, -4, 4);
    EXPECT_TRUE(equal_everywhere({b}, [](auto& v) { return copy(transpose(v[0], {0, 2, 1})); })) << "batched " << name;
    EXPECT_TRUE(equal_everywhere({b},
                                 [](auto& v) {
                                   return copy(transpose(v[0], {2, 0, 1}));
                                 }))
        << "batch last " << name;
    // Even sides: 1- and 2-byte elements move a word at a time (not where a view starts off one).
    Array e = input({2, 130, 260}, d, 75, -4, 4);
    EXPECT_TRUE(equal_everywhere({e}, [](auto& v) { return copy(transpose(v[0], {0, 2, 1})); })) << "words " << name;
    EXPECT_TRUE(equal_everywhere({e},
                                 [](auto& v) {
                                   return copy(transpose(slice(v[0], {0, 0, 1}, {2, 130, 257}), {0, 2, 1}));
                                 }))
        << "words off the start " << name;
    // Into views whose rows are longer than the copy's: concatenated and padded transposes
    // (an odd offset or row length takes the element path).
    Array f = input({260, 128}, d, 76, -4, 4), g = input({2, 64, 260}, d, 77, -4, 4);
    EXPECT_TRUE(equal_everywhere({e, g},
                                 [](auto& v) {
                                   return concatenate({transpose(v[0], {0, 2, 1}), transpose(v[1], {0, 2, 1})}, 2);
                                 }))
        << "concatenated " << name;
    EXPECT_TRUE(equal_everywhere({f},
                                 [](auto& v) {
                                   return concatenate({transpose(v[0]), transpose(v[0])}, 1);
                                 }))
        << "side by side " << name;
    EXPECT_TRUE(equal_everywhere({f},
                                 [](auto& v) {
                                   return pad(transpose(v[0]), {{2, 2}, {4, 4}}, 1.0);
                                 }))
        << "padded " << name;
    EXPECT_TRUE(equal_everywhere({f},
                                 [](auto& v) {
                                   return pad(transpose(v[0]), {{1, 0}, {1, 0}}, 1.0);
                                 }))
        << "padded off a word " << name;
  }
  // A fused program of a transposed input, a row-major one and a broadcast row.
  Array x = input({700, 600}, float32, 72), y = input({600, 700}, float32, 73), r = input({700}, float32, 74);
  EXPECT_TRUE(both(
      {x, y, r}, [](auto& v) { return exp(transpose(v[0]) * 0.25f) + v[1] * v[2]; }, 1.0));
  EXPECT_TRUE(equal_everywhere({x, y, r}, [](auto& v) { return transpose(v[0]) * v[1] + v[2]; }));
  // Programs whose other inputs are row-major or one element run in tiles, one pass: one or
  // two transposed inputs, mixed dtypes, batched, a conversion, small and odd sides; five
  // transposed inputs (more than the tiles) are copied first.
  for (Dtype d : {float32, bfloat16, int32}) {
    const std::string name = dtype_name(d);
    Array a = input({700, 600}, d, 83), a2 = input({700, 600}, d, 84), b = input({600, 700}, float32, 85);
    EXPECT_TRUE(equal_everywhere({a, b}, [](auto& v) { return transpose(v[0]) * v[1] + 0.5f; })) << "tiled " << name;
    EXPECT_TRUE(equal_everywhere({a, a2, b}, [](auto& v) { return transpose(v[0]) - transpose(v[1]) * v[2]; }))
        << "two tiled " << name;
    EXPECT_TRUE(equal_everywhere({a}, [](auto& v) { return astype(transpose(v[0]), float64); }))
        << "converted " << name;
    Array small = input({40, 50}, d, 86), small_y = input({50, 40}, d, 87);
    EXPECT_TRUE(equal_everywhere({small, small_y}, [](auto& v) { return transpose(v[0]) + v[1]; })) << "small " << name;
    Array c = input({3, 65, 97}, d, 88), cy = input({3, 97, 65}, d, 89);
    EXPECT_TRUE(equal_everywhere({c, cy},
                                 [](auto& v) {
                                   return maximum(transpose(v[0], {0, 2, 1}), v[1]);
                                 }))
        << "batched " << name;
    Array e = input({2, 130, 260}, d, 90), ey = input({2, 260, 130}, float32, 91);  // even sides: pairs
    EXPECT_TRUE(equal_everywhere({e, ey},
                                 [](auto& v) {
                                   return transpose(v[0], {0, 2, 1}) * v[1];
                                 }))
        << "batched pairs " << name;
    EXPECT_TRUE(equal_everywhere({a, b},
                                 [](auto& v) {
                                   return transpose(slice(v[0], {0, 1}, {700, 600})) - slice(v[1], {1, 0}, {600, 700});
                                 }))
        << "pairs off the start " << name;
    // Beside broadcasts: a row, a column, one element, a row a batch; rows with gaps.
    Array row = input({700}, float32, 92), col = input({600, 1}, d, 93), one = input({}, d, 94),
          per_batch = input({3, 1, 65}, d, 95);
    EXPECT_TRUE(equal_everywhere({a, row, col}, [](auto& v) { return transpose(v[0]) * v[1] + v[2]; }))
        << "row and column " << name;
    EXPECT_TRUE(equal_everywhere({a, one}, [](auto& v) { return transpose(v[0]) - v[1]; })) << "one element " << name;
    EXPECT_TRUE(equal_everywhere({c, per_batch},
                                 [](auto& v) {
                                   return transpose(v[0], {0, 2, 1}) * v[1];
                                 }))
        << "a row a batch " << name;
    Array wide = input({600, 800}, d, 96);
    EXPECT_TRUE(equal_everywhere({a, wide},
                                 [](auto& v) {
                                   return transpose(v[0]) + slice(v[1], {0, 0}, {600, 700});
                                 }))
        << "rows with gaps " << name;
    EXPECT_TRUE(equal_everywhere({a, a2, b},
                                 [](auto& v) {
                                   const Array t = transpose(v[0]), u = transpose(v[1]);
                                   return t + u * t - transpose(v[0] * 2.0f) + transpose(v[1] - v[0]) * v[2] +
                                          transpose(v[0] + v[1]);
                                 }))
        << "five transposed inputs " << name;
  }
}

// Programs over two merged axes where each operand walks rows contiguously or is one value a
// row (a row or column broadcast, rows with gaps) run over rows without per-axis index math,
// in vectors where every row start is aligned.
TEST_F(Cuda, BroadcastRowsAndColumns) {
  for (Dtype d : {float32, bfloat16, float16, float64, int32, uint8}) {
    const std::string name = dtype_name(d);
    Array x = input({300, 1000}, d, 92), w = input({1000}, d, 93), b = input({1000}, d, 94), c = input({300, 1}, d, 95);
    EXPECT_TRUE(equal_everywhere({x, w, b}, [](auto& v) { return v[0] * v[1] + v[2]; })) << "row broadcast " << name;
    EXPECT_TRUE(equal_everywhere({x, c}, [](auto& v) { return v[0] - v[1]; })) << "column broadcast " << name;
    EXPECT_TRUE(equal_everywhere({x, w, c}, [](auto& v) { return maximum(v[0], v[1]) * v[2]; })) << "both " << name;
    EXPECT_TRUE(equal_everywhere({x, b},
                                 [](auto& v) {
                                   return slice(v[0], {0, 0}, {300, 992}) + slice(v[1], {0}, {992});
                                 }))
        << "rows with gaps " << name;
    EXPECT_TRUE(equal_everywhere({x, b},
                                 [](auto& v) {
                                   return slice(v[0], {0, 1}, {300, 1000}) * slice(v[1], {1}, {1000});
                                 }))
        << "rows off a vector " << name;
    Array batched = input({4, 30, 1000}, d, 96);
    EXPECT_TRUE(equal_everywhere({batched, b}, [](auto& v) { return v[0] + v[1]; })) << "batched " << name;
    Array per_batch = input({4, 1, 1000}, d, 99), per_row = input({30, 1}, d, 100);  // three merged axes
    EXPECT_TRUE(equal_everywhere({batched, per_batch, per_row}, [](auto& v) { return v[0] * v[1] - v[2]; }))
        << "per batch " << name;
    Array many = input({2, 3, 4, 5, 64}, d, 101), sparse = input({3, 1, 5, 1}, d, 102);
    EXPECT_TRUE(equal_everywhere({many, sparse}, [](auto& v) { return maximum(v[0], v[1]); })) << "five axes " << name;
    Array odd = input({5, 7}, d, 97), odd_row = input({7}, d, 98);
    EXPECT_TRUE(equal_everywhere({odd, odd_row}, [](auto& v) { return v[0] * v[1]; })) << "short rows " << name;
  }
}

// Operands that step along the rows with a stride of their own (every other element,
// reversed rows, a flat array's every third) run over rows too, beside contiguous operands
// and broadcasts (from 2^16 elements; the generic kernel below that, also checked).
TEST_F(Cuda, SteppedRows) {
  const SliceArg all{}, reversed{std::nullopt, std::nullopt, -1};
  for (Dtype d : {float32, bfloat16, float64, int32, uint8}) {
    const std::string name = dtype_name(d);
    Array x = input({300, 1000}, d, 103), w = input({500}, d, 104), c = input({300, 1}, d, 105),
          flat = input({300001}, d, 106);
    EXPECT_TRUE(
        equal_everywhere({x},
                         [](auto& v) {
                           return slice(v[0], {0, 0}, {300, 1000}, {1, 2}) * slice(v[0], {0, 1}, {300, 1000}, {1, 2});
                         }))
        << "interleaved " << name;
    EXPECT_TRUE(equal_everywhere({x, w, c},
                                 [](auto& v) {
                                   return slice(v[0], {0, 1}, {300, 1000}, {1, 2}) * v[1] - v[2];
                                 }))
        << "beside broadcasts " << name;
    EXPECT_TRUE(equal_everywhere({x},
                                 [&](auto& v) {
                                   return slice(v[0], {all, reversed}) - v[0];
                                 }))
        << "reversed " << name;
    EXPECT_TRUE(equal_everywhere({flat}, [](auto& v) { return slice(v[0], {0}, {300001}, {3}) * 3.0f; }))
        << "every third " << name;
    Array batched = input({3, 400, 660}, d, 107), small = input({3, 40, 66}, d, 108);
    EXPECT_TRUE(equal_everywhere({batched},
                                 [](auto& v) {
                                   return maximum(slice(v[0], {0, 0, 0}, {3, 400, 660}, {1, 2, 3}), 0.5f);
                                 }))
        << "batched " << name;
    EXPECT_TRUE(equal_everywhere({small},
                                 [](auto& v) {
                                   return maximum(slice(v[0], {0, 0, 0}, {3, 40, 66}, {1, 2, 3}), 0.5f);
                                 }))
        << "small " << name;
  }
}

// Arg-reductions of long rows go in parts (a block a part, then a thread a row folds them):
// ties keep the first index, NaN is the extreme, every dtype, rows along or across memory.
TEST_F(Cuda, ArgReductionsOfLongRowsInParts) {
  for (Dtype d : {float32, bfloat16, float16, float64, int32, uint8, int64, bool_}) {
    const std::string name = dtype_name(d);
    Array x = input({3, 300000}, d, 61, -4, 4);  // integers in [-4, 4): many ties of the extreme
    EXPECT_TRUE(both({x}, [&](auto& v) { return argmax(v[0], 1); })) << "argmax " << name;
    EXPECT_TRUE(both({x}, [&](auto& v) { return argmin(v[0], -1, true); })) << "argmin " << name;
    Array across = input({300000, 3}, d, 62, -4, 4);
    EXPECT_TRUE(both({across}, [&](auto& v) { return argmax(v[0], 0); })) << "across " << name;
    Array many = input({2000, 4096}, d, 63, -4, 4);
    EXPECT_TRUE(both({many}, [&](auto& v) { return argmin(v[0], 1); })) << "many rows " << name;
    // Rows starting off a 16-byte boundary and parts with a tail: scalar loads there.
    Array odd = input({3, 300001}, d, 65, -4, 4);
    EXPECT_TRUE(both({odd}, [&](auto& v) { return argmax(v[0], 1); })) << "odd rows " << name;
    EXPECT_TRUE(both({odd}, [&](auto& v) { return argmin(slice(v[0], {0, 1}, {3, 300001}), 1); })) << "offset " << name;
  }
  // The first NaN, a row of one value that is each scan's starting value, the extreme last or
  // early, and in every floating type (bfloat16 scans 8 positions a load, float32 4).
  const int64_t n = 300000;
  for (Dtype d : {float32, bfloat16, float16}) {
    const std::string name = dtype_name(d);
    std::vector<double> v = kt::random_values(6 * n, d, 64, -2, 2);
    v[static_cast<size_t>(200000)] = NAN;  // row 0: the first NaN wins both ways
    v[static_cast<size_t>(150000)] = NAN;
    for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(n + j)] = -INFINITY;  // row 1: all -inf
    v[static_cast<size_t>(3 * n - 1)] = 5.0;  // row 2: the maximum last
    v[static_cast<size_t>(3 * n + 7)] = -5.0;  // row 3: the minimum early
    for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(4 * n + j)] = INFINITY;  // row 4: all +inf
    v[static_cast<size_t>(5 * n)] = NAN;  // row 5: a NaN first, and infinities after it
    v[static_cast<size_t>(5 * n + 9)] = INFINITY;
    v[static_cast<size_t>(5 * n + 17)] = -INFINITY;
    Array special = kt::from_values(v, {6, n}, d);
    EXPECT_TRUE(both({special}, [&](auto& a) { return argmax(a[0], 1); })) << "argmax with NaN and infinities " << name;
    EXPECT_TRUE(both({special}, [&](auto& a) { return argmin(a[0], 1); })) << "argmin with NaN and infinities " << name;
    const std::vector<int32_t> top = argmax(to(special, gpu), 1).to_vector<int32_t>();
    const std::vector<int32_t> bottom = argmin(to(special, gpu), 1).to_vector<int32_t>();
    EXPECT_EQ(top, (std::vector<int32_t>{150000, 0, 299999, top[3], 0, 0})) << name;
    EXPECT_EQ(bottom, (std::vector<int32_t>{150000, 0, bottom[2], 7, 0, 0})) << name;
  }
}

// The same key gives the same words on the GPU as on the CPU, eagerly and compiled, for
// draws of every parity and of many blocks; the distributions built on them follow.
TEST_F(Cuda, RandomBitsEqualTheCpus) {
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{4096}, int64_t{1000001}}) {
    Array k = random::key(static_cast<uint64_t>(n) * 31 + 1);
    EXPECT_EQ(random::bits({n}, to(k, gpu)).to_vector<uint32_t>(), random::bits({n}, k).to_vector<uint32_t>()) << n;
  }
  Array logits = input({8, 49152}, float32, 71, -8, 8);
  EXPECT_TRUE(equal_everywhere({random::key(9), logits}, [](auto& v) { return random::categorical(v[1], v[0]); }));
  EXPECT_TRUE(equal_everywhere({random::key(10)}, [](auto& v) { return random::uniform({3, 1000}, v[0], bfloat16); }));
  EXPECT_TRUE(equal_everywhere({random::split(random::key(11), 3)}, [](auto& v) {
    return random::bits({7}, reshape(slice(v[0], {2, 0}, {3, 2}), {2}));  // a key made on the device
  }));
}

// topk runs on the GPU (up to 1024 picks a row): the CPU's picks and order, ties by position,
// NaN first, for vocabulary rows, many short rows, a moved axis and every dtype family.
TEST_F(Cuda, TopkEqualsTheCpus) {
  for (Dtype d : {float32, bfloat16, float16, float64, int32, uint8, int64, uint64, bool_}) {
    const std::string name = dtype_name(d);
    std::vector<double> v = kt::random_values(3 * 49152, d, 72, -6, 6);  // integers: many ties
    if (is_floating(d)) {
      v[100] = v[70000] = NAN;
      v[200] = INFINITY;
      v[300] = -0.0;
      v[301] = 0.0;
    }
    Array x = kt::from_values(v, {3, 49152}, d);
    for (int k : {1, 40, 1024, 1025}) {  // 1025: on the host
      EXPECT_TRUE(equal_everywhere({x}, [&](auto& a) { return topk(a[0], k).second; })) << name << " k " << k;
      EXPECT_TRUE(equal_everywhere({x}, [&](auto& a) { return topk(a[0], k).first; })) << name << " k " << k;
    }
    Array many = input({3000, 50}, d, 73, -3, 3);
    EXPECT_TRUE(equal_everywhere({many}, [&](auto& a) { return topk(a[0], 50).second; })) << name << " all";
    EXPECT_TRUE(equal_everywhere({many}, [&](auto& a) { return topk(a[0], 7, 0).second; })) << name << " axis 0";
  }
}

// Many more rows than blocks: each block loops over rows, and row kernels reuse their
// reductions' shared buffers with no barrier of their own between rows. One reduction a row
// (rmsnorm, x / max|x|) and two (softmax, layernorm); the zeros, infinities and NaN send some
// elements to the exact division's second try.
TEST_F(Cuda, RowKernelsLoopingOverManyRowsMatchEager) {
  auto body = [](const std::vector<Array>& v) -> std::vector<Array> {
    const Array& x = v[0];
    Array d = x - mean(x, {-1}, true);
    return {x / max(abs(x), {-1}, true), x * rsqrt(mean(x * x, {-1}, true) + 1e-6f), softmax(x),
            d * rsqrt(mean(d * d, {-1}, true) + 1e-5f)};
  };
  auto fn = compile(body);
  for (Dtype dt : {bfloat16, float32}) {
    for (int64_t n : {256, 4096}) {
      // Staged blocks loop over rows past 128 an SM (20000 > 132 * 128), register blocks past a wave.
      const int64_t rows = n == 256 ? 20000 : 6000;
      std::vector<double> v = kt::random_values(rows * n, dt, 77 + static_cast<uint64_t>(n), -6, 6);
      for (int64_t r = 0; r < rows; r += 89) v[static_cast<size_t>(r * n + (r * 7) % n)] = -0.0;
      for (int64_t r = 1; r < rows; r += 97) v[static_cast<size_t>(r * n + r % n)] = -INFINITY;  // exp gives 0
      for (int64_t r = 50; r < rows; r += 1013) v[static_cast<size_t>(r * n)] = NAN;
      Array xg = to(kt::from_values(v, {rows, n}, dt), gpu);
      xg.eval();
      auto compiled = fn({xg});
      auto eager = body({xg});
      for (size_t i = 0; i < eager.size(); ++i) {
        const std::string what =
            std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " output " + std::to_string(i);
        EXPECT_TRUE(close(compiled[i], eager[i], 1.0)) << what;
        if (i == 0) {
          EXPECT_TRUE(same_bits(compiled[i], eager[i])) << what;  // no sum: no order to differ
        }
      }
    }
  }
}

// Fused row programs against their eager ops on the GPU, every output bit for bit: float
// sums accumulate in double in both, and a division by a row value is correctly rounded.
// Many rows (a block a row in both) and few long rows (eager reductions in parts, fused ones
// a block or, at 70000 float32, a cluster of blocks a row), so float64 sums fold in another
// order: within rounding there, and the differing elements counted.
TEST_F(Cuda, RowProgramsEqualEagerBitForBit) {
  auto body = [](const std::vector<Array>& v) -> std::vector<Array> {
    const Array& x = v[0];
    Array d = x - mean(x, {-1}, true);
    return {softmax(x), x * rsqrt(mean(x * x, {-1}, true) + 1e-6f), d * rsqrt(mean(d * d, {-1}, true) + 1e-5f)};
  };
  auto fn = compile(body);
  for (Dtype dt : {float32, bfloat16, float64}) {
    for (auto [rows, n] : {std::pair<int64_t, int64_t>{2000, 300}, {1500, 4096}, {300, 16384}, {3, 70000}}) {
      std::vector<double> v = kt::random_values(rows * n, dt, 91 + static_cast<uint64_t>(n), -5, 5);
      v[static_cast<size_t>(n + 3)] = INFINITY;
      v[static_cast<size_t>(2 * n - 1)] = NAN;
      Array xg = to(kt::from_values(v, {rows, n}, dt), gpu);
      xg.eval();
      auto compiled = fn({xg});
      auto eager = body({xg});
      for (size_t i = 0; i < eager.size(); ++i) {
        const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(n) +
                                 " output " + std::to_string(i);
        if (dt != float64) {
          EXPECT_TRUE(same_bits(compiled[i], eager[i])) << what;
          continue;
        }
        // Few long rows: eager sums in parts, in another order (H100: up to a quarter of the elements).
        auto a = compiled[i].to_vector<double>(), b = eager[i].to_vector<double>();
        int64_t differ = 0;
        for (size_t k = 0; k < a.size(); ++k) differ += !(a[k] == b[k] || (std::isnan(a[k]) && std::isnan(b[k])));
        if (differ > 0)
          std::printf("%s: %lld of %zu elements differ in rounding\n", what.c_str(), static_cast<long long>(differ),
                      a.size());
        EXPECT_TRUE(close(compiled[i], eager[i], 1.0)) << what;
      }
    }
  }
}

// A plan of several kernels: softmax rows, a column sum and an elementwise region.
std::vector<Array> several_kernels(const std::vector<Array>& v) {
  return {softmax(v[0]) * 2.0f, sum(exp(v[0] * 0.5f), {0}), v[0] * v[1] + 1.0f};
}

// A plan of one kernel replays as a graph too (a graph launch costs the host less than a
// kernel launch): new input and output buffers each call, earlier outputs kept intact.
TEST_F(Cuda, OneKernelPlansReplayAsGraphs) {
  auto one = [](const std::vector<Array>& v) { return std::vector<Array>{exp(v[0] * 0.5f) + v[1]}; };
  auto fn = compile(one);
  const uint64_t before = cuda::graph_replays();
  std::vector<Array> kept, want;
  for (int call = 0; call < 6; ++call) {
    Array x = input({1000}, float32, 230 + static_cast<uint64_t>(call)), y = input({1000}, float32, 240);
    want.push_back(one({x, y})[0]);
    kept.push_back(fn({to(x, gpu), to(y, gpu)})[0]);
  }
  eval(kept);
  for (size_t c = 0; c < kept.size(); ++c) EXPECT_TRUE(close(kept[c], want[c], 1.0)) << "call " << c;
  EXPECT_GE(cuda::graph_replays() - before, 4u) << "calls after the first should be graph launches";
}

TEST_F(Cuda, CompiledPlansReplayAsGraphsWithNewBuffers) {
  auto fn = compile(several_kernels);
  const uint64_t before = cuda::graph_replays();
  std::vector<std::vector<Array>> kept;  // earlier outputs must survive later calls
  std::vector<std::vector<Array>> want;
  for (int call = 0; call < 5; ++call) {
    Array x = input({64, 300}, float32, 200 + static_cast<uint64_t>(call)), w = input({300}, float32, 210);
    want.push_back(several_kernels({x, w}));
    kept.push_back(fn({to(x, gpu), to(w, gpu)}));
    eval(kept.back());
  }
  for (size_t c = 0; c < kept.size(); ++c) {
    for (size_t i = 0; i < kept[c].size(); ++i)
      EXPECT_TRUE(close(kept[c][i], want[c][i], 1.0)) << "call " << c << " output " << i;
  }
  EXPECT_GE(cuda::graph_replays() - before, 3u) << "calls after the first should be graph launches";
  // A transposed input is another layout: recorded again, still right.
  Array xt = input({300, 64}, float32, 220), w = input({300}, float32, 221);
  Array xv = transpose(to(xt, gpu));
  auto got = fn({xv, to(w, gpu)});
  auto expect = several_kernels({transpose(xt), w});
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close(got[i], expect[i], 1.0)) << "transposed output " << i;
}

// A plan with cuBLASLt products (an MLP: a product with bias and GELU in its epilogue,
// elementwise and row kernels, a second biased product) replays as graphs with new pointers
// every call. With 16 rows every product is inside the one graph (its per-call operands
// copied through the graph's buffers); with 8192 the first product reads a 2 MiB input,
// captured again each call, and the second writes a 1.3 MiB output and runs from the host
// between two graphs. Replays of the same values equal the recorded call bit for bit, and
// every call matches the CPU.
TEST_F(Cuda, CompiledPlansWithMatmulsReplayWithNewBuffers) {
  auto mlp = [](const std::vector<Array>& v) {
    Array h = gelu_tanh(matmul(v[0], v[1]) + v[2]);
    return std::vector<Array>{matmul(h * 0.5f + 1.0f, v[3]) + v[4], sum(h, {1})};
  };
  Array w1 = input({64, 96}, float32, 300, -1, 1), b1 = input({96}, float32, 301, -1, 1);
  Array w2 = input({96, 40}, float32, 302, -1, 1), b2 = input({40}, float32, 303, -1, 1);
  std::vector<Array> weights = {to(w1, gpu), to(b1, gpu), to(w2, gpu), to(b2, gpu)};
  for (int64_t rows : {16, 8192}) {
    auto fn = compile(mlp);
    std::vector<Array> uploads;  // kept: each call's input gets a block of its own, a new pointer
    auto call = [&](const Array& x) {
      uploads.push_back(to(x, gpu));
      std::vector<Array> in = {uploads.back()};
      in.insert(in.end(), weights.begin(), weights.end());
      return fn(in);
    };
    const uint64_t before = cuda::graph_replays();
    Array x0 = input({rows, 64}, float32, 310, -1, 1);
    std::vector<Array> first = call(x0);
    eval(first);
    std::vector<Array> second = call(x0);  // records again: the first uploaded the scalar constants
    eval(second);
    const cuda::GraphStepStats steps0 = cuda::graph_step_stats();
    std::vector<std::vector<Array>> kept;  // earlier outputs must survive later calls
    std::vector<Array> xs;
    for (int c = 0; c < 4; ++c) {
      xs.push_back(input({rows, 64}, float32, 320 + static_cast<uint64_t>(c), -1, 1));
      kept.push_back(call(xs.back()));
      eval(kept.back());  // each call runs now, in order (outputs are lazy)
    }
    std::vector<Array> again = call(x0);
    eval(again);
    const cuda::GraphStepStats steps = cuda::graph_step_stats();
    const std::string ctx = std::to_string(rows) + " rows";
    EXPECT_EQ(cuda::graph_replays() - before, 5u) << ctx << ": calls after the second should replay graphs";
    EXPECT_EQ(steps.host_steps - steps0.host_steps, rows == 16 ? 0u : 5u) << ctx << ": products run from the host";
    EXPECT_EQ(steps.recaptures - steps0.recaptures, rows == 16 ? 0u : 5u) << ctx << ": products captured again";
    for (size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(same_bits(again[i], first[i])) << ctx << " output " << i;
    for (size_t c = 0; c < kept.size(); ++c) {
      auto want = mlp({xs[c], w1, b1, w2, b2});
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_TRUE(close(kept[c][i], want[i], 100.0)) << ctx << " call " << c << " output " << i;
      }
    }
  }
}

// Operands at any offset (views 2 or 4 bytes past an aligned start): cuBLASLt is asked for
// algorithms that accept their alignment, eager and compiled (replayed) alike.
// The batched decode step's attention (cache_attention: the step's keys and values written into
// the caches, then attention over them) compiled over 70 sessions (launches of at most 64 rows)
// equals the CPU's; calls after the first replay as graphs over new caches, each written where it
// lies. A position past the caches, held on the device, is clamped into them (the CPU refuses it;
// the kernel never writes outside).
TEST_F(Cuda, BatchedDecodeStepReplaysOverNewCaches) {
  const int64_t B = 70, H = 2, cap = 32, D = 64;  // bfloat16 heads of 64: the tensor-core attention
  auto step = [](const std::vector<Array>& in) {
    return cache_attention(in[0], in[1], in[1] * 0.5f, in[2], std::vector<Array>(in.begin() + 3, in.end()), 0.125f,
                           false);
  };
  auto fn = compile(step);
  const uint64_t before = cuda::graph_replays();
  auto inputs = [&](int call, int32_t last_position) {
    std::vector<int32_t> pos;
    for (int64_t b = 0; b < B; ++b) pos.push_back(static_cast<int32_t>((b * 5 + call) % cap));
    pos.back() = last_position;
    std::vector<Array> in{input({B, 4, 1, D}, bfloat16, 300 + call, -1, 1), input({B, H, 1, D}, bfloat16, 310 + call),
                          array(pos, {B})};
    for (int64_t i = 0; i < 2 * B; ++i) in.push_back(input({1, H, cap, D}, bfloat16, 320 + 1000 * call + i));
    return in;
  };
  for (int call = 0; call < 4; ++call) {
    std::vector<Array> in = inputs(call, static_cast<int32_t>(cap - 1));
    const std::vector<Array> want = step(in);
    // The caches as a kernel's outputs: an upload stays its host array's mirror, never donated.
    std::vector<Array> g;
    for (size_t i = 0; i < in.size(); ++i) g.push_back(i < 3 ? to(in[i], gpu) : copy(to(in[i], gpu)));
    eval(g);
    std::vector<const void*> data;
    for (size_t i = 3; i < g.size(); ++i) data.push_back(g[i].tensor().raw());
    std::vector<Array> got = fn(g);
    g.clear();  // the caches are the step's alone: updated in place
    eval(got);
    // Attention's probabilities enter the tensor cores in bfloat16: its output errs by bfloat16
    // steps of the values (up to 4 here), not of the output (a small average of them).
    EXPECT_TRUE(close(got[0], want[0], 1.0)) << "call " << call << " attention";
    for (size_t i = 1; i < got.size(); ++i) {
      EXPECT_TRUE(close(got[i], want[i])) << "call " << call << " cache " << i - 1;
      EXPECT_EQ(got[i].tensor().raw(), data[i - 1]) << "call " << call << ": cache " << i - 1 << " was copied";
    }
  }
  EXPECT_GE(cuda::graph_replays() - before, 2u) << "calls after the first should be graph launches";
  std::vector<Array> g;
  for (const Array& a : inputs(9, static_cast<int32_t>(cap + 5))) g.push_back(to(a, gpu));
  const std::vector<Array> got = fn(g);
  kt::expect_error([&] { eval(step(inputs(9, static_cast<int32_t>(cap + 5)))); },
                   "[cache_attention] position 37 of batch row 69 puts 1 keys outside caches of capacity 32");
  const std::vector<Array> clamped = step(inputs(9, static_cast<int32_t>(cap - 1)));
  EXPECT_TRUE(close(got[B], clamped[B])) << "the last session's keys, at the last position";
  EXPECT_TRUE(close(got[0], clamped[0], 1.0)) << "attention over the clamped caches";
}

TEST_F(Cuda, MatmulOfViewsAtAnyOffset) {
  for (Dtype d : {float32, bfloat16, float16}) {
    Array flat_a = input({1 + 37 * 29}, d, 330, -1, 1), flat_b = input({3 + 29 * 23}, d, 331, -1, 1);
    auto at = [](const Array& flat, int64_t start, Shape shape) {
      return reshape(slice(flat, {start}, {start + shape[0] * shape[1]}), shape);
    };
    Array a = at(flat_a, 1, {37, 29}), b = at(flat_b, 3, {29, 23});
    Array ga = at(to(flat_a, gpu), 1, {37, 29}), gb = at(to(flat_b, gpu), 3, {29, 23});
    Array want = astype(matmul(astype(a, float64), astype(b, float64)), d);
    Array eager = matmul(ga, gb);
    EXPECT_TRUE(close(eager, want, 1.0)) << dtype_name(d);
    auto fn = compile([](const std::vector<Array>& v) { return std::vector<Array>{matmul(v[0], v[1])}; });
    for (int call = 0; call < 3; ++call) {
      EXPECT_TRUE(same_bits(fn({ga, gb})[0], eager)) << dtype_name(d) << " call " << call;
    }
  }
}

TEST_F(Cuda, GraphReplaysFromManyThreads) {
  auto fn = compile(several_kernels);
  Array w = input({300}, float32, 230);
  fn({to(input({32, 300}, float32, 231), gpu), to(w, gpu)})[0].eval();  // recorded here
  // KILN_TEST_THREADS: fewer threads for slow tools (compute-sanitizer's racecheck).
  const int n_threads = static_cast<int>(config::integer(config::Knob::test_threads));
  std::vector<std::thread> threads;
  std::vector<int> bad(static_cast<size_t>(n_threads), 0);
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 10; ++k) {
        Array x = input({32, 300}, float32, 300 + static_cast<uint64_t>(t * 10 + k));
        auto g = fn({to(x, gpu), to(w, gpu)});
        auto c = several_kernels({x, w});
        for (size_t i = 0; i < g.size(); ++i) bad[static_cast<size_t>(t)] += close(g[i], c[i], 1.0) ? 0 : 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < n_threads; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
}

// Split reductions (parts, then their fold) from many threads at once, eager and compiled
// (graphs recorded on each thread's stream): each thread gets its own rows' results call
// after call, bit for bit (two inputs in turn, so a result left over from the call before
// would show).
TEST_F(Cuda, SplitReductionsFromManyThreads) {
  auto body = [](const std::vector<Array>& v) {
    return std::vector<Array>{sum(v[0], {1}), argmax(v[0], 1), max(v[0])};
  };
  auto fn = compile(body);
  const int n_threads = static_cast<int>(config::integer(config::Knob::test_threads));
  std::vector<std::array<Array, 2>> xs;
  std::vector<std::array<std::vector<Array>, 2>> want;  // on the GPU once, from this thread
  for (int t = 0; t < n_threads; ++t) {
    xs.push_back({to(input({3, 200000}, float32, 400 + static_cast<uint64_t>(t)), gpu),
                  to(input({3, 200000}, float32, 500 + static_cast<uint64_t>(t)), gpu)});
    want.push_back({body({xs.back()[0]}), body({xs.back()[1]})});
    for (auto& w : want.back()) eval(w);
  }
  std::vector<std::thread> threads;
  std::vector<int> bad(static_cast<size_t>(n_threads), 0);
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) {
        const auto& x = xs[static_cast<size_t>(t)][static_cast<size_t>(k % 2)];
        const auto& w = want[static_cast<size_t>(t)][static_cast<size_t>(k % 2)];
        auto got = k % 4 < 2 ? body({x}) : fn({x});
        for (size_t i = 0; i < got.size(); ++i) bad[static_cast<size_t>(t)] += same_bits(got[i], w[i]) ? 0 : 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < n_threads; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "thread " << t;
}

// The share of outputs RandomGraphsGpuAgainstCpu compares by shape only (seeds 1 to 200 give
// a fixed share; see fuzz::kMaxUncheckedShare).
constexpr double kMaxUncheckedAcrossDevices = 0.25;

TEST_F(Cuda, RandomGraphsGpuAgainstCpu) {
  int compared = 0, unchecked = 0;
  const uint64_t count = static_cast<uint64_t>(config::integer(config::Knob::test_cuda_fuzz_count));
  for (uint64_t seed = 1; seed <= count; ++seed) {
    fuzz::Program p = fuzz::generate(seed);
    auto in = p.make_inputs();
    std::vector<Array> gin;
    for (auto& a : in) gin.push_back(to(a, gpu));
    std::vector<Array> want, got;
    try {
      want = p.run(in);
      eval(want);
    } catch (const std::exception&) {
      continue;  // the program is invalid on the CPU too
    }
    try {
      got = p.run(gin);
      eval(got);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << seed << ": the GPU threw " << e.what() << "\n" << p.listing();
      continue;
    }
    for (size_t o = 0; o < p.outputs.size(); ++o) {
      auto e = p.exactness[static_cast<size_t>(p.outputs[o])];
      // Unreliable, or legitimately device-dependent (argpartition's order off kth, Gumbel
      // draws through log, codes rounded from a scale): by shape only across devices; the
      // compiled-against-eager check below still compares them on the GPU.
      if (e == fuzz::Exactness::unreliable || p.same_device_only[static_cast<size_t>(p.outputs[o])]) {
        ++unchecked;
        EXPECT_EQ(got[o].shape(), want[o].shape());
        continue;
      }
      ++compared;
      // The GPU's libm differs from the CPU's in the last bits: compare within tolerance.
      std::string diff = fuzz::compare_arrays(got[o], want[o], fuzz::Exactness::approximate);
      EXPECT_EQ(diff, "") << "seed " << seed << " output " << o << "\n" << p.listing();
    }
    // And compiled on the GPU against eager on the GPU.
    fuzz::CheckResult r;
    set_default_device(gpu);
    r = fuzz::check(p, {.shapeless = true, .shapeless_variants = false});
    set_default_device(Device::cpu());
    EXPECT_TRUE(r.ok) << "seed " << seed << " (compiled on the GPU): " << r.failure;
  }
  // Across devices the unchecked share is larger (device-dependent outputs too): bounded apart.
  const std::string report =
      fuzz::unchecked_report(static_cast<uint64_t>(unchecked), static_cast<uint64_t>(compared + unchecked));
  std::printf("GPU against CPU: %s\n", report.c_str());
  EXPECT_LE(unchecked, kMaxUncheckedAcrossDevices * (compared + unchecked))
      << report << ": more than " << 100 * kMaxUncheckedAcrossDevices << "% went unchecked";
}

TEST_F(Cuda, CachingAllocatorReusesBlocks) {
  Array x = to(input({1 << 16}, float32, 81), gpu);
  for (int i = 0; i < 3; ++i) (x * 2.0f + 1.0f).eval();
  size_t before = cuda::device_mallocs();
  for (int i = 0; i < 100; ++i) (x * 2.0f + 1.0f).eval();
  EXPECT_EQ(cuda::device_mallocs(), before) << "an op allocated device memory instead of reusing a cached block";
  EXPECT_GT(cuda::cached_bytes(), 0u);
}

// A lazy chain frees each intermediate once the op after it has read it, so its blocks come back
// to the pool during the eval: 64 ops allocate no new device memory once two blocks are cached.
TEST_F(Cuda, LazyChainReusesEachIntermediatesBlock) {
  if (eager()) GTEST_SKIP() << "KILN_MODE=eager evaluates each op as it is built";
  Array x = to(input({1 << 18}, float32, 82), gpu);
  auto chain = [&] {
    Array y = x;
    for (int i = 0; i < 64; ++i) y = y * 0.5f;
    return y;
  };
  chain().eval();
  size_t before = cuda::device_mallocs();
  chain().eval();
  EXPECT_EQ(cuda::device_mallocs(), before) << "the chain held its intermediates until the end of the eval";
}

TEST_F(Cuda, OutOfMemoryIsAnErrorAndTheProcessGoesOn) {
  set_default_device(gpu);
  Array small = full({1 << 20}, 1.0, float32);
  small.eval();
  Array huge = full({int64_t{1} << 40}, 1.0, float32);  // 4 TiB
  try {
    huge.eval();
    ADD_FAILURE() << "a 4 TiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sum(small).item<float>(), float(1 << 20));
}

// async_eval queues the work and returns: a kernel queued first on this thread's stream holds
// the stream until the test opens a gate in device memory (from another thread's stream), so
// an async_eval that waited for its products would wait for the gate, which opens only after
// it returned; the gate kernel then gives up after 5 s and says so. The products' values
// equal those of an eval of the same chain.
TEST_F(Cuda, AsyncEvalReturnsWithoutWaiting) {
  set_default_device(gpu);
  const int64_t n = config::integer(config::Knob::test_async_n);  // smaller products under a sanitizer
  Array a = input({n, n}, float32, 91);
  Array b = to(a, gpu);
  auto chain = [&] {
    Array y = b;
    for (int i = 0; i < 20; ++i) y = matmul(y, b) * 1e-3f;
    return y;
  };
  Array want = chain();
  want.eval();  // also compiles and loads every kernel the chain uses, and sizes the memory pool

  const std::string src =
      "extern \"C\" __global__ void kiln_gate(const volatile int* open, int* timed_out, unsigned long long limit_ns) "
      "{\n"
      "  unsigned long long t0, t;\n"
      "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
      "  do {\n"
      "    if (*open) return;\n"
      "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
      "  } while (t - t0 < limit_ns);\n"
      "  *timed_out = 1;\n"
      "}\n";
  cuda::Kernel gate = cuda::kernel(0, src, "kiln_gate", [&] { return src; });
  auto flags = cuda::allocate(0, 2 * sizeof(int));  // [0]: the gate is open; [1]: the gate timed out
  const auto open_at = reinterpret_cast<CUdeviceptr>(flags->data());
  const CUdeviceptr timed_out_at = open_at + sizeof(int);
  cuda::check(cuda::drv().cuMemsetD8Async(open_at, 0, 2 * sizeof(int), cuda::stream(0)), "cuMemsetD8Async");
  void* open_ptr = flags->data();
  void* timed_out_ptr = reinterpret_cast<void*>(timed_out_at);
  unsigned long long limit_ns = 5'000'000'000ull;
  void* args[] = {&open_ptr, &timed_out_ptr, &limit_ns};
  cuda::launch(0, gate, 1, 1, args);

  Array y = chain();
  auto t0 = std::chrono::steady_clock::now();
  async_eval({y});
  const double returned_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::string open_error;
  std::thread opener([&] {  // another thread's stream: it does not queue behind the gate
    try {
      const int one = 1;
      cuda::check(cuda::drv().cuMemcpyHtoDAsync(open_at, &one, sizeof one, cuda::stream(0)), "cuMemcpyHtoDAsync");
      cuda::synchronize(0);
    } catch (const std::exception& e) {
      open_error = e.what();
    }
  });
  opener.join();
  ASSERT_EQ(open_error, "");
  int timed_out = -1;
  cuda::check(cuda::drv().cuMemcpyDtoHAsync(&timed_out, timed_out_at, sizeof timed_out, cuda::stream(0)),
              "cuMemcpyDtoHAsync");
  cuda::synchronize(0);
  std::printf("async_eval returned after %.3f ms, its products queued behind the closed gate\n", returned_ms);
  EXPECT_EQ(timed_out, 0) << "async_eval returned only after " << returned_ms
                          << " ms: it waited for work queued behind the gate";
  EXPECT_TRUE(close(y, want)) << "the products differ from those of eval";
}

// Work that is all on the GPU is launched by the calling thread (its nodes are evaluated
// when async_eval returns, the kernels still queued); a graph with a CPU part goes to the
// worker. Both give the same values as the CPU.
TEST_F(Cuda, AsyncEvalLaunchesGpuWorkOnTheCallingThread) {
  Array x = input({1 << 16}, float32, 111);
  auto f = [](const Array& a) { return exp(a * 0.5f) + 1.0f; };
  Array want = f(x);
  Array on_gpu = f(to(x, gpu));
  async_eval({on_gpu});
  EXPECT_TRUE(on_gpu.is_evaluated());
  EXPECT_TRUE(close(on_gpu, want));

  Array mixed = f(to(x, gpu)) + x * 2.0f;  // x * 2 is pending CPU work
  async_eval({mixed});
  // The sum cancels (terms up to 16 give results near 0): compare at the terms' scale.
  EXPECT_TRUE(close(mixed, want + x * 2.0f, 16.0));
  std::vector<Array> many;
  for (int i = 0; i < 100; ++i) {
    many.push_back(f(to(x, gpu)) * float(i));
    async_eval({many.back()});
  }
  eval(many);
  EXPECT_TRUE(close(many[99], want * 99.0f));
}

// Weights uploaded by one thread and read by another thread's calls: the reader's stream
// waits for the upload once, not on every call (each wait would also queue the reader
// behind everything the uploading thread launched since).
TEST_F(Cuda, SharedInputsAreWaitedForOncePerStream) {
  Array w = to(input({4096}, float32, 121), gpu);
  w.eval();
  const size_t before = cuda::input_stream_waits();
  std::vector<Array> got;
  std::thread reader([&] {
    for (int i = 0; i < 50; ++i) got.push_back(w * float(i) + 1.0f);
    eval(got);
  });
  reader.join();
  EXPECT_EQ(cuda::input_stream_waits() - before, 1u);
  EXPECT_TRUE(close(got[49], input({4096}, float32, 121) * 49.0f + 1.0f));
}

TEST_F(Cuda, ThreadsShareArraysAcrossStreams) {
  Array x = to(input({256, 256}, float32, 101), gpu);
  Array shared = exp(x * 0.01f);  // evaluated by whichever thread gets there first
  std::vector<std::thread> threads;
  std::vector<double> sums(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Array y = sum(matmul(shared, shared) + float(t));
      sums[static_cast<size_t>(t)] = y.item<double>();
    });
  }
  for (auto& th : threads) th.join();
  Array cpu_shared = exp(to(x, Device::cpu()) * 0.01f);
  double want = sum(matmul(cpu_shared, cpu_shared)).item<double>();
  for (int t = 0; t < 8; ++t)
    EXPECT_NEAR(sums[static_cast<size_t>(t)], want + 256.0 * 256 * t, 1e-4 * std::fabs(want) + 1);
}

TEST_F(Cuda, KernelsCompileOncePerSource) {
  Array x = to(input({100}, float32, 111), gpu);
  (cos(x) * 3.0f).eval();
  auto s0 = cuda::nvrtc_stats();
  for (int i = 0; i < 10; ++i) (cos(x) * 3.0f).eval();
  auto s1 = cuda::nvrtc_stats();
  EXPECT_EQ(s1.compiles, s0.compiles);
  EXPECT_EQ(s1.disk_loads, s0.disk_loads);
}

// The module cache filled past its bound: it keeps at most its capacity, a dropped kernel
// still held runs (its module stays loaded until the last holder goes), and asking for a
// dropped kernel again loads it again.
TEST_F(Cuda, ModuleCacheFilledPastItsBound) {
  struct Restore {
    ~Restore() { set_kernel_cache_capacity(4096); }
  } restore;
  set_kernel_cache_capacity(4);
  auto source = [](int k) {
    return "extern \"C\" __global__ void kiln_kernel(float* out) { out[threadIdx.x] = " + std::to_string(k) + ".0f; }";
  };
  auto get = [&](int k) {
    const std::string src = source(k);
    return cuda::kernel(0, src, "kiln_kernel", [&] { return src; });
  };
  cuda::Kernel first = get(0);
  for (int k = 1; k < 12; ++k) {
    get(k);
    EXPECT_LE(cuda::module_cache_size(), 4u);
  }
  auto buf = cuda::allocate(0, 32 * sizeof(float));
  void* out = buf->data();
  void* args[] = {&out};
  cuda::launch(0, first, 1, 32, args);
  std::vector<float> host(32, -1.0f);
  cuda::check(cuda::drv().cuMemcpyDtoHAsync(host.data(), reinterpret_cast<CUdeviceptr>(out), 32 * sizeof(float),
                                            cuda::stream(0)),
              "cuMemcpyDtoHAsync");
  cuda::synchronize(0);
  for (float v : host) EXPECT_EQ(v, 0.0f);
  auto before = cuda::nvrtc_stats();
  get(1);  // dropped long ago
  auto after = cuda::nvrtc_stats();
  EXPECT_EQ(after.compiles + after.disk_loads, before.compiles + before.disk_loads + 1);
  const size_t loaded = cuda::loaded_modules();
  first = {};
  EXPECT_EQ(cuda::loaded_modules(), loaded - 1) << "the last holder of a dropped module unloads it";
}

// The device memory pool keeps at most its limit in free blocks; clear_memory_cache gives
// them all back.
TEST_F(Cuda, DeviceMemoryPoolFilledPastItsBound) {
  struct Restore {
    ~Restore() { set_device_memory_cache_limit(0); }
  } restore;
  clear_memory_cache();
  set_device_memory_cache_limit(size_t{6} << 20);
  {
    std::vector<std::shared_ptr<detail::Buffer>> held;
    for (int i = 0; i < 8; ++i) held.push_back(cuda::allocate(0, size_t{2} << 20));
  }
  EXPECT_GT(cuda::cached_bytes(), 0u);
  EXPECT_LE(cuda::cached_bytes(), size_t{6} << 20);
  set_device_memory_cache_limit(size_t{2} << 20);  // a lower limit applies at once
  EXPECT_LE(cuda::cached_bytes(), size_t{2} << 20);
  clear_memory_cache();
  EXPECT_EQ(cuda::cached_bytes(), 0u);
  set_device_memory_cache_limit(0);
  EXPECT_EQ(cuda::cache_limit(0), cuda::device_info(0).memory_bytes / 2);
}
