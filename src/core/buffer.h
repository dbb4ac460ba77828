// Owned, aligned host memory. Large blocks are recycled through a bounded cache
// so that big temporaries do not pay for fresh pages on every op.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>

#include "kiln/device.h"

namespace kiln::detail {

class Buffer {
 public:
  /* Allocates at least `bytes` bytes aligned to 64; throws kiln::Error when out of memory. */
  static std::shared_ptr<Buffer> allocate(size_t bytes);
  /* Wraps memory the caller owns and keeps alive; it is never freed here. */
  static std::shared_ptr<Buffer> borrow(void* data, size_t bytes);
  /* Read-only memory that never changes (a mapped file, another library's array) and that
     `owner` keeps alive: never written or freed here. Host memory is uploaded to a device once
     like an owned buffer; device memory (another library's GPU array) is read in place. */
  static std::shared_ptr<Buffer> external(const void* data, size_t bytes, std::shared_ptr<const void> owner,
                                          Device device = Device::cpu());
  /* Device memory owned by a backend: `release(block)` runs when the buffer dies. */
  static std::shared_ptr<Buffer> device_memory(void* data, size_t bytes, Device device, void* block,
                                               void (*release)(void* block));
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool on_host() const { return device_.type == Device::Type::cpu; }
  bool owned() const { return owned_; }
  /* The contents never change: owned (kiln writes a buffer only before sharing it) or external. */
  bool immutable() const { return owned_ || owner_ != nullptr; }
  void* block() const { return block_; }  // the backend's record of device memory, else null
  /* The device copy of this owned host buffer, made by `make` on first use (host
     buffers are immutable once written, so one upload serves every later use). */
  template <class F>
  std::shared_ptr<Buffer> mirror(Device d, F make) {
    std::lock_guard<std::mutex> lock(mirror_mu_);
    if (!mirror_ || mirror_->device_ != d) mirror_ = make();
    return mirror_;
  }

 private:
  Buffer(void* data, size_t bytes, bool owned) : data_(data), bytes_(bytes), owned_(owned) {}
  static std::shared_ptr<Buffer> make(void* data, size_t bytes, bool owned);
  void* data_;
  size_t bytes_;
  bool owned_;
  Device device_;  // immutable
  void* block_ = nullptr;  // immutable
  void (*release_)(void*) = nullptr;  // immutable
  std::shared_ptr<const void> owner_;  // immutable: keeps external memory alive
  std::mutex mirror_mu_;  // guards mirror_
  std::shared_ptr<Buffer> mirror_;  // guarded by mirror_mu_
};

/* Releases every cached block (tests of memory use call this). */
void trim_buffer_cache();
/* Bytes currently held by the cache of freed blocks. */
size_t buffer_cache_bytes();

}  // namespace kiln::detail
