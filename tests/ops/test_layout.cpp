// copy, concatenate, stack, split, pad, take, take_along_axis and slice_update
// against references built element by element in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/tensor.h"
#include "index_ref.h"
#include "ops/layout.h"

using namespace kiln;
using kt::Index;
using kt::Layout;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/* What astype does to a float64 value for dtype d (truncation, saturation, NaN -> 0). */
double cast_ref(double v, Dtype d) {
  if (d == bool_) return v != 0 ? 1 : 0;
  if (is_integral(d)) {
    if (std::isnan(v)) return 0;
    double lo = is_unsigned(d) ? 0 : -std::ldexp(1.0, size_of(d) * 8 - 1);
    double hi = is_unsigned(d) ? std::ldexp(1.0, size_of(d) * 8) - 1 : std::ldexp(1.0, size_of(d) * 8 - 1) - 1;
    return std::min(std::max(std::trunc(v), lo), hi);
  }
  return kt::round_to(v, d);
}

/* An integer array of dtype d; layouts are applied through a transposed or strided base. */
Array index_array(const std::vector<double>& v, const Shape& s, Dtype d, Layout l = Layout::contiguous) {
  return kt::with_layout(v, s, d, l);
}

std::string printed(const Primitive& p) {
  std::ostringstream os;
  p.print(os);
  return os.str();
}

}  // namespace

// ---- copy -------------------------------------------------------------------------
TEST(Copy, AllDtypesAndLayouts) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      for (Shape s : {Shape{3, 4}, Shape{2, 3, 4}, Shape{1, 5}, Shape{0, 3}, Shape{4, 1}}) {
        auto v = kt::values_with_specials(kt::numel(s), d, 1);
        Array a = kt::with_layout(v, s, d, l);
        Array c = copy(a);
        EXPECT_NE(c.id(), a.id());
        kt::expect_array(c, s, d, v, kt::ctx_of(d, l, detail::shape_str(s)));
        EXPECT_TRUE(c.tensor().row_contiguous());
      }
    }
  }
}

TEST(Copy, ZeroDimensionalAndLarge) {
  Array z = copy(array(2.5f));
  kt::expect_array(z, {}, float32, {2.5}, "0-d");
  // Crosses the thread pool's threshold with a transposed input.
  Shape s{150, 260};
  auto v = kt::random_values(kt::numel(s), float32, 2);
  Array c = copy(kt::with_layout(v, s, float32, Layout::transposed));
  kt::expect_array(c, s, float32, v, "large");
}

// Copies of transposes go in 32 x 32 blocks: 2-D and batched, sides no block divides, a
// view at an offset and one reversed, with and without a dtype conversion; each element
// checked against its place in the source.
TEST(Copy, TransposesInBlocks) {
  const Shape s{3, 70, 45};
  for (Dtype d : kt::all_dtypes()) {
    auto v = kt::values_with_specials(kt::numel(s), d, 5);
    Array x = kt::from_values(v, s, d);
    auto at = [&](int64_t b, int64_t i, int64_t j) { return v[static_cast<size_t>((b * 70 + i) * 45 + j)]; };
    std::vector<double> batched, flat, offset, reversed;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t j = 0; j < 45; ++j)
        for (int64_t i = 0; i < 70; ++i) batched.push_back(at(b, i, j));
    for (int64_t j = 0; j < 45; ++j)
      for (int64_t i = 0; i < 70; ++i) flat.push_back(at(1, i, j));
    for (int64_t j = 2; j < 45; ++j)
      for (int64_t i = 1; i < 70; ++i) offset.push_back(at(2, i, j));
    for (int64_t j = 0; j < 45; ++j)
      for (int64_t i = 69; i >= 0; --i) reversed.push_back(at(0, i, j));
    const std::string name = dtype_name(d);
    kt::expect_array(copy(transpose(x, {0, 2, 1})), {3, 45, 70}, d, batched, "batched " + name);
    Array one = slice(x, {1, 0, 0}, {2, 70, 45});
    kt::expect_array(copy(transpose(reshape(copy(one), {70, 45}))), {45, 70}, d, flat, "2-D " + name);
    kt::expect_array(copy(transpose(slice(x, {2, 1, 2}, {3, 70, 45}), {0, 2, 1})), {1, 43, 69}, d, offset,
                     "offset " + name);
    kt::expect_array(copy(transpose(slice(x, {0, 69, 0}, {1, -71, 45}, {1, -1, 1}), {0, 2, 1})), {1, 45, 70}, d,
                     reversed, "reversed " + name);
    if (d != float64) {
      Array wide = astype(transpose(x, {0, 2, 1}), float64);
      kt::expect_array(wide, {3, 45, 70}, float64, batched, "converted " + name);
    }
  }
}

