// Elementwise kernel templates shared by the unary, binary and comparison
// translation units (split so the many instantiations compile in parallel).
#pragma once

#include <tuple>

#include "backend/common/dispatch.h"
#include "backend/cpu/strided.h"
#include "ops/elementwise.h"

namespace kiln::cpu {

using detail::Tensor;
using math::compute_t;

// Cost weights keep cheap ops (add) from fanning out on small arrays.
constexpr int64_t kCheapOp = 1;
constexpr int64_t kMathOp = 8;

// From the cost column of the op registry.
template <class F>
int64_t cost_of() {
  return op_traits(op_kind_of<F>::value).cost == OpCost::math ? kMathOp : kCheapOp;
}

// The stored type of F's result on T inputs: bool for predicates, else T itself.
template <class F, class... T>
struct result_of {
  using type = std::tuple_element_t<0, std::tuple<T...>>;
};
template <class F, class... T>
requires std::is_invocable_v<F, compute_t<T>...>
struct result_of<F, T...> {
  using R = std::invoke_result_t<F, compute_t<T>...>;
  using type = std::conditional_t<std::is_same_v<R, bool>, bool, std::tuple_element_t<0, std::tuple<T...>>>;
};
template <class F, class... T>
using result_t = typename result_of<F, T...>::type;

template <class F, class T, class Out>
void unary_typed(const Tensor& x, Tensor& y) {
  using C = compute_t<T>;
  if constexpr (!std::is_invocable_v<F, C>) {
    fail(op_name(op_kind_of<F>::value), "unsupported dtype ", dtype_name(x.dtype));
  } else {
    const T* xp = x.data<T>();
    Out* yp = y.data<Out>();
    Strides xs = detail::broadcast_strides(x, y.shape);
    auto L = detail::merge_axes<2>(y.shape, {&y.strides, &xs});
    detail::parallel_rows<2>(L, cost_of<F>(), [&](auto off, int64_t n, auto st) {
      const T* a = xp + off[1];
      Out* o = yp + off[0];
      if (st[1] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(F{}(static_cast<C>(a[i])));
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(F{}(static_cast<C>(a[i * st[1]])));
      }
    });
  }
}

template <class F, class T, class Out>
void binary_typed(const Tensor& a, const Tensor& b, Tensor& y) {
  using C = compute_t<T>;
  if constexpr (!std::is_invocable_v<F, C, C>) {
    fail(op_name(op_kind_of<F>::value), "unsupported dtype ", dtype_name(a.dtype));
  } else {
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    Out* yp = y.data<Out>();
    // Inputs broadcast here rather than through views, so shapeless replays re-broadcast.
    Strides as = detail::broadcast_strides(a, y.shape), bs = detail::broadcast_strides(b, y.shape);
    auto L = detail::merge_axes<3>(y.shape, {&y.strides, &as, &bs});
    detail::parallel_rows<3>(L, cost_of<F>(), [&](auto off, int64_t n, auto st) {
      const T* x0 = ap + off[1];
      const T* x1 = bp + off[2];
      Out* o = yp + off[0];
      F f;
      // The stride patterns of contiguous and scalar-broadcast operands get their own loops.
      if (st[1] == 1 && st[2] == 1) {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<C>(x0[i]), static_cast<C>(x1[i])));
      } else if (st[1] == 1 && st[2] == 0) {
        C s = static_cast<C>(x1[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<C>(x0[i]), s));
      } else if (st[1] == 0 && st[2] == 1) {
        C s = static_cast<C>(x0[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(s, static_cast<C>(x1[i])));
      } else {
        for (int64_t i = 0; i < n; ++i)
          o[i] = static_cast<Out>(f(static_cast<C>(x0[i * st[1]]), static_cast<C>(x1[i * st[2]])));
      }
    });
  }
}

// Types a kernel is instantiated for: float-only functors skip the integers.
template <class F, class T>
constexpr bool instantiate_for() {
  if constexpr (math::FloatsOnly<F>) return math::is_float_v<compute_t<T>>;
  return true;
}

template <class F>
void run_unary(const Tensor& x, Tensor& y) {
  y.allocate();
  if (y.size() == 0) return;
  detail::dispatch_dtype(x.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (instantiate_for<F, T>())
      unary_typed<F, T, result_t<F, T>>(x, y);
    else
      fail(op_name(op_kind_of<F>::value), "unsupported dtype ", dtype_name(x.dtype));
  });
}

template <class F>
void run_binary(const Tensor& a, const Tensor& b, Tensor& y) {
  y.allocate();
  if (y.size() == 0) return;
  detail::dispatch_dtype(a.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (instantiate_for<F, T>())
      binary_typed<F, T, result_t<F, T, T>>(a, b, y);
    else
      fail(op_name(op_kind_of<F>::value), "unsupported dtype ", dtype_name(a.dtype));
  });
}

}  // namespace kiln::cpu
