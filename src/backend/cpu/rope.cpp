// CPU kernel for rope: a table of cos/sin per (batch offset, position, frequency),
// computed in float64 once per call and shared by every head, then one pass over x.
#include <cmath>

#include "backend/cpu/nn_util.h"
#include "core/thread_pool.h"
#include "ops/nn.h"

namespace kiln {

using detail::Tensor;

void Rope::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  Tensor& y = out[0];
  y.allocate();
  const Tensor x = detail::row_major(in[0]);
  const int64_t d = x.shape.back(), len = x.shape[x.shape.size() - 2];
  const int64_t rows = d ? x.size() / d : 0;
  if (rows == 0 || len == 0) return;
  const int64_t half = dims_ / 2;
  const std::vector<int32_t> offsets = detail::elements_as<int32_t>(in[1]);
  // Rows of x per entry of offset: all of them for one offset, else one batch row's.
  const int64_t rows_per_offset = rows / static_cast<int64_t>(offsets.size());
  std::vector<double> inv_freq(static_cast<size_t>(half));
  if (has_freqs_) {
    std::vector<float> f = detail::to_floats(in[2]);
    for (int64_t i = 0; i < half; ++i) inv_freq[i] = 1.0 / f[static_cast<size_t>(i)];
  } else {
    for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(static_cast<double>(*base_), -2.0 * i / dims_);
  }
  std::vector<double> cos_t(offsets.size() * static_cast<size_t>(len * half)), sin_t(cos_t.size());
  for (size_t b = 0; b < offsets.size(); ++b) {
    for (int64_t l = 0; l < len; ++l) {
      const double pos = (static_cast<double>(offsets[b]) + static_cast<double>(l)) * scale_;
      for (int64_t i = 0; i < half; ++i) {
        const size_t at = (b * static_cast<size_t>(len) + static_cast<size_t>(l)) * static_cast<size_t>(half) +
                          static_cast<size_t>(i);
        cos_t[at] = std::cos(pos * inv_freq[static_cast<size_t>(i)]);
        sin_t[at] = std::sin(pos * inv_freq[static_cast<size_t>(i)]);
      }
    }
  }
  // Index of the second element of pair i, and the distance between the first elements of pairs.
  const int64_t partner = traditional_ ? 1 : half, step = traditional_ ? 2 : 1;
  detail::dispatch_float(x.dtype, [&](auto z) {
    using T = decltype(z);
    using A = math::compute_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    detail::parallel_for(rows, std::max<int64_t>(1, (1 << 14) / d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / rows_per_offset, l = r % len;
        const double* c = cos_t.data() + (b * len + l) * half;
        const double* s = sin_t.data() + (b * len + l) * half;
        const T* xr = xp + r * d;
        T* yr = yp + r * d;
        for (int64_t i = 0; i < half; ++i) {
          const A x1 = static_cast<A>(xr[i * step]), x2 = static_cast<A>(xr[i * step + partner]);
          const A ci = static_cast<A>(c[i]), si = static_cast<A>(s[i]);
          yr[i * step] = static_cast<T>(x1 * ci - x2 * si);
          yr[i * step + partner] = static_cast<T>(x1 * si + x2 * ci);
        }
        for (int64_t i = dims_; i < d; ++i) yr[i] = xr[i];
      }
    });
  });
}

}  // namespace kiln
