// matmul against a float64 (or exact, wrapped integer) reference computed here:
// every dtype, mixed dtypes, 1-D promotion, batch broadcasting, empty and size-1
// dimensions, transposed / strided / sub-matrix / reversed operands, NaN and inf,
// the parallel paths, and every error message.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/tensor.h"
#include "ops/linalg.h"
#include "reference.h"

using namespace kiln;
using kt::Layout;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/* Wraps an exact integer result to dtype d (as numpy's integer matmul does). */
double wrap_to(int64_t v, Dtype d) {
  auto u = static_cast<uint64_t>(v);
  switch (d) {
    case bool_: return v != 0;
    case uint8: return static_cast<uint8_t>(u);
    case uint16: return static_cast<uint16_t>(u);
    case uint32: return static_cast<uint32_t>(u);
    case uint64: return static_cast<double>(u);
    case int8: return static_cast<int8_t>(u);
    case int16: return static_cast<int16_t>(u);
    case int32: return static_cast<int32_t>(u);
    default: return static_cast<double>(v);
  }
}

struct Ref {
  Shape shape;
  std::vector<double> value, scale;  // scale: sum of |a||b| terms, for the tolerance
};

/* numpy.matmul on row-major values, in double (exact for the small integers used). */
Ref ref_matmul(const std::vector<double>& a, Shape sa, const std::vector<double>& b, Shape sb) {
  bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  size_t nd = std::max(sa.size(), sb.size());
  Shape ba(nd - 2, 1), bb(nd - 2, 1), batch(nd - 2, 1);
  for (size_t i = 0; i + 2 < sa.size(); ++i) ba[nd - sa.size() + i] = sa[i];
  for (size_t i = 0; i + 2 < sb.size(); ++i) bb[nd - sb.size() + i] = sb[i];
  for (size_t i = 0; i + 2 < nd; ++i) batch[i] = ba[i] == 1 ? bb[i] : ba[i];
  int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  Ref r;
  r.shape = batch;
  if (!va) r.shape.push_back(M);
  if (!vb) r.shape.push_back(N);
  int64_t nb = kt::numel(batch);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t oa = 0, ob = 0, st_a = 1, st_b = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      oa += (ba[d] == 1 ? 0 : idx[d]) * st_a;
      ob += (bb[d] == 1 ? 0 : idx[d]) * st_b;
      st_a *= ba[d];
      st_b *= bb[d];
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, sc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = a[static_cast<size_t>((oa * M + i) * K + k)], y = b[static_cast<size_t>((ob * K + k) * N + j)];
          s += x * y;
          sc += std::fabs(x * y);
        }
        r.value.push_back(s);
        r.scale.push_back(sc);
      }
    }
    for (size_t d = batch.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

void expect_matches(const Array& got, const Ref& want, const std::string& ctx) {
  ASSERT_EQ(got.shape(), want.shape) << ctx;
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.value.size()) << ctx;
  Dtype d = got.dtype();
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    double w = want.value[i];
    bool ok;
    if (is_floating(d)) {
      // Accumulated in float32 at least; 16-bit results are rounded once.
      double tol = kt::rel_tol(d) * (std::fabs(w) + want.scale[i]) + 4e-7 * want.scale[i];
      ok = std::isnan(w) ? std::isnan(g[i]) : std::isinf(w) ? g[i] == w : std::fabs(g[i] - w) <= tol;
    } else {
      // The reference is exact in double for the ranges used; wrap it to the dtype.
      ok = g[i] == wrap_to(static_cast<int64_t>(w), d);
    }
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " got " << g[i] << " want " << w << " (" << dtype_name(d) << ")";
      ++bad;
    }
  }
}

