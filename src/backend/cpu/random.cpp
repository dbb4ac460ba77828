// CPU kernel for random bits: the Threefry pairs of backend/common/threefry.h, spread
// over threads.
#include <algorithm>

#include "backend/common/threefry.h"
#include "core/thread_pool.h"
#include "ops/random.h"

namespace kiln {

void RandomBits::eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) {
  const detail::Tensor& key = in[0];
  detail::Tensor& y = out[0];
  y.allocate();
  const uint64_t n = static_cast<uint64_t>(y.size());
  if (n == 0) return;
  const uint32_t* k = key.data<uint32_t>();
  const uint32_t k0 = k[0], k1 = k[key.strides[0]];
  uint32_t* w = y.data<uint32_t>();
  const uint64_t h = (n + 1) / 2;
  detail::parallel_for(static_cast<int64_t>(h), 1 << 14, [&](int64_t b, int64_t e) {
    // Whole blocks of pairs whose second word exists hash side by side, which the compiler
    // vectorizes; the rest (and the odd draw's last pair) one at a time.
    constexpr int64_t L = 16;
    int64_t j = b;
    for (; j + L <= e && static_cast<uint64_t>(j + L) + h <= n; j += L) {
      uint32_t x0[L], x1[L];
      for (int64_t l = 0; l < L; ++l) {
        x0[l] = static_cast<uint32_t>(j + l);
        x1[l] = static_cast<uint32_t>(h + static_cast<uint64_t>(j + l));
        threefry::hash(k0, k1, x0[l], x1[l]);
      }
      std::copy(x0, x0 + L, w + j);
      std::copy(x1, x1 + L, w + h + static_cast<uint64_t>(j));
    }
    for (; j < e; ++j) threefry::pair(k0, k1, n, static_cast<uint64_t>(j), w);
  });
}

}  // namespace kiln