// Any elementwise walk with an operand running down the columns goes in 32 x 32 blocks:
// every element still meets its partners, batched, at sides no block divides, in views at
// an offset, and with the transposed operand second.
TEST(Copy, ElementwiseOpsWithATransposedOperandWalkInBlocks) {
  const Shape s{3, 70, 45};
  for (Dtype d : {float32, float64, bfloat16, int32, uint8}) {
    auto xv = kt::random_values(kt::numel(s), d, 21), yv = kt::random_values(kt::numel(s), d, 22);
    Array x = kt::from_values(xv, s, d), y = kt::from_values(yv, {3, 45, 70}, d);
    auto xt = [&](int64_t b, int64_t j, int64_t i) { return xv[static_cast<size_t>((b * 70 + i) * 45 + j)]; };
    auto yat = [&](int64_t b, int64_t j, int64_t i) { return yv[static_cast<size_t>((b * 45 + j) * 70 + i)]; };
    std::vector<double> larger, offset;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t j = 0; j < 45; ++j)
        for (int64_t i = 0; i < 70; ++i) larger.push_back(std::max(xt(b, j, i), yat(b, j, i)));
    for (int64_t j = 1; j < 45; ++j)
      for (int64_t i = 2; i < 70; ++i) offset.push_back(std::max(xt(1, j, i), yat(1, j, i)));
    const std::string name = dtype_name(d);
    kt::expect_array(maximum(transpose(x, {0, 2, 1}), y), {3, 45, 70}, d, larger, "batched " + name);
    kt::expect_array(maximum(y, transpose(x, {0, 2, 1})), {3, 45, 70}, d, larger, "second " + name);
    kt::expect_array(maximum(transpose(slice(x, {1, 2, 1}, {2, 70, 45}), {0, 2, 1}), slice(y, {1, 1, 2}, {2, 45, 70})),
                     {1, 44, 68}, d, offset, "offset " + name);
  }
}

TEST(Copy, EmptyHandleIsAnError) {
  kt::expect_error([] { copy(Array()); }, "[copy] operation on an empty Array handle");
}

// ---- concatenate --------------------------------------------------------------------
TEST(Concatenate, AllDtypesAxesAndLayouts) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      for (int axis : {0, 1, -1, -3}) {
        int ax = axis < 0 ? axis + 3 : axis;
        // Three parts of different lengths along the axis, one of them empty.
        std::vector<int64_t> lens = {2, 0, 3};
        std::vector<Array> parts;
        std::vector<std::vector<double>> vals;
        std::vector<Shape> shapes;
        for (size_t k = 0; k < lens.size(); ++k) {
          Shape s{2, 3, 4};
          s[static_cast<size_t>(ax)] = lens[k];
          vals.push_back(kt::values_with_specials(kt::numel(s), d, 10 + k));
          shapes.push_back(s);
          parts.push_back(kt::with_layout(vals.back(), s, d, k == 2 ? Layout::contiguous : l));
        }
        Shape out{2, 3, 4};
        out[static_cast<size_t>(ax)] = 5;
        auto want = kt::build(out, [&](const Index& idx) {
          Index i = idx;
          size_t k = 0;
          while (i[static_cast<size_t>(ax)] >= lens[k]) i[static_cast<size_t>(ax)] -= lens[k++];
          return vals[k][static_cast<size_t>(kt::ravel(i, shapes[k]))];
        });
        kt::expect_array(concatenate(parts, axis), out, d, want, kt::ctx_of(d, l, std::to_string(axis)));
      }
    }
  }
}

TEST(Concatenate, PromotesDtypes) {
  for (Dtype a : kt::all_dtypes()) {
    for (Dtype b : {bool_, int8, uint8, int32, uint64, float16, bfloat16, float32}) {
      auto va = kt::random_values(3, a, 3, 0, 100);
      auto vb = kt::random_values(2, b, 4, 0, 100);
      Array r = concatenate({kt::from_values(va, {3}, a), kt::from_values(vb, {2}, b)});
      Dtype d = promote_types(a, b);
      std::vector<double> want;
      for (double x : va) want.push_back(cast_ref(x, d));
      for (double x : vb) want.push_back(cast_ref(x, d));
      kt::expect_array(r, {5}, d, want, std::string(dtype_name(a)) + "+" + dtype_name(b));
    }
  }
  EXPECT_EQ(concatenate({array({int8_t{1}}), array({uint8_t{2}})}).dtype(), int16);
}

TEST(Concatenate, SingleArrayAndLarge) {
  Array a = array(std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  kt::expect_array(concatenate({a}, 1), {2, 2}, int32, {1, 2, 3, 4}, "single");
  // Crosses the thread pool's threshold: a transposed part next to a contiguous one.
  Shape s1{200, 90}, s2{200, 110};
  auto v1 = kt::random_values(kt::numel(s1), float32, 5);
  auto v2 = kt::random_values(kt::numel(s2), float32, 6);
  Array r = concatenate(
      {kt::with_layout(v1, s1, float32, Layout::transposed), kt::with_layout(v2, s2, float32, Layout::contiguous)}, 1);
  auto want = kt::build({200, 200}, [&](const Index& i) {
    return i[1] < 90 ? v1[static_cast<size_t>(i[0] * 90 + i[1])] : v2[static_cast<size_t>(i[0] * 110 + i[1] - 90)];
  });
  kt::expect_array(r, {200, 200}, float32, want, "large");
}

TEST(Concatenate, Errors) {
  Array a = zeros({2, 3});
  kt::expect_error([] { concatenate({}); }, "[concatenate] need at least one array to concatenate");
  kt::expect_error(
      [] {
        concatenate({array(1.0f), array(2.0f)});
      },
      "[concatenate] zero-dimensional arrays cannot be concatenated");
  kt::expect_error([&] { concatenate({a, zeros({3})}); }, "[concatenate] array 1 has rank 1 but array 0 has rank 2");
  kt::expect_error(
      [&] {
        concatenate({a, zeros({3, 2})}, 1);
      },
      "[concatenate] array 1 of shape (3,2) does not match array 0 of shape (2,3) off axis 1");
  kt::expect_error([&] { concatenate({a, a}, 2); }, "[concatenate] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { concatenate({a, a}, -3); }, "[concatenate] axis -3 is out of range for an array of rank 2");
  kt::expect_error([&] { concatenate({a, Array()}); }, "[concatenate] operation on an empty Array handle");
}

// ---- stack ------------------------------------------------------------------------
TEST(Stack, AllDtypesAxesAndLayouts) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      for (int axis : {0, 1, 2, -1}) {
        int ax = axis < 0 ? axis + 3 : axis;
        Shape s{2, 3};
        std::vector<std::vector<double>> vals;
        std::vector<Array> parts;
        for (int k = 0; k < 3; ++k) {
          vals.push_back(kt::values_with_specials(6, d, 20 + static_cast<uint64_t>(k)));
          parts.push_back(kt::with_layout(vals.back(), s, d, l));
        }
        Shape out = s;
        out.insert(out.begin() + ax, 3);
        auto want = kt::build(out, [&](const Index& idx) {
          Index i = idx;
          int64_t k = i[static_cast<size_t>(ax)];
          i.erase(i.begin() + ax);
          return vals[static_cast<size_t>(k)][static_cast<size_t>(kt::ravel(i, s))];
        });
        kt::expect_array(stack(parts, axis), out, d, want, kt::ctx_of(d, l, std::to_string(axis)));
      }
    }
  }
}

