// Process-wide counters behind kiln::stats().
#pragma once

#include <atomic>
#include <cstdint>

namespace kiln::detail {

// Each counter is its own atomic, bumped with relaxed order: totals, not synchronization.
struct Counters {
  std::atomic<uint64_t> kernels_launched{0};
  std::atomic<uint64_t> arrays_materialized{0};
  std::atomic<uint64_t> traces{0};
  std::atomic<uint64_t> cache_hits{0};
  std::atomic<uint64_t> cache_misses{0};
  std::atomic<uint64_t> interim_calls{0};
  std::atomic<uint64_t> fused_calls{0};
  std::atomic<uint64_t> fused_arrivals{0};
  std::atomic<uint64_t> fused_arrival_ns{0};
  std::atomic<uint64_t> host_to_device_copies{0};  // CUDA uploads (cuda::to_device), not part of kiln::Stats
  std::atomic<uint64_t> device_to_host_copies{0};  // CUDA downloads (cuda::to_host)
  std::atomic<uint64_t> layout_bytes_copied{
      0};  // bytes layout kernels copied (CPU; CUDA cache updates): tests of in-place updates
};
Counters& counters();

inline void count(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

}  // namespace kiln::detail
