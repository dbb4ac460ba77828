// Kernels a backend compiled for one immutable fused program, found by a small key
// (device and variant) so a replayed call skips generating and hashing source.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace kiln::compiler {

class KernelSlots {
 public:
  KernelSlots() = default;
  KernelSlots(const KernelSlots&) {}  // a copied program starts with no kernels
  KernelSlots& operator=(const KernelSlots&) { return *this; }

  /* The backend's kernel object stored under `key`, or null; valid while this object lives. */
  const void* find(uint64_t key) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, kernel] : entries_) {
      if (k == key) return kernel.get();
    }
    return nullptr;
  }
  /* Keeps `kernel` (which keeps its code loaded) for the life of the program. */
  void put(uint64_t key, std::shared_ptr<const void> kernel) const {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.emplace_back(key, std::move(kernel));  // a racing duplicate is harmless: both name one kernel
  }

 private:
  mutable std::mutex mu_;  // guards entries_
  mutable std::vector<std::pair<uint64_t, std::shared_ptr<const void>>> entries_;
};

}  // namespace kiln::compiler