TEST(Stack, ScalarsEmptyAndErrors) {
  kt::expect_array(stack({array(1.5f), array(-2.0f)}), {2}, float32, {1.5, -2.0}, "0-d");
  kt::expect_array(stack({zeros({0, 2}), zeros({0, 2})}, 1), {0, 2, 2}, float32, {}, "empty");
  kt::expect_error([] { stack({}); }, "[stack] need at least one array to stack");
  kt::expect_error(
      [] {
        stack({zeros({2, 3}), zeros({2, 2})});
      },
      "[stack] array 1 has shape (2,2) but array 0 has shape (2,3)");
  kt::expect_error([] { stack({zeros({2, 3})}, 3); }, "[stack] axis 3 is out of range for an array of rank 3");
  kt::expect_error([] { stack({zeros({2, 3}), Array()}); }, "[stack] operation on an empty Array handle");
}

// ---- split ------------------------------------------------------------------------
namespace {
/* Expects parts to be the pieces [start, stop) of `v` (shape s) along axis. */
void expect_pieces(const std::vector<Array>& parts, const std::vector<double>& v, const Shape& s, int axis,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges, Dtype d, const std::string& ctx) {
  ASSERT_EQ(parts.size(), ranges.size()) << ctx;
  for (size_t p = 0; p < parts.size(); ++p) {
    auto [lo, hi] = ranges[p];
    Shape out = s;
    out[static_cast<size_t>(axis)] = hi - lo;
    auto want = kt::build(out, [&](const Index& idx) {
      Index i = idx;
      i[static_cast<size_t>(axis)] += lo;
      return v[static_cast<size_t>(kt::ravel(i, s))];
    });
    kt::expect_array(parts[p], out, d, want, ctx + "/piece " + std::to_string(p));
  }
}
}  // namespace

TEST(Split, EqualSections) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      Shape s{6, 4};
      auto v = kt::values_with_specials(24, d, 30);
      Array a = kt::with_layout(v, s, d, l);
      expect_pieces(split(a, 3), v, s, 0, {{0, 2}, {2, 4}, {4, 6}}, d, kt::ctx_of(d, l, "axis0"));
      expect_pieces(split(a, 2, 1), v, s, 1, {{0, 2}, {2, 4}}, d, kt::ctx_of(d, l, "axis1"));
      expect_pieces(split(a, 4, -1), v, s, 1, {{0, 1}, {1, 2}, {2, 3}, {3, 4}}, d, kt::ctx_of(d, l, "axis-1"));
      expect_pieces(split(a, 1), v, s, 0, {{0, 6}}, d, kt::ctx_of(d, l, "one"));
    }
  }
  auto parts = split(zeros({0, 3}), 3);
  ASSERT_EQ(parts.size(), 3u);
  for (auto& p : parts) EXPECT_EQ(p.shape(), (Shape{0, 3}));
}

TEST(Split, AtIndicesLikeNumpy) {
  Shape s{7, 2};
  auto v = kt::values_with_specials(14, float32, 31);
  for (Layout l : kt::all_layouts()) {
    Array a = kt::with_layout(v, s, float32, l);
    auto c = kt::ctx_of(float32, l);
    expect_pieces(split(a, std::vector<int64_t>{2, 5}), v, s, 0, {{0, 2}, {2, 5}, {5, 7}}, float32, c + "/plain");
    // Indices past the end clamp; decreasing ones give empty pieces; negative ones count from the end.
    expect_pieces(split(a, std::vector<int64_t>{3, 10}), v, s, 0, {{0, 3}, {3, 7}, {7, 7}}, float32, c + "/clamp");
    expect_pieces(split(a, std::vector<int64_t>{4, 2}), v, s, 0, {{0, 4}, {4, 4}, {2, 7}}, float32, c + "/decr");
    expect_pieces(split(a, std::vector<int64_t>{-2}), v, s, 0, {{0, 5}, {5, 7}}, float32, c + "/neg");
    expect_pieces(split(a, std::vector<int64_t>{-9, 0}), v, s, 0, {{0, 0}, {0, 0}, {0, 7}}, float32, c + "/negclamp");
    expect_pieces(split(a, std::vector<int64_t>{}), v, s, 0, {{0, 7}}, float32, c + "/none");
    expect_pieces(split(a, std::vector<int64_t>{1}, -1), v, s, 1, {{0, 1}, {1, 2}}, float32, c + "/axis");
  }
}

