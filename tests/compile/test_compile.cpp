// compile(): caching, shapeless replay, captures, inlining, failures, outputs, dtypes.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/tensor.h"
#include "reference.h"
#include <kiln/kiln.h>

using namespace kiln;

namespace {

Array rand_f32(const Shape& s, uint64_t seed) {
  return kt::from_values(kt::random_values(kt::numel(s), float32, seed), s, float32);
}

void expect_same(const Array& a, const Array& b, const std::string& ctx) {
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

struct ModeGuard {
  CompileMode saved = compile_mode();
  ~ModeGuard() { set_compile_mode(saved); }
};

}  // namespace

TEST(Compile, RepeatCallsDoNotTraceAgain) {
  std::atomic<int> calls{0};
  auto f = compile([&](const std::vector<Array>& in) {
    ++calls;
    return std::vector<Array>{exp(in[0]) * in[1] + 1.0f};
  });
  Array x = rand_f32({3, 4}, 1), y = rand_f32({3, 4}, 2);
  auto r1 = f({x, y});
  auto r2 = f({x, y});
  EXPECT_EQ(calls.load(), 1);
  expect_same(r1[0], exp(x) * y + 1.0f, "first call");
  expect_same(r2[0], r1[0], "second call");
  f({rand_f32({5, 4}, 3), rand_f32({5, 4}, 4)});  // new shape
  EXPECT_EQ(calls.load(), 2);
  f({astype(x, float64), astype(y, float64)});  // new dtype
  EXPECT_EQ(calls.load(), 3);
  f({rand_f32({12}, 5), rand_f32({12}, 6)});  // new rank
  EXPECT_EQ(calls.load(), 4);
  f({x, y});
  EXPECT_EQ(calls.load(), 4);
}

TEST(Compile, CountersShowHitsAndMisses) {
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] + 1.0f}; });
  reset_stats();
  Array x = rand_f32({4}, 1);
  f({x})[0].eval();
  f({x})[0].eval();
  f({x})[0].eval();
  EXPECT_EQ(stats().traces, 1u);
  EXPECT_EQ(stats().cache_misses, 1u);
  EXPECT_EQ(stats().cache_hits, 2u);
}

TEST(Compile, ShapelessReusesTraceAcrossSizes) {
  std::atomic<int> calls{0};
  auto f = compile(
      [&](const std::vector<Array>& in) {
        ++calls;
        Array x = in[0];
        Array y = reshape(x * 2.0f, {-1});
        return std::vector<Array>{y, x + in[1]};
      },
      {.shapeless = true});
  for (int64_t n : {2, 5, 9}) {
    Array x = rand_f32({n, 3}, static_cast<uint64_t>(n)), b = rand_f32({3}, 7);
    auto r = f({x, b});
    expect_same(r[0], reshape(x * 2.0f, {-1}), "reshape -1 at n=" + std::to_string(n));
    expect_same(r[1], x + b, "broadcast at n=" + std::to_string(n));
  }
  EXPECT_EQ(calls.load(), 1);
  f({astype(rand_f32({2, 3}, 1), float64), rand_f32({3}, 2)});  // dtype change
  EXPECT_EQ(calls.load(), 2);
  f({rand_f32({2, 3, 1}, 1), rand_f32({3}, 2)});  // rank change
  EXPECT_EQ(calls.load(), 3);
}

TEST(Compile, ShapelessStoredShapeThatCannotApplyIsAClearError) {
  auto f = compile(
      [](const std::vector<Array>& in) {
        return std::vector<Array>{reshape(in[0], {2, 3})};
      },
      {.shapeless = true});
  f({rand_f32({6}, 1)})[0].eval();
  // The message says why a size the caller never wrote at this call is there.
  kt::expect_error([&] { f({rand_f32({8}, 1)}); },
                   "[reshape] cannot reshape array of size 8 into shape (2,3) (a shapeless function replays the "
                   "sizes its trace fixed, such as a reshape target or topk's k; derive them from the inputs' "
                   "shapes, or give reshape -1)");
}

TEST(Compile, CapturedArraysAreFrozenConstants) {
  Array w = rand_f32({4}, 9);
  auto f = compile([w](const std::vector<Array>& in) { return std::vector<Array>{in[0] * w}; });
  Array x = rand_f32({4}, 1);
  expect_same(f({x})[0], x * w, "captured");
  Array w_lazy = w + 1.0f;  // a lazy capture is evaluated at trace time
  auto g = compile([w_lazy](const std::vector<Array>& in) { return std::vector<Array>{in[0] - w_lazy}; });
  expect_same(g({x})[0], x - (w + 1.0f), "lazy capture");
}

