// Kernels a backend compiled for one immutable fused program, found by a small structured
// key (device and variant) so a replayed call skips generating and hashing source.
#pragma once

#include <memory>
#include <mutex>
#include <typeindex>
#include <utility>
#include <vector>

namespace kiln::compiler {

class KernelSlots {
 public:
  KernelSlots() = default;
  KernelSlots(const KernelSlots&) {}  // a copied program starts with no kernels
  KernelSlots& operator=(const KernelSlots&) { return *this; }

  /* The backend's kernel object stored under `key`, or null; valid while this object lives.
     Key: a struct with operator== and a hash() member. */
  template <class Key>
  const void* find(const Key& key) const {
    const size_t hash = key.hash();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : entries_) {
      if (e.hash == hash && e.type == typeid(Key) && *static_cast<const Key*>(e.key.get()) == key)
        return e.kernel.get();
    }
    return nullptr;
  }
  /* Keeps `kernel` (which keeps its code loaded) for the life of the program. */
  template <class Key>
  void put(const Key& key, std::shared_ptr<const void> kernel) const {
    Entry e{key.hash(), typeid(Key), std::make_shared<const Key>(key), std::move(kernel)};
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(std::move(e));  // a racing duplicate is harmless: both name one kernel
  }

 private:
  struct Entry {
    size_t hash;
    std::type_index type;
    std::shared_ptr<const void> key;
    std::shared_ptr<const void> kernel;
  };
  mutable std::mutex mu_;  // guards entries_
  mutable std::vector<Entry> entries_;
};

}  // namespace kiln::compiler
