// CPU kernel for cumsum: forward or reverse, inclusive or exclusive, along one axis.
#include <algorithm>
#include <vector>

#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/reduce.h"
#include "core/thread_pool.h"
#include "ops/reduce.h"

namespace kiln {

namespace {

using detail::Tensor;
using math::compute_t;

/* Scans src into dst, both row-major (outer, n, inner); src may equal dst. */
template <class T>
void scan_typed(const T* src, T* dst, int64_t outer, int64_t n, int64_t inner, bool reverse, bool inclusive) {
  using A = compute_t<T>;
  const int64_t first = reverse ? n - 1 : 0, step = reverse ? -1 : 1;
  if (inner == 1) {
    detail::parallel_for(outer, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* s = src + o * n;
        T* d = dst + o * n;
        A acc = A(0);
        for (int64_t i = 0, k = first; i < n; ++i, k += step) {
          A v = static_cast<A>(s[k]);  // read before the write: src may alias dst
          if (inclusive) acc = math::Add{}(acc, v);
          d[k] = static_cast<T>(acc);
          if (!inclusive) acc = math::Add{}(acc, v);
        }
      }
    });
    return;
  }
  // The axis is strided: carry one running sum per inner element, a tile at a time.
  constexpr int64_t kTile = 1024;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, n * std::min(inner, kTile)));
  detail::parallel_for(outer * tiles, grain, [&](int64_t b, int64_t e) {
    const int64_t width = std::min(inner, kTile);
    cpu::Scratch<A> acc(width);
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / tiles, j0 = (t % tiles) * kTile, w = std::min(kTile, inner - j0);
      std::fill(acc.data(), acc.data() + width, A(0));
      for (int64_t i = 0, k = first; i < n; ++i, k += step) {
        const T* s = src + (o * n + k) * inner + j0;
        T* d = dst + (o * n + k) * inner + j0;
        if (inclusive) {
          for (int64_t j = 0; j < w; ++j) {
            acc[j] = math::Add{}(acc[j], static_cast<A>(s[j]));
            d[j] = static_cast<T>(acc[j]);
          }
        } else {
          for (int64_t j = 0; j < w; ++j) {
            A v = static_cast<A>(s[j]);
            d[j] = static_cast<T>(acc[j]);
            acc[j] = math::Add{}(acc[j], v);
          }
        }
      }
    }
  });
}

}  // namespace

void CumSum::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  Tensor& y = out[0];
  y.allocate();
  if (y.size() == 0) return;
  // A strided input is first copied into the output, then scanned in place.
  const void* src = x.raw();
  if (!x.row_contiguous()) {
    detail::copy_convert(x, y);
    src = y.raw();
  }
  int64_t outer = 1, inner = 1, n = y.shape[static_cast<size_t>(axis_)];
  for (int i = 0; i < axis_; ++i) outer *= y.shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis_) + 1; i < y.shape.size(); ++i) inner *= y.shape[i];
  detail::dispatch_dtype(y.dtype, [&](auto t) {
    using T = decltype(t);
    scan_typed<T>(static_cast<const T*>(src), y.data<T>(), outer, n, inner, reverse_, inclusive_);
  });
}

}  // namespace kiln
