#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/checked.h"
#include "core/config.h"

namespace kiln::detail {
namespace {

thread_local bool t_in_pool_task = false;

// How long a thread polls before it sleeps: a decode step hands the pool a job every few
// microseconds, and waking a sleeping thread takes tens of them (more on a loaded machine).
constexpr std::chrono::microseconds kSpin{100};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/* Polls ready() for up to kSpin; true once it holds. */
template <class F>
bool spin_until(F&& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= until) return ready();
  }
}

// One parallel_for call: chunks are claimed through an atomic counter.
struct Job {
  const std::function<void(int64_t, int64_t)>* body;  // body, n, chunk, num_chunks: set before submit, then read-only
  int64_t n, chunk, num_chunks;
  std::atomic<int64_t> next{0};  // atomic: claims chunks
  std::atomic<int64_t> finished{0};  // atomic: chunks done; the caller waits for num_chunks
  std::mutex mu;  // guards error and pairs with done_cv
  std::condition_variable done_cv;  // waits on mu
  std::exception_ptr error;

  // Claims and runs chunks until none are left.
  void work() {
    for (int64_t c; (c = next.fetch_add(1)) < num_chunks;) {
      int64_t begin = c * chunk, end = chunk < n - begin ? begin + chunk : n;  // no begin + chunk past int64
      try {
        (*body)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      if (finished.fetch_add(1) + 1 == num_chunks) {
        std::lock_guard<std::mutex> lock(mu);
        done_cv.notify_all();
      }
    }
  }
};

class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  size_t workers() const { return threads_.size(); }

  void submit(const std::shared_ptr<Job>& job, int copies) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int i = 0; i < copies; ++i) queue_.push_back(job);
      queued_.store(queue_.size(), std::memory_order_release);
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    t_in_pool_task = true;
    for (;;) {
      std::shared_ptr<Job> job;
      spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; });
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (stop_ && queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
        queued_.store(queue_.size(), std::memory_order_release);
      }
      job->work();
    }
  }

  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable cv_;  // waits on mu_
  std::deque<std::shared_ptr<Job>> queue_;
  std::atomic<size_t> queued_{0};  // atomic: queue_.size() as last set under mu_, polled without it
  bool stop_ = false;
  std::vector<std::thread> threads_;  // filled by the constructor, then read-only
};

int configured_threads() {
  if (long n = config::integer(config::Knob::num_threads); n > 0) return static_cast<int>(n);
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool* p = new Pool(num_threads() - 1);  // leaked: workers may run during static teardown
  return *p;
}

}  // namespace

int num_threads() {
  static const int n = configured_threads();
  return n;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  if (threads == 1 || n <= grain || t_in_pool_task) {
    body(0, n);
    return;
  }
  // A few chunks per thread balance uneven cores without much overhead.
  int64_t num_chunks = std::min<int64_t>(ceil_div(n, grain), int64_t{threads} * 4);
  auto job = std::make_shared<Job>();
  job->body = &body;
  job->n = n;
  job->chunk = ceil_div(n, num_chunks);
  job->num_chunks = ceil_div(n, job->chunk);
  pool().submit(job, std::min<int>(threads - 1, static_cast<int>(job->num_chunks) - 1));
  t_in_pool_task = true;  // the caller's own chunks must not fan out again
  job->work();
  t_in_pool_task = false;
  spin_until([&] { return job->finished.load(std::memory_order_acquire) == job->num_chunks; });
  std::unique_lock<std::mutex> lock(job->mu);
  job->done_cv.wait(lock, [&] { return job->finished.load() == job->num_chunks; });
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace kiln::detail
