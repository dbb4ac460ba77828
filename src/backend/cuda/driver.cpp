#include "backend/cuda/driver.h"

#include <dlfcn.h>

#include <algorithm>

#include "kiln/error.h"

namespace kiln::cuda {

namespace {

struct DeviceState {
  CUcontext ctx = nullptr;
  DeviceInfo info;
};

struct State {
  Driver driver;
  bool ok = false;
  std::string why;
  int count = 0;
  DeviceState devices[kMaxDevices];
};

State* load() {
  auto* s = new State;  // never destroyed: buffers may be released during static teardown
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    s->why = "no CUDA driver (libcuda.so.1 could not be loaded)";
    return s;
  }
  using GetProc = decltype(&::cuGetProcAddress);
  auto get = reinterpret_cast<GetProc>(::dlsym(lib, "cuGetProcAddress_v2"));
  if (!get) {
    s->why = "the CUDA driver is too old (no cuGetProcAddress_v2; kiln needs CUDA 12 or newer)";
    return s;
  }
  bool all = true;
#define KILN_CU_FN(name)                                                                           \
  {                                                                                                \
    void* p = nullptr;                                                                             \
    CUdriverProcAddressQueryResult q{};                                                            \
    if (get(#name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !p) all = false; \
    s->driver.name = reinterpret_cast<decltype(s->driver.name)>(p);                                \
  }
#include "backend/cuda/driver_fns.def"
#undef KILN_CU_FN
  // Optional: edges with data (programmatic launches in graphs) came with CUDA 12.3.
  {
    void* p = nullptr;
    CUdriverProcAddressQueryResult q{};
    if (get("cuGraphAddDependencies", &p, 12030, CU_GET_PROC_ADDRESS_DEFAULT, &q) == CUDA_SUCCESS && p)
      s->driver.cuGraphAddDependencies = reinterpret_cast<decltype(s->driver.cuGraphAddDependencies)>(p);
  }
  if (!all) {
    s->why = "the CUDA driver lacks functions kiln needs";
    return s;
  }
  const Driver& d = s->driver;
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* msg = nullptr;
    d.cuGetErrorString(r, &msg);
    s->why = std::string("cuInit failed: ") + (msg ? msg : "unknown error");
    return s;
  }
  int n = 0;
  if (d.cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    s->why = "no CUDA device";
    return s;
  }
  s->count = std::min(n, kMaxDevices);
  for (int i = 0; i < s->count; ++i) {
    CUdevice dev;
    DeviceState& ds = s->devices[i];
    if (d.cuDeviceGet(&dev, i) != CUDA_SUCCESS || d.cuDevicePrimaryCtxRetain(&ds.ctx, dev) != CUDA_SUCCESS) {
      s->why = "cannot open CUDA device " + std::to_string(i);
      s->count = 0;
      return s;
    }
    d.cuDeviceGetAttribute(&ds.info.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    d.cuDeviceGetAttribute(&ds.info.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    d.cuDeviceGetAttribute(&ds.info.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    d.cuDeviceGetAttribute(&ds.info.shared_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
    d.cuDeviceGetAttribute(&ds.info.shared_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev);
    d.cuDeviceGetAttribute(&ds.info.threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev);
    d.cuDeviceGetAttribute(&ds.info.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    char name[256] = {};
    d.cuDeviceGetName(name, sizeof(name), dev);
    d.cuDeviceTotalMem(&ds.info.memory_bytes, dev);
    ds.info.name = name;
  }
  s->ok = true;
  return s;
}

State& state() {
  static State* s = load();  // never destroyed: buffers may be released during static teardown
  return *s;
}

DeviceState& dev_state(int device) {
  State& s = state();
  if (!s.ok) fail("cuda", "CUDA is not available: ", s.why);
  if (device < 0 || device >= s.count) fail("cuda", "no CUDA device ", device, " (", s.count, " present)");
  return s.devices[device];
}

thread_local int t_bound = -1;

}  // namespace

const Driver* driver() { return state().ok ? &state().driver : nullptr; }
const std::string& unavailable_reason() { return state().why; }
int device_count() { return state().ok ? state().count : 0; }

const Driver& drv() {
  State& s = state();
  if (!s.ok) fail("cuda", "CUDA is not available: ", s.why);
  return s.driver;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* msg = nullptr;
  if (state().ok) state().driver.cuGetErrorString(r, &msg);
  fail("cuda", what, ": ", msg ? msg : "unknown error", " (CUresult ", static_cast<int>(r), ")");
}

const DeviceInfo& device_info(int device) { return dev_state(device).info; }

void bind(int device) {
  if (t_bound == device) return;
  DeviceState& ds = dev_state(device);
  check(state().driver.cuCtxSetCurrent(ds.ctx), "cuCtxSetCurrent");
  t_bound = device;
}

void forget_bound() noexcept { t_bound = -1; }

bool try_bind(int device) noexcept {
  if (t_bound == device) return true;
  State& s = state();
  if (!s.ok || device < 0 || device >= s.count || s.driver.cuCtxSetCurrent(s.devices[device].ctx) != CUDA_SUCCESS)
    return false;
  t_bound = device;
  return true;
}

}  // namespace kiln::cuda
