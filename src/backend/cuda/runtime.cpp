#include "backend/cuda/runtime.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <map>
#include <unordered_map>

#include "backend/cpu/copy.h"
#include "core/stats.h"
#include "kiln/error.h"

namespace kiln::cuda {

using detail::Buffer;
using detail::Tensor;

namespace {

constexpr int kMaxDevices = 16;

struct DeviceState {
  CUcontext ctx = nullptr;
  DeviceInfo info;
  std::mutex mu;                                         // guards pool, idle_streams and the counters
  std::map<CUstream, std::multimap<size_t, Block*>> pool;  // free blocks by owning stream, then size
  std::vector<CUstream> idle_streams;                    // streams of threads that have exited
  size_t cached = 0, in_use = 0;
};

struct State {
  Driver driver;
  bool ok = false;
  std::string why;
  int count = 0;
  DeviceState devices[kMaxDevices];
  std::atomic<size_t> mallocs{0};
  std::atomic<size_t> stream_waits{0};
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
#define KILN_CU_FN(name)                                                                                  \
  {                                                                                                       \
    void* p = nullptr;                                                                                    \
    CUdriverProcAddressQueryResult q{};                                                                   \
    if (get(#name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || !p) all = false;        \
    s->driver.name = reinterpret_cast<decltype(s->driver.name)>(p);                                       \
  }
#include "backend/cuda/driver_fns.def"
#undef KILN_CU_FN
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
    ds.info.name = name;
  }
  s->ok = true;
  return s;
}

State& state() {
  static State* s = load();
  return *s;
}

DeviceState& dev_state(int device) {
  State& s = state();
  if (!s.ok) fail("cuda", "CUDA is not available: ", s.why);
  if (device < 0 || device >= s.count) fail("cuda", "no CUDA device ", device, " (", s.count, " present)");
  return s.devices[device];
}

// One stream per device for each thread; a thread's streams go back to an idle list
// when it exits and serve later threads, so the number of streams stays bounded.
struct ThreadStreams {
  CUstream s[kMaxDevices] = {};
  ~ThreadStreams() {
    for (int i = 0; i < kMaxDevices; ++i) {
      if (!s[i]) continue;
      DeviceState& ds = state().devices[i];
      std::lock_guard<std::mutex> lock(ds.mu);
      ds.idle_streams.push_back(s[i]);
    }
  }
};

thread_local int t_bound = -1;

size_t round_size(size_t bytes) {
  if (bytes <= (size_t{1} << 20)) {
    size_t r = 512;
    while (r < bytes) r <<= 1;
    return r;
  }
  constexpr size_t kBig = size_t{2} << 20;
  return (bytes + kBig - 1) / kBig * kBig;
}

void free_cached_locked(DeviceState& ds) {
  const Driver& d = state().driver;
  for (auto& [stream, blocks] : ds.pool) {
    for (auto& [size, b] : blocks) {
      d.cuMemFree(b->ptr);
      if (b->ready) d.cuEventDestroy(b->ready);
      ds.cached -= b->size;
      delete b;
    }
  }
  ds.pool.clear();
}

void release_block(void* p) {
  auto* b = static_cast<Block*>(p);
  State& s = state();
  DeviceState& ds = s.devices[b->device];
  const Driver& d = s.driver;
  // Readers on other streams must finish before the owning stream reuses the memory.
  std::vector<CUstream> users;
  {
    std::lock_guard<std::mutex> lock(b->mu);
    users.swap(b->users);
  }
  if (!users.empty()) {
    bind(b->device);
    for (CUstream u : users) {
      CUevent e;
      if (d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        d.cuCtxSynchronize();
        break;
      }
      d.cuEventRecord(e, u);
      d.cuStreamWaitEvent(b->stream, e, 0);
      d.cuEventDestroy(e);  // released once it completes
    }
  }
  std::lock_guard<std::mutex> lock(ds.mu);
  ds.in_use -= b->size;
  ds.cached += b->size;
  ds.pool[b->stream].emplace(b->size, b);
}

}  // namespace

Recording*& recording() {
  thread_local Recording* r = nullptr;
  return r;
}

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

CUstream stream(int device) {
  thread_local ThreadStreams streams;
  bind(device);
  CUstream& s = streams.s[device];
  if (!s) {
    DeviceState& ds = dev_state(device);
    {
      std::lock_guard<std::mutex> lock(ds.mu);
      if (!ds.idle_streams.empty()) {
        s = ds.idle_streams.back();
        ds.idle_streams.pop_back();
      }
    }
    if (!s) check(state().driver.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  return s;
}

std::shared_ptr<Buffer> allocate(int device, size_t bytes) {
  DeviceState& ds = dev_state(device);
  const Driver& d = state().driver;
  CUstream st = stream(device);
  size_t size = round_size(bytes == 0 ? 1 : bytes);
  Block* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(ds.mu);
    auto pit = ds.pool.find(st);
    if (pit != ds.pool.end()) {
      auto it = pit->second.lower_bound(size);
      if (it != pit->second.end() && it->first <= size + size / 4) {
        b = it->second;
        pit->second.erase(it);
        ds.cached -= b->size;
        ds.in_use += b->size;
      }
    }
  }
  if (!b) {
    CUdeviceptr ptr = 0;
    CUresult r = d.cuMemAlloc(&ptr, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      // Free what the cache holds (after the work that may still use it) and try once more.
      d.cuCtxSynchronize();
      {
        std::lock_guard<std::mutex> lock(ds.mu);
        free_cached_locked(ds);
      }
      r = d.cuMemAlloc(&ptr, size);
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t free_b = 0, total_b = 0;
        d.cuMemGetInfo(&free_b, &total_b);
        fail("cuda", "out of memory allocating ", bytes, " bytes on cuda:", device, " (", free_b, " of ", total_b,
             " bytes free after releasing kiln's cached blocks)");
      }
    }
    check(r, "cuMemAlloc");
    state().mallocs.fetch_add(1, std::memory_order_relaxed);
    b = new Block;
    b->ptr = ptr;
    b->size = size;
    b->device = device;
    b->stream = st;
    std::lock_guard<std::mutex> lock(ds.mu);
    ds.in_use += size;
  }
  {
    std::lock_guard<std::mutex> lock(b->mu);
    b->written = false;
  }
  auto buf = Buffer::device_memory(reinterpret_cast<void*>(b->ptr), b->size, Device::cuda(device), b, release_block);
  if (Recording* r = recording()) r->buffers.push_back(buf);
  return buf;
}

void allocate_output(int device, Tensor& t) {
  size_t need = static_cast<size_t>(t.size()) * t.itemsize();
  if (Block* b = block_of(t)) {
    // A buffer handed over by a compiled plan (donated) is still referenced by the dead
    // input it came from, so its use count says nothing; the plan vouches for it instead.
    bool reuse = b->device == device && b->stream == stream(device) && t.buffer->bytes() >= need &&
                 (t.buffer.use_count() == 1 || t.donated);
    t.donated = false;
    if (reuse) {
      std::lock_guard<std::mutex> lock(b->mu);
      reuse = b->users.empty();  // another stream may still read a donated input
    }
    if (reuse) {
      t.reset_layout();
      return;
    }
  }
  t.buffer = allocate(device, need);
  t.reset_layout();
}

void prepare_inputs(int device, std::vector<Tensor>& in) {
  CUstream st = stream(device);
  const Driver& d = state().driver;
  for (auto& t : in) {
    if (!t.buffer) continue;
    if (!on_device(t) || t.buffer->device().index != device) t = to_device(t, device);
    Block* b = block_of(t);
    if (!b || b->stream == st) continue;
    std::lock_guard<std::mutex> lock(b->mu);
    // A block is written once while allocated (reuse needs no other readers), so a stream
    // that waited for it once never waits again: shared weights or constants read by many
    // threads would otherwise chain every call to the uploading thread's queue.
    bool known = false;
    for (CUstream u : b->users) known = known || u == st;
    if (known) continue;
    if (b->written) {
      // Marks the owning stream now: everything queued there so far includes the write.
      if (!b->ready) check(d.cuEventCreate(&b->ready, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      check(d.cuEventRecord(b->ready, b->stream), "cuEventRecord");
      check(d.cuStreamWaitEvent(st, b->ready, 0), "cuStreamWaitEvent");
      state().stream_waits.fetch_add(1, std::memory_order_relaxed);
    }
    b->users.push_back(st);
  }
}

void finish_outputs(int device, const std::vector<Tensor>& out) {
  CUstream st = stream(device);
  for (auto& t : out) {
    Block* b = block_of(t);
    if (!b || b->stream != st) continue;
    std::lock_guard<std::mutex> lock(b->mu);
    b->written = true;  // the event is recorded when another stream first needs it
  }
}

namespace {

// Uploads `bytes` from host memory into a fresh device buffer.
std::shared_ptr<Buffer> upload(int device, const void* src, size_t bytes) {
  auto buf = allocate(device, bytes);
  if (bytes > 0) {
    detail::count(detail::counters().host_to_device_copies);
    // From pageable memory the call returns once the source has been staged, so the
    // host buffer may go away afterwards.
    not_replayable();
    check(state().driver.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(buf->data()), src, bytes, stream(device)),
          "cuMemcpyHtoDAsync");
  }
  Tensor tmp;
  tmp.buffer = buf;
  finish_outputs(device, {tmp});
  return buf;
}

}  // namespace

Tensor to_device(const Tensor& t, int device) {
  if (!t.buffer) return t;
  if (on_device(t)) {
    if (t.buffer->device().index == device) return t;
    return to_device(to_host(t), device);
  }
  Tensor r = t;
  if (t.buffer->immutable()) {
    Buffer* host = t.buffer.get();
    r.buffer = host->mirror(Device::cuda(device), [&] { return upload(device, host->data(), host->bytes()); });
    return r;
  }
  // Borrowed memory may change under us: upload just the viewed elements, every time.
  Tensor dense = t;
  if (!t.row_contiguous()) {
    dense = Tensor(t.shape, t.dtype);
    dense.allocate();
    detail::copy_convert(t, dense);
  }
  r = Tensor(t.shape, t.dtype);
  r.buffer = upload(device, dense.raw(), static_cast<size_t>(t.size()) * t.itemsize());
  return r;
}

Tensor contiguous_on_device(const Tensor& t, int device);  // kernels.cpp

Tensor to_host(const Tensor& t) {
  if (!on_device(t)) return t;
  int device = t.buffer->device().index;
  std::vector<Tensor> in{t};
  prepare_inputs(device, in);
  Tensor src = in[0].row_contiguous() ? in[0] : contiguous_on_device(in[0], device);
  Tensor h(t.shape, t.dtype);
  h.allocate();
  size_t bytes = static_cast<size_t>(t.size()) * t.itemsize();
  CUstream st = stream(device);
  const Driver& d = state().driver;
  if (bytes > 0) {
    detail::count(detail::counters().device_to_host_copies);
    not_replayable();
    check(d.cuMemcpyDtoHAsync(h.raw(), reinterpret_cast<CUdeviceptr>(src.raw()), bytes, st), "cuMemcpyDtoHAsync");
  }
  check(d.cuStreamSynchronize(st), "waiting for the device");
  return h;
}

void ensure_host(std::vector<Tensor>& ts) {
  for (auto& t : ts) {
    if (on_device(t)) t = to_host(t);
  }
}

void synchronize(int device) { check(state().driver.cuStreamSynchronize(stream(device)), "waiting for the device"); }

void trim_memory_cache() {
  State& s = state();
  if (!s.ok) return;
  for (int i = 0; i < s.count; ++i) {
    bind(i);
    s.driver.cuCtxSynchronize();
    std::lock_guard<std::mutex> lock(s.devices[i].mu);
    free_cached_locked(s.devices[i]);
  }
}

namespace {

// A byte count of the allocator summed over the devices.
size_t sum_over_devices(size_t DeviceState::*field) {
  State& s = state();
  size_t n = 0;
  for (int i = 0; i < s.count; ++i) {
    std::lock_guard<std::mutex> lock(s.devices[i].mu);
    n += s.devices[i].*field;
  }
  return n;
}

}  // namespace

size_t cached_bytes() { return sum_over_devices(&DeviceState::cached); }
size_t allocated_bytes() { return sum_over_devices(&DeviceState::in_use); }

size_t device_mallocs() { return state().mallocs.load(); }
size_t input_stream_waits() { return state().stream_waits.load(); }

}  // namespace kiln::cuda
