// A fused program's kernel in tiers: interpreted now, generated code once compiled.
#include "backend/cpu/tiered_kernel.h"

#include <cstdio>

#include "backend/cpu/compile_pool.h"
#include "compile/tier.h"
#include "kiln/error.h"

namespace kiln::cpu {

TieredKernel::~TieredKernel() = default;

void* TieredKernel::settle_locked(bool report) {
  const CompileJob& r = ticket_->result();
  if (r.kernel) {
    kernel_ = r.kernel;
    ready_ns_.store(r.finished_ns, std::memory_order_relaxed);
    fn_.store(kernel_.fn, std::memory_order_release);
  } else {
    unavailable_ = true;
    error_ = r.error;
    // A rejected source is kiln's bug, worth a line; cancellation (at exit) is not.
    if (report && !error_.empty() && error_.rfind("cancelled", 0) != 0 &&
        error_.find("was cancelled") == std::string::npos)
      std::fprintf(stderr, "kiln: %s\nkiln: that fused region keeps running through the interpreter\n", error_.c_str());
  }
  ticket_.reset();
  return fn_.load(std::memory_order_relaxed);
}

void* TieredKernel::get(const MakeSource& make) {
  const FusedKernels policy = fused_kernels();
  if (policy == FusedKernels::off) return nullptr;
  if (void* f = fn_.load(std::memory_order_acquire)) return f;
  std::unique_lock<std::mutex> lock(mu_);
  if (void* f = fn_.load(std::memory_order_relaxed)) return f;
  if (unavailable_) {
    if (policy == FusedKernels::wait && !error_.empty()) throw Error(error_);  // already tagged [jit]
    return nullptr;
  }
  if (!looked_up_) {
    looked_up_ = true;
    if (!jit_available()) {
      unavailable_ = true;
      return nullptr;
    }
    source_ = make();
    JitKernel k = jit_lookup(source_.text, source_.symbol);  // a previous process's kernel, at once
    if (k) {
      kernel_ = std::move(k);
      ready_ns_.store(compiler::now_ns(), std::memory_order_relaxed);
      fn_.store(kernel_.fn, std::memory_order_release);
      source_ = {};
      return kernel_.fn;
    }
  }
  if (ticket_ && ticket_->done()) return settle_locked(policy == FusedKernels::background);
  if (policy == FusedKernels::background) {
    if (!ticket_) {
      ticket_ = compile_pool().request(source_.text, source_.symbol);
      if (ticket_) source_ = {};  // else the queue is full: asked again at the next call
    }
    return nullptr;
  }
  // wait: join the compile under way (or run it here).
  if (!ticket_) ticket_ = compile_pool().request(source_.text, source_.symbol, /*queue=*/false);
  if (!ticket_) fail("jit", "cannot compile kernel '", source_.symbol, "': the process is exiting");
  source_ = {};
  std::shared_ptr<CompileTicket> t = ticket_;
  lock.unlock();  // background callers of this region go on meanwhile
  compile_pool().wait(*t);
  lock.lock();
  if (ticket_ == t) settle_locked(false);  // the error is thrown below
  if (void* f = fn_.load(std::memory_order_relaxed)) return f;
  if (!error_.empty()) throw Error(error_);
  return nullptr;
}

}  // namespace kiln::cpu
