// reshape, transpose, swapaxes, broadcast_to, expand_dims, squeeze, flatten and
// slice against references built element by element in the test.
#include <gtest/gtest.h>

#include <optional>
#include <tuple>

#include "core/buffer.h"
#include "core/stats.h"
#include "core/tensor.h"
#include "index_ref.h"

using namespace kiln;
using kt::Index;
using kt::Layout;

namespace {

/* The indices Python's range(n)[start:stop:step] visits. */
std::vector<int64_t> py_slice(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  auto adjust = [&](std::optional<int64_t> v, int64_t absent, int64_t lo, int64_t hi) {
    if (!v) return absent;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::min(std::max(x, lo), hi);
  };
  std::vector<int64_t> out;
  if (step > 0) {
    int64_t b = adjust(start, 0, 0, n), e = adjust(stop, n, 0, n);
    for (int64_t i = b; i < e; i += step) out.push_back(i);
  } else {
    int64_t b = adjust(start, n - 1, -1, n - 1), e = adjust(stop, -1, -1, n - 1);
    for (int64_t i = b; i > e; i += step) out.push_back(i);
  }
  return out;
}

/* Values of `v` (shape s) permuted: output axis i is input axis perm[i]. */
std::vector<double> permute_ref(const std::vector<double>& v, const Shape& s, const std::vector<int>& perm,
                                Shape* out) {
  out->resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) (*out)[i] = s[static_cast<size_t>(perm[i])];
  return kt::build(*out, [&](const Index& o) {
    Index src(s.size());
    for (size_t i = 0; i < perm.size(); ++i) src[static_cast<size_t>(perm[i])] = o[i];
    return v[static_cast<size_t>(kt::ravel(src, s))];
  });
}

/* Values of `v` (shape s) broadcast to `to`. */
std::vector<double> broadcast_ref(const std::vector<double>& v, const Shape& s, const Shape& to) {
  return kt::build(to, [&](const Index& o) {
    Index src(s.size());
    size_t lead = to.size() - s.size();
    for (size_t i = 0; i < s.size(); ++i) src[i] = s[i] == 1 ? 0 : o[lead + i];
    return v[static_cast<size_t>(kt::ravel(src, s))];
  });
}

/* Values of `v` (shape s) sliced with Python semantics per axis. */
std::vector<double> slice_ref(const std::vector<double>& v, const Shape& s, const std::vector<SliceArg>& args,
                              Shape* out) {
  std::vector<std::vector<int64_t>> picks;
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    SliceArg a = i < args.size() ? args[i] : SliceArg{};
    picks.push_back(py_slice(s[i], a.start, a.stop, a.step));
    out->push_back(static_cast<int64_t>(picks.back().size()));
  }
  return kt::build(*out, [&](const Index& o) {
    Index src(s.size());
    for (size_t i = 0; i < s.size(); ++i) src[i] = picks[i][static_cast<size_t>(o[i])];
    return v[static_cast<size_t>(kt::ravel(src, s))];
  });
}

bool shares_buffer(const Array& a, const Array& b) {
  a.eval();
  b.eval();
  return a.tensor().buffer == b.tensor().buffer;
}

}  // namespace

// ---- reshape ------------------------------------------------------------------------
TEST(Reshape, AllDtypesLayoutsAndInference) {
  Shape s{3, 4};
  std::vector<std::pair<Shape, Shape>> targets = {{{4, 3}, {4, 3}},       {{2, -1}, {2, 6}},  {{-1}, {12}},
                                                  {{2, 2, 3}, {2, 2, 3}}, {{12, 1}, {12, 1}}, {{1, -1, 1}, {1, 12, 1}},
                                                  {{-1, 4}, {3, 4}}};
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(12, d, 1);
      Array a = kt::with_layout(v, s, d, l);
      for (auto& [target, want] : targets) {
        Array r = reshape(a, target);
        kt::expect_array(r, want, d, v, kt::ctx_of(d, l, detail::shape_str(target)));
        // Contiguous inputs are viewed; the others are copied into row-major order.
        if (want != s) {
          EXPECT_EQ(shares_buffer(r, a), l == Layout::contiguous) << kt::ctx_of(d, l);
        }
        // A chain of reshapes (of a copy or a view) still reads row-major order.
        kt::expect_array(reshape(reshape(r, {6, 2}), {-1}), {12}, d, v, kt::ctx_of(d, l, "chain"));
      }
    }
  }
}

