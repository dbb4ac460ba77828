// The CPU "JIT": turns generated C++ source into a callable function by running the system
// compiler into a shared library and loading it, with an in-memory and an on-disk cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/error.h"

namespace kiln::cpu {

namespace detail {
class ProcessCanceller;  // jit_support.h
}

struct JitKernel {
  void* fn = nullptr;  // address of the requested symbol
  std::shared_ptr<void> library;  // keeps the dlopen handle alive while anyone holds the kernel
  explicit operator bool() const { return fn != nullptr; }
};

/* What jit_compile throws when the compiler run it made was stopped by its canceller. */
class CompileCancelled : public Error {
 public:
  using Error::Error;
};

/* The function `symbol` (declared extern "C" in `source`) compiled from `source`.
   Looks in the in-memory cache, then the disk cache, then runs the system compiler.
   Returns an empty JitKernel when no working C++ compiler is available (kiln says so
   once on stderr, naming the fallback). Throws kiln::Error ("[jit] ...", including the
   compiler's diagnostics) when the compiler rejects the source. Thread-safe: concurrent
   callers asking for the same source compile it once; a caller that joined another's compile
   which that caller's canceller then stopped compiles it itself. A compiler run that `cancel`
   stops throws CompileCancelled ("[jit] the compile of kernel ... was cancelled"); `niceness` above 0
   runs the compiler at that lower priority (background compiles yield to the calls). */
JitKernel jit_compile(const std::string& source, const std::string& symbol, detail::ProcessCanceller* cancel = nullptr,
                      int niceness = 0);

/* The kernel when it is in the in-memory cache or intact in the disk cache; empty otherwise
   (and without a compiler). Never runs the compiler: a first call takes what a previous
   process stored at once, and leaves compiling to the background (compile_pool.h). */
JitKernel jit_lookup(const std::string& source, const std::string& symbol);

/* Whether a working compiler was found (probed once). */
bool jit_available();

/* Include directory holding the headers generated source may include:
   "kiln/half.h" and "backend/common/math.h" (in a private directory, made again if deleted). */
std::string jit_include_dir();

/* Entry `name` of the disk kernel cache when present and intact (its checksum matches; a
   damaged entry is removed). For compiled code of other backends (CUDA cubins). */
bool read_cache_entry(const std::string& name, std::string* bytes);
/* Stores `bytes` as entry `name` of the disk cache, with its checksum; nothing without one. */
void write_cache_entry(const std::string& name, const std::string& bytes);
void remove_cache_entry(const std::string& name);

/* Counters for tests: compiles run, disk-cache loads, memory-cache hits (a caller that
   waited for another thread's compile of the same source counts as a memory hit). */
struct JitStats {
  uint64_t compiles, disk_loads, memory_hits;
};
JitStats jit_stats();

/* Bound on kernels kept in the in-memory cache (least recently used are dropped; a dropped
   library stays loaded until no JitKernel refers to it). Default 4096; the public
   kiln::set_kernel_cache_capacity sets it with NVRTC's. */
void set_jit_cache_capacity(size_t n);
size_t jit_cache_capacity();
/* Kernels in the in-memory cache now. */
size_t jit_cache_size();

// ---- internal: for tests and tools; not part of the stable API ----

/* Uses `path` as the disk cache instead of $KILN_CACHE_DIR (empty: back to the environment)
   and empties the in-memory cache, as if a new process started. */
void set_jit_cache_dir(const std::string& path);
/* Writes every compiled or loaded source to `<path>/<key>.cpp` (empty: back to
   $KILN_DUMP_KERNELS). */
void set_jit_dump_dir(const std::string& path);
/* Drops every kernel from the in-memory cache (held JitKernels stay valid). */
void clear_jit_memory_cache();
/* Forgets the probed compiler and the in-memory kernels and re-reads the environment
   (directories given to the setters above stay); `compiler` replaces $KILN_CXX when not
   empty. Says the once-only warnings again. Callers must not be compiling meanwhile. */
void reset_jit_for_tests(const std::string& compiler);
/* The disk directory where `<key>.so` files live now; empty when the cache directory was
   refused (not writable, a symbolic link, not ours alone) and kernels are compiled privately. */
std::string jit_cache_dir();
/* The cache key of `source` under the current compiler and settings (the file stem). */
std::string jit_cache_key(const std::string& source);

}  // namespace kiln::cpu
