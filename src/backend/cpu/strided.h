// Iteration over N operands that share a shape but have their own strides.
// Axes are merged where every operand is contiguous across them, and the work
// is handed out as innermost rows, so the inner loop is a plain strided loop
// the compiler can vectorize (stride 1 or 0 is the common case).
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace kiln::detail {

template <int N>
struct StridedLayout {
  Shape shape;                  // merged axes; never empty (a 0-d shape becomes {1})
  std::array<Strides, N> strides;

  int64_t inner() const { return shape.back(); }
  int64_t rows() const { return shape_size(shape) / (shape.back() ? shape.back() : 1); }
};

template <int N>
StridedLayout<N> merge_axes(const Shape& shape, const std::array<const Strides*, N>& strides) {
  StridedLayout<N> out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;  // size-1 axes never move the index
    bool merge = !out.shape.empty();
    for (int k = 0; k < N && merge; ++k) {
      merge = out.strides[k].back() == (*strides[k])[i] * shape[i];
    }
    if (merge) {
      out.shape.back() *= shape[i];
      for (int k = 0; k < N; ++k) out.strides[k].back() = (*strides[k])[i];
    } else {
      out.shape.push_back(shape[i]);
      for (int k = 0; k < N; ++k) out.strides[k].push_back((*strides[k])[i]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (int k = 0; k < N; ++k) out.strides[k].push_back(1);
  }
  return out;
}

/* Calls row(offsets, n, inner_strides) for rows [row_begin, row_end) of the layout,
   where offsets[k] is operand k's element offset at the row's start. */
template <int N, class Row>
void for_each_row(const StridedLayout<N>& L, int64_t row_begin, int64_t row_end, Row&& row) {
  const int nd = static_cast<int>(L.shape.size());
  const int64_t n = L.shape.back();
  std::array<int64_t, N> inner;
  for (int k = 0; k < N; ++k) inner[k] = L.strides[k][nd - 1];
  // Decompose row_begin into an index over the outer axes.
  std::array<int64_t, 16> small_idx{};
  std::vector<int64_t> big_idx;
  int64_t* idx = small_idx.data();
  if (nd > 16) {
    big_idx.resize(nd);
    idx = big_idx.data();
  }
  std::array<int64_t, N> off{};
  int64_t r = row_begin;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = r % L.shape[d];
    r /= L.shape[d];
    for (int k = 0; k < N; ++k) off[k] += idx[d] * L.strides[k][d];
  }
  for (int64_t rr = row_begin; rr < row_end; ++rr) {
    row(off, n, inner);
    for (int d = nd - 2; d >= 0; --d) {  // odometer step over the outer axes
      for (int k = 0; k < N; ++k) off[k] += L.strides[k][d];
      if (++idx[d] < L.shape[d]) break;
      for (int k = 0; k < N; ++k) off[k] -= L.strides[k][d] * L.shape[d];
      idx[d] = 0;
    }
  }
}

/* Strides that read `t` broadcast to `shape` (0 along new and stretched axes). */
inline Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides s(shape.size(), 0);
  size_t lead = shape.size() - t.shape.size();
  for (size_t i = 0; i < t.shape.size(); ++i) {
    s[lead + i] = (t.shape[i] == 1 && shape[lead + i] != 1) ? 0 : t.strides[i];
  }
  return s;
}

/* Elements per task below which kernels stay on one thread. */
inline constexpr int64_t kParallelGrain = 1 << 15;

/* Runs row() over every row of the layout, in parallel for large work. */
template <int N, class Row>
void parallel_rows(const StridedLayout<N>& L, int64_t cost_per_element, Row&& row) {
  int64_t rows = L.rows();
  int64_t per_row = std::max<int64_t>(1, L.inner() * cost_per_element);
  int64_t grain_rows = std::max<int64_t>(1, kParallelGrain / per_row);
  if (rows == 1 && L.inner() * cost_per_element > kParallelGrain) {
    // One long row: split it into pieces instead.
    parallel_for(L.inner(), std::max<int64_t>(1, kParallelGrain / cost_per_element), [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off;
      std::array<int64_t, N> inner;
      for (int k = 0; k < N; ++k) {
        inner[k] = L.strides[k].back();
        off[k] = b * inner[k];
      }
      row(off, e - b, inner);
    });
    return;
  }
  parallel_for(rows, grain_rows, [&](int64_t b, int64_t e) { for_each_row<N>(L, b, e, row); });
}

}  // namespace kiln::detail
