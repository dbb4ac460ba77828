// Shape and byte-count overflow (issue 24, "Hostile input"): every size, stride and
// byte count is checked, and an impossible one is a kiln::Error tagged with the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <kiln/kiln.h>

#include "core/checked.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

using namespace kiln;

namespace {
// The message of the kiln::Error that f throws (a test failure if it throws nothing).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no kiln::Error";
  return "";
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
}  // namespace

TEST(Sizes, ByteCountPastInt64IsAnErrorNotAWrappedAllocation) {
  // 2^61 float64 elements are 2^64 bytes, which wrapped to a 64-byte buffer.
  std::string e = error_of([] { zeros({int64_t{1} << 61}, float64).eval(); });
  EXPECT_TRUE(starts_with(e, "[zeros] shape (2305843009213693952) of float64 is too large")) << e;
  e = error_of([] { ones({int64_t{1} << 61}, float64); });
  EXPECT_TRUE(starts_with(e, "[ones]")) << e;
  e = error_of([] { full({int64_t{1} << 62}, 1.0, int32); });
  EXPECT_TRUE(starts_with(e, "[full]")) << e;
}

TEST(Sizes, ElementCountPastInt64IsAnError) {
  // Their sizes read 0 and -2.
  EXPECT_TRUE(starts_with(error_of([] { zeros({int64_t{1} << 32, int64_t{1} << 32}); }), "[zeros]"));
  EXPECT_TRUE(starts_with(error_of([] { zeros({INT64_MAX, 2}, bool_); }), "[zeros]"));
  EXPECT_TRUE(starts_with(error_of([] { detail::shape_size({INT64_MAX, 2}); }), "[shape]"));
  // numpy's rule: a zero dimension does not excuse the others.
  EXPECT_TRUE(starts_with(error_of([] { zeros({0, int64_t{1} << 40, int64_t{1} << 40}); }), "[zeros]"));
  EXPECT_EQ(zeros({0, int64_t{1} << 40}).size(), 0);
}

TEST(Sizes, BroadcastViewPastInt64IsAnError) {
  // The sum of this view was 0.
  std::string e = error_of([] { sum(broadcast_to(array(1.f), {int64_t{1} << 32, int64_t{1} << 32})).item<float>(); });
  EXPECT_TRUE(starts_with(e, "[broadcast_to]")) << e;
  EXPECT_EQ(sum(broadcast_to(array(1.f), {1 << 10, 1 << 10})).item<float>(), 1048576.f);
}

TEST(Sizes, SliceWithAHugeStepTakesOneElementAsNumpy) {
  Array a = arange(5, int32);
  EXPECT_EQ(slice(a, {SliceArg{std::nullopt, std::nullopt, INT64_MAX}}).to_vector<int32_t>(), std::vector<int32_t>{0});
  EXPECT_EQ(slice(a, {SliceArg{std::nullopt, std::nullopt, INT64_MIN}}).to_vector<int32_t>(), std::vector<int32_t>{4});
  EXPECT_EQ(slice(a, {SliceArg{1, std::nullopt, INT64_MAX - 1}}).to_vector<int32_t>(), std::vector<int32_t>{1});
  Array m = reshape(arange(12, float32), {3, 4});
  EXPECT_EQ(slice(m, {SliceArg{}, SliceArg{2, std::nullopt, INT64_MAX}}).to_vector<float>(),
            (std::vector<float>{2, 6, 10}));
  Array u = slice_update(zeros({5}, int32), array(std::vector<int32_t>{7}, {1}), {3}, {5}, {INT64_MAX});
  EXPECT_EQ(u.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 7, 0}));
}

TEST(Sizes, LinspaceOfInt64MaxSamplesFailsAtOnce) {
  std::string e = error_of([] { linspace(0, 1, INT64_MAX).eval(); });
  EXPECT_TRUE(starts_with(e, "[linspace]")) << e;
  e = error_of([] { arange(0.0, 0x1p61, 1.0, float64); });
  EXPECT_TRUE(starts_with(e, "[arange]")) << e;
}

TEST(Sizes, ShapeArithmeticOfLayoutOpsIsChecked) {
  Array big = broadcast_to(array(int8_t{1}), {INT64_MAX / 2 + 1});
  std::string e = error_of([&] { concatenate({big, big}); });
  EXPECT_TRUE(starts_with(e, "[concatenate]")) << e;
  e = error_of([] { pad(zeros({2}), {{INT64_MAX, 1}}); });
  EXPECT_TRUE(starts_with(e, "[pad]")) << e;
  e = error_of([] { reshape(zeros({0}), {int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32, 0}); });
  EXPECT_TRUE(starts_with(e, "[reshape]")) << e;
  e = error_of([] { reshape(zeros({0}), {-1, int64_t{1} << 32, int64_t{1} << 32}); });
  EXPECT_TRUE(starts_with(e, "[reshape]")) << e;
  // Products of valid shapes that pass int64 (an outer product of two broadcast views).
  Array col = broadcast_to(array(1.f), {int64_t{1} << 40, 1});
  Array row = broadcast_to(array(1.f), {1, int64_t{1} << 40});
  e = error_of([&] { add(col, row); });
  EXPECT_TRUE(starts_with(e, "[add]")) << e;
}