TEST(Split, Errors) {
  Array a = zeros({7, 2});
  kt::expect_error([&] { split(a, 0); }, "[split] number of sections must be positive, got 0");
  kt::expect_error([&] { split(a, -2); }, "[split] number of sections must be positive, got -2");
  kt::expect_error([&] { split(a, 3); }, "[split] array of size 7 along axis 0 cannot be split into 3 equal sections");
  kt::expect_error([&] { split(a, 2, 2); }, "[split] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { split(a, std::vector<int64_t>{1}, -3); },
                   "[split] axis -3 is out of range for an array of rank 2");
  kt::expect_error([] { split(array(1.0f), 1); }, "[split] axis 0 is out of range for an array of rank 0");
  kt::expect_error([] { split(Array(), 1); }, "[split] operation on an empty Array handle");
}

// ---- pad --------------------------------------------------------------------------
namespace {
std::vector<double> pad_ref(const std::vector<double>& v, const Shape& s,
                            const std::vector<std::pair<int64_t, int64_t>>& w, double fill, Shape* out) {
  *out = s;
  for (size_t i = 0; i < s.size(); ++i) (*out)[i] += w[i].first + w[i].second;
  return kt::build(*out, [&](const Index& idx) {
    Index i = idx;
    for (size_t k = 0; k < s.size(); ++k) {
      i[k] -= w[k].first;
      if (i[k] < 0 || i[k] >= s[k]) return fill;
    }
    return v[static_cast<size_t>(kt::ravel(i, s))];
  });
}
}  // namespace

TEST(Pad, AllDtypesAndLayouts) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      for (auto [s, w] : std::vector<std::pair<Shape, std::vector<std::pair<int64_t, int64_t>>>>{
               {{3, 4}, {{1, 2}, {0, 3}}},
               {{2, 3, 2}, {{0, 0}, {2, 1}, {1, 0}}},
               {{1, 5}, {{2, 2}, {0, 0}}},
               {{0, 3}, {{1, 1}, {0, 1}}},
               {{4}, {{3, 0}}}}) {
        auto v = kt::values_with_specials(kt::numel(s), d, 40);
        Shape out;
        auto want = pad_ref(v, s, w, cast_ref(7.0, d), &out);
        Array r = pad(kt::with_layout(v, s, d, l), w, 7.0);
        kt::expect_array(r, out, d, want, kt::ctx_of(d, l, detail::shape_str(s)));
      }
    }
  }
}

TEST(Pad, ValueConversionAndSpecials) {
  std::vector<std::pair<int64_t, int64_t>> w = {{1, 1}};
  Array i = array(std::vector<int32_t>{5, 6}, {2});
  kt::expect_array(pad(i, w, 2.7), {4}, int32, {2, 5, 6, 2}, "truncates");
  kt::expect_array(pad(i, w, -2.7), {4}, int32, {-2, 5, 6, -2}, "truncates negative");
  kt::expect_array(pad(array(std::vector<uint8_t>{3}, {1}), w, 300.0), {3}, uint8, {255, 3, 255}, "saturates");
  kt::expect_array(pad(array(std::vector<bool>{false}, {1}), w, 0.5), {3}, bool_, {1, 0, 1}, "bool");
  for (Dtype d : kt::float_dtypes()) {
    Array f = astype(array(std::vector<float>{1, 2}, {2}), d);
    kt::expect_array(pad(f, w, kNaN), {4}, d, {kNaN, 1, 2, kNaN}, dtype_name(d));
    kt::expect_array(pad(f, w, -INFINITY), {4}, d, {-INFINITY, 1, 2, -INFINITY}, dtype_name(d));
    kt::expect_array(pad(f, w, 0.1), {4}, d, {kt::round_to(0.1, d), 1, 2, kt::round_to(0.1, d)}, dtype_name(d));
  }
  kt::expect_array(pad(array(3.0f), {}, 1.0), {}, float32, {3}, "0-d");
}

TEST(Pad, ZeroWidthsAndLarge) {
  Array a = ones({2, 2});
  EXPECT_EQ(pad(a, {{0, 0}, {0, 0}}).id(), a.id());
  // Crosses the thread pool's threshold with a strided input.
  Shape s{200, 200};
  auto v = kt::random_values(kt::numel(s), float32, 41);
  std::vector<std::pair<int64_t, int64_t>> w = {{1, 2}, {3, 1}};
  Shape out;
  auto want = pad_ref(v, s, w, -1.0, &out);
  kt::expect_array(pad(kt::with_layout(v, s, float32, Layout::strided), w, -1.0), out, float32, want, "large");
}

TEST(Pad, Errors) {
  Array a = zeros({2, 3});
  kt::expect_error([&] { pad(a, {{1, 1}}); }, "[pad] got 1 (before, after) pairs for an array of rank 2");
  kt::expect_error([&] { pad(a, {{-1, 2}, {0, 0}}); }, "[pad] pad widths must be non-negative, got (-1,2) for axis 0");
  kt::expect_error([&] { pad(a, {{0, 0}, {1, -3}}); }, "[pad] pad widths must be non-negative, got (1,-3) for axis 1");
  kt::expect_error([] { pad(Array(), {}); }, "[pad] operation on an empty Array handle");
}

