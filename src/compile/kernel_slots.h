// Kernels a backend compiled for one immutable fused program, found by a small key
// (device and variant) so a replayed call skips generating and hashing source.
#pragma once

#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace kiln::compiler {

class KernelSlots {
 public:
  KernelSlots() = default;
  KernelSlots(const KernelSlots&) {}  // a copied program starts with no kernels
  KernelSlots& operator=(const KernelSlots&) { return *this; }

  void* find(uint64_t key) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, fn] : entries_) {
      if (k == key) return fn;
    }
    return nullptr;
  }
  void put(uint64_t key, void* fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.emplace_back(key, fn);  // a racing duplicate is harmless: both name one kernel
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::pair<uint64_t, void*>> entries_;
};

}  // namespace kiln::compiler
