// The background compile pool: a FIFO of compile jobs shared by source, a few workers,
// cancellation by the last requester or at exit.
#include "backend/cpu/compile_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>

#include "core/config.h"

namespace kiln::cpu {

// Background compilers yield to the work they run beside: on 2 cores a compiler at normal
// priority made the decoder's interim runs 4 ms instead of 0.9 (its eager speed).
constexpr int kBackgroundNiceness = 10;

struct CompilePoolState {
  CompilePoolState(int threads, size_t limit, CompileFn compile)
      : threads(std::max(1, threads)), limit(limit), compile(std::move(compile)) {}

  const int threads;
  const size_t limit;
  const CompileFn compile;

  mutable std::mutex mu;  // guards everything below, and every job's state and tickets
  std::condition_variable work;  // a job was queued, or the pool stops
  std::condition_variable finished;  // a job finished
  std::deque<std::shared_ptr<CompileJob>> queue;  // oldest first
  std::unordered_map<std::string, std::shared_ptr<CompileJob>> live;  // key -> queued or running job
  size_t running = 0;
  bool stopping = false;
  std::vector<std::thread> workers;

  // Runs the job outside the lock, then publishes its result.
  void run(const std::shared_ptr<CompileJob>& job, int niceness) {
    JitKernel k;
    std::string error;
    try {
      k = compile(job->source, job->symbol, &job->canceller, niceness);
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "unknown error";
    }
    std::lock_guard<std::mutex> lock(mu);
    job->kernel = std::move(k);
    job->error = std::move(error);
    job->finished_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    job->source.clear();
    job->source.shrink_to_fit();
    job->state = CompileJob::State::done;
    job->finished.store(true, std::memory_order_release);
    if (auto it = live.find(job->key); it != live.end() && it->second == job) live.erase(it);
    --running;
    finished.notify_all();
  }

  void worker() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      std::shared_ptr<CompileJob> job = std::move(queue.front());
      queue.pop_front();
      job->state = CompileJob::State::running;
      ++running;
      lock.unlock();
      run(job, kBackgroundNiceness);
      lock.lock();
    }
  }

  // Called with mu held: the job ends without running.
  void drop_locked(const std::shared_ptr<CompileJob>& job, const char* why) {
    queue.erase(std::remove(queue.begin(), queue.end(), job), queue.end());
    if (auto it = live.find(job->key); it != live.end() && it->second == job) live.erase(it);
    job->error = why;
    job->state = CompileJob::State::done;
    job->finished.store(true, std::memory_order_release);
    finished.notify_all();
  }

  void release(const std::shared_ptr<CompileJob>& job) {
    std::lock_guard<std::mutex> lock(mu);
    if (--job->tickets > 0 || job->state == CompileJob::State::done) return;
    // No one wants it any more: a later request for this source starts afresh.
    if (job->state == CompileJob::State::queued) return drop_locked(job, "cancelled");
    if (auto it = live.find(job->key); it != live.end() && it->second == job) live.erase(it);
    job->canceller.cancel();
  }
};

CompileTicket::~CompileTicket() { pool_->release(job_); }

CompilePool::CompilePool(int threads, size_t limit, CompileFn compile)
    : s_(std::make_shared<CompilePoolState>(threads, limit, std::move(compile))) {}

CompilePool::~CompilePool() { shutdown(); }

std::shared_ptr<CompileTicket> CompilePool::request(const std::string& source, const std::string& symbol, bool queue) {
  CompilePoolState& s = *s_;
  std::string key = symbol + '\n' + source;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.stopping) return nullptr;
  if (auto it = s.live.find(key); it != s.live.end()) {
    ++it->second->tickets;
    return std::make_shared<CompileTicket>(s_, it->second);
  }
  if (queue && s.queue.size() >= s.limit) return nullptr;
  auto job = std::make_shared<CompileJob>();
  job->key = key;
  job->source = source;
  job->symbol = symbol;
  job->tickets = 1;
  s.live.emplace(std::move(key), job);
  if (queue) {
    s.queue.push_back(job);
    if (s.workers.size() < static_cast<size_t>(s.threads) && s.workers.size() < s.queue.size() + s.running) {
      s.workers.emplace_back([st = s_] { st->worker(); });
    }
    s.work.notify_one();
  }
  return std::make_shared<CompileTicket>(s_, job);
}

void CompilePool::wait(CompileTicket& t) {
  CompilePoolState& s = *s_;
  const std::shared_ptr<CompileJob>& job = t.job_;
  std::unique_lock<std::mutex> lock(s.mu);
  if (job->state == CompileJob::State::queued) {
    // Not started by a worker: compiling here is sooner than waiting behind the queue.
    s.queue.erase(std::remove(s.queue.begin(), s.queue.end(), job), s.queue.end());
    job->state = CompileJob::State::running;
    ++s.running;
    lock.unlock();
    s.run(job, 0);  // the caller waits for it: full priority
    return;
  }
  s.finished.wait(lock, [&] { return job->state == CompileJob::State::done; });
}

size_t CompilePool::pending() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->queue.size() + s_->running;
}

void CompilePool::drain() {
  std::unique_lock<std::mutex> lock(s_->mu);
  s_->finished.wait(lock, [&] { return s_->queue.empty() && s_->running == 0; });
}

void CompilePool::shutdown() {
  CompilePoolState& s = *s_;
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stopping = true;
    while (!s.queue.empty()) s.drop_locked(s.queue.front(), "cancelled: the process is exiting");
    for (auto& [key, job] : s.live) job->canceller.cancel();  // running ones
    workers.swap(s.workers);
  }
  s.work.notify_all();
  for (std::thread& w : workers) w.join();
}

namespace {

std::mutex g_pools_mu;  // guards g_pools
std::vector<CompilePool*> g_pools;  // never deleted: shut down at exit

int pool_threads() {
  long n = config::integer(config::Knob::compile_threads);
  if (n == 0) n = std::clamp<long>(static_cast<long>(std::thread::hardware_concurrency()) / 2, 1, 4);
  return static_cast<int>(n);
}

CompilePool* add_pool(CompileFn compile) {
  auto* p = new CompilePool(pool_threads(), 1024, std::move(compile));
  {
    std::lock_guard<std::mutex> lock(g_pools_mu);
    g_pools.push_back(p);
  }
  // Registered after what the pool's jobs use, so it runs first: workers joined while it exists.
  std::atexit([] {
    std::vector<CompilePool*> pools;
    {
      std::lock_guard<std::mutex> lock(g_pools_mu);
      pools = g_pools;
    }
    for (CompilePool* q : pools) q->shutdown();
  });
  return p;
}

}  // namespace

CompilePool& compile_pool() {
  static CompilePool* pool = [] {
    // The JIT's state (and the exit hook that removes its directory) first, so that the hook
    // below runs before it: compilers are killed and workers joined while all they use exists.
    (void)jit_available();
    return add_pool(CompilePool::default_compile);
  }();
  return *pool;
}

CompilePool& make_process_pool(CompileFn compile) {
  (void)compile_pool();  // first in the list
  return *add_pool(std::move(compile));
}

std::vector<CompilePool*> process_pools() {
  (void)compile_pool();
  std::lock_guard<std::mutex> lock(g_pools_mu);
  return g_pools;
}

}  // namespace kiln::cpu