TEST(Compile, ArrayBothCapturedAndPassedIsAnError) {
  Array w = rand_f32({4}, 9);
  auto f = compile([w](const std::vector<Array>& in) { return std::vector<Array>{in[0] * w}; });
  kt::expect_error([&] { f({w}); },
                   "[compile] an array passed as an input is also captured by the function; use the input argument "
                   "inside the function instead");
}

TEST(Compile, ArraysCreatedInsideWorkOnEveryReplay) {
  auto f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{in[0] + arange(4, float32) + array(0.5f) + full({4}, 2.0, float32)};
  });
  Array x = rand_f32({4}, 3);
  for (int i = 0; i < 3; ++i) expect_same(f({x})[0], x + arange(4, float32) + 0.5f + 2.0f, "replay");
}

TEST(Compile, NestedCompileIsInlined) {
  std::atomic<int> inner_calls{0};
  auto inner = compile([&](const std::vector<Array>& in) {
    ++inner_calls;
    return std::vector<Array>{sin(in[0]) * 2.0f};
  });
  auto outer = compile([&](const std::vector<Array>& in) { return std::vector<Array>{inner({in[0]})[0] + 1.0f}; });
  Array x = rand_f32({8}, 4);
  reset_stats();
  expect_same(outer({x})[0], sin(x) * 2.0f + 1.0f, "nested");
  EXPECT_EQ(stats().traces, 1u);  // the inner function was traced as part of the outer one
  EXPECT_EQ(inner_calls.load(), 1);
}

TEST(Compile, TraceThatThrowsLeavesNoEntry) {
  std::atomic<int> calls{0};
  auto f = compile([&](const std::vector<Array>& in) {
    if (++calls == 1) throw std::runtime_error("boom");
    return std::vector<Array>{in[0] + 1.0f};
  });
  Array x = rand_f32({3}, 1);
  EXPECT_THROW(f({x}), std::runtime_error);
  expect_same(f({x})[0], x + 1.0f, "after failure");
  EXPECT_EQ(calls.load(), 2);
  // A bad op inside the trace is an ordinary kiln error.
  auto g = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] + in[1]}; });
  kt::expect_error(
      [&] {
        g({rand_f32({2, 3}, 1), rand_f32({4}, 2)});
      },
      "[add] shapes (2,3) and (4) cannot be broadcast together");
}

TEST(Compile, EvaluatingInsideTraceIsAnError) {
  auto f = compile([](const std::vector<Array>& in) {
    (void)in[0].item<float>();
    return in;
  });
  EXPECT_THROW(f({array(1.0f)}), Error);
}

TEST(Compile, OutputVariants) {
  auto f = compile([](const std::vector<Array>& in) {
    Array t = in[0] * 3.0f;
    Array u = t + in[1];
    return std::vector<Array>{u, t, u, in[0], cos(in[1])};
  });
  Array x = rand_f32({2, 3}, 1), y = rand_f32({2, 3}, 2);
  auto r = f({x, y});
  ASSERT_EQ(r.size(), 5u);
  expect_same(r[0], x * 3.0f + y, "output");
  expect_same(r[1], x * 3.0f, "intermediate output");
  expect_same(r[2], r[0], "same array twice");
  expect_same(r[3], x, "input returned");
  expect_same(r[4], cos(y), "independent output");
  auto zero = compile([](const std::vector<Array>&) { return std::vector<Array>{arange(5, int32) * 2}; });
  EXPECT_EQ(zero({})[0].to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 4, 6, 8}));
}

TEST(Compile, NanAndInfConstantsInEveryFloatDtype) {
  for (Dtype d : kt::float_dtypes()) {
    auto f = compile([](const std::vector<Array>& in) {
      Array nan = scalar(std::numeric_limits<double>::quiet_NaN(), in[0].dtype());
      Array inf = scalar(std::numeric_limits<double>::infinity(), in[0].dtype());
      return std::vector<Array>{in[0] + nan, minimum(in[0], inf), maximum(in[0], -inf), in[0] * 0.0 + inf};
    });
    Array x = kt::from_values({1, -2, 3}, {3}, d);
    auto r = f({x});
    for (double v : r[0].to_vector<double>()) EXPECT_TRUE(std::isnan(v)) << dtype_name(d);
    expect_same(r[1], x, std::string("min inf ") + dtype_name(d));
    expect_same(r[2], x, std::string("max -inf ") + dtype_name(d));
    for (double v : r[3].to_vector<double>()) EXPECT_EQ(v, std::numeric_limits<double>::infinity());
  }
}

