#include "backend/cuda/nvrtc.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend/cpu/jit.h"
#include "backend/cpu/jit_support.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/nvrtc_compile.h"
#include "backend/cuda/precompiled_images.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "backend/cuda/tuning.h"
#include "core/bounded_cache.h"
#include "core/config.h"
#include "kiln/error.h"

namespace kiln::cuda {

namespace {

// The embedded headers' hash, part of the disk-cache key.
const std::string& headers_hash() {
  static const std::string h = [] {
    const NvrtcHeaders& r = nvrtc_headers();
    cpu::detail::Hash128 hash;
    for (size_t i = 0; i < r.names.size(); ++i) hash.field(r.names[i]).field(r.texts[i]);
    return hash.hex();
  }();
  return h;
}

std::vector<std::string> options(const DeviceInfo& info) { return nvrtc_options(info.arch(), tuning().fmad); }

std::string compile_cubin(const std::string& source, const std::string& name, const DeviceInfo& info) {
  return nvrtc_compile(source, name, info.arch(), tuning().fmad);
}

}  // namespace

// One loaded module and its kernel, with what kiln learned about launching it (kept here,
// so a later module loaded at the same address starts afresh).
struct Module {
  int device;
  CUmodule handle;
  std::mutex mu;  // guards shared_allowed and resident
  unsigned shared_allowed = kDefaultSharedBytes;  // dynamic shared memory the kernel may ask for
  std::map<std::pair<unsigned, unsigned>, int> resident;  // (block, shared bytes) -> blocks an SM holds
  static inline std::atomic<size_t> loaded{0};  // modules alive; relaxed

  Module(int d, CUmodule h) : device(d), handle(h) { loaded.fetch_add(1, std::memory_order_relaxed); }
  ~Module() {
    loaded.fetch_sub(1, std::memory_order_relaxed);
    const Driver* d = driver();
    if (!d) return;
    try {
      bind(device);
    } catch (const Error&) {
      return;
    }
    d->cuCtxSynchronize();  // work queued with this kernel may still run: let it finish first
    d->cuModuleUnload(handle);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
};

namespace {

// Compiled modules by device, kernel name and key. Never destroyed: kernels may be held
// during static destruction.
kiln::detail::BoundedCache<Kernel>& modules() {
  static auto* cache = new kiln::detail::BoundedCache<Kernel>(4096);
  return *cache;
}

std::atomic<uint64_t> g_compiles{0}, g_disk{0}, g_precompiled{0};  // statistics; relaxed

// The disk-cache entry of a kernel's cubin for the device.
std::string cache_entry(const DeviceInfo& info, const std::string& name, const std::string& source) {
  cpu::detail::Hash128 hash;
  hash.field("kiln-cuda-1").field(nvrtc_identity()).field(info.arch()).field(headers_hash());
  for (auto& o : options(info)) hash.field(o);
  hash.field(name).field(source);
  return "cuda-" + hash.hex() + ".cubin";
}

// KILN_DUMP_KERNELS: the source of every kernel this process loads, as <its cache entry>.cu.
void dump_source(const DeviceInfo& info, const std::string& name, const std::string& source) {
  static std::atomic<bool> warned{false};
  const std::string dir = config::text(config::Knob::dump_kernels);
  if (dir.empty()) return;
  const std::string entry = cache_entry(info, name, source);
  const std::string path = dir + "/" + entry.substr(0, entry.rfind('.')) + ".cu";
  if ((!cpu::detail::make_dirs(dir) || !cpu::detail::write_file_atomic(path, source)) && !warned.exchange(true))
    std::fprintf(stderr, "kiln: cannot write kernel sources into KILN_DUMP_KERNELS='%s'\n", dir.c_str());
}

Kernel loaded(int device, CUmodule module, const std::string& name) {
  Kernel k;
  k.module = std::make_shared<Module>(device, module);  // unloads the module if the next line throws
  check(drv().cuModuleGetFunction(&k.fn, module, name.c_str()), "cuModuleGetFunction");
  // A cluster of more than 8 blocks (its __cluster_dims__) launches only where the kernel allows it.
  int width = 0;
  if (drv().cuFuncGetAttribute(&width, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, k.fn) == CUDA_SUCCESS && width > 8)
    check(drv().cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1), "cuFuncSetAttribute");
  return k;
}

// The kernel from the disk cache (through the CPU JIT's: its directory checks, and a checksum
// beside each cubin), or false.
bool load_from_disk(int device, const std::string& name, const std::string& source, Kernel* out) {
  const DeviceInfo& info = device_info(device);
  bind(device);
  const std::string entry = cache_entry(info, name, source);
  std::string cubin;
  if (!cpu::read_cache_entry(entry, &cubin)) return false;
  CUmodule module = nullptr;
  if (drv().cuModuleLoadData(&module, cubin.data()) != CUDA_SUCCESS) {
    std::fprintf(stderr, "kiln: removing unloadable cached kernel %s\n", entry.c_str());
    cpu::remove_cache_entry(entry);
    return false;
  }
  g_disk.fetch_add(1, std::memory_order_relaxed);
  *out = loaded(device, module, name);
  return true;
}

Kernel load(int device, const std::string& name, const std::string& source) {
  const DeviceInfo& info = device_info(device);
  dump_source(info, name, source);
  // Built into kiln (compiled without contractions, as by default), then the disk cache, then NVRTC.
  const auto* im = tuning().fmad ? nullptr : embedded::precompiled_image(name, source, info.major, info.minor);
  if (im) {
    bind(device);
    CUmodule module = nullptr;
    if (drv().cuModuleLoadData(&module, im->bytes) == CUDA_SUCCESS) {
      g_precompiled.fetch_add(1, std::memory_order_relaxed);
      return loaded(device, module, name);
    }
  }
  Kernel k;
  if (load_from_disk(device, name, source, &k)) return k;
  const std::string cubin = compile_cubin(source, name, info);
  g_compiles.fetch_add(1, std::memory_order_relaxed);
  bind(device);
  CUmodule module = nullptr;
  check(drv().cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData");
  cpu::write_cache_entry(cache_entry(info, name, source), cubin);
  return loaded(device, module, name);
}

std::string module_key(int device, const std::string& name, const std::string& key) {
  return std::to_string(device) + "|" + name + "|" + key;
}

}  // namespace

bool nvrtc_available() { return nvrtc_loaded(); }

std::string cubin_for_arch(const std::string& source, int major, int minor) {
  DeviceInfo info;
  info.major = major;
  info.minor = minor;
  return compile_cubin(source, "kiln_kernel", info);
}

Kernel kernel(int device, const std::string& key, const std::string& name,
              const std::function<std::string()>& make_source) {
  return modules().get(module_key(device, name, key), [&] { return load(device, name, make_source()); });
}

bool cached_kernel(int device, const std::string& name, const std::string& source, Kernel* out) {
  const std::string key = module_key(device, name, source);
  if (modules().find(key, out)) return true;
  Kernel k;
  if (!load_from_disk(device, name, source, &k)) return false;
  *out = modules().get(key, [&] { return k; });
  return true;
}

Kernel loaded_image(int device, const std::string& key, const std::string& name, const void* image) {
  return modules().get(module_key(device, name, key), [&] {
    bind(device);
    CUmodule module = nullptr;
    check(drv().cuModuleLoadData(&module, image), "cuModuleLoadData");
    return loaded(device, module, name);
  });
}

void set_module_cache_capacity(size_t n) { modules().set_capacity(n); }
size_t module_cache_capacity() { return modules().capacity(); }
size_t module_cache_size() { return modules().size(); }
void clear_module_cache() { modules().clear(); }
size_t loaded_modules() { return Module::loaded.load(std::memory_order_relaxed); }

namespace {

// Blocks may use more than 48 KB of dynamic shared memory only once their kernel allows it.
void allow_shared(const Kernel& k, unsigned bytes) {
  if (bytes <= kDefaultSharedBytes) return;
  std::lock_guard<std::mutex> lock(k.module->mu);
  if (bytes <= k.module->shared_allowed) return;
  check(drv().cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes)),
        "cuFuncSetAttribute");
  k.module->shared_allowed = bytes;
}

}  // namespace

