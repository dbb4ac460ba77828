// compile(): the per-function cache of traced plans and the call path.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <shared_mutex>
#include <unordered_map>

#include "compile/cache_probe.h"
#include "compile/plan.h"
#include "compile/tier.h"
#include "compile/trace.h"
#include "core/config.h"
#include "core/stats.h"
#include "kiln/compile.h"
#include "passes/pass.h"

namespace kiln {

namespace {

std::atomic<int> g_mode{-1};  // -1: not yet read from KILN_MODE
std::atomic<size_t> g_cache_capacity{64};  // atomic: read by every insertion, set from any thread
std::atomic<size_t> g_warn_after{32};  // atomic: read by every trace, set from any thread
std::atomic<size_t> g_live_entries{0};  // atomic: CacheEntry objects alive (cache_probe.h)

// KILN_MODE=eager or lazy call functions directly; no_simplify and no_fuse trace with fewer passes.
CompileMode mode_from_env() {
  const std::string m = config::choice(config::Knob::mode);
  if (m == "eager" || m == "lazy") return CompileMode::disabled;
  if (m == "no_simplify") return CompileMode::no_simplify;
  if (m == "no_fuse") return CompileMode::no_fuse;
  return CompileMode::enabled;
}

}  // namespace

void set_compile_mode(CompileMode mode) { g_mode.store(static_cast<int>(mode)); }

CompileMode compile_mode() {
  int m = g_mode.load(std::memory_order_relaxed);
  if (m < 0) {
    int expected = -1;
    g_mode.compare_exchange_strong(expected, static_cast<int>(mode_from_env()));
    m = g_mode.load();
  }
  return static_cast<CompileMode>(m);
}

void set_compile_cache_capacity(size_t entries) {
  if (entries == 0) fail("compile", "cache capacity must be at least 1");
  g_cache_capacity.store(entries);
}
size_t compile_cache_capacity() { return g_cache_capacity.load(); }
void set_recompile_warning(size_t traces) { g_warn_after.store(traces); }

// One traced signature. Waiters block until the tracing thread finishes.
struct CacheEntry {
  std::mutex mu;  // guards state, plan
  std::condition_variable done;  // signalled under mu when state leaves tracing
  enum class State { tracing, ready, failed } state = State::tracing;
  std::shared_ptr<const compiler::Plan> plan;  // immutable once ready; shared read-only by every caller
  std::atomic<uint64_t> last_used{0};  // atomic: stamped by hits under a shared lock

  CacheEntry() { g_live_entries.fetch_add(1, std::memory_order_relaxed); }
  ~CacheEntry() { g_live_entries.fetch_sub(1, std::memory_order_relaxed); }
  CacheEntry(const CacheEntry&) = delete;
  CacheEntry& operator=(const CacheEntry&) = delete;
};

struct CompiledFunction::Impl {
  Function fn;  // immutable after compile(); called concurrently by tracing threads
  CompileOptions options;  // immutable after compile()
  std::shared_mutex mu;  // guards entries (lookups shared, insert and erase exclusive)
  std::unordered_map<std::string, std::shared_ptr<CacheEntry>> entries;
  std::atomic<uint64_t> clock{0};  // LRU ticks
  std::atomic<uint64_t> traces{0};  // traces of this function
  std::atomic<bool> warned{false};  // atomic: the recompile warning is said once