// Ops whose result is already a value of a 16-bit type (abs, negative, sign, floor, ceil,
// round, maximum, minimum, where) are not rounded again in generated code: compiled results
// must still equal eager ones bit for bit, NaN and infinities included.
TEST(Compile, SixteenBitExactOpsMatchEager) {
  auto fn = [](const std::vector<Array>& in) {
    Array x = in[0], y = in[1];
    return std::vector<Array>{abs(x) * y,
                              -x + y,
                              sign(x) * y,
                              floor(x * y),
                              ceil(x) - y,
                              round(x * 0.5f),
                              maximum(x, y) * x,
                              minimum(x, y) - x,
                              where(x > y, x, y) * y};
  };
  auto f = compile(fn);
  for (Dtype d : {float16, bfloat16}) {
    std::vector<double> xv = kt::random_values(64, d, 31, -40, 40), yv = kt::random_values(64, d, 32, -3, 3);
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> special = {std::nan(""), inf, -inf, 0.0, -0.0, 2.5, -2.5, 65504};
    for (size_t i = 0; i < special.size(); ++i) {
      xv[i] = special[i];
      yv[i + 8] = special[i];
    }
    Array x = kt::from_values(xv, {64}, d), y = kt::from_values(yv, {64}, d);
    auto got = f({x, y});
    auto want = fn({x, y});
    for (size_t o = 0; o < got.size(); ++o)
      expect_same(got[o], want[o], std::string(dtype_name(d)) + " output " + std::to_string(o));
  }
}

TEST(Compile, IntegerAndBoolDtypes) {
  auto f = compile([](const std::vector<Array>& in) {
    Array a = in[0], b = in[1];
    return std::vector<Array>{a * b + 3, floor_divide(a, b),        remainder(a, b),
                              a > b,     logical_and(a > 0, b > 0), bitwise_xor(a, b)};
  });
  for (Dtype d : {int8, int32, int64, uint8, uint32}) {
    Array a = kt::from_values(kt::random_values(20, d, 1), {20}, d);
    Array b = kt::from_values(kt::random_values(20, d, 2), {20}, d);
    auto r = f({a, b});
    expect_same(r[0], a * b + 3, "mul add");
    expect_same(r[1], floor_divide(a, b), "floor_divide");
    expect_same(r[2], remainder(a, b), "remainder");
    expect_same(r[3], a > b, "greater");
    expect_same(r[4], logical_and(a > 0, b > 0), "logical_and");
    expect_same(r[5], bitwise_xor(a, b), "xor");
  }
}

TEST(Compile, EveryModeMatchesEager) {
  ModeGuard guard;
  auto fn = [](const std::vector<Array>& in) {
    Array x = in[0];
    Array y = exp(x) * 1.0f + log(x * x + 1.0f) - tanh(x) / (x * x + 2.0f);
    Array z = y * y + y;  // y used twice: CSE and fusion keep one copy
    return std::vector<Array>{z, sum(z, {1}), sqrt(abs(x)) * 1.0f};
  };
  Array x = rand_f32({16, 33}, 11);
  auto eager = fn({x});
  for (CompileMode m : {CompileMode::disabled, CompileMode::no_simplify, CompileMode::no_fuse, CompileMode::enabled}) {
    set_compile_mode(m);
    auto f = compile(fn);
    auto got = f({x});
    std::string ctx = "mode " + std::to_string(static_cast<int>(m));
    expect_same(got[0], eager[0], ctx + " elementwise");
    // A fused reduction adds in another order: equal within rounding, not bit for bit.
    kt::expect_close(got[1], eager[1].to_vector<double>(), ctx + " reduction", 4);
    expect_same(got[2], eager[2], ctx + " elementwise");
  }
}

TEST(Compile, OneArgumentHelpers) {
  auto f1 = compile(std::function<Array(const Array&)>([](const Array& a) { return a * 2.0f; }));
  auto f2 =
      compile(std::function<Array(const Array&, const Array&)>([](const Array& a, const Array& b) { return a - b; }));
  auto f3 = compile(std::function<Array(const Array&, const Array&, const Array&)>(
      [](const Array& a, const Array& b, const Array& c) { return where(a > 0.0f, b, c); }));
  Array x = rand_f32({5}, 1), y = rand_f32({5}, 2), z = rand_f32({5}, 3);
  expect_same(f1(x), x * 2.0f, "f1");
  expect_same(f2(x, y), x - y, "f2");
  expect_same(f3(x, y, z), where(x > 0.0f, y, z), "f3");
}

