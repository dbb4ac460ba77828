// kiln's caches of compiled kernels and of memory, and their bounds. docs/threading.md
// lists every cache with its key, its bound and its guard.
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

/* Where compiled kernels (CPU and CUDA) are kept on disk: $KILN_CACHE_DIR, else
   ~/.cache/kiln, else /tmp/kiln-cache-<uid>. Used only when it is not a symbolic link,
   belongs to this user and nobody else can write it (docs/codegen.md). Not bounded by kiln. */
std::string kernel_cache_dir();

/* Most kernels each in-memory kernel cache keeps loaded (the CPU JIT's, and NVRTC's
   modules): past it the least recently used are dropped, and a dropped kernel stays
   loaded while a compiled function uses it. At least 1; default 4096. */
void set_kernel_cache_capacity(size_t kernels);
size_t kernel_cache_capacity();

/* Most bytes of freed device memory each GPU keeps for reuse; past it, the largest free
   blocks go back to the driver (after the device finishes the work that used them).
   0, the default: half of each GPU's memory. A lower limit applies at once. */
void set_device_memory_cache_limit(size_t bytes);
size_t device_memory_cache_limit();

/* Gives the memory kiln keeps for reuse back to the system: every GPU's free cached
   blocks (after the work that may still use them) and the host's cached buffers.
   Arrays and compiled functions stay valid. */
void clear_memory_cache();

}  // namespace kiln
