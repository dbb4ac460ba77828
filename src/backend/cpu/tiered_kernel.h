// The generated kernel of one fused program on the CPU, in two tiers: until it is ready the
// region runs through its interpreter (the eager kernels, exact), while the kernel compiles
// on the background pool; then the kernel. kiln::fused_kernels() picks the policy.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "backend/cpu/jit.h"

namespace kiln::cpu {

class CompileTicket;  // compile_pool.h

class TieredKernel {
 public:
  struct Source {
    std::string text, symbol;
  };
  using MakeSource = std::function<Source()>;

  TieredKernel() = default;
  ~TieredKernel();  // drops its ticket: a compile no one else wants is cancelled
  TieredKernel(const TieredKernel&) = delete;
  TieredKernel& operator=(const TieredKernel&) = delete;

  /* The kernel's address, or null: the caller runs the region's interpreter. Background: a
     kernel in memory or on disk is taken at once, else a compile is queued (never waited for).
     Wait: compiles here, or waits for the compile under way. Off: always null. Throws the
     compiler's error under wait (background reports it once on stderr and stays interpreted). */
  void* get(const MakeSource& make);
  /* Steady-clock time the kernel became ready (valid once get() returned it). */
  int64_t ready_ns() const { return ready_ns_.load(std::memory_order_relaxed); }

 private:
  void* settle_locked(bool report);  // takes a finished ticket's result; report: say a failure on stderr

  std::atomic<void*> fn_{nullptr};  // the kernel, once ready: the replay's lock-free path
  std::atomic<int64_t> ready_ns_{0};  // set before fn_ (release)
  std::mutex mu_;  // guards everything below
  bool looked_up_ = false;  // memory and disk caches tried
  bool unavailable_ = false;  // no compiler, or the compile failed: interpreted for good
  std::string error_;  // the failed compile's error
  Source source_;  // kept until a compile is queued (a full queue is asked again)
  std::shared_ptr<CompileTicket> ticket_;
  JitKernel kernel_;  // keeps the library loaded
};

}  // namespace kiln::cpu
