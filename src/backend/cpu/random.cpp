// CPU kernel for random bits: the Threefry pairs of backend/common/threefry.h, spread
// over threads.
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
  detail::parallel_for(static_cast<int64_t>((n + 1) / 2), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) threefry::pair(k0, k1, n, static_cast<uint64_t>(j), w);
  });
}

}  // namespace kiln
