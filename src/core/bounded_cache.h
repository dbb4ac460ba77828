// A bounded cache of values that are costly to make, one class with one policy for the
// CPU JIT's kernels, NVRTC's modules and an executable's extent plans: lookups share a
// reader-writer lock; a key is made once however many threads ask for it (the others wait,
// and see the same error if it fails); past the capacity the least recently used eighth is
// dropped, destroyed after the lock is released. A Value holds what keeps it alive (a
// library, a module), so a dropped kernel lives on while it is used.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::detail {

template <class Value>
class BoundedCache {
 public:
  explicit BoundedCache(size_t capacity) : capacity_(capacity) {}

  /* The value for `key`: from memory, else made by make() (once per key at a time). */
  template <class Make>
  Value get(const std::string& key, const Make& make) {
    {
      std::shared_lock lock(mu_);
      if (auto it = entries_.find(key); it != entries_.end()) return hit(*it->second);
    }
    std::promise<Value> promise;
    std::shared_future<Value> pending;
    {
      std::unique_lock lock(mu_);
      if (auto it = entries_.find(key); it != entries_.end()) return hit(*it->second);
      if (auto it = in_flight_.find(key); it != in_flight_.end()) {
        pending = it->second;
      } else {
        in_flight_.emplace(key, promise.get_future().share());
      }
    }
    if (pending.valid()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      return pending.get();  // rethrows the maker's error
    }
    misses_.fetch_add(1, std::memory_order_relaxed);
    Dropped dropped;  // declared first: destroyed after the lock below is released
    try {
      Value v = make();
      std::unique_lock lock(mu_);
      // Publish and retire the in-flight entry together, so no caller sees neither.
      insert_locked(key, v, &dropped);
      in_flight_.erase(key);
      lock.unlock();
      promise.set_value(v);
      return v;
    } catch (...) {
      {
        std::unique_lock lock(mu_);
        in_flight_.erase(key);
      }
      promise.set_exception(std::current_exception());
      throw;
    }
  }

  /* The value for `key` when it is in memory now (counted as a hit), else false; never makes one. */
  bool find(const std::string& key, Value* out) {
    std::shared_lock lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return false;
    *out = hit(*it->second);
    return true;
  }

  /* Lower capacities drop entries at once. */
  void set_capacity(size_t n) {
    Dropped dropped;
    std::unique_lock lock(mu_);
    capacity_ = n;
    evict_locked(n, &dropped);
  }
  size_t capacity() const {
    std::shared_lock lock(mu_);
    return capacity_;
  }
  /* Drops every entry (values held elsewhere stay valid). */
  void clear() {
    Dropped dropped;
    std::unique_lock lock(mu_);
    evict_locked(0, &dropped);
  }
  size_t size() const {
    std::shared_lock lock(mu_);
    return entries_.size();
  }
  /* Lookups answered from memory (or by waiting for another thread's make), and makes. */
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    Value value;
    std::atomic<uint64_t> last_used;  // tick of the latest hit; written under a shared lock
    Entry(Value v, uint64_t tick) : value(std::move(v)), last_used(tick) {}
  };
  using Dropped = std::vector<std::unique_ptr<Entry>>;

  Value hit(Entry& e) {
    e.last_used.store(tick_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
    hits_.fetch_add(1, std::memory_order_relaxed);
    return e.value;
  }

  void insert_locked(const std::string& key, const Value& v, Dropped* dropped) {
    auto [it, inserted] = entries_.try_emplace(key);
    if (!inserted) return;
    it->second = std::make_unique<Entry>(v, tick_.fetch_add(1, std::memory_order_relaxed));
    // An eighth at a time, so a full cache does not sort on every insert.
    if (entries_.size() > capacity_) evict_locked(capacity_ - capacity_ / 8, dropped);
  }

  void evict_locked(size_t keep, Dropped* dropped) {
    if (entries_.size() <= keep) return;
    using It = typename decltype(entries_)::iterator;
    std::vector<std::pair<uint64_t, It>> order;
    order.reserve(entries_.size());
    for (It it = entries_.begin(); it != entries_.end(); ++it)
      order.emplace_back(it->second->last_used.load(std::memory_order_relaxed), it);
    const size_t drop = entries_.size() - keep;
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(drop - 1), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < drop; ++i) {
      dropped->push_back(std::move(order[i].second->second));
      entries_.erase(order[i].second);
    }
  }

  mutable std::shared_mutex mu_;  // guards entries_, in_flight_ and capacity_
  std::unordered_map<std::string, std::unique_ptr<Entry>> entries_;
  std::unordered_map<std::string, std::shared_future<Value>> in_flight_;  // key -> the make under way
  size_t capacity_;
  std::atomic<uint64_t> tick_{0};  // LRU clock; relaxed
  std::atomic<uint64_t> hits_{0}, misses_{0};  // statistics; relaxed
};

}  // namespace kiln::detail
