// Evaluation of the lazy graph: a post-order walk, then each node materialized
// once under its own lock, so threads sharing nodes compute each of them once.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <new>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "core/config.h"
#include "core/node.h"
#include "core/stats.h"
#include "kiln/eval.h"
#include "ops/primitive.h"
#ifdef KILN_WITH_CUDA
#include "backend/cuda/cuda.h"
#endif

namespace kiln {
namespace detail {

Counters& counters() {
  static Counters c;
  return c;
}

std::shared_ptr<Producer> Node::pending_producer() {
  if (ready.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  return producer;
}

void Producer::run(Device device) {
  std::lock_guard<std::mutex> lock(mu);
  if (done) return;
  if (error_after_donation) std::rethrow_exception(error_after_donation);
  std::vector<Tensor> in;
  in.reserve(inputs.size());
  bool donated = false;
  for (auto& a : inputs) {
    in.push_back(a.tensor());
    // Only this producer holds the input node, and only the node holds its buffer
    // (besides the copy just made): nobody can observe the buffer being reused.
    const auto& buf = in.back().buffer;
    // Host memory kiln allocated, or device memory from a backend's allocator (an upload
    // is also held as its host buffer's mirror, so it never gets here).
    const bool ours = buf && (buf->on_host() ? buf->owned() : buf->block() != nullptr);
    const bool may_donate = prim->kind() == OpKind::CompiledCall || prim->may_write_into(in.size() - 1);
    if (may_donate && a.node().use_count() == 1 && ours && buf.use_count() == 2) {
      in.back().donated = donated = true;
    }
  }
  std::vector<Tensor> out = results;  // shapes and dtypes; kernels fill buffers
  try {
    run_primitive(device, *prim, in, out);
  } catch (...) {
    if (donated) error_after_donation = std::current_exception();
    throw;
  }
  // A compiled call counts the kernels of its plan itself.
  if (!prim->is_view() && prim->kind() != OpKind::CompiledCall) count(counters().kernels_launched);
  results = std::move(out);
  done = true;
}

void run_primitive(Device device, Primitive& prim, std::vector<Tensor>& in, std::vector<Tensor>& out) {
#ifdef KILN_WITH_CUDA
  if (device.type == Device::Type::cuda) return cuda::eval(device, prim, in, out);
  cuda::ensure_host(in);
#else
  if (device.type != Device::Type::cpu) fail(prim.name(), "no backend for device ", device.str());
#endif
  try {
    prim.eval_cpu(in, out);
  } catch (const std::bad_alloc&) {  // a kernel's scratch (packing, sort keys) that cannot fit
    fail(prim.name(), "out of memory");
  } catch (const std::length_error&) {
    fail(prim.name(), "out of memory: a scratch buffer is longer than memory can hold");
  }
}

Device device_of(const std::vector<Tensor>& ts) {
  for (auto& t : ts) {
    if (t.buffer && !t.buffer->on_host()) return t.buffer->device();
  }
  return Device::cpu();
}

// Releasing a long chain of producers recursively would overflow the stack,
// so inputs whose last reference dies here are released in a loop instead.
Producer::~Producer() {
  thread_local std::vector<Array>* pending = nullptr;
  if (pending) {
    for (auto& a : inputs) pending->push_back(std::move(a));
    return;
  }
  std::vector<Array> queue = std::move(inputs);
  pending = &queue;
  while (!queue.empty()) {
    Array a = std::move(queue.back());
    queue.pop_back();
    // Dropping `a` may destroy its node and producer, which append to `queue`.
  }
  pending = nullptr;
}

namespace {
thread_local uint64_t t_trace_id = 0;
}
uint64_t current_trace_id() { return t_trace_id; }
void set_current_trace_id(uint64_t id) { t_trace_id = id; }

void Node::materialize() {
  std::lock_guard<std::mutex> lock(mu);
  if (ready.load(std::memory_order_relaxed)) return;
  if (!producer) {
    fail("eval",
         "cannot evaluate an array that depends on the inputs of a function being compiled "
         "(item, to_vector and eval are not available while tracing)");
  }
  producer->run(device);
  Tensor& result = producer->results[static_cast<size_t>(output_index)];
  // Taken rather than copied when no sibling or tracer can still read it.
  tensor = producer.use_count() == 1 ? std::move(result) : result;
  producer.reset();  // drops the inputs once every sibling is done
  ready.store(true, std::memory_order_release);
  count(counters().arrays_materialized);
}

namespace {

// What a walk has met (nodes, producers): the first few in a reused per-thread list searched
// linearly (a compiled call's walk meets one or two, and allocates nothing for them), the rest hashed.
template <class T>
class Seen {
 public:
  Seen() { few().clear(); }
  bool insert(T* n) {
    auto& f = few();
    if (std::find(f.begin(), f.end(), n) != f.end()) return false;
    if (f.size() < kFew) {
      f.push_back(n);
      return true;
    }
    return many_.insert(n).second;
  }

 private:
  static constexpr size_t kFew = 16;
  static std::vector<T*>& few() {
    thread_local std::vector<T*> list;  // the walk never re-enters itself on a thread
    return list;
  }
  std::unordered_set<T*> many_;
};

// Unevaluated nodes reachable from `roots`, inputs before users.
std::vector<std::shared_ptr<Node>> post_order(const std::vector<Array>& roots) {
  std::vector<std::shared_ptr<Node>> order;
  Seen<Node> seen;
  // A producer's inputs are walked once: its other outputs (a compiled step returns a thousand
  // caches) follow at once, since none of them can lie among those inputs.
  Seen<Producer> walked;
  struct Frame {
    std::shared_ptr<Node> node;
    std::shared_ptr<Producer> producer;
    size_t next_input;
  };
  thread_local std::vector<Frame> stack;  // reused, like SeenNodes' list
  struct Empty {  // a walk that throws keeps no node alive
    ~Empty() { stack.clear(); }
  } empty_on_exit;
  auto push = [&](const std::shared_ptr<Node>& n) {
    if (!n) return;
    auto p = n->pending_producer();
    if (!p && n->ready.load(std::memory_order_acquire)) return;  // evaluated: not even remembered
    if (!seen.insert(n.get())) return;
    if (!p || !walked.insert(p.get())) {
      order.push_back(n);  // a trace placeholder (fails below), or its producer's inputs are ordered
      return;
    }
    stack.push_back({n, std::move(p), 0});
  };
  // One root at a time: a root that is also an input of a later root must not be marked
  // seen while still waiting on the stack, or its user would be ordered before it.
  for (auto& r : roots) {
    push(r.node());
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next_input < f.producer->inputs.size()) {
        auto& in = f.producer->inputs[f.next_input++].node();
        push(in);
        continue;
      }
      order.push_back(std::move(f.node));
      stack.pop_back();
    }
  }
  return order;
}

std::atomic<int> g_eager{-1};  // atomic; -1: not yet read from KILN_MODE

// One worker thread per calling thread: that thread's default CPU stream.
class Stream {
 public:
  Stream() : worker_([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void enqueue(std::vector<Array> arrays) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(arrays));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::vector<Array> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      try {
        eval(work);
      } catch (...) {
        // The nodes stay unevaluated; the next synchronous eval raises the error.
      }
    }
  }
  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable cv_;  // waits on mu_
  std::deque<std::vector<Array>> queue_;  // guarded by mu_
  bool stop_ = false;  // guarded by mu_
  std::thread worker_;  // touched only by the owning thread (start, join)
};

}  // namespace
}  // namespace detail