// ---- take -------------------------------------------------------------------------
namespace {
std::vector<double> take_ref(const std::vector<double>& v, const Shape& s, const std::vector<int64_t>& idx,
                             const Shape& is, int axis, Shape* out) {
  size_t ax = static_cast<size_t>(axis);
  out->assign(s.begin(), s.begin() + axis);
  out->insert(out->end(), is.begin(), is.end());
  out->insert(out->end(), s.begin() + axis + 1, s.end());
  return kt::build(*out, [&](const Index& o) {
    Index i(o.begin(), o.begin() + axis);
    Index j(o.begin() + axis, o.begin() + axis + static_cast<int64_t>(is.size()));
    int64_t k = idx[static_cast<size_t>(kt::ravel(j, is))];
    i.push_back(k < 0 ? k + s[ax] : k);
    i.insert(i.end(), o.begin() + axis + static_cast<int64_t>(is.size()), o.end());
    return v[static_cast<size_t>(kt::ravel(i, s))];
  });
}
}  // namespace

TEST(Take, AllDtypesAxesAndIndexShapes) {
  Shape s{5, 4, 3};
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(kt::numel(s), d, 50);
      Array a = kt::with_layout(v, s, d, l);
      for (int axis : {0, 1, 2, -1}) {
        int ax = axis < 0 ? axis + 3 : axis;
        int64_t n = s[static_cast<size_t>(ax)];
        std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
            {{}, {n - 1}},
            {{4}, {0, -1, 1, 0}},
            {{2, 3}, {2, 0, -n, 1, n - 1, -2}},
            {{0}, {}},
        };
        for (auto& [is, idx] : cases) {
          std::vector<double> iv(idx.begin(), idx.end());
          Shape out;
          auto want = take_ref(v, s, idx, is, ax, &out);
          Array r = take(a, index_array(iv, is, int32, l), axis);
          kt::expect_array(r, out, d, want, kt::ctx_of(d, l, std::to_string(axis) + detail::shape_str(is)));
        }
      }
    }
  }
}

TEST(Take, EveryIndexDtype) {
  Shape s{4, 6};
  auto v = kt::values_with_specials(24, float32, 51);
  Array a = kt::from_values(v, s, float32);
  for (Dtype id : kt::int_dtypes()) {
    std::vector<int64_t> idx = {5, 0, 3, 3};
    if (!is_unsigned(id)) idx = {-1, 0, -3, 3};
    std::vector<double> iv(idx.begin(), idx.end());
    Shape out;
    auto want = take_ref(v, s, idx, {2, 2}, 1, &out);
    kt::expect_array(take(a, kt::from_values(iv, {2, 2}, id), 1), out, float32, want, dtype_name(id));
  }
}

TEST(Take, EmptyAndLarge) {
  kt::expect_array(take(zeros({0, 3}), array(std::vector<int32_t>{}, {0}), 0), {0, 3}, float32, {}, "empty axis");
  kt::expect_array(take(zeros({2, 0}), array(std::vector<int32_t>{1, 0}, {2}), 0), {2, 0}, float32, {}, "empty rows");
  // Crosses the thread pool's threshold: many rows of a transposed input.
  Shape s{300, 200};
  auto v = kt::random_values(kt::numel(s), float32, 52);
  std::vector<int64_t> idx;
  for (int i = 0; i < 150; ++i) idx.push_back((i * 37) % 200 - (i % 3 == 0 ? 200 : 0));
  std::vector<double> iv(idx.begin(), idx.end());
  Shape out;
  auto want = take_ref(v, s, idx, {150}, 1, &out);
  Array a = kt::with_layout(v, s, float32, Layout::transposed);
  kt::expect_array(take(a, kt::from_values(iv, {150}, int64), 1), out, float32, want, "axis 1");
  // A flat gather of 40000 indices.
  std::vector<int64_t> flat;
  for (int i = 0; i < 40000; ++i) flat.push_back((i * 7919) % 60000);
  std::vector<double> fv(flat.begin(), flat.end());
  Shape fout;
  auto fwant = take_ref(v, {60000}, flat, {40000}, 0, &fout);
  kt::expect_array(take(reshape(a, {60000}), kt::from_values(fv, {40000}, int32), 0), fout, float32, fwant, "flat");
}

TEST(Take, OutOfRangeIndicesFailAtEvaluation) {
  Array a = arange(5, float32);
  Array r = take(a, array(std::vector<int32_t>{0, 7}, {2}), 0);  // building succeeds
  kt::expect_error([&] { r.eval(); }, "[take] index 7 is out of bounds for axis 0 with size 5");
  EXPECT_FALSE(r.is_evaluated());
  kt::expect_error([&] { r.eval(); }, "[take] index 7 is out of bounds for axis 0 with size 5");
  kt::expect_error([&] { take(a, array(std::vector<int64_t>{-6}, {1}), 0).eval(); },
                   "[take] index -6 is out of bounds for axis 0 with size 5");
  kt::expect_error([&] { take(a, array(std::vector<int8_t>{-100}, {1}), 0).eval(); },
                   "[take] index -100 is out of bounds for axis 0 with size 5");
  kt::expect_error([&] { take(a, array(std::vector<uint64_t>{~uint64_t{0}}, {1}), 0).eval(); },
                   "[take] index 18446744073709551615 is out of bounds for axis 0 with size 5");
  kt::expect_error(
      [&] {
        take(reshape(a, {1, 5}), array(std::vector<uint8_t>{5}, {1}), -1).eval();
      },
      "[take] index 5 is out of bounds for axis 1 with size 5");
  kt::expect_error(
      [] {
        take(zeros({0, 3}), array(std::vector<int32_t>{0}, {1}), 0).eval();
      },
      "[take] index 0 is out of bounds for axis 0 with size 0");
  // The error reaches a consumer evaluated later, too.
  kt::expect_error([&] { (r + 1.0f).eval(); }, "[take] index 7 is out of bounds for axis 0 with size 5");
}

