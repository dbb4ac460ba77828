// CPU kernels for the reduction primitives (sum, prod, max, min, all, any).
#include "backend/cpu/reduce.h"

#include <numeric>

#include "ops/reduce.h"

namespace kiln {
namespace cpu {

namespace {
// Appends an axis, merging it into the previous one when memory allows.
void push_axis(Shape& shape, Strides& strides, int64_t n, int64_t s) {
  if (!shape.empty() && strides.back() == s * n) {
    shape.back() *= n;
    strides.back() = s;
  } else {
    shape.push_back(n);
    strides.push_back(s);
  }
}
}  // namespace

ReduceLayout make_reduce_layout(const Tensor& x, const std::vector<int>& axes) {
  ReduceLayout L;
  std::vector<bool> reduced(x.shape.size(), false);
  for (int ax : axes) reduced[static_cast<size_t>(ax)] = true;
  std::vector<size_t> red_axes;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    L.red_size *= reduced[i] ? x.shape[i] : 1;
    L.out_size *= reduced[i] ? 1 : x.shape[i];
    if (x.shape[i] == 1) continue;  // never moves the index
    if (reduced[i])
      red_axes.push_back(i);
    else
      push_axis(L.kept, L.kept_x, x.shape[i], x.strides[i]);
  }
  // Reduction order is free: walk the largest strides outermost.
  std::stable_sort(red_axes.begin(), red_axes.end(),
                   [&](size_t a, size_t b) { return std::abs(x.strides[a]) > std::abs(x.strides[b]); });
  for (size_t i : red_axes) push_axis(L.red, L.red_x, x.shape[i], x.strides[i]);
  if (L.kept.empty()) L.kept = {1}, L.kept_x = {0};
  if (L.red.empty()) L.red = {1}, L.red_x = {1};
  return L;
}

template <class F>
void run_reduce(const Tensor& x, Tensor& y, const std::vector<int>& axes) {
  y.allocate();
  if (y.size() == 0) return;
  ReduceLayout L = make_reduce_layout(x, axes);
  detail::dispatch_dtype(x.dtype, [&](auto t) {
    using T = decltype(t);
    // All/Any only ever see bool (the front end converts), so skip the other types.
    if constexpr ((std::is_same_v<F, math::All> || std::is_same_v<F, math::Any>)&&!std::is_same_v<T, bool>) {
      fail(op_name(op_kind_of<F>::value), "unsupported dtype ", dtype_name(x.dtype));
    } else {
      reduce_typed<F, T>(x, y, L);
    }
  });
}

}  // namespace cpu

template <class F>
void Reduce<F>::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  cpu::run_reduce<F>(in[0], out[0], axes_);
}

#define KILN_REDUCE(F, n) \
  template void Reduce<math::F>::eval_cpu(const std::vector<detail::Tensor>&, std::vector<detail::Tensor>&);
#include "ops/op_table.def"

}  // namespace kiln
