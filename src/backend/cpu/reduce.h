// Reduction kernel machinery shared by the reduction translation units. The
// input is viewed as kept axes (one per output element) and reduced axes, each
// merged where the memory allows, so most reductions become either rows
// (contiguous reduced run) or columns (contiguous kept run).
#pragma once

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/fold.h"
#include "backend/common/math.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

using detail::Tensor;
using math::compute_t;

/* A zero-initialized array of n accumulators (std::vector<bool> has no data()). */
template <class A>
class Scratch {
 public:
  explicit Scratch(int64_t n) : p_(new A[static_cast<size_t>(n)]()) {}
  A* data() { return p_.get(); }
  A& operator[](int64_t i) { return p_[static_cast<size_t>(i)]; }

 private:
  std::unique_ptr<A[]> p_;
};

/* Elements of work per task below which kernels stay on one thread. */
inline constexpr int64_t kReduceGrain = fold::kGrain;

struct ReduceLayout {
  Shape kept;  // output axes in output order, merged; never empty
  Strides kept_x;  // their input strides
  Shape red;  // reduced axes, outer to inner (smallest stride last), merged; never empty
  Strides red_x;  // their input strides
  int64_t out_size = 1, red_size = 1;

  int64_t inner() const { return red.back(); }
  int64_t inner_stride() const { return red_x.back(); }
};

/* The layout of reducing `axes` (sorted) of x. */
ReduceLayout make_reduce_layout(const Tensor& x, const std::vector<int>& axes);

/* Walks a flat index over a shape, keeping the matching element offset. */
class Odometer {
 public:
  Odometer(const Shape& shape, const Strides& strides, int64_t flat) : shape_(shape), strides_(strides) {
    // Kernels build one per output row: avoid the heap for the usual few axes.
    if (shape.size() > small_.size()) big_.resize(shape.size());
    idx_ = shape.size() > small_.size() ? big_.data() : small_.data();
    for (size_t d = shape.size(); d-- > 0;) {
      idx_[d] = flat % shape[d];
      flat /= shape[d];
      offset_ += idx_[d] * strides[d];
    }
  }
  Odometer(const Odometer&) = delete;  // idx_ may point into small_
  Odometer& operator=(const Odometer&) = delete;
  int64_t offset() const { return offset_; }
  /* Advances over every axis but the last `skip` ones (which the caller walks itself). */
  void next(size_t skip = 0) {
    for (size_t d = shape_.size() - skip; d-- > 0;) {
      offset_ += strides_[d];
      if (++idx_[d] < shape_[d]) return;
      offset_ -= strides_[d] * shape_[d];
      idx_[d] = 0;
    }
  }

 private:
  const Shape& shape_;
  const Strides& strides_;
  std::array<int64_t, 8> small_;
  std::vector<int64_t> big_;
  int64_t* idx_;
  int64_t offset_ = 0;
};

/* Reduces n elements p[0], p[s], ... in fold::run's order. */
template <class F, class A, class T>
A reduce_run(const T* p, int64_t n, int64_t s) {
  if (s == 1) return fold::run<F, A>(n, [p](int64_t i) { return static_cast<A>(p[i]); });
  return fold::run<F, A>(n, [p, s](int64_t i) { return static_cast<A>(p[i * s]); });
}

/* Reduces flat reduced indices [r0, r1) for the output whose first input element is `base`. */
template <class F, class A, class T>
A reduce_flat(const T* base, const ReduceLayout& L, int64_t r0, int64_t r1) {
  const int64_t n = L.inner(), s = L.inner_stride();
  return fold::range<F, A>(r0, r1, [&](int64_t a, int64_t b) {
    if (L.red.size() == 1) return reduce_run<F, A>(base + a * s, b - a, s);
    Odometer od(L.red, L.red_x, a - a % n);
    A acc = F::template init<A>();
    int64_t r = a, j = a % n;
    while (r < b) {
      int64_t len = std::min(n - j, b - r);
      acc = F{}(acc, reduce_run<F, A>(base + od.offset() + j * s, len, s));
      r += len;
      j = 0;
      od.next(1);
    }
    return acc;
  });
}

/* Column form: dst[j] (j < lanes) reduces base[j + r-th reduced offset] over r in [r0, r1).
   `scratch` holds room for the pairwise levels. */