TEST(Take, Errors) {
  Array a = zeros({5, 4, 3});
  Array i = array(std::vector<int32_t>{0}, {1});
  kt::expect_error([&] { take(a, array(std::vector<float>{0}, {1}), 0); },
                   "[take] indices must be integers, got float32");
  kt::expect_error([&] { take(a, array(std::vector<bool>{true}, {1}), 0); },
                   "[take] indices must be integers, got bool");
  kt::expect_error([&] { take(a, i, 3); }, "[take] axis 3 is out of range for an array of rank 3");
  kt::expect_error([&] { take(a, i, -4); }, "[take] axis -4 is out of range for an array of rank 3");
  kt::expect_error([&] { take(array(1.0f), i, 0); }, "[take] axis 0 is out of range for an array of rank 0");
  kt::expect_error([&] { take(Array(), i, 0); }, "[take] operation on an empty Array handle");
  kt::expect_error([&] { take(a, Array(), 0); }, "[take] operation on an empty Array handle");
}

// ---- take_along_axis -----------------------------------------------------------------
namespace {
std::vector<double> along_ref(const std::vector<double>& v, const Shape& s, const std::vector<int64_t>& idx,
                              const Shape& is, int axis, Shape* out) {
  out->resize(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    (*out)[d] = static_cast<int>(d) == axis ? is[d] : std::max(s[d], is[d]);
  }
  return kt::build(*out, [&](const Index& o) {
    Index j(o.size()), i(o.size());
    for (size_t d = 0; d < o.size(); ++d) {
      j[d] = is[d] == 1 ? 0 : o[d];
      i[d] = s[d] == 1 ? 0 : o[d];
    }
    int64_t k = idx[static_cast<size_t>(kt::ravel(j, is))];
    i[static_cast<size_t>(axis)] = k < 0 ? k + s[static_cast<size_t>(axis)] : k;
    return v[static_cast<size_t>(kt::ravel(i, s))];
  });
}
}  // namespace

TEST(TakeAlongAxis, AllDtypesAndBroadcasting) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      struct Case {
        Shape s, is;
        int axis;
      };
      for (auto c : std::vector<Case>{{{4, 5}, {4, 3}, 1},
                                      {{4, 5}, {4, 3}, -1},
                                      {{4, 5}, {2, 5}, 0},
                                      {{4, 5}, {1, 3}, 1},
                                      {{1, 5}, {4, 3}, 1},
                                      {{3, 4, 2}, {3, 6, 1}, 1},
                                      {{3, 4, 2}, {3, 0, 2}, 1},
                                      {{0, 4}, {0, 2}, 1}}) {
        int ax = c.axis < 0 ? c.axis + static_cast<int>(c.s.size()) : c.axis;
        auto v = kt::values_with_specials(kt::numel(c.s), d, 60);
        int64_t n = c.s[static_cast<size_t>(ax)];
        std::vector<int64_t> idx;
        for (int64_t i = 0; i < kt::numel(c.is); ++i) idx.push_back((i * 3) % (2 * n) - n);  // in [-n, n)
        std::vector<double> iv(idx.begin(), idx.end());
        Shape out;
        auto want = along_ref(v, c.s, idx, c.is, ax, &out);
        Array r = take_along_axis(kt::with_layout(v, c.s, d, l), index_array(iv, c.is, int64, l), c.axis);
        kt::expect_array(r, out, d, want, kt::ctx_of(d, l, detail::shape_str(c.s) + detail::shape_str(c.is)));
      }
    }
  }
}

TEST(TakeAlongAxis, LargeAndIndexDtypes) {
  // Crosses the thread pool's threshold: reverse every row of a transposed input.
  Shape s{300, 200};
  auto v = kt::random_values(kt::numel(s), float32, 61);
  std::vector<int64_t> idx;
  for (int64_t r = 0; r < 300; ++r) {
    for (int64_t c = 0; c < 200; ++c) idx.push_back(199 - (c + r) % 200);
  }
  std::vector<double> iv(idx.begin(), idx.end());
  Shape out;
  auto want = along_ref(v, s, idx, s, 1, &out);
  Array r = take_along_axis(kt::with_layout(v, s, float32, Layout::transposed), kt::from_values(iv, s, int32), 1);
  kt::expect_array(r, out, float32, want, "large");
  for (Dtype id : kt::int_dtypes()) {
    Array a = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    kt::expect_array(take_along_axis(a, kt::from_values({2, 0}, {2, 1}, id), 1), {2, 1}, float32, {3, 4},
                     dtype_name(id));
  }
}

TEST(TakeAlongAxis, Errors) {
  Array a = zeros({4, 5});
  kt::expect_error([&] { take_along_axis(a, array(std::vector<int32_t>{0}, {1}), 0); },
                   "[take_along_axis] indices of rank 1 do not match the array's rank 2");
  kt::expect_error(
      [&] {
        take_along_axis(a, zeros({3, 2}, int32), 1);
      },
      "[take_along_axis] indices of shape (3,2) do not broadcast against the array's shape (4,5) off axis 1");
  kt::expect_error(
      [&] {
        take_along_axis(a, zeros({1, 1}, float64), 1);
      },
      "[take_along_axis] indices must be integers, got float64");
  kt::expect_error(
      [&] {
        take_along_axis(a, zeros({1, 1}, int32), 2);
      },
      "[take_along_axis] axis 2 is out of range for an array of rank 2");
  kt::expect_error(
      [&] {
        take_along_axis(a, full({1, 1}, 5.0, int32), 1).eval();
      },
      "[take_along_axis] index 5 is out of bounds for axis 1 with size 5");
  kt::expect_error(
      [&] {
        take_along_axis(a, full({2, 1}, -5.0, int16), 0).eval();
      },
      "[take_along_axis] index -5 is out of bounds for axis 0 with size 4");
  kt::expect_error([&] { take_along_axis(Array(), zeros({1}, int32), 0); },
                   "[take_along_axis] operation on an empty Array handle");
}

