// kiln's caches of compiled kernels and of memory, and their bounds. docs/threading.md
// lists every cache with its key, its bound and its guard.
#pragma once

#include <string>

namespace kiln {

/* Where compiled kernels (CPU and CUDA) are kept on disk: $KILN_CACHE_DIR, else
   ~/.cache/kiln, else /tmp/kiln-cache-<uid>. Not bounded by kiln. */
std::string kernel_cache_dir();

}  // namespace kiln
