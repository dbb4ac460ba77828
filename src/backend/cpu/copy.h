// Strided copy with dtype conversion, shared by astype, copies and host transfers.
#pragma once

#include <algorithm>

#include "backend/cpu/strided.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace kiln::detail {

/* Copies src into dst elementwise (same shape, any strides on both), converting dtypes. */
void copy_convert(const Tensor& src, Tensor& dst);

// A copy whose source runs down the destination's columns (a transpose, batched or not),
// in blocks of 32 x 32 so each source line fetched serves 32 destination rows; row by row,
// a line was left before the next row came back to it. False when the layout is not of
// that form.
template <class S, class D, class Convert>
bool copy_blocks(const StridedLayout<2>& L, const S* sp, D* dp, const Convert& convert) {
  constexpr int64_t kB = 32;
  const std::optional<ColumnRuns> runs = column_runs(L, kB);
  if (!runs) return false;
  const int64_t batch = runs->batch, R = runs->rows, C = runs->cols, sb = runs->src_batch, sc = runs->src_col;
  const int64_t db = runs->dst_batch, dr = runs->dst_row;
  const int64_t row_blocks = (R + kB - 1) / kB;
  parallel_for(batch * row_blocks, std::max<int64_t>(1, kParallelGrain / (kB * C)), [&](int64_t b0, int64_t b1) {
    for (int64_t w = b0; w < b1; ++w) {
      const int64_t b = w / row_blocks, r0 = w % row_blocks * kB, r1 = std::min(R, r0 + kB);
      for (int64_t c0 = 0; c0 < C; c0 += kB) {
        const int64_t c1 = std::min(C, c0 + kB);
        for (int64_t r = r0; r < r1; ++r) {
          const S* a = sp + b * sb + r;
          D* o = dp + b * db + r * dr;
          for (int64_t c = c0; c < c1; ++c) o[c] = convert(a[c * sc]);
        }
      }
    }
  });
  return true;
}

}  // namespace kiln::detail