// ---- slice_update ---------------------------------------------------------------------
namespace {
/* a (shape s) with the elements at rows x cols (lists of indices) replaced by update
   (shape us, broadcast to the region's shape). */
std::vector<double> update_ref(std::vector<double> a, const Shape& s, const std::vector<int64_t>& rows,
                               const std::vector<int64_t>& cols, const std::vector<double>& u, const Shape& us) {
  Shape region{static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size())};
  kt::for_each_index(region, [&](const Index& r) {
    Index ui;  // broadcast: trailing axes of the region, size-1 axes read index 0
    for (size_t k = 0; k < us.size(); ++k) {
      size_t rk = region.size() - us.size() + k;
      ui.push_back(us[k] == 1 ? 0 : r[rk]);
    }
    a[static_cast<size_t>(kt::ravel({rows[static_cast<size_t>(r[0])], cols[static_cast<size_t>(r[1])]}, s))] =
        u[static_cast<size_t>(kt::ravel(ui, us))];
  });
  return a;
}
}  // namespace

TEST(SliceUpdate, AllDtypesRegionsAndBroadcasts) {
  Shape s{6, 5};
  struct Case {
    Shape start, stop, step;
    std::vector<int64_t> rows, cols;  // the region, worked out by hand with Python slicing
  };
  std::vector<Case> cases = {
      {{1, 0}, {5, 5}, {2, 1}, {1, 3}, {0, 1, 2, 3, 4}},
      {{4, 3}, {0, -6}, {-2, -1}, {4, 2}, {3, 2, 1, 0}},
      {{-1, -4}, {-7, 100}, {-3, 2}, {5, 2}, {1, 3}},
      {{-100, 2}, {2, 3}, {1, 1}, {0, 1}, {2}},
  };
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(30, d, 70);
      Array a = kt::with_layout(v, s, d, l);
      for (auto& c : cases) {
        Shape region{static_cast<int64_t>(c.rows.size()), static_cast<int64_t>(c.cols.size())};
        for (Shape us : {region, Shape{region[1]}, Shape{region[0], 1}, Shape{1, region[1]}, Shape{}}) {
          auto u = kt::values_with_specials(kt::numel(us), d, 71);
          auto want = update_ref(v, s, c.rows, c.cols, u, us);
          Array r = slice_update(a, kt::with_layout(u, us, d, l), c.start, c.stop, c.step);
          kt::expect_array(r, s, d, want, kt::ctx_of(d, l, detail::shape_str(c.start) + detail::shape_str(us)));
        }
      }
    }
  }
}

TEST(SliceUpdate, CastsUpdateAndLeavesInputAlone) {
  Array a = array(std::vector<int32_t>{1, 2, 3, 4}, {4});
  Array r = slice_update(a, array(std::vector<float>{9.7f, -2.5f}, {2}), {1}, {3}, {1});
  kt::expect_array(r, {4}, int32, {1, 9, -2, 4}, "cast");
  kt::expect_array(a, {4}, int32, {1, 2, 3, 4}, "input unchanged");
  Array f = astype(a, float16);
  kt::expect_array(slice_update(f, array(std::vector<int64_t>{7}, {1}), {0}, {4}, {3}), {4}, float16, {7, 2, 3, 7},
                   "step 3");
  // Step defaults to 1; an empty region leaves the copy as it was.
  kt::expect_array(slice_update(a, array(5), {2}, {4}), {4}, int32, {1, 2, 5, 5}, "default step");
  kt::expect_array(slice_update(a, array(5), {3}, {1}), {4}, int32, {1, 2, 3, 4}, "empty region");
  kt::expect_array(slice_update(zeros({0, 2}), array(1.0f), {0, 0}, {1, 2}), {0, 2}, float32, {}, "empty array");
  kt::expect_array(slice_update(array(1.0f), array(3.0f), Shape{}, Shape{}), {}, float32, {3}, "0-d");
}

TEST(SliceUpdate, Large) {
  // Crosses the thread pool's threshold: every other row of a strided input, a broadcast row.
  Shape s{200, 200};
  auto v = kt::random_values(kt::numel(s), float32, 72);
  auto u = kt::random_values(200, float32, 73);
  std::vector<int64_t> rows, cols;
  for (int64_t i = 0; i < 200; ++i) {
    if (i % 2 == 0) rows.push_back(i);
    cols.push_back(i);
  }
  auto want = update_ref(v, s, rows, cols, u, {200});
  Array r = slice_update(kt::with_layout(v, s, float32, Layout::strided), kt::from_values(u, {200}, float32), {0, 0},
                         {200, 200}, {2, 1});
  kt::expect_array(r, s, float32, want, "large");
}