TEST(Compile, CompiledOutputsComposeWithLazyGraphs) {
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 2.0f}; });
  Array x = rand_f32({4}, 1);
  Array lazy = exp(x);
  Array out = f({lazy})[0] + 1.0f;
  EXPECT_FALSE(out.is_evaluated());
  expect_same(out, exp(x) * 2.0f + 1.0f, "compose");
}

TEST(Compile, ExportToDotShowsGraphs) {
  Array x = rand_f32({4}, 1);
  std::ostringstream before;
  export_to_dot(before, {exp(x) + 1.0f});
  EXPECT_NE(before.str().find("exp"), std::string::npos);
  EXPECT_NE(before.str().find("add"), std::string::npos);
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) + 1.0f}; });
  std::ostringstream after;
  export_to_dot(after, f, {x});
  EXPECT_NE(after.str().find("digraph"), std::string::npos);
}

TEST(Compile, CacheIsBoundedAndWarnsOnRecompiles) {
  size_t saved = compile_cache_capacity();
  set_compile_cache_capacity(2);
  std::atomic<int> calls{0};
  auto f = compile([&](const std::vector<Array>& in) {
    ++calls;
    return std::vector<Array>{in[0] + 1.0f};
  });
  Array a = rand_f32({1}, 1), b = rand_f32({2}, 1), c = rand_f32({3}, 1);
  f({a});
  f({b});
  f({c});  // evicts a
  EXPECT_EQ(calls.load(), 3);
  f({c});
  f({b});
  EXPECT_EQ(calls.load(), 3);
  f({a});
  EXPECT_EQ(calls.load(), 4);
  set_compile_cache_capacity(saved);
  kt::expect_error([] { set_compile_cache_capacity(0); }, "[compile] cache capacity must be at least 1");
}

TEST(Compile, OutputTakesOverADonatedInputBuffer) {
  // cumsum is not fused, so the multiply is a later step that may take x's buffer.
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{cumsum(in[0], 0) * 2.0f}; });
  auto make = [] {
    // Computed on the default device, so nothing else holds its buffer (an upload is also
    // kept as the host buffer's device mirror, and is never taken over).
    Array x = to(kt::from_values(kt::random_values(4096, float32, 5), {4096}, float32), default_device()) * 1.0f;
    x.eval();
    return x;
  };
  Array kept = make();
  const void* kept_data = kept.tensor().raw();
  Array y = f({kept})[0];
  y.eval();
  EXPECT_NE(y.tensor().raw(), kept_data);  // the caller still holds x: never reused
  expect_same(y, cumsum(kept, 0) * 2.0f, "kept input");

  Array given = make();
  Array want = cumsum(given, 0) * 2.0f;
  want.eval();
  const void* given_data = given.tensor().raw();
  std::vector<Array> args{std::move(given)};
  Array z = f(args)[0];
  args.clear();  // the call's node now holds the only reference
  z.eval();
  EXPECT_EQ(z.tensor().raw(), given_data);
  expect_same(z, want, "donated input");
}

TEST(Compile, ShapelessTraceAtSizeOneDoesNotFixLaterCalls) {
  // A first call with a size-1 axis traced broadcasts that later sizes kept: two kernels
  // a call forever. Sizes of 1 now get a trace of their own.
  auto fn = [](const std::vector<Array>& in) {
    Array x = in[0];
    return std::vector<Array>{exp(x) * in[1] + x};
  };
  auto kernels = [](const CompiledFunction& f, int64_t n) {
    Array x = rand_f32({n}, 3), s = rand_f32({n}, 4);
    f({x, s})[0].eval();  // trace
    Array y = rand_f32({n}, 5);
    y.eval();
    reset_stats();
    f({y, s})[0].eval();
    return stats().kernels_launched;
  };
  auto fresh = compile(fn, {.shapeless = true});
  const uint64_t want = kernels(fresh, 100000);
  auto first_one = compile(fn, {.shapeless = true});
  kernels(first_one, 1);
  EXPECT_EQ(kernels(first_one, 100000), want);
  Array x = rand_f32({1000}, 6), s = rand_f32({1000}, 7);
  expect_same(first_one({x, s})[0], exp(x) * s + x, "after a size-1 trace");
}
