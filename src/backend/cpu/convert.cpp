// CPU kernels for dtype conversion (astype, host copies) and where.
#include "backend/common/dispatch.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/strided.h"
#include "ops/elementwise.h"

namespace kiln {

using detail::Tensor;

namespace detail {
void copy_convert(const Tensor& src, Tensor& dst) {
  if (dst.size() == 0) return;
  dispatch_dtype(src.dtype, [&](auto s) {
    dispatch_dtype(dst.dtype, [&](auto d) {
      using S = decltype(s);
      using D = decltype(d);
      const S* sp = src.data<S>();
      D* dp = dst.data<D>();
      auto L = merge_axes<2>(dst.shape, {&dst.strides, &src.strides});
      parallel_rows<2>(L, 1, [&](auto off, int64_t n, auto st) {
        const S* a = sp + off[1];
        D* o = dp + off[0];
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = math::convert<D>(a[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * st[0]] = math::convert<D>(a[i * st[1]]);
        }
      });
    });
  });
}
}  // namespace detail

void AsType::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  out[0].allocate();
  detail::copy_convert(in[0], out[0]);
}

void Where::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  y.allocate();
  if (y.size() == 0) return;
  const bool* cp = in[0].data<bool>();
  detail::dispatch_dtype(y.dtype, [&](auto t) {
    using T = decltype(t);
    const T* ap = in[1].data<T>();
    const T* bp = in[2].data<T>();
    T* yp = y.data<T>();
    Strides cs = detail::broadcast_strides(in[0], y.shape), as = detail::broadcast_strides(in[1], y.shape),
            bs = detail::broadcast_strides(in[2], y.shape);
    auto L = detail::merge_axes<4>(y.shape, {&y.strides, &cs, &as, &bs});
    detail::parallel_rows<4>(L, 1, [&](auto off, int64_t n, auto st) {
      for (int64_t i = 0; i < n; ++i) {
        yp[off[0] + i] = cp[off[1] + i * st[1]] ? ap[off[2] + i * st[2]] : bp[off[3] + i * st[3]];
      }
    });
  });
}

}  // namespace kiln
