// Owned, aligned host memory. Large blocks are recycled through a bounded cache
// so that big temporaries do not pay for fresh pages on every op.
#pragma once

#include <cstddef>
#include <memory>

namespace kiln::detail {

class Buffer {
 public:
  /* Allocates at least `bytes` bytes aligned to 64; throws kiln::Error when out of memory. */
  static std::shared_ptr<Buffer> allocate(size_t bytes);
  /* Wraps memory the caller owns and keeps alive; it is never freed here. */
  static std::shared_ptr<Buffer> borrow(void* data, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  Buffer(void* data, size_t bytes, bool owned) : data_(data), bytes_(bytes), owned_(owned) {}
  void* data_;
  size_t bytes_;
  bool owned_;
};

/* Releases every cached block (tests of memory use call this). */
void trim_buffer_cache();
/* Bytes currently held by the cache of freed blocks. */
size_t buffer_cache_bytes();

}  // namespace kiln::detail
