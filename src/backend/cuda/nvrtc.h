// Run-time compilation of generated CUDA C++ with NVRTC for the device's own
// architecture, cached in memory (bounded, the CPU JIT's policy: core/bounded_cache.h) and
// on disk as cubins under the same directory rules as the CPU JIT (KILN_CACHE_DIR).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cuda {

struct Module;  // a loaded module and what was learned about launching its kernel (nvrtc.cpp)

/* A compiled kernel. Its module stays loaded while any copy lives, also after the module
   cache has dropped it; the last copy unloads it once the device has finished its work. */
struct Kernel {
  CUfunction fn = nullptr;
  std::shared_ptr<Module> module;
  // The kernel runs griddepcontrol.wait before it reads what earlier kernels wrote, so a CUDA
  // graph may start it while the kernel ahead of it still runs (plan_graph.cpp).
  bool waits_for_inputs = false;
};

/* The kernel `name` (extern "C" __global__ in the source) for the device. `key` names
   the source uniquely (the source itself, or a shorter signature from which `make_source`
   builds it on a miss). Throws kiln::Error with NVRTC's log when compilation fails.
   Thread-safe; one compile per key. */
Kernel kernel(int device, const std::string& key, const std::string& name,
              const std::function<std::string()>& make_source);

/* The kernel `name` of `source` when it is in memory or in the disk cache now, else false:
   never compiles (a caller that must not wait queues the compile instead). */
bool cached_kernel(int device, const std::string& name, const std::string& source, Kernel* out);
/* The kernel `name` of a module image built into kiln (a cubin, or PTX the driver compiles),
   loaded once per device and key. */
Kernel loaded_image(int device, const std::string& key, const std::string& name, const void* image);

/* Launches on this thread's stream with a 1-D grid; the kernel's one parameter, an argument
   struct (kernels/args.h), is `words` by value. Recorded when a recording is under way
   (recording.h). */
void launch(int device, const Kernel& k, unsigned grid, unsigned block, const std::vector<long>& words,
            unsigned shared_bytes = 0);
/* A launch with any parameters; a recording under way cannot hold it. */
void launch(int device, const Kernel& k, unsigned grid, unsigned block, void** args, unsigned shared_bytes = 0);
/* A grid for n independent items with `block` threads each, capped for grid-stride loops. */
unsigned grid_for(int device, int64_t n, unsigned block, int per_sm = 32);

/* Blocks of k that fit on one SM at once (at least 1); kept with its module per shape. */
int resident_blocks(const Kernel& k, unsigned block, unsigned shared_bytes);

/* The in-memory module cache: most modules kept (default 4096, least recently used
   dropped; kiln::set_kernel_cache_capacity sets it with the CPU JIT's), modules in it
   now, and dropping them all (held kernels stay valid). */
void set_module_cache_capacity(size_t n);
size_t module_cache_capacity();
size_t module_cache_size();
void clear_module_cache();
/* Modules loaded now, in the cache or held by plans (tests check the bound with it). */
size_t loaded_modules();

struct NvrtcStats {
  uint64_t compiles, disk_loads, memory_hits;
  uint64_t precompiled;  // modules loaded from the images built into kiln (precompiled_images.h)
};
NvrtcStats nvrtc_stats();
/* A cubin of `source` for sm_<major><minor>, compiled by NVRTC alone (no device needed:
   tests check generated code this way on machines without a GPU). */
std::string cubin_for_arch(const std::string& source, int major, int minor);
/* Whether NVRTC could be loaded. */
bool nvrtc_available();

}  // namespace kiln::cuda
