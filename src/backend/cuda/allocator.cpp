#include "backend/cuda/allocator.h"

#include <atomic>
#include <iterator>
#include <map>

#include "backend/cuda/driver.h"
#include "backend/cuda/recording.h"
#include "backend/cuda/streams.h"
#include "kiln/cache.h"
#include "kiln/error.h"

namespace kiln::cuda {

using detail::Buffer;
using detail::Tensor;

namespace {

// One device's free blocks.
struct DevicePool {
  std::mutex mu;  // guards free, cached and in_use
  std::map<CUstream, std::multimap<size_t, Block*>> free;  // free blocks by owning stream, then size
  size_t cached = 0, in_use = 0;
};

DevicePool& pool(int device) {
  static auto* pools = new DevicePool[kMaxDevices];  // never destroyed: blocks may be released during static teardown
  return pools[device];
}

std::atomic<size_t> g_mallocs{0};  // statistics; relaxed

size_t round_size(size_t bytes) {
  if (bytes <= (size_t{1} << 20)) {
    size_t r = 512;
    while (r < bytes) r <<= 1;
    return r;
  }
  constexpr size_t kBig = size_t{2} << 20;
  return (bytes + kBig - 1) / kBig * kBig;
}

// Returns a free block's memory to the driver; the device must be done with it.
void free_block(Block* b) {
  const Driver& d = drv();
  d.cuMemFree(b->ptr);
  if (b->ready) d.cuEventDestroy(b->ready);
  delete b;
}

void free_cached_locked(DevicePool& ds) {
  for (auto& [stream, blocks] : ds.free) {
    for (auto& [size, b] : blocks) {
      ds.cached -= b->size;
      free_block(b);
    }
  }
  ds.free.clear();
}

// Takes the largest free blocks out of the pool until it holds at most `limit` bytes.
std::vector<Block*> take_past_limit_locked(DevicePool& ds, size_t limit) {
  std::vector<Block*> out;
  while (ds.cached > limit) {
    std::multimap<size_t, Block*>* from = nullptr;
    for (auto& [stream, blocks] : ds.free) {
      if (!blocks.empty() && (!from || blocks.rbegin()->first > from->rbegin()->first)) from = &blocks;
    }
    if (!from) break;
    auto last = std::prev(from->end());
    ds.cached -= last->second->size;
    out.push_back(last->second);
    from->erase(last);
  }
  return out;
}

// Frees blocks taken out of the pool once the device is done with them (the work queued
// on their streams may still read them). Called without the pool's lock.
void free_taken(int device, const std::vector<Block*>& blocks) {
  if (blocks.empty()) return;
  if (!try_bind(device)) return;  // leaked rather than raced
  drv().cuCtxSynchronize();
  for (Block* b : blocks) free_block(b);
}

void release_block(void* p) {
  auto* b = static_cast<Block*>(p);
  DevicePool& ds = pool(b->device);
  const Driver& d = drv();
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
  const size_t limit = cache_limit(b->device);
  std::vector<Block*> past_limit;
  {
    std::lock_guard<std::mutex> lock(ds.mu);
    ds.in_use -= b->size;
    ds.cached += b->size;
    ds.free[b->stream].emplace(b->size, b);
    past_limit = take_past_limit_locked(ds, limit);
  }
  free_taken(b->device, past_limit);
}

}  // namespace

std::shared_ptr<Buffer> allocate(int device, size_t bytes) {
  DevicePool& ds = pool(device);
  const Driver& d = drv();
  CUstream st = stream(device);
  size_t size = round_size(bytes == 0 ? 1 : bytes);
  Block* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(ds.mu);
    auto pit = ds.free.find(st);
    if (pit != ds.free.end()) {
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
    g_mallocs.fetch_add(1, std::memory_order_relaxed);
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

bool allocate_from(int device, const Tensor& donor, Tensor& y) {
  if (donor.donated && on_device(donor) && donor.row_contiguous() && donor.offset == 0 && donor.dtype == y.dtype) {
    y.buffer = donor.buffer;
    y.donated = true;
  }
  allocate_output(device, y);
  return y.buffer == donor.buffer;
}

void trim_memory_cache() {
  for (int i = 0; i < device_count(); ++i) {
    bind(i);
    drv().cuCtxSynchronize();
    std::lock_guard<std::mutex> lock(pool(i).mu);
    free_cached_locked(pool(i));
  }
}

size_t cache_limit(int device) {
  const size_t set = device_memory_cache_limit();
  return set ? set : device_info(device).memory_bytes / 2;
}

void trim_memory_cache_to_limit() {
  for (int i = 0; i < device_count(); ++i) {
    DevicePool& ds = pool(i);
    const size_t limit = cache_limit(i);
    std::vector<Block*> past_limit;
    {
      std::lock_guard<std::mutex> lock(ds.mu);
      past_limit = take_past_limit_locked(ds, limit);
    }
    free_taken(i, past_limit);
  }
}

namespace {

// A byte count of the allocator summed over the devices.
size_t sum_over_devices(size_t DevicePool::*field) {
  size_t n = 0;
  for (int i = 0; i < device_count(); ++i) {
    std::lock_guard<std::mutex> lock(pool(i).mu);
    n += pool(i).*field;
  }
  return n;
}

}  // namespace

size_t cached_bytes() { return sum_over_devices(&DevicePool::cached); }
size_t allocated_bytes() { return sum_over_devices(&DevicePool::in_use); }

size_t device_mallocs() { return g_mallocs.load(); }

}  // namespace kiln::cuda