/* A matrix-like layout BLAS can read without copying: a window of a larger array. */
Array sub_matrix(const std::vector<double>& v, const Shape& s, Dtype d) {
  Shape big = s;
  big[big.size() - 1] += 3;
  if (big.size() >= 2) big[big.size() - 2] += 2;
  std::vector<double> b(static_cast<size_t>(kt::numel(big)), 7.0);
  // Copy v into the window starting at (…, 1, 2).
  int64_t rows = kt::numel(s) / std::max<int64_t>(1, s.back());
  int64_t cols = s.back();
  int64_t inner_rows = s.size() >= 2 ? s[s.size() - 2] : 1;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t batch = r / std::max<int64_t>(1, inner_rows), row = r % std::max<int64_t>(1, inner_rows);
    int64_t brows = big.size() >= 2 ? big[big.size() - 2] : 1;
    for (int64_t c = 0; c < cols; ++c) {
      int64_t at = (batch * brows + row + (s.size() >= 2 ? 1 : 0)) * big.back() + c + 2;
      b[static_cast<size_t>(at)] = v[static_cast<size_t>(r * cols + c)];
    }
  }
  Array base = kt::from_values(b, big, d);
  base.eval();
  std::vector<SliceArg> args(s.size());
  args.back() = SliceArg{2, 2 + cols, 1};
  if (s.size() >= 2) args[s.size() - 2] = SliceArg{1, 1 + inner_rows, 1};
  return slice(base, args);
}

/* The values laid out reversed along the last axis (negative strides): BLAS cannot read it. */
Array reversed(const std::vector<double>& v, const Shape& s, Dtype d) {
  std::vector<double> r(v.size());
  int64_t cols = s.back();
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t row = static_cast<int64_t>(i) / cols, c = static_cast<int64_t>(i) % cols;
    r[static_cast<size_t>(row * cols + (cols - 1 - c))] = v[i];
  }
  Array base = kt::from_values(r, s, d);
  base.eval();
  std::vector<SliceArg> args(s.size());
  args.back().step = -1;
  return slice(base, args);
}

enum class Form { contiguous, transposed, strided, window, reversed };
const Form kForms[] = {Form::contiguous, Form::transposed, Form::strided, Form::window, Form::reversed};
const char* form_name(Form f) {
  switch (f) {
    case Form::contiguous: return "contiguous";
    case Form::transposed: return "transposed";
    case Form::strided: return "strided";
    case Form::window: return "window";
    case Form::reversed: return "reversed";
  }
  return "?";
}

Array make(const std::vector<double>& v, const Shape& s, Dtype d, Form f) {
  if (kt::numel(s) == 0 && f != Form::contiguous) f = Form::contiguous;
  switch (f) {
    case Form::contiguous: return kt::with_layout(v, s, d, Layout::contiguous);
    case Form::transposed: return kt::with_layout(v, s, d, Layout::transposed);
    case Form::strided: return kt::with_layout(v, s, d, Layout::strided);
    case Form::window: return sub_matrix(v, s, d);
    case Form::reversed: return reversed(v, s, d);
  }
  return {};
}

struct Case {
  Shape a, b;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{3, 4}, {4, 5}},       {{1, 1}, {1, 1}},    {{4}, {4}},          {{4}, {4, 3}},
      {{2, 4}, {4}},          {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {5, 4, 2}},
      {{4}, {2, 4, 3}},       {{2, 3, 4}, {4}},    {{0, 4}, {4, 5}},    {{3, 0}, {0, 5}},
      {{2, 0, 3}, {3, 4}},    {{3, 4}, {4, 1}},    {{1, 4}, {4, 6}},    {{5, 1}, {1, 3}},
      {{2, 3, 4}, {2, 4, 5}}, {{0, 3, 4}, {4, 2}}, {{7, 9}, {9, 11}},
  };
  return c;
}

std::string describe(Dtype da, Dtype db, const Case& c, Form fa, Form fb) {
  return std::string(dtype_name(da)) + " " + detail::shape_str(c.a) + " (" + form_name(fa) + ") @ " + dtype_name(db) +
         " " + detail::shape_str(c.b) + " (" + form_name(fb) + ")";
}

}  // namespace

TEST(Matmul, EveryDtypeShapeAndLayout) {
  uint64_t seed = 1;
  for (Dtype d : kt::all_dtypes()) {
    for (auto& c : cases()) {
      for (Form fa : kForms) {
        for (Form fb : kForms) {
          // Full cross product for one float and one integer type; the diagonal for the rest.
          if (d != float32 && d != int16 && fa != fb && fb != Form::contiguous) continue;
          auto va = kt::random_values(kt::numel(c.a), d, seed++);
          auto vb = kt::random_values(kt::numel(c.b), d, seed++);
          Array y = matmul(make(va, c.a, d, fa), make(vb, c.b, d, fb));
          std::string ctx = describe(d, d, c, fa, fb);
          ASSERT_EQ(y.dtype(), d) << ctx;
          expect_matches(y, ref_matmul(va, c.a, vb, c.b), ctx);
        }
      }
    }
  }
}

