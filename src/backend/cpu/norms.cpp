// CPU kernels for rms_norm and layer_norm: one task per block of rows, each row
// read in a pass per statistic and once more to write, sums in float32 (float64
// for float64 inputs) folded in kiln's lane order (backend/common/fold.h).
#include <cmath>

#include "backend/common/fold.h"
#include "backend/cpu/nn_util.h"
#include "core/thread_pool.h"
#include "ops/nn.h"

namespace kiln {

using detail::Tensor;

namespace {

/* Runs row<T, A>(x, y, n) over the rows of the last axis (x row-major; A the accumulator type). */
template <class Row>
void for_each_row(const Tensor& in, Tensor& out, Row&& row) {
  out.allocate();
  const Tensor x = detail::row_major(in);
  const int64_t n = x.shape.back(), rows = n ? x.size() / n : 0;
  if (rows == 0) return;
  detail::dispatch_float(x.dtype, [&](auto z) {
    using T = decltype(z);
    using A = math::compute_t<T>;
    const T* xp = x.data<T>();
    T* yp = out.data<T>();
    detail::parallel_for(rows, std::max<int64_t>(1, fold::kGrain / n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) row.template operator()<T, A>(xp + r * n, yp + r * n, n);
    });
  });
}

/* Input `at` as a vector of A, or empty when the op has no such input. */
template <class A>
std::vector<A> param(const std::vector<Tensor>& in, size_t at, bool present) {
  return present ? detail::elements_as<A>(in[at]) : std::vector<A>{};
}

}  // namespace

void RmsNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const bool f64 = in[0].dtype == float64;
  const std::vector<float> wf = param<float>(in, 1, has_weight_ && !f64);
  const std::vector<double> wd = param<double>(in, 1, has_weight_ && f64);
  const float eps = eps_;
  for_each_row(in[0], out[0], [&]<class T, class A>(const T* x, T* y, int64_t n) {
    const A* w = nullptr;
    if constexpr (std::is_same_v<A, double>)
      w = wd.empty() ? nullptr : wd.data();
    else
      w = wf.empty() ? nullptr : wf.data();
    const A ss = fold::range<math::Sum, A>(0, n, [&](int64_t a, int64_t b) {
      return fold::run<math::Sum, A>(b - a, [&](int64_t i) {
        const A v = static_cast<A>(x[a + i]);
        return v * v;
      });
    });
    const A r = A(1) / std::sqrt(ss / static_cast<A>(n) + static_cast<A>(eps));
    for (int64_t i = 0; i < n; ++i) {
      const A v = static_cast<A>(x[i]) * r;
      y[i] = static_cast<T>(w ? v * w[i] : v);
    }
  });
}

void LayerNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const bool f64 = in[0].dtype == float64;
  const size_t bias_at = has_weight_ ? 2 : 1;
  const auto pf = std::pair{param<float>(in, 1, has_weight_ && !f64), param<float>(in, bias_at, has_bias_ && !f64)};
  const auto pd = std::pair{param<double>(in, 1, has_weight_ && f64), param<double>(in, bias_at, has_bias_ && f64)};
  const float eps = eps_;
  for_each_row(in[0], out[0], [&]<class T, class A>(const T* x, T* y, int64_t n) {
    const auto& p = [&]() -> const auto& {
      if constexpr (std::is_same_v<A, double>)
        return pd;
      else
        return pf;
    }
    ();
    const A* w = p.first.empty() ? nullptr : p.first.data();
    const A* b = p.second.empty() ? nullptr : p.second.data();
    auto sum = [&](auto&& term) {
      return fold::range<math::Sum, A>(0, n, [&](int64_t a, int64_t e) {
        return fold::run<math::Sum, A>(e - a, [&](int64_t i) { return term(static_cast<A>(x[a + i])); });
      });
    };
    const A mean = sum([](A v) { return v; }) / static_cast<A>(n);
    const A var = sum([&](A v) { return (v - mean) * (v - mean); }) / static_cast<A>(n);
    const A r = A(1) / std::sqrt(var + static_cast<A>(eps));
    for (int64_t i = 0; i < n; ++i) {
      A v = (static_cast<A>(x[i]) - mean) * r;
      if (w) v = v * w[i];
      if (b) v = v + b[i];
      y[i] = static_cast<T>(v);
    }
  });
}

}  // namespace kiln
