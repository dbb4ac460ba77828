#include "backend/cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>
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
#include "backend/cpu/jit_headers.h"
#include "backend/cpu/jit_support.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "backend/cuda/tuning.h"
#include "core/bounded_cache.h"
#include "kiln/error.h"

#ifndef KILN_CUDA_LIBDIR
#define KILN_CUDA_LIBDIR "/usr/local/cuda/lib64"
#endif

namespace kiln::cuda {

namespace {

struct Nvrtc {
  bool ok = false;
  std::string why;
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) cubin = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcGetErrorString) error_string = nullptr;
  std::string identity;  // NVRTC's version, part of the disk-cache key
};

// Opens a toolkit library by soname, then from the toolkit kiln was built against.
void* open_toolkit_library(const char* soname) {
  void* h = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) h = ::dlopen((std::string(KILN_CUDA_LIBDIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
  return h;
}

const Nvrtc& nvrtc() {
  static const Nvrtc* n = [] {
    auto* r = new Nvrtc;
    void* h = open_toolkit_library("libnvrtc.so.13");
    if (!h) h = open_toolkit_library("libnvrtc.so");
    if (!h) {
      r->why = "NVRTC (libnvrtc.so.13) could not be loaded";
      return r;
    }
    bool all = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      all = all && fn;
    };
    sym(r->version, "nvrtcVersion");
    sym(r->create, "nvrtcCreateProgram");
    sym(r->compile, "nvrtcCompileProgram");
    sym(r->log_size, "nvrtcGetProgramLogSize");
    sym(r->log, "nvrtcGetProgramLog");
    sym(r->cubin_size, "nvrtcGetCUBINSize");
    sym(r->cubin, "nvrtcGetCUBIN");
    sym(r->destroy, "nvrtcDestroyProgram");
    sym(r->error_string, "nvrtcGetErrorString");
    if (!all) {
      r->why = "NVRTC lacks functions kiln needs";
      return r;
    }
    int major = 0, minor = 0;
    r->version(&major, &minor);
    r->identity = "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
    r->ok = true;
    return r;
  }();
  return *n;
}

// Every header generated source may include, by include name: NVRTC's standard headers and
// the embedded files (the shared headers and kernels/*), all embedded at build time.
struct Headers {
  std::vector<std::string> names, texts;
  std::string hash;
};

const Headers& headers() {
  static const Headers h = [] {
    Headers r;
    auto add = [&](const cpu::detail::EmbeddedHeader* files, size_t count) {
      for (size_t i = 0; i < count; ++i) {
        r.names.push_back(files[i].path);
        r.texts.push_back(files[i].text);
      }
    };
    add(cpu::detail::nvrtc_std_headers, cpu::detail::nvrtc_std_header_count);
    add(cpu::detail::embedded_headers, cpu::detail::embedded_header_count);
    cpu::detail::Hash128 hash;
    for (size_t i = 0; i < r.names.size(); ++i) hash.field(r.names[i]).field(r.texts[i]);
    r.hash = hash.hex();
    return r;
  }();
  return h;
}

std::vector<std::string> options(const DeviceInfo& info) {
  // No contraction into FMAs, as on the CPU, so results stay within rounding of the CPU's.
  return {"--gpu-architecture=" + info.arch(),
          "-std=c++20",
          "-default-device",
          tuning().fmad ? "--fmad=true" : "--fmad=false",
          "-DKILN_HD=__device__",
          "-DKILN_CUDA_DEVICE=1"};
}

std::string compile_cubin(const std::string& source, const std::string& name, const DeviceInfo& info) {
  const Nvrtc& n = nvrtc();
  if (!n.ok) fail("cuda", n.why);
  const Headers& h = headers();
  std::vector<const char*> names, texts;
  for (size_t i = 0; i < h.names.size(); ++i) {
    names.push_back(h.names[i].c_str());
    texts.push_back(h.texts[i].c_str());
  }
  nvrtcProgram prog;
  nvrtcResult r = n.create(&prog, source.c_str(), (name + ".cu").c_str(), static_cast<int>(names.size()), texts.data(),
                           names.data());
  if (r != NVRTC_SUCCESS) fail("cuda", "nvrtcCreateProgram: ", n.error_string(r));
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtc().destroy(p); });
  auto opts = options(info);
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  r = n.compile(prog, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    n.log_size(prog, &size);
    std::string log(size, '\0');
    n.log(prog, log.data());
    fail("cuda", "NVRTC rejected kernel '", name, "' (", n.error_string(r), "):\n", log, "\n--- source ---\n", source);
  }
  size_t size = 0;
  n.cubin_size(prog, &size);
  std::string cubin(size, '\0');
  n.cubin(prog, cubin.data());
  return cubin;
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

std::atomic<uint64_t> g_compiles{0}, g_disk{0};  // statistics; relaxed

Kernel load(int device, const std::string& name, const std::string& source) {
  const DeviceInfo& info = device_info(device);
  const Driver& d = drv();
  bind(device);
  cpu::detail::Hash128 hash;
  hash.field("kiln-cuda-1").field(nvrtc().identity).field(info.arch()).field(headers().hash);
  for (auto& o : options(info)) hash.field(o);
  hash.field(name).field(source);
  // Through the CPU JIT's disk cache: its directory checks, and a checksum beside each cubin.
  const std::string entry = "cuda-" + hash.hex() + ".cubin";
  CUmodule module = nullptr;
  std::string cubin;
  if (cpu::read_cache_entry(entry, &cubin)) {
    if (d.cuModuleLoadData(&module, cubin.data()) == CUDA_SUCCESS) {
      g_disk.fetch_add(1, std::memory_order_relaxed);
    } else {
      std::fprintf(stderr, "kiln: removing unloadable cached kernel %s\n", entry.c_str());
      cpu::remove_cache_entry(entry);
      module = nullptr;
    }
  }
  if (!module) {
    cubin = compile_cubin(source, name, info);
    g_compiles.fetch_add(1, std::memory_order_relaxed);
    check(d.cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData");
    cpu::write_cache_entry(entry, cubin);
  }
  Kernel k;
  k.module = std::make_shared<Module>(device, module);  // unloads the module if the next line throws
  check(d.cuModuleGetFunction(&k.fn, module, name.c_str()), "cuModuleGetFunction");
  return k;
}

}  // namespace

bool nvrtc_available() { return nvrtc().ok; }

std::string cubin_for_arch(const std::string& source, int major, int minor) {
  DeviceInfo info;
  info.major = major;
  info.minor = minor;
  return compile_cubin(source, "kiln_kernel", info);
}

Kernel kernel(int device, const std::string& key, const std::string& name,
              const std::function<std::string()>& make_source) {
  return modules().get(std::to_string(device) + "|" + name + "|" + key,
                       [&] { return load(device, name, make_source()); });
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

NvrtcStats nvrtc_stats() { return {g_compiles.load(), g_disk.load(), modules().hits()}; }

}  // namespace kiln::cuda