TEST(Reshape, ThreeDimensionalTransposedAndLarge) {
  Shape s{2, 3, 4};
  auto v = kt::values_with_specials(24, float32, 2);
  Array t = kt::with_layout(v, s, float32, Layout::transposed);
  kt::expect_array(reshape(t, {4, 6}), {4, 6}, float32, v, "3-D");
  // A size-1 axis with an odd stride does not break contiguity.
  Array e = expand_dims(kt::from_values(v, s, float32), 1);
  kt::expect_array(reshape(e, {24}), {24}, float32, v, "size-1 axis");
  EXPECT_TRUE(shares_buffer(reshape(e, {24}), e));
  // The copy of a non-contiguous input crosses the thread pool's threshold.
  Shape big{200, 200};
  auto bv = kt::random_values(kt::numel(big), float64, 3);
  kt::expect_array(reshape(kt::with_layout(bv, big, float64, Layout::transposed), {-1}), {40000}, float64, bv, "large");
}

TEST(Reshape, EmptyAndZeroDimensional) {
  kt::expect_array(reshape(zeros({0, 3}), {3, 0}), {3, 0}, float32, {}, "(3,0)");
  kt::expect_array(reshape(zeros({0, 3}), {-1, 3}), {0, 3}, float32, {}, "(-1,3)");
  kt::expect_array(reshape(zeros({0, 3}, int8), {-1}), {0}, int8, {}, "(-1)");
  kt::expect_array(reshape(array(2.5f), {1, 1}), {1, 1}, float32, {2.5}, "0-d up");
  kt::expect_array(reshape(array({7}), {}), {}, int32, {7}, "to 0-d");
  kt::expect_array(reshape(array(2.5f), {-1}), {1}, float32, {2.5}, "0-d infer");
  Array a = zeros({2, 3});
  EXPECT_EQ(reshape(a, {2, 3}).id(), a.id());
  EXPECT_EQ(reshape(a, {2, -1}).id(), a.id());
}

TEST(Reshape, Errors) {
  Array a = zeros({3, 4});
  kt::expect_error([&] { reshape(a, {-1, -1}); }, "[reshape] only one dimension can be -1, got (-1,-1)");
  kt::expect_error([&] { reshape(a, {-2, 6}); }, "[reshape] invalid dimension -2 in shape (-2,6)");
  kt::expect_error([&] { reshape(a, {5, -1}); }, "[reshape] cannot reshape array of size 12 into shape (5,-1)");
  kt::expect_error([&] { reshape(a, {4, 4}); }, "[reshape] cannot reshape array of size 12 into shape (4,4)");
  kt::expect_error([&] { reshape(a, {}); }, "[reshape] cannot reshape array of size 12 into shape ()");
  kt::expect_error(
      [] {
        reshape(zeros({0, 3}), {0, -1});
      },
      "[reshape] cannot reshape array of size 0 into shape (0,-1)");
  kt::expect_error([] { reshape(Array(), {1}); }, "[reshape] operation on an empty Array handle");
}