template <class F, class A, class T>
void reduce_columns(const T* base, const ReduceLayout& L, int64_t r0, int64_t r1, int64_t lanes, A* dst, A* scratch) {
  if constexpr (fold::pairwise<F, A>) {
    if (r1 - r0 > 128) {
      int64_t mid = r0 + (r1 - r0) / 2;
      reduce_columns<F, A>(base, L, r0, mid, lanes, dst, scratch + lanes);
      reduce_columns<F, A>(base, L, mid, r1, lanes, scratch, scratch + lanes);
      for (int64_t j = 0; j < lanes; ++j) dst[j] = F{}(dst[j], scratch[j]);
      return;
    }
  }
  for (int64_t j = 0; j < lanes; ++j) dst[j] = F::template init<A>();
  Odometer od(L.red, L.red_x, r0);
  for (int64_t r = r0; r < r1; ++r) {
    const T* p = base + od.offset();
    for (int64_t j = 0; j < lanes; ++j) dst[j] = F{}(dst[j], static_cast<A>(p[j]));
    od.next();
  }
}

/* Partial results acc[o - o0] for outputs [o0, o1) over reduced indices [r0, r1). */
/* Column form: the reduced axes are strided while neighbouring outputs are adjacent in memory. */
inline bool column_form(const ReduceLayout& L) {
  return L.inner_stride() != 1 && L.kept_x.back() == 1 && L.kept.back() >= 8;
}

template <class F, class A, class T>
void reduce_block(const T* x, const ReduceLayout& L, int64_t o0, int64_t o1, int64_t r0, int64_t r1, A* acc) {
  const int64_t lanes_axis = L.kept.back();
  if (!column_form(L)) {
    Odometer od(L.kept, L.kept_x, o0);
    for (int64_t o = o0; o < o1; ++o, od.next()) acc[o - o0] = reduce_flat<F, A>(x + od.offset(), L, r0, r1);
    return;
  }
  constexpr int64_t kTile = 512;
  Scratch<A> scratch(fold::pairwise<F, A> ? kTile * 64 : 0);
  for (int64_t o = o0; o < o1;) {
    int64_t j = o % lanes_axis;
    int64_t n = std::min({o1 - o, lanes_axis - j, kTile});
    Odometer od(L.kept, L.kept_x, o);
    reduce_columns<F, A>(x + od.offset(), L, r0, r1, n, acc + (o - o0), scratch.data());
    o += n;
  }
}

/* Outputs a task takes at least: columns split across tasks only in wide strips. */
inline int64_t min_outputs(const ReduceLayout& L) { return column_form(L) ? 64 : 1; }

/* The length of the pieces of every output's reduced range (the whole range: one piece). */
inline int64_t piece_length(const ReduceLayout& L) {
  return fold::piece_length(L.out_size, L.red_size, min_outputs(L));
}

/* Reduces x into y (allocated here) over L, in parallel when the work is large. */
template <class F, class T>
void reduce_typed(const Tensor& xt, Tensor& yt, const ReduceLayout& L) {
  using A = compute_t<T>;
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  const int64_t outs = L.out_size, reds = L.red_size;
  if (reds == 0) {
    for (int64_t o = 0; o < outs; ++o) y[o] = static_cast<T>(F::template init<A>());
    return;
  }
  const int64_t piece = piece_length(L);
  if (piece >= reds) {
    const int64_t min_outs = min_outputs(L);
    // Enough outputs (or little work): each task owns whole outputs.
    int64_t grain = std::max<int64_t>(min_outs, kReduceGrain / reds);
    detail::parallel_for(outs, grain, [&](int64_t b, int64_t e) {
      Scratch<A> acc(e - b);
      reduce_block<F, A>(x, L, b, e, 0, reds, acc.data());
      for (int64_t o = b; o < e; ++o) y[o] = static_cast<T>(acc[o - b]);
    });
    return;
  }
  // Few long outputs: split the reduced range into a shape-determined number of
  // pieces (so results do not depend on the thread count), then combine.
  int64_t pieces = (reds + piece - 1) / piece;
  Scratch<A> part(pieces * outs);
  detail::parallel_for(pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      reduce_block<F, A>(x, L, 0, outs, p * piece, std::min(reds, (p + 1) * piece), part.data() + p * outs);
    }
  });
  for (int64_t o = 0; o < outs; ++o) {
    A acc = part[o];
    for (int64_t p = 1; p < pieces; ++p) acc = F{}(acc, part[p * outs + o]);
    y[o] = static_cast<T>(acc);
  }
}

}  // namespace kiln::cpu