  /* The cache key of a call with these inputs, written into k. */
  void key(const std::vector<Array>& inputs, CompileMode mode, std::string& k) const;
  std::shared_ptr<const compiler::Plan> plan_for(const std::vector<Array>& inputs, CompileMode mode);
  std::shared_ptr<const compiler::Plan> build(const std::vector<Array>& inputs, CompileMode mode);
  void evict_if_full();
};

void CompiledFunction::Impl::key(const std::vector<Array>& inputs, CompileMode mode, std::string& k) const {
  k.clear();
  auto put = [&](int64_t x) { k.append(reinterpret_cast<const char*>(&x), sizeof x); };
  put(static_cast<int64_t>(mode));
  put(static_cast<int64_t>(inputs.size()));
  for (auto& a : inputs) {
    if (!a.valid()) fail("compile", "an input is an empty Array handle");
    put(static_cast<int64_t>(a.dtype()) | (static_cast<int64_t>(a.device().type) << 8) |
        (static_cast<int64_t>(a.device().index) << 16));
    put(a.ndim());
    if (!options.shapeless) {
      for (auto d : a.shape()) put(d);
    } else {
      // Size-1 axes trace apart: fusion treats them as possible broadcasts and leaves
      // their nodes unfused, which other sizes should not inherit.
      int64_t ones = 0;
      for (int i = 0; i < a.ndim() && i < 63; ++i) ones |= static_cast<int64_t>(a.shape(i) == 1) << i;
      put(ones);
    }
  }
}

std::shared_ptr<const compiler::Plan> CompiledFunction::Impl::build(const std::vector<Array>& inputs,
                                                                    CompileMode mode) {
  const int64_t miss_ns = compiler::now_ns();
  compiler::Graph g = compiler::trace(fn, inputs);
  compiler::PassOptions po{options.shapeless};
  compiler::run_pipeline(g, mode, po);
  uint64_t n = traces.fetch_add(1) + 1;
  if (n > g_warn_after.load() && !warned.exchange(true)) {
    std::fprintf(stderr,
                 "kiln: compiled function '%s' has been traced %llu times; its inputs keep changing shape or "
                 "dtype (consider shapeless=true)\n",
                 options.name.empty() ? "<unnamed>" : options.name.c_str(), static_cast<unsigned long long>(n));
  }
  auto plan = std::const_pointer_cast<compiler::Plan>(compiler::lower(g, options.shapeless));
  plan->miss_ns = miss_ns;
  return plan;
}

void CompiledFunction::Impl::evict_if_full() {
  // Called with mu held exclusively.
  size_t cap = g_cache_capacity.load();
  while (entries.size() > cap) {
    auto victim = entries.end();
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      std::lock_guard<std::mutex> lock(it->second->mu);
      if (it->second->state != CacheEntry::State::ready) continue;
      if (victim == entries.end() || it->second->last_used < victim->second->last_used) victim = it;
    }
    if (victim == entries.end()) return;  // everything is being traced
    entries.erase(victim);
  }
}

std::shared_ptr<const compiler::Plan> CompiledFunction::Impl::plan_for(const std::vector<Array>& inputs,
                                                                       CompileMode mode) {
  thread_local std::string k;  // reused: a warm call's key allocates nothing
  key(inputs, mode, k);
  for (;;) {
    std::shared_ptr<CacheEntry> entry;
    bool mine = false;
    bool over = false;  // the capacity was lowered since this cache last grew
    {
      std::shared_lock<std::shared_mutex> lock(mu);
      auto it = entries.find(k);
      if (it != entries.end()) entry = it->second;
      over = entries.size() > g_cache_capacity.load();
    }
    if (!entry) {
      std::unique_lock<std::shared_mutex> lock(mu);
      auto [it, inserted] = entries.try_emplace(k, nullptr);
      if (inserted) {
        it->second = std::make_shared<CacheEntry>();
        mine = true;
      }
      entry = it->second;
    }
    entry->last_used.store(clock.fetch_add(1) + 1, std::memory_order_relaxed);
    if (mine) {
      detail::count(detail::counters().cache_misses);
      const std::string own_key = k;  // the trace below may run compiled calls on this thread
      try {
        auto plan = build(inputs, mode);
        {
          std::lock_guard<std::mutex> lock(entry->mu);
          entry->plan = plan;
          entry->state = CacheEntry::State::ready;
        }
        entry->done.notify_all();
        std::unique_lock<std::shared_mutex> lock(mu);
        evict_if_full();
        return plan;
      } catch (...) {
        {
          std::unique_lock<std::shared_mutex> lock(mu);
          entries.erase(own_key);  // a failed trace leaves nothing behind
        }
        {
          std::lock_guard<std::mutex> lock(entry->mu);
          entry->state = CacheEntry::State::failed;
        }
        entry->done.notify_all();
        throw;
      }
    }
    std::unique_lock<std::mutex> lock(entry->mu);
    entry->done.wait(lock, [&] { return entry->state != CacheEntry::State::tracing; });
    if (entry->state == CacheEntry::State::ready) {
      detail::count(detail::counters().cache_hits);
      auto plan = entry->plan;
      lock.unlock();
      if (over) {
        std::unique_lock<std::shared_mutex> shrink(mu);
        evict_if_full();
      }
      return plan;
    }
    // The trace we waited for failed: try again (and trace ourselves).
  }
}

