// The public bounds of kiln's caches (include/kiln/cache.h); each cache applies its own.
#include "kiln/cache.h"

#include <atomic>

#include "backend/cpu/jit.h"
#include "core/buffer.h"
#include "kiln/error.h"
#ifdef KILN_WITH_CUDA
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/allocator.h"
#endif

namespace kiln {

namespace {
std::atomic<size_t> g_device_cache_limit{0};  // atomic: read by every device buffer release
}

void set_kernel_cache_capacity(size_t kernels) {
  if (kernels == 0) fail("kernel_cache", "capacity must be at least 1");
  cpu::set_jit_cache_capacity(kernels);
#ifdef KILN_WITH_CUDA
  cuda::set_module_cache_capacity(kernels);
#endif
}

size_t kernel_cache_capacity() { return cpu::jit_cache_capacity(); }

void set_device_memory_cache_limit(size_t bytes) {
  g_device_cache_limit.store(bytes);
#ifdef KILN_WITH_CUDA
  cuda::trim_memory_cache_to_limit();
#endif
}

size_t device_memory_cache_limit() { return g_device_cache_limit.load(std::memory_order_relaxed); }

void clear_memory_cache() {
#ifdef KILN_WITH_CUDA
  cuda::trim_memory_cache();
#endif
  detail::trim_buffer_cache();
}

}  // namespace kiln