// ---- transpose and swapaxes ------------------------------------------------------------
TEST(Transpose, AllDtypesLayoutsAndPermutations) {
  Shape s{2, 3, 4};
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(24, d, 4);
      Array a = kt::with_layout(v, s, d, l);
      std::vector<std::pair<std::vector<int>, std::vector<int>>> perms = {
          {{}, {2, 1, 0}}, {{1, 0, 2}, {1, 0, 2}}, {{-1, 0, 1}, {2, 0, 1}}, {{0, -1, -2}, {0, 2, 1}}};
      for (auto& [perm, resolved] : perms) {
        Shape out;
        auto want = permute_ref(v, s, resolved, &out);
        Array t = transpose(a, perm);
        kt::expect_array(t, out, d, want, kt::ctx_of(d, l, "perm"));
        EXPECT_TRUE(shares_buffer(t, a));
        kt::expect_array(copy(t), out, d, want, kt::ctx_of(d, l, "copy"));
      }
      // swapaxes is the transposition of two axes.
      for (auto [i, j, resolved] : std::vector<std::tuple<int, int, std::vector<int>>>{
               {0, 2, {2, 1, 0}}, {-1, 1, {0, 2, 1}}, {1, -3, {1, 0, 2}}}) {
        Shape out;
        auto want = permute_ref(v, s, resolved, &out);
        kt::expect_array(swapaxes(a, i, j), out, d, want, kt::ctx_of(d, l, "swapaxes"));
      }
    }
  }
}

TEST(Transpose, IdentityEmptyAndLowRank) {
  Array a = zeros({2, 3});
  EXPECT_EQ(transpose(a, {0, 1}).id(), a.id());
  EXPECT_EQ(transpose(a, {-2, -1}).id(), a.id());
  EXPECT_EQ(swapaxes(a, 1, -1).id(), a.id());
  Array s = array(3.0f);
  EXPECT_EQ(transpose(s).id(), s.id());
  Array v = array({1, 2, 3});
  kt::expect_array(transpose(v), {3}, int32, {1, 2, 3}, "1-D");
  kt::expect_array(transpose(zeros({0, 3})), {3, 0}, float32, {}, "empty");
  // Transposing twice gives the original order back.
  auto vals = kt::random_values(6, float32, 5);
  Array m = kt::from_values(vals, {2, 3}, float32);
  kt::expect_array(transpose(transpose(m)), {2, 3}, float32, vals, "twice");
}

TEST(Transpose, ViewsLaunchNoKernel) {
  Array a = zeros({2, 3});
  a.eval();
  reset_stats();
  Array t = transpose(a);
  t.eval();
  EXPECT_EQ(stats().kernels_launched, 0u);
  EXPECT_EQ(stats().arrays_materialized, 1u);
}

TEST(Transpose, Errors) {
  Array a = zeros({2, 3});
  kt::expect_error([&] { transpose(a, {0, 0}); }, "[transpose] axis 0 repeated in the permutation");
  kt::expect_error([&] { transpose(a, {1, -1}); }, "[transpose] axis 1 repeated in the permutation");
  kt::expect_error([&] { transpose(a, {0, 1, 2}); }, "[transpose] permutation has 3 axes but the array has rank 2");
  kt::expect_error([&] { transpose(a, {0}); }, "[transpose] permutation has 1 axes but the array has rank 2");
  kt::expect_error([&] { transpose(a, {0, 2}); }, "[transpose] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { transpose(a, {-3, 0}); }, "[transpose] axis -3 is out of range for an array of rank 2");
  kt::expect_error([] { transpose(Array()); }, "[transpose] operation on an empty Array handle");
  kt::expect_error([&] { swapaxes(a, 0, 2); }, "[swapaxes] axis 2 is out of range for an array of rank 2");
  kt::expect_error([&] { swapaxes(a, -3, 0); }, "[swapaxes] axis -3 is out of range for an array of rank 2");
  kt::expect_error([] { swapaxes(Array(), 0, 1); }, "[swapaxes] operation on an empty Array handle");
}

// ---- broadcast_to ---------------------------------------------------------------------
TEST(BroadcastTo, AllDtypesAndLayouts) {
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      for (auto [s, to] : std::vector<std::pair<Shape, Shape>>{{{3, 1}, {2, 3, 4}},
                                                               {{4}, {3, 4}},
                                                               {{}, {2, 2}},
                                                               {{1, 4}, {0, 4}},
                                                               {{2, 1, 3}, {2, 5, 3}},
                                                               {{1, 1}, {1, 1}}}) {
        auto v = kt::values_with_specials(kt::numel(s), d, 6);
        Array a = kt::with_layout(v, s, d, l);
        auto want = broadcast_ref(v, s, to);
        Array b = broadcast_to(a, to);
        kt::expect_array(b, to, d, want, kt::ctx_of(d, l, detail::shape_str(s)));
        kt::expect_array(copy(b), to, d, want, kt::ctx_of(d, l, "copy"));
        if (s == to) {
          EXPECT_EQ(b.id(), a.id());
        }
      }
    }
  }
}

