// Reference helpers for layout and view tests: row-major multi-indices over
// host vectors, so expected results are built element by element in float64.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reference.h"

namespace kt {

using Index = std::vector<int64_t>;

/* Random values for dtype d; floating dtypes also get NaN, +inf and -inf when n >= 4. */
inline std::vector<double> values_with_specials(int64_t n, Dtype d, uint64_t seed) {
  auto v = random_values(n, d, seed);
  if (kiln::is_floating(d) && n >= 4) {
    v[1] = std::numeric_limits<double>::quiet_NaN();
    v[2] = std::numeric_limits<double>::infinity();
    v[3] = -std::numeric_limits<double>::infinity();
  }
  return v;
}

/* Flat row-major position of idx in shape. */
inline int64_t ravel(const Index& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + idx[i];
  return flat;
}

/* Calls f(idx) for every index of shape in row-major order. */
inline void for_each_index(const Shape& shape, const std::function<void(const Index&)>& f) {
  if (numel(shape) == 0) return;
  Index idx(shape.size(), 0);
  for (;;) {
    f(idx);
    size_t k = shape.size();
    while (k > 0) {
      --k;
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
      if (k == 0) return;
    }
    if (shape.empty()) return;
  }
}

/* The row-major values of an array of shape `out` whose element at idx is at(idx). */
inline std::vector<double> build(const Shape& out, const std::function<double(const Index&)>& at) {
  std::vector<double> v;
  v.reserve(static_cast<size_t>(numel(out)));
  for_each_index(out, [&](const Index& idx) { v.push_back(at(idx)); });
  return v;
}

/* Expects got to have this shape and dtype and exactly these values (NaN matching NaN). */
inline void expect_array(const Array& got, const Shape& shape, Dtype dtype, const std::vector<double>& want,
                         const std::string& ctx) {
  ASSERT_EQ(got.shape(), shape) << ctx;
  ASSERT_EQ(got.dtype(), dtype) << ctx;
  expect_close(got, want, ctx, 0.0);
}

inline std::string ctx_of(Dtype d, Layout l, const std::string& what = "") {
  return std::string(kiln::dtype_name(d)) + "/" + layout_name(l) + (what.empty() ? "" : "/" + what);
}

inline const std::vector<Layout>& all_layouts() {
  static const std::vector<Layout> l = {Layout::contiguous, Layout::transposed, Layout::strided};
  return l;
}

}  // namespace kt
