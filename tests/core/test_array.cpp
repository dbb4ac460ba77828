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