TEST(SliceUpdate, Errors) {
  Array a = zeros({6, 5});
  kt::expect_error([&] { slice_update(a, array(1.0f), Shape{0}, Shape{1}); },
                   "[slice_update] start, stop and step need one entry per axis (2)");
  kt::expect_error(
      [&] {
        slice_update(a, array(1.0f), {0, 0}, {1, 1}, {1});
      },
      "[slice_update] start, stop and step need one entry per axis (2)");
  kt::expect_error(
      [&] {
        slice_update(a, zeros({3}), {0, 0}, {4, 5}, {2, 1});
      },
      "[slice_update] cannot broadcast update of shape (3) to the region's shape (2,5)");
  kt::expect_error(
      [&] {
        slice_update(a, zeros({1, 2, 5}), {0, 0}, {4, 5}, {2, 1});
      },
      "[slice_update] cannot broadcast update of shape (1,2,5) to the region's shape (2,5)");
  kt::expect_error(
      [&] {
        slice_update(a, array(1.0f), {0, 0}, {4, 5}, {1, 0});
      },
      "[slice_update] slice step cannot be zero (axis 1)");
  kt::expect_error([&] { slice_update(Array(), a, Shape{}, Shape{}); },
                   "[slice_update] operation on an empty Array handle");
  kt::expect_error(
      [&] {
        slice_update(a, Array(), {0, 0}, {1, 1});
      },
      "[slice_update] operation on an empty Array handle");
}

// ---- the primitives themselves ----------------------------------------------------------
TEST(LayoutPrimitives, ShapesAreRecomputedFromInputs) {
  EXPECT_EQ(Concatenate(1).output_shapes({{2, 3}, {2, 5}})[0], (Shape{2, 8}));
  EXPECT_EQ(Concatenate(0).output_shapes({{7, 3}})[0], (Shape{7, 3}));
  EXPECT_EQ(Pad({{1, 2}, {0, 1}}, 0).output_shapes({{5, 5}})[0], (Shape{8, 6}));
  EXPECT_EQ(Take(1).output_shapes({{4, 6, 2}, {3, 1}})[0], (Shape{4, 3, 1, 2}));
  EXPECT_EQ(TakeAlongAxis(0).output_shapes({{4, 1}, {2, 3}})[0], (Shape{2, 3}));
  EXPECT_EQ(Copy().output_shapes({{3, 0}})[0], (Shape{3, 0}));
  // The region resolves against the new input's shape: stop clamps to it.
  SliceUpdate su({SliceArg{1, 100, 2}});
  EXPECT_EQ(su.output_shapes({{9}, {4}})[0], (Shape{9}));
  kt::expect_error(
      [&] {
        su.output_shapes({{5}, {4}});
      },
      "[slice_update] cannot broadcast update of shape (4) to the region's shape (2)");
  kt::expect_error([] { Concatenate(0).output_shapes({}); }, "[concatenate] need at least one array to concatenate");
  kt::expect_error([] { Concatenate(0).output_shapes({Shape{}}); },
                   "[concatenate] zero-dimensional arrays cannot be concatenated");
  kt::expect_error(
      [] {
        Concatenate(3).output_shapes({{2, 2}});
      },
      "[concatenate] axis 3 is out of range for an array of rank 2");
  kt::expect_error(
      [] {
        Take(2).output_shapes({{2, 2}, {1}});
      },
      "[take] axis 2 is out of range for an array of rank 2");
  kt::expect_error(
      [] {
        TakeAlongAxis(2).output_shapes({{2, 2}, {1, 1}});
      },
      "[take_along_axis] axis 2 is out of range for an array of rank 2");
}

TEST(LayoutPrimitives, EquivalenceAndPrinting) {
  EXPECT_TRUE(Concatenate(1).is_equivalent(Concatenate(1)));
  EXPECT_FALSE(Concatenate(1).is_equivalent(Concatenate(0)));
  EXPECT_FALSE(Take(1).is_equivalent(TakeAlongAxis(1)));
  EXPECT_TRUE(Take(0).is_equivalent(Take(0)));
  EXPECT_FALSE(Take(0).is_equivalent(Take(1)));
  EXPECT_TRUE(TakeAlongAxis(0).is_equivalent(TakeAlongAxis(0)));
  EXPECT_FALSE(TakeAlongAxis(0).is_equivalent(TakeAlongAxis(1)));
  EXPECT_TRUE(Copy().is_equivalent(Copy()));
  EXPECT_TRUE(Pad({{1, 2}}, kNaN).is_equivalent(Pad({{1, 2}}, kNaN)));
  EXPECT_FALSE(Pad({{1, 2}}, 0.0).is_equivalent(Pad({{1, 2}}, -0.0)));
  EXPECT_FALSE(Pad({{1, 2}}, 0.0).is_equivalent(Pad({{2, 1}}, 0.0)));
  SliceUpdate a({SliceArg{1, 5, 2}, SliceArg{}}), b({SliceArg{1, 5, 2}, SliceArg{}}),
      c({SliceArg{1, 5, 1}, SliceArg{}});
  EXPECT_TRUE(a.is_equivalent(b));
  EXPECT_FALSE(a.is_equivalent(c));
  EXPECT_EQ(printed(Copy()), "copy");
  EXPECT_EQ(printed(Concatenate(1)), "concatenate(1)");
  EXPECT_EQ(printed(Pad({{1, 2}, {0, 0}}, 0.5)), "pad((1,2),(0,0),0.5)");
  EXPECT_EQ(printed(SliceUpdate({SliceArg{1, 5, 2}, SliceArg{std::nullopt, -1, -1}})), "slice_update(1:5:2,:-1:-1)");
  EXPECT_EQ(printed(Take(2)), "take(2)");
  EXPECT_EQ(printed(TakeAlongAxis(0)), "take_along_axis(0)");
}
