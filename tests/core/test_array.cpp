#include <gtest/gtest.h>

#include <cmath>

#include <kiln/kiln.h>

using namespace kiln;

TEST(Array, FromHostDataAndQueries) {
  Array a = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.nbytes(), 24u);
  EXPECT_EQ(a.shape(-1), 3);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(array(3.0f).item<float>(), 3.0f);
  EXPECT_EQ(array(7).dtype(), int32);
}

TEST(Array, WrongElementCountIsAnError) {
  try {
    array(std::vector<float>{1, 2, 3}, {2, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[array] got 3 elements for shape (2,2) which holds 4");
  }
}

TEST(Array, OpsAreLazyUntilEval) {
  reset_stats();
  Array a = array(std::vector<float>{1, 2, 3}, {3});
  Array b = exp(a) + 1.0f;
  EXPECT_FALSE(b.is_evaluated());
  EXPECT_EQ(stats().kernels_launched, 0u);
  b.eval();
  EXPECT_TRUE(b.is_evaluated());
  EXPECT_EQ(stats().kernels_launched, 2u);
  auto v = b.to_vector<float>();
  EXPECT_FLOAT_EQ(v[1], std::exp(2.0f) + 1.0f);
}

TEST(Array, ScalarsDoNotWiden) {
  Array x = astype(array(std::vector<float>{1, 2}, {2}), bfloat16);
  EXPECT_EQ((x * 2.0).dtype(), bfloat16);
  EXPECT_EQ((2.0 * x).dtype(), bfloat16);
  Array i = array(std::vector<int8_t>{1, 2}, {2});
  EXPECT_EQ((i + 1).dtype(), int8);
  EXPECT_EQ((i * 1.5).dtype(), float32);
}

TEST(Array, BroadcastAndTransposedInputs) {
  Array a = reshape(arange(6, float32), {2, 3});
  Array col = array(std::vector<float>{10, 20}, {2, 1});
  EXPECT_EQ((a + col).to_vector<float>(), (std::vector<float>{10, 11, 12, 23, 24, 25}));
  Array t = transpose(a);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ((t * 1.0f).to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Array, LongChainsDoNotOverflowTheStack) {
  Array x = array(0.0f);
  for (int i = 0; i < 200000; ++i) x = x + 1.0f;
  EXPECT_EQ(x.item<float>(), 200000.0f);
  Array y = array(0.0f);
  for (int i = 0; i < 200000; ++i) y = y + 1.0f;
  // dropped without evaluation: destruction must not recurse either
}

TEST(Array, ExternalMemoryIsViewedKeptAliveAndNeverWritten) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, -2, 3, -4, 5, -6});
  std::weak_ptr<std::vector<float>> watch = owner;
  const float* data = owner->data();
  Array a = external_array(data, {2, 3}, float32, owner);
  owner.reset();
  EXPECT_FALSE(watch.expired());  // the array holds the owner
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, -2, 3, -4, 5, -6}));
  // A compiled call given the only reference to its input may reuse the input's buffer for its
  // output: never external memory.
  auto f = compile(std::function<Array(const Array&)>([](const Array& x) { return negative(x); }));
  Array b = f(external_array(data, {2, 3}, float32, watch.lock()));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{-1, 2, -3, 4, -5, 6}));
  EXPECT_EQ(data[0], 1.0f);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, -2, 3, -4, 5, -6}));
  a = Array();
  EXPECT_TRUE(watch.expired());

  auto keep = std::make_shared<std::vector<float>>(4);
  auto error = [&](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error([&] {
              external_array(reinterpret_cast<const char*>(keep->data()) + 1, {1}, float32, keep);
            }).find("[external_array] data at"),
            std::string::npos);
  EXPECT_NE(error([&] { external_array(keep->data(), {-1}, float32, keep); }).find("negative dimension"),
            std::string::npos);
  EXPECT_NE(error([&] { external_array(keep->data(), {1}, float32, nullptr); }).find("no owner"), std::string::npos);
  EXPECT_NE(error([&] {
              external_array(keep->data(), {int64_t{1} << 40, int64_t{1} << 40}, float32, keep);
            }).find("too large"),
            std::string::npos);
}

// std::vector<bool> has no data(): the result of a comparison reads back as bools all the same.
TEST(Array, ComparisonsReadBackAsBools) {
  Array x = array(std::vector<float>{1.f, 2.f, 3.f, -1.f}, {2, 2});
  EXPECT_EQ((x > 1.5f).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(transpose(x > 1.5f).to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(x.to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  EXPECT_TRUE((zeros({0}) > 1.f).to_vector<bool>().empty());
}
