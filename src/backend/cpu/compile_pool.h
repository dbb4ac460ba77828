// The background compile pool: a few threads that run the system compiler for fused
// kernels while calls go on through the interpreter (docs/codegen.md, "Tiers").
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/cpu/jit.h"
#include "backend/cpu/jit_support.h"

namespace kiln::cpu {

// One compile, shared by every ticket for the same source and symbol.
struct CompileJob {
  std::string key, source, symbol;
  enum class State { queued, running, done } state = State::queued;  // guarded by the pool's mutex
  int tickets = 0;  // guarded by the pool's mutex: requesters still interested
  detail::ProcessCanceller canceller;  // kills the compiler when the last ticket goes, or at exit
  std::atomic<bool> finished{false};  // set (release) after the three results below
  JitKernel kernel;  // empty when the compile failed
  std::string error;  // why it failed ("" when it did not)
  int64_t finished_ns = 0;  // steady clock
};

struct CompilePoolState;

/* One requester's share of a compile. Requesters of one source share one job; the job is
   cancelled when the last ticket is dropped (queued: removed; running: its compiler killed). */
class CompileTicket {
 public:
  CompileTicket(std::shared_ptr<CompilePoolState> pool, std::shared_ptr<CompileJob> job)
      : pool_(std::move(pool)), job_(std::move(job)) {}
  ~CompileTicket();
  CompileTicket(const CompileTicket&) = delete;
  CompileTicket& operator=(const CompileTicket&) = delete;

  bool done() const { return job_->finished.load(std::memory_order_acquire); }
  /* Valid once done(). */
  const CompileJob& result() const { return *job_; }

 private:
  friend class CompilePool;
  std::shared_ptr<CompilePoolState> pool_;
  std::shared_ptr<CompileJob> job_;
};

/* Compiles one job: jit_compile, or a test's stand-in. `niceness` is above 0 on the pool's
   workers (the calls running meanwhile come first) and 0 for a caller that waits. */
using CompileFn = std::function<JitKernel(const std::string& source, const std::string& symbol,
                                          detail::ProcessCanceller*, int niceness)>;

class CompilePool {
 public:
  static JitKernel default_compile(const std::string& source, const std::string& symbol,
                                   detail::ProcessCanceller* cancel, int niceness) {
    return jit_compile(source, symbol, cancel, niceness);
  }
  /* `threads` workers, started on the first queued job; at most `limit` jobs queued.
     `compile` runs one job (jit_compile; tests give a stand-in). */
  CompilePool(int threads, size_t limit, CompileFn compile = default_compile);
  ~CompilePool();  // shutdown()
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /* A ticket for compiling `source`: joins the job for the same source that is queued or
     running, else makes one, queued at the back when `queue` (workers take the oldest first).
     Null when the queue is full or the pool is shut down: the caller asks again later.
     Never blocks on a compile. */
  std::shared_ptr<CompileTicket> request(const std::string& source, const std::string& symbol, bool queue = true);
  /* Returns when t is done: runs its job on this thread if no worker has started it. */
  void wait(CompileTicket& t);
  /* Jobs queued or running now. */
  size_t pending() const;
  /* Returns when nothing is queued or running. */
  void drain();
  /* Cancels every job (queued ones are dropped, running compilers killed), joins the
     workers; later requests return null. */
  void shutdown();

 private:
  std::shared_ptr<CompilePoolState> s_;
};

/* The process's pool: KILN_COMPILE_THREADS workers, 1024 queued jobs at most; shut down
   (its compilers killed, its threads joined) when the process exits. */
CompilePool& compile_pool();
/* A process's pool of `threads` workers (KILN_COMPILE_THREADS when 0) running `compile`,
   shut down at exit like compile_pool(), and covered by kernels_compiling() and
   wait_for_kernels() with it (the GPU's NVRTC compiles, backend/cuda/tiers.cpp). */
CompilePool& make_process_pool(CompileFn compile);
/* Every process pool made so far, compile_pool() first. */
std::vector<CompilePool*> process_pools();

}  // namespace kiln::cpu
