// The CUDA runtime of kiln: the driver API loaded with dlopen (so a CPU-only
// machine runs the same binary), devices and their primary contexts, a default
// stream per thread per device, a stream-ordered caching allocator, events for
// dependencies across streams, and transfers between host and device.
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/nvrtc.h"
#include "core/tensor.h"

namespace kiln::cuda {

// Driver entry points, resolved once through cuGetProcAddress.
struct Driver {
#define KILN_CU_FN(name) decltype(&::name) name = nullptr;
#include "backend/cuda/driver_fns.def"
#undef KILN_CU_FN
};

/* The loaded driver, or null when there is none (no libcuda, no device, init failed). */
const Driver* driver();
/* Why driver() is null, for messages. */
const std::string& unavailable_reason();
int device_count();
/* The loaded driver; throws kiln::Error naming the reason when there is none. */
const Driver& drv();
/* Throws kiln::Error "[cuda] <what>: <driver message>" unless r is CUDA_SUCCESS. */
void check(CUresult r, const char* what);

struct DeviceInfo {
  int major = 0, minor = 0, sms = 0;
  int shared_optin = 0;   // bytes of shared memory a block may ask for beyond the default 48 KB
  int shared_per_sm = 0;  // bytes of shared memory of an SM, for all its blocks
  int threads_per_sm = 0;  // resident threads an SM holds
  int l2_bytes = 0;        // the L2 cache
  size_t memory_bytes = 0;  // the device's memory
  std::string name;
  std::string arch() const { return "sm_" + std::to_string(major) + std::to_string(minor); }
};
const DeviceInfo& device_info(int device);
/* Dynamic shared memory a block gets without asking (more needs the kernel's opt-in). */
constexpr unsigned kDefaultSharedBytes = 48 * 1024;

/* Makes the device's primary context current on this thread. */
void bind(int device);
/* This thread's default stream on the device (binds the context). */
CUstream stream(int device);

/* Device memory: one record per allocation, reused through the caching allocator. */
struct Block {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  int device = 0;
  CUstream stream = nullptr;      // the stream that allocates, writes and reuses it
  std::mutex mu;                  // guards written, ready and users
  CUevent ready = nullptr;        // recorded on `stream` when another stream must wait for it
  bool written = false;           // written on `stream` since it was allocated
  std::vector<CUstream> users;    // other streams that read it since it was allocated
};

/* A fresh device buffer of at least `bytes` on this thread's stream. Out of memory:
   releases the cached blocks and retries once, then throws kiln::Error. */
std::shared_ptr<detail::Buffer> allocate(int device, size_t bytes);
/* Gives t a row-major device buffer unless it already has a usable one (a plan's reused
   buffer of this device and stream, large enough). */
void allocate_output(int device, detail::Tensor& t);
inline Block* block_of(const detail::Tensor& t) {
  return t.buffer ? static_cast<Block*>(t.buffer->block()) : nullptr;
}
/* Whether t's data lives on a CUDA device. */
inline bool on_device(const detail::Tensor& t) { return t.buffer && !t.buffer->on_host(); }

/* Before a launch on this thread's stream: uploads host inputs, and makes the stream wait
   for inputs written on other streams. */
void prepare_inputs(int device, std::vector<detail::Tensor>& in);
/* After a launch: records that the outputs' blocks were written on this stream. */
void finish_outputs(int device, const std::vector<detail::Tensor>& out);

/* The tensor on the device (uploads host data; owned host buffers are uploaded once). */
detail::Tensor to_device(const detail::Tensor& t, int device);
/* The tensor's data on the host, row-major (waits for the device). */
detail::Tensor to_host(const detail::Tensor& t);
/* Copies host-side every device-resident tensor (for CPU kernels). */
void ensure_host(std::vector<detail::Tensor>& ts);
/* Waits for the work this thread queued on the device. */
void synchronize(int device);

/* Device work a run issues from the host (a cuBLASLt product), kept so that a replay can
   capture it into its graph, or run it again between its graph launches, with the
   pointers in `words`, on this thread's stream. */
struct HostStep {
  virtual ~HostStep() = default;
  virtual void run(int device, const std::vector<long>& words) = 0;
  /* The same work with these pointers captured from this thread's stream as a graph (the
     caller destroys it), whose other buffers `keep` then holds; null where it cannot be. */
  virtual CUgraph capture(int device, const std::vector<long>& words,
                          std::vector<std::shared_ptr<detail::Buffer>>& keep) = 0;
};
/* One kernel launch as a CUDA graph node holds it: function, shape and the parameter; or,
   with `host` set, a host step and the pointers it was given. */
struct LaunchRecord {
  Kernel kernel;
  unsigned grid = 0, block = 0, shared = 0;
  std::vector<long> meta;  // the kernel's one by-value parameter, or the host step's pointers
  std::shared_ptr<HostStep> host;
};
/* The launches and allocations of one run of a compiled plan on this thread, kept so the
   run can be replayed as a CUDA graph (plan_graph.cpp). */
struct Recording {
  std::vector<LaunchRecord> launches;
  std::vector<std::shared_ptr<detail::Buffer>> buffers;  // allocated while recording
  bool replayable = true;  // false after device work that is not a recorded kernel launch
};
/* This thread's recording, or null when none is under way. */
Recording*& recording();
/* Marks the recording (if any) as not replayable: copies and host round trips. */
inline void not_replayable() {
  if (Recording* r = recording()) r->replayable = false;
}

/* The tensor's data address as a kernel parameter word (0 without a buffer). */
inline long ptr_bits(const detail::Tensor& t) {
  return static_cast<long>(reinterpret_cast<uintptr_t>(t.buffer ? t.raw() : nullptr));
}

/* Whether the tensor's data starts on a vector of `elements` of its elements. */
inline bool aligned_to(const detail::Tensor& t, long elements) {
  return ptr_bits(t) % (elements * static_cast<long>(t.itemsize())) == 0;
}

/* Releases every cached free block on every device (kiln::clear_memory_cache). */
void trim_memory_cache();
/* Bytes of free blocks a device keeps: kiln::device_memory_cache_limit(), or half its
   memory when that is 0. Past it, the largest free blocks go back to the driver. */
size_t cache_limit(int device);
/* Releases free blocks past each device's cache limit (after a lower limit is set). */
void trim_memory_cache_to_limit();
/* Bytes held in free cached blocks, and bytes in use, summed over devices. */
size_t cached_bytes();
size_t allocated_bytes();
/* Number of cuMemAlloc calls made so far (tests check that the cache avoids them). */
size_t device_mallocs();
/* Times a stream was made to wait for an input written on another stream (tests check
   that each stream waits for a block once). */
size_t input_stream_waits();

}  // namespace kiln::cuda
