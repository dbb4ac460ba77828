// The order in which kiln folds a row of values into a reduction, shared by the eager CPU
// kernels (backend/cpu/reduce.h) and the generated row kernels, so that compiled results
// equal eager ones bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/common/math.h"

namespace kiln::fold {

/* Elements of work per task below which reductions stay on one thread. */
inline constexpr int64_t kGrain = 1 << 15;

/* Float sums split pairwise above this many elements, so rounding error grows with log(n). */
inline constexpr int64_t kPairwiseLeaf = 2048;
template <class F, class A>
inline constexpr bool pairwise = std::is_same_v<F, math::Sum>&& math::is_float_v<A>;

/* get(0) ... get(n - 1) in 16 independent lanes, the rest in one more, folded as a tree. */
template <class F, class A, class Get>
inline A run(int64_t n, Get&& get) {
  constexpr int W = 16;
  A lane[W];
  for (int l = 0; l < W; ++l) lane[l] = F::template init<A>();
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    for (int l = 0; l < W; ++l) lane[l] = F{}(lane[l], get(i + l));
  }
  A acc = F::template init<A>();
  for (; i < n; ++i) acc = F{}(acc, get(i));
  for (int w = W / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) lane[l] = F{}(lane[l], lane[l + w]);
  }
  return F{}(lane[0], acc);
}

/* [r0, r1) split pairwise (float sums) down to leaf(r0, r1) calls. */
template <class F, class A, class Leaf>
inline A range(int64_t r0, int64_t r1, Leaf&& leaf) {
  if constexpr (pairwise<F, A>) {
    if (r1 - r0 > kPairwiseLeaf) {
      const int64_t mid = r0 + ((r1 - r0) / 2 + 15) / 16 * 16;
      return F{}(range<F, A>(r0, mid, leaf), range<F, A>(mid, r1, leaf));
    }
  }
  return leaf(r0, r1);
}

/* The length of the pieces each of `outs` outputs' `len` values are cut into (folded in
   order after), or `len` for one piece: whole outputs when the work is small or there are
   enough outputs (64, or 64 strips of `min_outs`) to keep 16 threads busy. The shape alone
   decides, never the thread count, so a sum rounds the same on every machine. */
inline int64_t piece_length(int64_t outs, int64_t len, int64_t min_outs = 1) {
  if (outs * len <= 2 * kGrain || outs >= 64 * min_outs) return len;
  return std::min(len, std::max(kGrain / outs, (len + 63) / 64));
}

/* One of `rows` rows of n values, as the eager reduction of a row-major (rows, n) array:
   leaf(a, b) folds values [a, b) with run(). */
template <class F, class A, class Leaf>
inline A row(int64_t rows, int64_t n, Leaf&& leaf) {
  const int64_t piece = piece_length(rows, n);
  A acc = range<F, A>(0, piece, leaf);
  for (int64_t p = piece; p < n; p += piece) acc = F{}(acc, range<F, A>(p, std::min(n, p + piece), leaf));
  return acc;
}

}  // namespace kiln::fold