void eval(const std::vector<Array>& arrays) {
  for (auto& n : detail::post_order(arrays)) {
    n->materialize();
    n.reset();  // the walk's own hold: an intermediate that no later node reads goes now, not at the end
  }
#ifdef KILN_WITH_CUDA
  // eval returns once the device has finished (async_eval is the one that does not wait).
  int synced = -1;
  for (auto& a : arrays) {
    if (a.valid() && a.device().type == Device::Type::cuda && a.device().index != synced && cuda::available()) {
      synced = a.device().index;
      cuda::synchronize(synced);
    }
  }
#endif
}

void async_eval(const std::vector<Array>& arrays) {
#ifdef KILN_WITH_CUDA
  // GPU work only enqueues kernels on this thread's CUDA stream, which runs on its own:
  // launched here, as eval does but without the final wait (no hand-over to a worker,
  // and the next call's launches overlap this one's kernels).
  bool on_gpus = true;
  for (auto& a : arrays) on_gpus = on_gpus && a.valid() && a.device().type == Device::Type::cuda;
  std::vector<std::shared_ptr<detail::Node>> order;
  if (on_gpus) order = detail::post_order(arrays);  // CPU roots skip the walk: the worker does it
  for (auto& n : order) on_gpus = on_gpus && n->device.type == Device::Type::cuda;
  if (on_gpus) {
    try {
      for (auto& n : order) {
        n->materialize();
        n.reset();  // as in eval
      }
    } catch (...) {
      // As on the worker: the nodes stay unevaluated and the next synchronous eval raises.
    }
    return;
  }
#endif
  // Per thread, so no lock is shared between threads' streams; its destructor drains the queue.
  thread_local detail::Stream stream;
  stream.enqueue(arrays);
}

void set_eager(bool e) { detail::g_eager.store(e ? 1 : 0); }

bool eager() {
  int v = detail::g_eager.load(std::memory_order_relaxed);
  if (v < 0) {
    v = config::choice(config::Knob::mode) == "eager" ? 1 : 0;
    int expected = -1;
    detail::g_eager.compare_exchange_strong(expected, v);
    v = detail::g_eager.load();
  }
  return v == 1;
}

Stats stats() {
  auto& c = detail::counters();
  return {c.kernels_launched.load(), c.arrays_materialized.load(), c.traces.load(),
          c.cache_hits.load(),       c.cache_misses.load(),        c.interim_calls.load(),
          c.fused_calls.load(),      c.fused_arrivals.load(),      c.fused_arrival_ns.load()};
}

void reset_stats() {
  auto& c = detail::counters();
  c.kernels_launched = 0;
  c.arrays_materialized = 0;
  c.traces = 0;
  c.cache_hits = 0;
  c.cache_misses = 0;
  c.interim_calls = 0;
  c.fused_calls = 0;
  c.fused_arrivals = 0;
  c.fused_arrival_ns = 0;
  c.host_to_device_copies = 0;
  c.device_to_host_copies = 0;
  c.layout_bytes_copied = 0;
}

}  // namespace kiln
