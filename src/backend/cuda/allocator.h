// Device memory: a stream-ordered caching allocator. A freed block goes back to the pool of
// the stream that owns it and is reused by later work on that stream without a sync; the
// free blocks a device keeps are bounded (kiln::set_device_memory_cache_limit).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"

namespace kiln::cuda {

/* Device memory: one record per allocation, reused through the caching allocator. */
struct Block {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  int device = 0;
  CUstream stream = nullptr;  // the stream that allocates, writes and reuses it
  std::mutex mu;  // guards written, ready and users
  CUevent ready = nullptr;  // recorded on `stream` when another stream must wait for it
  bool written = false;  // written on `stream` since it was allocated
  std::vector<CUstream> users;  // other streams that read it since it was allocated
};

/* A fresh device buffer of at least `bytes` on this thread's stream. Out of memory:
   releases the cached blocks and retries once, then throws kiln::Error. */
std::shared_ptr<detail::Buffer> allocate(int device, size_t bytes);
/* Gives t a row-major device buffer unless it already has a usable one (a plan's reused
   buffer of this device and stream, large enough). */
void allocate_output(int device, detail::Tensor& t);
/* Allocates y in the buffer of `donor` where the donor was donated and y can take it as it lies
   (row-major from its start, same dtype): true then, and y holds the donor's values; else y
   gets a buffer of its own (false) for the caller to fill. */
bool allocate_from(int device, const detail::Tensor& donor, detail::Tensor& y);
inline Block* block_of(const detail::Tensor& t) { return t.buffer ? static_cast<Block*>(t.buffer->block()) : nullptr; }
/* Whether t's data lives on a CUDA device. */
inline bool on_device(const detail::Tensor& t) { return t.buffer && !t.buffer->on_host(); }

/* The tensor's data address, for a pointer of a kernel's argument struct (null without a buffer). */
inline void* data_ptr(const detail::Tensor& t) { return t.buffer ? t.raw() : nullptr; }
/* The same as a kernel parameter word. */
inline long ptr_bits(const detail::Tensor& t) { return static_cast<long>(reinterpret_cast<uintptr_t>(data_ptr(t))); }

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

}  // namespace kiln::cuda
