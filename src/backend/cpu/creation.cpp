// CPU kernels for the creation primitives.
#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include <algorithm>

#include "core/thread_pool.h"
#include "ops/creation.h"

namespace kiln {

using detail::Tensor;

void Full::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  out[0].allocate();
  detail::dispatch_dtype(out[0].dtype, [&](auto t) {
    using T = decltype(t);
    T v = *in[0].data<T>();
    T* y = out[0].data<T>();
    detail::parallel_for(out[0].size(), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = v;
    });
  });
}

void Arange::eval_cpu(const std::vector<Tensor>&, std::vector<Tensor>& out) {
  out[0].allocate();
  detail::dispatch_dtype(out[0].dtype, [&](auto t) {
    using T = decltype(t);
    T* y = out[0].data<T>();
    detail::parallel_for(out[0].size(), 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = math::convert<T>(start_ + static_cast<double>(i) * step_);
    });
    if (last_ && n_ > 0) y[n_ - 1] = math::convert<T>(*last_);
  });
}

double AxisSize::count(const Shape& in) const {
  int64_t n = 1;
  for (int ax : axes_) n *= in[static_cast<size_t>(ax)];
  return static_cast<double>(std::max<int64_t>(0, n - ddof_));
}

void AxisSize::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  out[0].allocate();
  double c = count(in[0].shape);
  detail::dispatch_dtype(out[0].dtype, [&](auto t) {
    using T = decltype(t);
    *out[0].data<T>() = math::convert<T>(c);
  });
}

}  // namespace kiln