void launch(int device, const Kernel& k, unsigned grid, unsigned block, const std::vector<long>& words,
            unsigned shared_bytes) {
  if (grid == 0) return;
  allow_shared(k, shared_bytes);
  if (Recording* r = recording()) r->launches.push_back({k, grid, block, shared_bytes, words, nullptr});
  void* args[] = {const_cast<long*>(words.data())};
  check(drv().cuLaunchKernel(k.fn, grid, 1, 1, block, 1, 1, shared_bytes, stream(device), args, nullptr),
        "cuLaunchKernel");
}

void launch(int device, const Kernel& k, unsigned grid, unsigned block, void** args, unsigned shared_bytes) {
  if (grid == 0) return;
  not_replayable();
  allow_shared(k, shared_bytes);
  check(drv().cuLaunchKernel(k.fn, grid, 1, 1, block, 1, 1, shared_bytes, stream(device), args, nullptr),
        "cuLaunchKernel");
}

unsigned grid_for(int device, int64_t n, unsigned block, int per_sm) {
  if (n <= 0) return 0;
  int64_t g = (n + block - 1) / block;
  int64_t cap = per_sm > 0 ? static_cast<int64_t>(device_info(device).sms) * per_sm : g;
  return static_cast<unsigned>(std::min(g, std::max<int64_t>(cap, 1)));
}

int resident_blocks(const Kernel& k, unsigned block, unsigned shared_bytes) {
  std::lock_guard<std::mutex> lock(k.module->mu);
  auto [it, fresh] = k.module->resident.try_emplace({block, shared_bytes}, 1);
  if (fresh) {
    int n = 0;
    check(drv().cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, k.fn, static_cast<int>(block), shared_bytes),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    it->second = std::max(n, 1);
  }
  return it->second;
}

NvrtcStats nvrtc_stats() { return {g_compiles.load(), g_disk.load(), modules().hits(), g_precompiled.load()}; }

}  // namespace kiln::cuda