TEST(Matmul, MixedDtypesPromote) {
  const std::vector<std::pair<Dtype, Dtype>> pairs = {{int8, float16},     {uint8, int8},    {bool_, int32},
                                                      {float16, bfloat16}, {int64, float32}, {uint16, float64},
                                                      {bool_, bool_},      {uint64, int8}};
  uint64_t seed = 300;
  for (auto [da, db] : pairs) {
    for (auto& c : cases()) {
      auto va = kt::random_values(kt::numel(c.a), da, seed++);
      auto vb = kt::random_values(kt::numel(c.b), db, seed++);
      Array y = matmul(make(va, c.a, da, Form::contiguous), make(vb, c.b, db, Form::transposed));
      std::string ctx = describe(da, db, c, Form::contiguous, Form::transposed);
      ASSERT_EQ(y.dtype(), promote_types(da, db)) << ctx;
      expect_matches(y, ref_matmul(va, c.a, vb, c.b), ctx);
    }
  }
}

TEST(Matmul, IntegerProductsWrap) {
  Array a = array(std::vector<int8_t>{100, 100}, {1, 2});
  Array b = array(std::vector<int8_t>{100, 100}, {2, 1});
  EXPECT_EQ(matmul(a, b).item<int8_t>(), static_cast<int8_t>(20000 % 256));
  Array u = array(std::vector<uint32_t>{0xffffffffu, 2}, {1, 2});
  Array v = array(std::vector<uint32_t>{2, 3}, {2, 1});
  EXPECT_EQ(matmul(u, v).item<uint32_t>(), 4u);  // (2^32 - 1) * 2 + 6 mod 2^32
  Array big = array(std::vector<int64_t>{int64_t{1} << 62, 1}, {1, 2});
  Array four = array(std::vector<int64_t>{4, 5}, {2, 1});
  EXPECT_EQ(matmul(big, four).item<int64_t>(), 5);
  Array t = array(std::vector<bool>{true, false, true}, {1, 3});
  Array s = array(std::vector<bool>{false, true, true}, {3, 1});
  EXPECT_TRUE(matmul(t, s).item<bool>());  // or of ands, not a count
  EXPECT_FALSE(matmul(t, array(std::vector<bool>{false, true, false}, {3, 1})).item<bool>());
}

TEST(Matmul, BroadcastBatchOperands) {
  // A stride-0 batch axis from broadcast_to, and size-1 batch axes.
  auto va = kt::random_values(12, float32, 40);
  auto vb = kt::random_values(4 * 4 * 5, float32, 41);
  Array a = broadcast_to(kt::from_values(va, {1, 3, 4}, float32), {4, 3, 4});
  Array b = kt::from_values(vb, {4, 4, 5}, float32);
  std::vector<double> va4;
  for (int i = 0; i < 4; ++i) va4.insert(va4.end(), va.begin(), va.end());
  expect_matches(matmul(a, b), ref_matmul(va4, {4, 3, 4}, vb, {4, 4, 5}), "broadcast_to batch");
  for (Dtype d : {float16, int32}) {
    auto x = kt::random_values(2 * 1 * 3 * 4, d, 42), y = kt::random_values(3 * 4 * 2, d, 43);
    Array r = matmul(kt::from_values(x, {2, 1, 3, 4}, d), kt::from_values(y, {3, 4, 2}, d));
    EXPECT_EQ(r.shape(), (Shape{2, 3, 3, 2}));
    expect_matches(r, ref_matmul(x, {2, 1, 3, 4}, y, {3, 4, 2}), dtype_name(d));
  }
}

TEST(Matmul, NaNAndInfPropagate) {
  for (Dtype d : kt::float_dtypes()) {
    Array a = kt::from_values({1, kNaN, 2, 3, kInf, 0, 1, 1}, {4, 2}, d);
    Array b = kt::from_values({1, 2, 3, 4}, {2, 2}, d);
    auto r = matmul(a, b).to_vector<double>();
    EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1])) << dtype_name(d);
    EXPECT_EQ(r[2], 11.0);
    EXPECT_EQ(r[4], kInf);
    EXPECT_EQ(r[5], kInf);
    EXPECT_EQ(r[6], 4.0);
    // inf * 0 is NaN
    Array z = kt::from_values({0, 1, 0, 1}, {2, 2}, d);
    auto q = matmul(kt::from_values({kInf, 0}, {1, 2}, d), z).to_vector<double>();
    EXPECT_TRUE(std::isnan(q[0])) << dtype_name(d);
  }
}