TEST(BroadcastTo, Errors) {
  kt::expect_error([] { broadcast_to(zeros({3}), {4}); }, "[broadcast_to] cannot broadcast shape (3) to (4)");
  kt::expect_error([] { broadcast_to(zeros({2, 3}), {3}); }, "[broadcast_to] cannot broadcast shape (2,3) to (3)");
  kt::expect_error([] { broadcast_to(zeros({2, 3}), {2, 0}); }, "[broadcast_to] cannot broadcast shape (2,3) to (2,0)");
  kt::expect_error([] { broadcast_to(zeros({3}), {-1, 3}); }, "[broadcast_to] negative dimension in shape (-1,3)");
  kt::expect_error([] { broadcast_to(Array(), {1}); }, "[broadcast_to] operation on an empty Array handle");
}

// ---- expand_dims, squeeze, flatten ---------------------------------------------------------
TEST(ExpandDims, AllDtypesAxesAndLayouts) {
  Shape s{2, 3};
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(6, d, 7);
      Array a = kt::with_layout(v, s, d, l);
      for (auto [axis, out] : std::vector<std::pair<int, Shape>>{
               {0, {1, 2, 3}}, {1, {2, 1, 3}}, {2, {2, 3, 1}}, {-1, {2, 3, 1}}, {-3, {1, 2, 3}}}) {
        kt::expect_array(expand_dims(a, axis), out, d, v, kt::ctx_of(d, l, std::to_string(axis)));
      }
    }
  }
  kt::expect_array(expand_dims(array(4.0f), 0), {1}, float32, {4}, "0-d");
  kt::expect_array(expand_dims(zeros({0}), -1), {0, 1}, float32, {}, "empty");
}

TEST(ExpandDims, Errors) {
  Array a = zeros({2, 3});
  kt::expect_error([&] { expand_dims(a, 3); }, "[expand_dims] axis 3 is out of range for an array of rank 3");
  kt::expect_error([&] { expand_dims(a, -4); }, "[expand_dims] axis -4 is out of range for an array of rank 3");
  kt::expect_error([] { expand_dims(Array(), 0); }, "[expand_dims] operation on an empty Array handle");
}

TEST(Squeeze, AllDtypesAxesAndLayouts) {
  Shape s{1, 3, 1, 2};
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(6, d, 8);
      Array a = kt::with_layout(v, s, d, l);
      for (auto [axes, out] : std::vector<std::pair<std::vector<int>, Shape>>{
               {{}, {3, 2}}, {{0}, {3, 1, 2}}, {{-2}, {1, 3, 2}}, {{0, 2}, {3, 2}}, {{2, -4}, {3, 2}}}) {
        kt::expect_array(squeeze(a, axes), out, d, v, kt::ctx_of(d, l, detail::shape_str(out)));
      }
    }
  }
  Array x = zeros({3, 2});
  EXPECT_EQ(squeeze(x).id(), x.id());
  kt::expect_array(squeeze(array({5})), {}, int32, {5}, "to 0-d");
  kt::expect_array(squeeze(zeros({0, 1})), {0}, float32, {}, "empty");
}

TEST(Squeeze, Errors) {
  Array a = zeros({1, 3, 1, 2});
  kt::expect_error([&] { squeeze(a, {1}); }, "[squeeze] cannot squeeze axis 1 of size 3 in shape (1,3,1,2)");
  kt::expect_error([&] { squeeze(a, {0, -1}); }, "[squeeze] cannot squeeze axis -1 of size 2 in shape (1,3,1,2)");
  kt::expect_error([&] { squeeze(a, {4}); }, "[squeeze] axis 4 is out of range for an array of rank 4");
  kt::expect_error([] { squeeze(Array()); }, "[squeeze] operation on an empty Array handle");
}

