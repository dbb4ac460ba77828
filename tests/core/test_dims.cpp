// kiln::Dims behaves as std::vector<int64_t> does, inline (rank <= 6) and on the heap
// (longer), checked against a std::vector given the same edits.
#include <gtest/gtest.h>

#include <random>
#include <utility>

#include <kiln/dims.h>

using kiln::Dims;
using Vec = std::vector<int64_t>;

namespace {

void same(const Dims& d, const Vec& v) {
  ASSERT_EQ(d.size(), v.size());
  EXPECT_EQ(d.empty(), v.empty());
  EXPECT_TRUE(std::equal(d.begin(), d.end(), v.begin(), v.end()));
  EXPECT_EQ(d.vec(), v);
}

}  // namespace

TEST(Dims, ConstructsAsAVector) {
  same(Dims{}, Vec{});
  same(Dims{4, -2, 7}, Vec{4, -2, 7});
  same(Dims(3, 1), Vec(3, 1));
  same(Dims(9, 5), Vec(9, 5));
  Vec long_one{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  same(Dims(long_one), long_one);
  same(Dims(long_one.begin() + 2, long_one.end()), Vec(long_one.begin() + 2, long_one.end()));
  Vec back = Dims{3, 1, 2};  // and back again
  EXPECT_EQ(back, (Vec{3, 1, 2}));
}

TEST(Dims, CopiesAndMovesInlineAndOnTheHeap) {
  for (size_t n : {0u, 1u, 6u, 7u, 13u}) {
    Vec v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(i * 3 + 1);
    Dims a(v), copy(a);
    same(copy, v);
    if (n) copy[0] = 99;  // a copy does not share storage
    same(a, v);
    Dims moved(std::move(a));
    same(moved, v);
    EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty and usable
    a.push_back(5);
    same(a, Vec{5});
    Dims assigned{1};
    assigned = moved;
    same(assigned, v);
    assigned = Dims{8, 9};
    same(assigned, Vec{8, 9});
    assigned = std::move(moved);
    same(assigned, v);
    assigned = assigned;  // self-assignment keeps the values
    same(assigned, v);
  }
}

// Random edits applied to a Dims and a std::vector leave both equal, across the
// inline/heap boundary in both directions.
TEST(Dims, RandomEditsMatchAVector) {
  std::mt19937 rng(7);
  Dims d;
  Vec v;
  for (int step = 0; step < 4000; ++step) {
    const int64_t x = static_cast<int64_t>(rng() % 1000) - 500;
    const size_t at = v.empty() ? 0 : rng() % (v.size() + 1);
    switch (rng() % 9) {
      case 0: d.push_back(x), v.push_back(x); break;
      case 1:
        if (!v.empty()) d.pop_back(), v.pop_back();
        break;
      case 2: d.insert(d.begin() + at, x), v.insert(v.begin() + static_cast<long>(at), x); break;
      case 3:
        if (at < v.size()) d.erase(d.begin() + at), v.erase(v.begin() + static_cast<long>(at));
        break;
      case 4: {
        const size_t n = rng() % 12;
        d.resize(n, x), v.resize(n, x);
        break;
      }
      case 5: {  // insert a range of the list into itself
        const size_t from = v.empty() ? 0 : rng() % v.size();
        d.insert(d.begin() + at, d.begin() + from, d.end());
        Vec tail(v.begin() + static_cast<long>(from), v.end());
        v.insert(v.begin() + static_cast<long>(at), tail.begin(), tail.end());
        break;
      }
      case 6: {
        const size_t to = at + (v.size() > at ? rng() % (v.size() - at + 1) : 0);
        d.erase(d.begin() + at, d.begin() + to);
        v.erase(v.begin() + static_cast<long>(at), v.begin() + static_cast<long>(to));
        break;
      }
      case 7: d.insert(d.begin() + at, 2, x), v.insert(v.begin() + static_cast<long>(at), 2, x); break;
      default:
        if (v.size() > 20) d.clear(), v.clear();
        break;
    }
    same(d, v);
    if (::testing::Test::HasFailure()) FAIL() << "after step " << step;
  }
}

TEST(Dims, ComparesAsAVector) {
  EXPECT_EQ((Dims{1, 2}), (Dims{1, 2}));
  EXPECT_NE((Dims{1, 2}), (Dims{1, 2, 3}));
  EXPECT_LT((Dims{1, 2}), (Dims{1, 3}));
  EXPECT_LT((Dims{1, 2}), (Dims{1, 2, 0}));
  EXPECT_TRUE((Dims{4, 5}) == (Vec{4, 5}));
  EXPECT_TRUE((Vec{4, 5}) == (Dims{4, 5}));
  EXPECT_FALSE((Dims{4, 5}) == (Vec{4}));
  EXPECT_EQ((Dims{1, 2, 3}).front(), 1);
  EXPECT_EQ((Dims{1, 2, 3}).back(), 3);
  EXPECT_EQ(*(Dims{1, 2, 3}).rbegin(), 3);
}
