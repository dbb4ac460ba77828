// Iteration over N operands that share a shape but have their own strides.
// Axes are merged where every operand is contiguous across them, and the work
// is handed out as innermost rows, so the inner loop is a plain strided loop
// the compiler can vectorize (stride 1 or 0 is the common case).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "core/checked.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace kiln::detail {

template <int N>
struct StridedLayout {
  Shape shape;  // merged axes; never empty (a 0-d shape becomes {1})
  std::array<Strides, N> strides;

  int64_t inner() const { return shape.back(); }
  int64_t rows() const { return shape_size(shape) / (shape.back() ? shape.back() : 1); }
};

/* Drops size-1 axes of `shape` and merges neighbours that every operand walks
   contiguously, in place (an empty shape stays empty). */
inline void merge_axes_in_place(Shape& shape, std::span<Strides> strides) {
  size_t kept = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;  // size-1 axes never move the index
    bool merge = kept > 0;
    for (const Strides& s : strides) merge = merge && s[kept - 1] == s[i] * shape[i];
    const size_t at = merge ? kept - 1 : kept++;
    shape[at] = merge ? shape[at] * shape[i] : shape[i];
    for (Strides& s : strides) s[at] = s[i];
  }
  shape.resize(kept);
  for (Strides& s : strides) s.resize(kept);
}

template <int N>
StridedLayout<N> merge_axes(const Shape& shape, const std::array<const Strides*, N>& strides) {
  StridedLayout<N> out{shape, {}};
  for (int k = 0; k < N; ++k) out.strides[k] = *strides[k];
  merge_axes_in_place(out.shape, out.strides);
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (int k = 0; k < N; ++k) out.strides[k].push_back(1);
  }
  return out;
}

/* A copy whose source runs down the destination's columns (a transpose, batched or not):
   element (b, r, c) of the merged axes is at b * dst_batch + r * dst_row + c in the
   destination and b * src_batch + r + c * src_col in the source. */
struct ColumnRuns {
  int64_t batch = 1, rows = 0, cols = 0, dst_batch = 0, dst_row = 0, src_batch = 0, src_col = 0;
};

/* The column runs of a (destination, source) layout with at least `min_side` rows and
   columns, or nothing when the copy is not of that form. */
inline std::optional<ColumnRuns> column_runs(const StridedLayout<2>& L, int64_t min_side) {
  const size_t nd = L.shape.size();
  if (nd < 2 || nd > 3) return std::nullopt;
  const Strides &d = L.strides[0], &s = L.strides[1];
  const int64_t rows = L.shape[nd - 2], cols = L.shape[nd - 1];
  if (d[nd - 1] != 1 || s[nd - 2] != 1 || s[nd - 1] == 1 || rows < min_side || cols < min_side) return std::nullopt;
  const bool batched = nd == 3;
  return ColumnRuns{batched ? L.shape[0] : 1, rows, cols, batched ? d[0] : 0, d[nd - 2], batched ? s[0] : 0, s[nd - 1]};
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

/* Side of the blocks a layout with an operand running down its columns is walked in. */
inline constexpr int64_t kBlock = 32;

/* Whether some operand (strides: one Strides each, over the merged `shape`) runs down the
   columns (stride 1 on the axis before the last, a stride other than 0 or 1 on the last: a
   transpose), both at least kBlock long. Row by row, that operand's lines would be left
   before the next row came back to them. */
template <class OperandStrides>
bool runs_down_columns(const Shape& shape, const OperandStrides& strides) {
  const size_t nd = shape.size();
  if (nd < 2 || shape[nd - 2] < kBlock || shape[nd - 1] < kBlock) return false;
  for (const Strides& s : strides) {
    if (s[nd - 2] == 1 && s[nd - 1] != 0 && s[nd - 1] != 1) return true;
  }
  return false;
}

/* The blocked walk of `matrices` R x C matrices: blocks of kBlock rows and BlockCols
   columns, a block's rows in turn, so each line an operand reads down the columns serves
   kBlock rows while it is in the cache; in parallel over blocks of rows, `grain` of them a
   task at least. Each task makes its state with start() and calls piece(state, m, r, c0, n)
   for columns [c0, c0 + n) of row r of matrix m (a piece finds its offsets itself: kept in
   the task's state, they made the eager transpose_add 40% slower). */
template <int64_t BlockCols, class Start, class Piece>
void parallel_row_blocks(int64_t matrices, int64_t R, int64_t C, int64_t grain, Start&& start, Piece&& piece) {
  const int64_t row_blocks = ceil_div(R, kBlock);
  parallel_for(matrices * row_blocks, grain, [&](int64_t w0, int64_t w1) {
    auto state = start();
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t m = w / row_blocks, r0 = w % row_blocks * kBlock, r1 = std::min(R, r0 + kBlock);
      for (int64_t c0 = 0; c0 < C; c0 += BlockCols) {
        for (int64_t r = r0; r < r1; ++r) piece(state, m, r, c0, std::min(BlockCols, C - c0));
      }
    }
  });
}

/* Calls row() over the layout in kBlock x kBlock blocks of its last two axes (pieces of
   kBlock elements); see parallel_row_blocks. */
template <int N, class Row>
void parallel_blocks(const StridedLayout<N>& L, int64_t cost_per_element, Row&& row) {
  const int nd = static_cast<int>(L.shape.size());
  const int64_t R = L.shape[nd - 2], C = L.shape[nd - 1];
  std::array<int64_t, N> inner;
  for (int k = 0; k < N; ++k) inner[k] = L.strides[k][nd - 1];
  const int64_t grain = std::max<int64_t>(
      1, kParallelGrain / saturating_mul(saturating_mul(kBlock, C), std::max<int64_t>(cost_per_element, 1)));
  parallel_row_blocks<kBlock>(
      shape_size(L.shape) / (R * C), R, C, grain, [] { return 0; },
      [&](int, int64_t m, int64_t r, int64_t c0, int64_t n) {
        std::array<int64_t, N> off;
        for (int k = 0; k < N; ++k) off[k] = r * L.strides[k][nd - 2] + c0 * inner[k];
        for (int64_t d = nd - 3, rem = m; d >= 0; --d) {  // the outer axes' index
          const int64_t i = rem % L.shape[d];
          rem /= L.shape[d];
          for (int k = 0; k < N; ++k) off[k] += i * L.strides[k][d];
        }
        row(off, n, inner);
      });
}

/* Runs row() over every row of the layout, in parallel for large work; in blocks where an
   operand runs down the columns. */
template <int N, class Row>
void parallel_rows(const StridedLayout<N>& L, int64_t cost_per_element, Row&& row) {
  if (runs_down_columns(L.shape, L.strides)) return parallel_blocks(L, cost_per_element, row);
  int64_t rows = L.rows();
  int64_t per_row = std::max<int64_t>(1, saturating_mul(L.inner(), cost_per_element));  // broadcast views can be huge
  int64_t grain_rows = std::max<int64_t>(1, kParallelGrain / per_row);
  if (rows == 1 && per_row > kParallelGrain) {
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