TEST(Matmul, LargeAndBatchedShapesUseEveryPath) {
  uint64_t seed = 700;
  // Large single products (BLAS threads, the integer kernel's row split, half
  // conversion), many small batches side by side, and a transposed large operand.
  const std::vector<Case> big = {
      {{96, 130}, {130, 80}}, {{64, 8, 8}, {64, 8, 8}}, {{40, 3, 5}, {5, 7}}, {{1, 300}, {300, 1}}};
  for (Dtype d : {float32, float64, float16, int32, int8, bool_}) {
    for (auto& c : big) {
      for (Form f : {Form::contiguous, Form::transposed}) {
        auto va = kt::random_values(kt::numel(c.a), d, seed++);
        auto vb = kt::random_values(kt::numel(c.b), d, seed++);
        Array y = matmul(make(va, c.a, d, f), make(vb, c.b, d, Form::contiguous));
        expect_matches(y, ref_matmul(va, c.a, vb, c.b), describe(d, d, c, f, Form::contiguous));
      }
    }
  }
}

TEST(Matmul, Errors) {
  Array a = zeros({2, 3}), b = zeros({4, 5});
  kt::expect_error([&] { matmul(a, b); }, "[matmul] inner dimensions differ: (2,3) @ (4,5)");
  kt::expect_error([&] { matmul(zeros({3}), zeros({4})); }, "[matmul] inner dimensions differ: (3) @ (4)");
  kt::expect_error([&] { matmul(zeros({3}), zeros({2, 4, 5})); }, "[matmul] inner dimensions differ: (3) @ (2,4,5)");
  kt::expect_error([&] { matmul(zeros({2, 3}), zeros({2})); }, "[matmul] inner dimensions differ: (2,3) @ (2)");
  kt::expect_error([&] { matmul(array(1.0f), b); }, "[matmul] 0-d operands are not allowed: () @ (4,5)");
  kt::expect_error([&] { matmul(b, array(1.0f)); }, "[matmul] 0-d operands are not allowed: (4,5) @ ()");
  kt::expect_error(
      [&] {
        matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
      },
      "[matmul] batch dimensions cannot be broadcast: (2,3,4) @ (3,4,5)");
  kt::expect_error(
      [&] {
        matmul(zeros({2, 1, 4}), zeros({3, 4, 2}));
      },
      "[matmul] batch dimensions cannot be broadcast: (2,1,4) @ (3,4,2)");
  kt::expect_error([&] { matmul(Array(), b); }, "[matmul] operation on an empty Array handle");
  kt::expect_error([&] { matmul(b, Array()); }, "[matmul] operation on an empty Array handle");
  // A host array combines with a CUDA one (it is copied on use): the product runs on CUDA,
  // and without a GPU evaluating it is a clear error.
  detail::Tensor t({5, 2}, float32);
  t.allocate();
  Array g = Array::from_tensor(t, Device::cuda(0));
  Array m = matmul(b, g);
  EXPECT_EQ(m.device(), Device::cuda(0));
  if (!cuda_available()) {
    EXPECT_THROW(m.eval(), Error);
  }
}

TEST(Matmul, PrimitiveRechecksShapesOnReplay) {
  Matmul m;
  EXPECT_EQ(m.output_shapes({{2, 1, 3, 4}, {5, 4, 2}})[0], (Shape{2, 5, 3, 2}));
  kt::expect_error([&] { m.output_shapes({{3, 4}, {3, 2}}); }, "[matmul] inner dimensions differ: (3,4) @ (3,2)");
  kt::expect_error(
      [&] {
        m.output_shapes({{4}, {4, 2}});
      },
      "[matmul] operands need at least 2 dimensions here, got (4) @ (4,2)");
  kt::expect_error(
      [&] {
        m.output_shapes({{2, 3, 4}, {3, 4, 2}});
      },
      "[matmul] batch dimensions cannot be broadcast: (2,3,4) @ (3,4,2)");
}