TEST(Flatten, AllDtypesAndLayouts) {
  Shape s{2, 3, 4};
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(24, d, 9);
      kt::expect_array(flatten(kt::with_layout(v, s, d, l)), {24}, d, v, kt::ctx_of(d, l));
    }
  }
  kt::expect_array(flatten(array(1.5f)), {1}, float32, {1.5}, "0-d");
  kt::expect_array(flatten(zeros({0, 3})), {0}, float32, {}, "empty");
  kt::expect_error([] { flatten(Array()); }, "[flatten] operation on an empty Array handle");
}

// ---- slice ---------------------------------------------------------------------------
TEST(Slice, ReferenceFollowsPython) {
  // Hand-worked Python results anchor the reference used below.
  EXPECT_EQ(py_slice(5, std::nullopt, std::nullopt, -1), (std::vector<int64_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(py_slice(6, -1, -7, -1), (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(py_slice(6, std::nullopt, -1, 3), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(py_slice(5, 10, 20, 1), (std::vector<int64_t>{}));
  EXPECT_EQ(py_slice(5, 10, std::nullopt, -2), (std::vector<int64_t>{4, 2, 0}));
  EXPECT_EQ(py_slice(5, -100, 2, 1), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(py_slice(0, std::nullopt, std::nullopt, -1), (std::vector<int64_t>{}));
}

TEST(Slice, AllDtypesLayoutsAndSteps) {
  Shape s{5, 6};
  using O = std::optional<int64_t>;
  const O none;
  std::vector<std::vector<SliceArg>> cases = {
      {{1, 4, 1}, {0, 6, 2}},
      {{none, none, -1}},
      {{4, none, -2}, {-1, -7, -1}},
      {{-100, 100, 1}, {2, 2, 1}},
      {{10, 20, 1}},
      {{-2, none, 1}},
      {{none, -1, 3}, {none, none, -4}},
      {{3, 1, -1}, {O(-2), O(-5), -1}},
      {{0, 5, 7}, {5, 0, 1}},
      {},
  };
  for (Dtype d : kt::all_dtypes()) {
    for (Layout l : kt::all_layouts()) {
      auto v = kt::values_with_specials(30, d, 10);
      Array a = kt::with_layout(v, s, d, l);
      for (size_t c = 0; c < cases.size(); ++c) {
        Shape out;
        auto want = slice_ref(v, s, cases[c], &out);
        Array r = slice(a, cases[c]);
        auto ctx = kt::ctx_of(d, l, "case " + std::to_string(c));
        kt::expect_array(r, out, d, want, ctx);
        kt::expect_array(copy(r), out, d, want, ctx + "/copy");
        // A slice of the slice: a view of a view.
        Shape out2;
        auto want2 = slice_ref(want, out, {{none, none, -1}}, &out2);
        kt::expect_array(slice(r, {{none, none, -1}}), out2, d, want2, ctx + "/twice");
      }
    }
  }
}

TEST(Slice, ShapeFormThreeDimensionalEmptyAndLarge) {
  Shape s{3, 4, 5};
  auto v = kt::values_with_specials(60, float32, 11);
  Array a = kt::with_layout(v, s, float32, Layout::transposed);
  Shape out;
  auto want = slice_ref(v, s, {{0, 3, 2}, {3, -5, -1}, {1, 5, 3}}, &out);
  kt::expect_array(slice(a, {0, 3, 1}, {3, -5, 5}, {2, -1, 3}), out, float32, want, "shape form");
  want = slice_ref(v, s, {{1, 3, 1}, {0, 2, 1}, {2, 4, 1}}, &out);
  kt::expect_array(slice(a, {1, 0, 2}, {3, 2, 4}), out, float32, want, "default step");
  kt::expect_array(slice(zeros({0, 3}), {{std::nullopt, std::nullopt, -1}}), {0, 3}, float32, {}, "empty input");
  kt::expect_array(slice(array(2.0f), std::vector<SliceArg>{}), {}, float32, {2}, "0-d");
  // Reversing both axes of a big array crosses the thread pool's threshold in the copy.
  Shape big{300, 200};
  auto bv = kt::random_values(kt::numel(big), float32, 12);
  std::vector<SliceArg> rev = {{std::nullopt, std::nullopt, -1}, {std::nullopt, std::nullopt, -1}};
  Shape bout;
  auto bwant = slice_ref(bv, big, rev, &bout);
  Array r = slice(kt::with_layout(bv, big, float32, Layout::contiguous), rev);
  EXPECT_TRUE(shares_buffer(r, slice(r, std::vector<SliceArg>{})));
  kt::expect_array(copy(r), bout, float32, bwant, "large");
}

TEST(Slice, Errors) {
  Array a = zeros({5, 6});
  kt::expect_error(
      [&] {
        slice(a, {SliceArg{}, SliceArg{}, SliceArg{}});
      },
      "[slice] got 3 slice arguments for an array of rank 2");
  kt::expect_error(
      [&] {
        slice(a, {SliceArg{0, 1, 1}, SliceArg{0, 1, 0}});
      },
      "[slice] slice step cannot be zero (axis 1)");
  kt::expect_error(
      [&] {
        slice(a, Shape{0}, Shape{1, 1});
      },
      "[slice] start, stop and step need one entry per axis (2)");
  kt::expect_error(
      [&] {
        slice(a, Shape{0, 0}, Shape{1, 1}, Shape{1});
      },
      "[slice] start, stop and step need one entry per axis (2)");
  kt::expect_error(
      [&] {
        slice(a, Shape{0, 0}, Shape{1, 1}, Shape{0, 1});
      },
      "[slice] slice step cannot be zero (axis 0)");
  kt::expect_error([] { slice(Array(), std::vector<SliceArg>{}); }, "[slice] operation on an empty Array handle");
}

// ---- buffer identity on every device ------------------------------------------------
// A view shares its input's buffer wherever that lives: a view of device data views the
// device buffer, and a view of host data (an array made from host values) stays a view of
// the host buffer, also with the GPU as the default device (KILN_TEST_DEVICE=cuda), where
// reading it back then moves nothing.
TEST(Views, ShareTheInputBufferOnEveryDevice) {
  std::vector<float> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 3.0f;
  Array host = array(v, {2, 3, 4});
  Array placed = to(host, default_device());  // the GPU's copy under KILN_TEST_DEVICE=cuda, else host itself
  EXPECT_EQ(placed.tensor().buffer->on_host(), default_device().type == Device::Type::cpu);
  auto views = [](const Array& b) {
    return std::vector<Array>{reshape(b, {6, 4}),
                              flatten(b),
                              transpose(b),
                              swapaxes(b, 0, 2),
                              slice(b, {{1, 2}, {0, 3, 2}}),
                              broadcast_to(expand_dims(b, 0), {3, 2, 3, 4}),
                              squeeze(expand_dims(b, 1))};
  };
  for (const Array& base : {host, placed}) {
    base.eval();
    bool on_host = base.tensor().buffer->on_host();
    auto& c = detail::counters();
    uint64_t up = c.host_to_device_copies.load(), down = c.device_to_host_copies.load();
    std::vector<Array> vs = views(base);
    for (size_t k = 0; k < vs.size(); ++k) {
      EXPECT_TRUE(shares_buffer(vs[k], base)) << "view " << k << (on_host ? " of host data" : " of device data");
      EXPECT_EQ(vs[k].tensor().buffer->on_host(), on_host) << "view " << k;
    }
    if (on_host) {
      EXPECT_EQ(transpose(base).to_vector<float>()[1], v[12]);
      EXPECT_EQ(c.host_to_device_copies.load() - up, 0u) << "a view of host data was uploaded";
      EXPECT_EQ(c.device_to_host_copies.load() - down, 0u) << "reading a view of host data went through a device";
    }
  }
}