std::vector<Array> CompiledFunction::operator()(const std::vector<Array>& inputs) const {
  if (!impl_) fail("compile", "call of an empty CompiledFunction");
  CompileMode mode = compile_mode();
  // Disabled, or called while another function is traced: run the function itself (inlined).
  if (mode == CompileMode::disabled || compiler::tracing()) return impl_->fn(inputs);
  auto plan = impl_->plan_for(inputs, mode);
  std::vector<Shape> in_shapes;
  if (plan->shapeless) {
    for (auto& a : inputs) in_shapes.push_back(a.shape());
  }
  std::vector<Shape> shapes = plan->output_shapes(in_shapes);
  std::vector<Dtype> dtypes;
  for (int v : plan->outputs) dtypes.push_back(plan->dtypes[static_cast<size_t>(v)]);
  return Array::make(std::move(shapes), std::move(dtypes), std::make_shared<compiler::CompiledCall>(plan), inputs);
}

size_t compiler::live_cache_entries() { return g_live_entries.load(); }

size_t compiler::cache_size(const CompiledFunction& f) {
  if (!f.valid()) return 0;
  std::shared_lock<std::shared_mutex> lock(f.impl()->mu);
  return f.impl()->entries.size();
}

void export_to_dot(std::ostream& os, const CompiledFunction& f, const std::vector<Array>& inputs,
                   const DotNames& names) {
  if (!f.valid()) fail("export_to_dot", "empty CompiledFunction");
  compiler::Graph g = compiler::trace(f.impl()->fn, inputs);
  compiler::run_pipeline(g, compile_mode(), {f.impl()->options.shapeless});
  compiler::write_dot(os, g, f.impl()->options.name.empty() ? "compiled" : f.impl()->options.name, &names);
}

void export_to_dot(std::ostream& os, const CompiledFunction& f, const std::vector<Array>& inputs) {
  export_to_dot(os, f, inputs, DotNames{});
}

CompiledFunction compile(Function fn, CompileOptions options) {
  if (!fn) fail("compile", "the function is empty");
  auto impl = std::make_shared<CompiledFunction::Impl>();
  impl->fn = std::move(fn);
  impl->options = std::move(options);
  return CompiledFunction(std::move(impl));
}

std::function<Array(const Array&)> compile(std::function<Array(const Array&)> fn, CompileOptions options) {
  auto f = compile([fn = std::move(fn)](const std::vector<Array>& in) { return std::vector<Array>{fn(in[0])}; },
                   std::move(options));
  return [f](const Array& a) { return f({a})[0]; };
}

std::function<Array(const Array&, const Array&)> compile(std::function<Array(const Array&, const Array&)> fn,
                                                         CompileOptions options) {
  auto f = compile([fn = std::move(fn)](const std::vector<Array>& in) { return std::vector<Array>{fn(in[0], in[1])}; },
                   std::move(options));
  return [f](const Array& a, const Array& b) { return f({a, b})[0]; };
}

std::function<Array(const Array&, const Array&, const Array&)> compile(
    std::function<Array(const Array&, const Array&, const Array&)> fn, CompileOptions options) {
  auto f = compile(
      [fn = std::move(fn)](const std::vector<Array>& in) { return std::vector<Array>{fn(in[0], in[1], in[2])}; },
      std::move(options));
  return [f](const Array& a, const Array& b, const Array& c) { return f({a, b, c})[0]; };
}

}  // namespace kiln
