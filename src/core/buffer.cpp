#include "core/buffer.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "kiln/error.h"

namespace kiln::detail {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kCacheMinBytes = size_t{1} << 20;  // smaller blocks go straight to malloc
constexpr size_t kCacheMaxBytes = size_t{1} << 30;  // bound on what the cache holds

struct BlockCache {
  std::mutex mu;  // guards blocks and held
  std::multimap<size_t, void*> blocks;  // size -> free block
  size_t held = 0;

  // A free block of at least `bytes` and not much more; its true size goes to *got.
  void* take(size_t bytes, size_t* got) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = blocks.lower_bound(bytes);
    if (it == blocks.end() || it->first > bytes + bytes / 4) return nullptr;  // too wasteful
    void* p = it->second;
    *got = it->first;
    held -= it->first;
    blocks.erase(it);
    return p;
  }
  bool give(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    if (held + bytes > kCacheMaxBytes) return false;
    blocks.emplace(bytes, p);
    held += bytes;
    return true;
  }
  void trim() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [size, p] : blocks) std::free(p);
    blocks.clear();
    held = 0;
  }
  ~BlockCache() { trim(); }
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: buffers may die during static teardown
  return *c;
}

size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

std::shared_ptr<Buffer> Buffer::make(void* data, size_t bytes, bool owned) {
  struct Made : Buffer {  // make_shared needs a public constructor: one allocation, not two
    Made(void* d, size_t b, bool o) : Buffer(d, b, o) {}
  };
  return std::make_shared<Made>(data, bytes, owned);
}

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes) {
  size_t rounded = round_up(bytes == 0 ? 1 : bytes);
  void* p = nullptr;
  size_t got = rounded;
  if (rounded >= kCacheMinBytes) p = cache().take(rounded, &got);
  if (!p) p = std::aligned_alloc(kAlign, rounded);
  if (!p) fail("alloc", "out of memory allocating ", bytes, " bytes");
  return make(p, got, true);
}

std::shared_ptr<Buffer> Buffer::borrow(void* data, size_t bytes) { return make(data, bytes, false); }

std::shared_ptr<Buffer> Buffer::external(const void* data, size_t bytes, std::shared_ptr<const void> owner,
                                         Device device) {
  auto b = make(const_cast<void*>(data), bytes, false);  // not owned: never reused for outputs
  b->owner_ = std::move(owner);
  b->device_ = device;  // no block: the CUDA allocator never reuses or frees it
  return b;
}

std::shared_ptr<Buffer> Buffer::device_memory(void* data, size_t bytes, Device device, void* block,
                                              void (*release)(void*)) {
  auto b = make(data, bytes, false);
  b->device_ = device;
  b->block_ = block;
  b->release_ = release;
  return b;
}

Buffer::~Buffer() {
  if (release_) {
    release_(block_);
    return;
  }
  if (!owned_) return;
  if (bytes_ >= kCacheMinBytes && cache().give(data_, bytes_)) return;
  std::free(data_);
}

void trim_buffer_cache() { cache().trim(); }

size_t buffer_cache_bytes() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().held;
}

}  // namespace kiln::detail
