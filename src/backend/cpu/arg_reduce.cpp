// CPU kernels for argmax and argmin: the first index of the extreme value, NaN
// counting as the extreme.
#include "backend/cpu/reduce.h"
#include "ops/reduce.h"

namespace kiln {
namespace cpu {

namespace {

// Strictly better, so the earliest of equal values wins; the first NaN beats all.
template <bool IsMax, class A>
inline bool better(A v, A best) {
  if constexpr (math::is_float_v<A>) {
    if (v != v) return best == best;
  }
  if constexpr (IsMax)
    return v > best;
  else
    return v < best;
}

/* Best value and its index over [r0, r1) of the axis for outputs [o0, o1). */
template <bool IsMax, class A, class T>
void arg_block(const T* x, const ReduceLayout& L, int64_t o0, int64_t o1, int64_t r0, int64_t r1, A* val,
               int64_t* idx) {
  using F = std::conditional_t<IsMax, math::Max, math::Min>;
  const int64_t s = L.inner_stride();
  const int64_t lanes_axis = L.kept.back();
  if (column_form(L)) {
    // Columns: the axis is strided, neighbouring outputs are adjacent in memory.
    for (int64_t o = o0; o < o1;) {
      int64_t n = std::min(o1 - o, lanes_axis - o % lanes_axis);
      Odometer od(L.kept, L.kept_x, o);
      const T* base = x + od.offset();
      A* v = val + (o - o0);
      int64_t* k = idx + (o - o0);
      for (int64_t j = 0; j < n; ++j) v[j] = static_cast<A>(base[r0 * s + j]), k[j] = r0;
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const T* p = base + r * s;
        for (int64_t j = 0; j < n; ++j) {
          A e = static_cast<A>(p[j]);
          if (better<IsMax>(e, v[j])) v[j] = e, k[j] = r;
        }
      }
      o += n;
    }
    return;
  }
  // Rows: find the extreme with a vectorizable reduction, then its first position.
  Odometer od(L.kept, L.kept_x, o0);
  for (int64_t o = o0; o < o1; ++o, od.next()) {
    const T* p = x + od.offset();
    A m = reduce_run<F, A>(p + r0 * s, r1 - r0, s);
    int64_t r = r0;
    if constexpr (math::is_float_v<A>) {
      if (m != m) {
        while (!(static_cast<A>(p[r * s]) != static_cast<A>(p[r * s]))) ++r;
        val[o - o0] = m, idx[o - o0] = r;
        continue;
      }
    }
    while (static_cast<A>(p[r * s]) != m) ++r;
    val[o - o0] = m, idx[o - o0] = r;
  }
}

template <bool IsMax, class T>
void arg_typed(const Tensor& xt, Tensor& yt, const ReduceLayout& L) {
  using A = compute_t<T>;
  const T* x = xt.data<T>();
  int32_t* y = yt.data<int32_t>();
  const int64_t outs = L.out_size, len = L.red_size;
  const int64_t piece = piece_length(L);
  if (piece >= len) {
    const int64_t min_outs = min_outputs(L);
    int64_t grain = std::max<int64_t>(min_outs, kReduceGrain / len);
    detail::parallel_for(outs, grain, [&](int64_t b, int64_t e) {
      Scratch<A> val(e - b);
      std::vector<int64_t> idx(static_cast<size_t>(e - b));
      arg_block<IsMax, A>(x, L, b, e, 0, len, val.data(), idx.data());
      for (int64_t o = b; o < e; ++o) y[o] = static_cast<int32_t>(idx[static_cast<size_t>(o - b)]);
    });
    return;
  }
  // Few long axes: search pieces in parallel, then keep the earliest best.
  int64_t pieces = (len + piece - 1) / piece;
  Scratch<A> val(pieces * outs);
  std::vector<int64_t> idx(static_cast<size_t>(pieces * outs));
  detail::parallel_for(pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      size_t at = static_cast<size_t>(p * outs);
      arg_block<IsMax, A>(x, L, 0, outs, p * piece, std::min(len, (p + 1) * piece), val.data() + at, idx.data() + at);
    }
  });
  for (int64_t o = 0; o < outs; ++o) {
    A best = val[o];
    int64_t k = idx[static_cast<size_t>(o)];
    for (int64_t p = 1; p < pieces; ++p) {
      int64_t at = p * outs + o;
      if (better<IsMax>(val[at], best)) best = val[at], k = idx[static_cast<size_t>(at)];
    }
    y[o] = static_cast<int32_t>(k);
  }
}

template <bool IsMax>
void run_arg(const Tensor& x, Tensor& y, int axis) {
  y.allocate();
  if (y.size() == 0) return;
  ReduceLayout L = make_reduce_layout(x, {axis});
  detail::dispatch_dtype(x.dtype, [&](auto t) { arg_typed<IsMax, decltype(t)>(x, y, L); });
}

}  // namespace
}  // namespace cpu

void ArgMax::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_arg<true>(in[0], out[0], axis_);
}

void ArgMin::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_arg<false>(in[0], out[0], axis_);
}

}  // namespace kiln