TEST(Sizes, RandomDrawPastInt64NamesTheDraw) {
  std::string e = error_of([] { random::bits({int64_t{1} << 32, int64_t{1} << 32}, random::key(0)); });
  EXPECT_TRUE(starts_with(e, "[bits] shape (4294967296,4294967296) has more elements than int64 holds")) << e;
}

TEST(Sizes, AllocationThatCannotSucceedIsAKilnError) {
  // Allocating 2^62 bytes fails: a kiln::Error, not std::bad_alloc.
  std::string e = error_of([] { zeros({int64_t{1} << 59}, float64).eval(); });
  EXPECT_TRUE(starts_with(e, "[alloc] out of memory")) << e;
  detail::Tensor t({int64_t{1} << 61}, float64);
  e = error_of([&] { t.allocate(); });
  EXPECT_TRUE(starts_with(e, "[alloc]")) << e;
}

TEST(Sizes, MatmulOperandPackingOutOfMemoryIsAKilnError) {
  // A broadcast operand BLAS cannot read in place is packed first: 2^46 floats (256 TiB,
  // past any address space) threw std::bad_alloc out of the kernel.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "under a sanitizer, a failed operator new aborts instead of throwing std::bad_alloc";
#endif
  Array a = broadcast_to(array(1.f), {int64_t{1} << 23, int64_t{1} << 23});
  Array b = broadcast_to(array(1.f), {int64_t{1} << 23, 1});
  std::string e = error_of([&] { matmul(a, b).eval(); });
  EXPECT_TRUE(starts_with(e, "[matmul] out of memory")) << e;
}

TEST(Sizes, MatmulPastBlasIntSizesIsAnErrorNotACutProduct) {
  // cblas takes int: K = 2^31 was passed as a negative int.
  Array a = broadcast_to(array(1.f), {1, int64_t{1} << 31});
  Array b = broadcast_to(array(1.f), {int64_t{1} << 31, 1});
  std::string e = error_of([&] { matmul(a, b).eval(); });
  EXPECT_TRUE(starts_with(e, "[matmul] a product of 1 x 2147483648 by 2147483648 x 1")) << e;
}

TEST(Sizes, CheckedHelpers) {
  EXPECT_EQ(detail::checked_mul("t", INT64_MAX / 2, 2), INT64_MAX - 1);
  EXPECT_TRUE(starts_with(error_of([] { detail::checked_mul("t", INT64_MAX / 2 + 1, 2); }), "[t] "));
  EXPECT_TRUE(starts_with(error_of([] { detail::checked_add("t", INT64_MAX, 1); }), "[t] "));
  EXPECT_EQ(detail::saturating_mul(INT64_MAX, 3), INT64_MAX);
  EXPECT_EQ(detail::ceil_div(INT64_MAX, 2), int64_t{1} << 62);
  EXPECT_EQ(detail::checked_bytes("t", {3, 0, 5}, float32), 0u);
  EXPECT_EQ(detail::checked_bytes("t", {3, 5}, float64), 120u);
  std::vector<double> v;
  EXPECT_TRUE(starts_with(error_of([&] { detail::checked_resize("t", v, INT64_MAX); }), "[t] "));
}

TEST(Sizes, ThreadPoolPartitionsRangesNearInt64Max) {
  // (n + grain - 1) / grain wrapped for n near INT64_MAX: the chunks must tile [0, n) exactly.
  for (int64_t grain : {int64_t{1}, INT64_MAX / 3, INT64_MAX - 1}) {
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    detail::parallel_for(INT64_MAX, grain, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      ranges.emplace_back(b, e);
    });
    std::sort(ranges.begin(), ranges.end());
    ASSERT_FALSE(ranges.empty());
    EXPECT_EQ(ranges.front().first, 0);
    EXPECT_EQ(ranges.back().second, INT64_MAX);
    for (size_t i = 0; i < ranges.size(); ++i) {
      EXPECT_LT(ranges[i].first, ranges[i].second);
      if (i) {
        EXPECT_EQ(ranges[i - 1].second, ranges[i].first);
      }
    }
  }
}
