// The threading contract (docs/threading.md), proved from 8 threads that start
// together: compute-once evaluation, one trace per cache entry, functions freed on
// other threads, failures that stay local, per-thread streams, bounded caches, and a
// randomized mix of all of these. Seeds and iteration counts are fixed.
#include <gtest/gtest.h>

#include "fused_kernels.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_set>

#include "backend/cpu/jit.h"
#include "compile/cache_probe.h"
#include "core/tensor.h"
#include "ops/primitive.h"
#include "stress_util.h"

using namespace kiln;
using namespace std::chrono_literals;
using stress::kThreads;
using stress::Ref;

namespace {

// ---- reference math (exact float32, same order as the kernels) ----

float ref_max(float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : (x > y ? x : y); }
float ref_min(float x, float y) { return std::isnan(x) || std::isnan(y) ? NAN : (x < y ? x : y); }

template <class F>
std::vector<float> zip(const std::vector<float>& a, const std::vector<float>& b, F f) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}

// The body every compiled-function test uses: several elementwise ops, so they fuse.
std::vector<Array> body(const std::vector<Array>& in) { return {maximum(in[0] * in[1], in[0] + in[1]) - in[0] * 0.5f}; }
std::vector<float> body_ref(const std::vector<float>& a, const std::vector<float>& b) {
  return zip(a, b, [](float x, float y) { return ref_max(x * y, x + y) - x * 0.5f; });
}

Stats delta(const Stats& before) {
  Stats now = stats();
  return {now.kernels_launched - before.kernels_launched, now.arrays_materialized - before.arrays_materialized,
          now.traces - before.traces, now.cache_hits - before.cache_hits, now.cache_misses - before.cache_misses};
}

void check(const Array& a, const std::vector<float>& want, const std::string& ctx) {
  std::string m = stress::mismatch(a.to_vector<float>(), want);
  if (!m.empty()) stress::fail_in_thread(ctx + ": " + m);
}

// ---- a random lazy DAG with known values and known dependencies ----

struct Dag {
  std::vector<Ref> nodes;  // leaves first, then inner nodes
  std::vector<std::vector<int>> deps;  // input node indices of each node
  int leaves = 0;
};

Dag make_dag(uint64_t seed, int leaves, int inner, int64_t n) {
  std::mt19937_64 rng(seed);
  Dag d;
  d.leaves = leaves;
  for (int i = 0; i < leaves; ++i) {
    d.nodes.push_back(stress::leaf({n}, rng));
    d.deps.emplace_back();
  }
  for (int i = 0; i < inner; ++i) {
    int size = static_cast<int>(d.nodes.size());
    // Favour recent nodes so the graph is deep as well as wide.
    auto pick = [&] {
      return std::max(0, size - 1 - static_cast<int>(rng() % static_cast<uint64_t>(std::min(size, 12))));
    };
    int x = pick(), y = pick();
    const Ref &a = d.nodes[static_cast<size_t>(x)], &b = d.nodes[static_cast<size_t>(y)];
    Ref r;
    switch (rng() % 6) {
      case 0: r = {a.a + b.a, zip(a.v, b.v, [](float p, float q) { return p + q; })}; break;
      case 1: r = {a.a - b.a, zip(a.v, b.v, [](float p, float q) { return p - q; })}; break;
      case 2: r = {maximum(a.a, b.a), zip(a.v, b.v, ref_max)}; break;
      case 3: r = {minimum(a.a, b.a), zip(a.v, b.v, ref_min)}; break;
      case 4: r = {-a.a, zip(a.v, a.v, [](float p, float) { return -p; })}, y = x; break;
      default: r = {a.a * 0.5f, zip(a.v, a.v, [](float p, float) { return p * 0.5f; })}, y = x; break;
    }
    d.nodes.push_back(std::move(r));
    d.deps.push_back(x == y ? std::vector<int>{x} : std::vector<int>{x, y});
  }
  return d;
}

// Inner nodes reachable from `roots` (what evaluating them must materialize).
size_t reachable_inner(const Dag& d, const std::set<int>& roots) {
  std::set<int> seen;
  std::vector<int> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    int i = stack.back();
    stack.pop_back();
    if (i < d.leaves || !seen.insert(i).second) continue;
    for (int j : d.deps[static_cast<size_t>(i)]) stack.push_back(j);
  }
  return seen.size();
}

// A copy that waits for its gate and counts the threads inside it: shows which
// streams run at the same time.
struct GateState {
  std::atomic<bool> open{false};
  std::atomic<int> inside{0};
};

class Gate : public Primitive {
 public:
  explicit Gate(std::shared_ptr<GateState> s) : Primitive(OpKind::Copy), s_(std::move(s)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override {
    s_->inside.fetch_add(1);
    while (!s_->open.load()) std::this_thread::sleep_for(1ms);
    out[0].allocate();
    std::memcpy(out[0].raw(), in[0].raw(), static_cast<size_t>(in[0].size()) * in[0].itemsize());
  }
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return {in[0]}; }
  bool is_equivalent(const Primitive& o) const override { return &o == this; }  // each gate its own

 private:
  std::shared_ptr<GateState> s_;
};

Array gated(const Array& x, const std::shared_ptr<GateState>& s) {
  return Array::make(x.shape(), x.dtype(), std::make_shared<Gate>(s), {x});
}

// Polls until pred() or the timeout; a broken contract fails instead of hanging.
template <class P>
bool wait_for(P pred, std::chrono::milliseconds timeout = 20s) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

struct CapacityGuard {
  size_t saved = compile_cache_capacity();
  ~CapacityGuard() {
    set_compile_cache_capacity(saved);
    set_recompile_warning(32);
  }
};

}  // namespace

// Regression: eval({x, f(x)}) once ordered f(x) before x, because every root was
// marked seen before the walk reached it ("array is not evaluated").
TEST(Threads, EvalOfARootTogetherWithItsUser) {
  std::mt19937_64 rng(50);
  Ref x = stress::leaf({16}, rng);
  Array a = x.a * 0.5f;
  Array b = a + x.a;
  Array c = maximum(b, a);
  Stats before = stats();
  eval({a, c, b});
  EXPECT_EQ(delta(before).arrays_materialized, 3u);
  std::vector<float> va(x.v.size()), vc(x.v.size());
  for (size_t i = 0; i < va.size(); ++i) va[i] = x.v[i] * 0.5f, vc[i] = ref_max(va[i] + x.v[i], va[i]);
  EXPECT_EQ(stress::mismatch(c.to_vector<float>(), vc), "");
  EXPECT_EQ(stress::mismatch(a.to_vector<float>(), va), "");
}

// Overlapping graphs evaluated from 8 threads at once: each shared node is computed
// once (the counter equals the nodes reachable from all threads' roots) and every
// value is right. The DAG is owned only by the threads, so it is freed by them.
TEST(Threads, OverlappingGraphsComputeEachNodeOnce) {
  for (int round = 0; round < 12; ++round) {
    int64_t n = round % 3 == 2 ? 40000 : 257;  // the larger size also runs kernels on the pool
    Dag dag = make_dag(100 + static_cast<uint64_t>(round), 6, 48, n);
    std::mt19937_64 rng(200 + static_cast<uint64_t>(round));
    std::vector<std::vector<int>> roots(kThreads);
    std::set<int> all_roots;
    for (auto& r : roots) {
      int k = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < k; ++i) {
        int idx = dag.leaves + static_cast<int>(rng() % static_cast<uint64_t>(dag.nodes.size() - dag.leaves));
        r.push_back(idx);
        all_roots.insert(idx);
      }
    }
    size_t expected = reachable_inner(dag, all_roots);
    std::vector<std::vector<Array>> handles(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      for (int i : roots[static_cast<size_t>(t)])
        handles[static_cast<size_t>(t)].push_back(dag.nodes[static_cast<size_t>(i)].a);
    }
    for (auto& node : dag.nodes) node.a = Array();  // only the threads hold the graph now
    Stats before = stats();
    stress::run_together([&](int t) {
      auto& mine = handles[static_cast<size_t>(t)];
      switch ((t + round) % 3) {
        case 0: eval(mine); break;
        case 1:
          async_eval(mine);
          eval(mine);
          break;
        default: break;  // to_vector below evaluates one root at a time
      }
      for (size_t i = 0; i < mine.size(); ++i) {
        check(mine[i], dag.nodes[static_cast<size_t>(roots[static_cast<size_t>(t)][i])].v,
              "round " + std::to_string(round) + " node " + std::to_string(roots[static_cast<size_t>(t)][i]));
      }
      mine.clear();  // the last of these handles frees the shared nodes, on some thread
    });
    EXPECT_EQ(delta(before).arrays_materialized, expected) << "round " << round;
  }
}

// Arrays made on one thread, combined lazily on another, evaluated on a third and
// freed on a fourth.
TEST(Threads, ArraysCrossThreadsAtEveryStage) {
  constexpr int kIters = 30;
  std::vector<Ref> made(kThreads), combined(kThreads);
  std::barrier phase(kThreads);
  Stats before = stats();
  stress::run_together([&](int t) {
    std::mt19937_64 rng(300 + static_cast<uint64_t>(t));
    for (int it = 0; it < kIters; ++it) {
      size_t me = static_cast<size_t>(t), next = static_cast<size_t>((t + 1) % kThreads),
             prev = static_cast<size_t>((t + kThreads - 1) % kThreads);
      made[me] = stress::leaf({64}, rng);
      phase.arrive_and_wait();
      const Ref &a = made[me], &b = made[next];
      combined[me] = {maximum(a.a, b.a) + a.a, zip(a.v, b.v, [](float x, float y) { return ref_max(x, y) + x; })};
      phase.arrive_and_wait();
      check(combined[prev].a, combined[prev].v, "combined by thread " + std::to_string(prev));
      phase.arrive_and_wait();
      combined[next] = Ref();  // freed on a thread that neither made nor evaluated it
      phase.arrive_and_wait();
    }
  });
  // Two nodes per combination; each was evaluated once though it was shared.
  EXPECT_EQ(delta(before).arrays_materialized, static_cast<uint64_t>(2 * kThreads * kIters));
}

// A missing entry hit by 8 threads at once is traced by one; the others wait for it
// and count as hits.
TEST(Threads, MissingEntryIsTracedOnceWhileOthersWait) {
  std::atomic<int> traced{0};
  auto f = compile([&](const std::vector<Array>& in) {
    traced.fetch_add(1);
    std::this_thread::sleep_for(20ms);  // keeps the others arriving while the trace runs
    return body(in);
  });
  for (int round = 0; round < 6; ++round) {
    Shape shape{round + 1, 3};
    Stats before = stats();
    stress::run_together([&](int t) {
      std::mt19937_64 rng(400 + static_cast<uint64_t>(round * kThreads + t));
      Ref a = stress::leaf(shape, rng), b = stress::leaf(shape, rng);
      check(f({a.a, b.a})[0], body_ref(a.v, b.v), "thread " + std::to_string(t));
    });
    Stats d = delta(before);
    EXPECT_EQ(traced.load(), round + 1);
    EXPECT_EQ(d.traces, 1u);
    EXPECT_EQ(d.cache_misses, 1u);
    EXPECT_EQ(d.cache_hits, static_cast<uint64_t>(kThreads - 1));
  }
}

// One compiled function (and one shapeless one) shared by 8 threads calling with
// the same and with different shapes: one cache for all threads, right results.
TEST(Threads, OneCacheSharedBySameAndDifferentShapes) {
  const std::vector<Shape> shapes = {{7}, {3, 5}, {64}, {2, 3, 4}, {1000}, {33000}};
  constexpr int kIters = 24;
  auto f = compile(body);
  auto g = compile(body, {.shapeless = true, .name = "shapeless_body"});
  Stats before = stats();
  stress::run_together([&](int t) {
    std::mt19937_64 rng(500 + static_cast<uint64_t>(t));
    for (int it = 0; it < kIters; ++it) {
      const Shape& s = shapes[rng() % shapes.size()];
      Ref a = stress::leaf(s, rng), b = stress::leaf(s, rng);
      auto& fn = (it % 2) ? g : f;
      auto out = fn({a.a, b.a})[0];
      if (out.shape() != s) stress::fail_in_thread("wrong output shape");
      check(out, body_ref(a.v, b.v), "thread " + std::to_string(t) + " iteration " + std::to_string(it));
    }
  });
  Stats d = delta(before);
  // Every shape was drawn (fixed seeds); f traces each once, g once per rank (1, 2, 3).
  EXPECT_EQ(compiler::cache_size(f), shapes.size());
  EXPECT_EQ(compiler::cache_size(g), 3u);
  EXPECT_EQ(d.traces, shapes.size() + 3);
  EXPECT_EQ(d.cache_misses, d.traces);
  EXPECT_EQ(d.cache_hits + d.cache_misses, static_cast<uint64_t>(kThreads * kIters));
}

// A function traced on one thread and freed on another drops its entries; an output
// made before the free still evaluates (it holds its plan, not the function).
TEST(Threads, FunctionFreedOnAnotherThreadRemovesEntries) {
  size_t base = compiler::live_cache_entries();
  CompiledFunction slot;
  Ref a, b;
  Array out;
  std::thread maker([&] {
    std::mt19937_64 rng(600);
    a = stress::leaf({5, 5}, rng);
    b = stress::leaf({5, 5}, rng);
    slot = compile(body);
    out = slot({a.a, b.a})[0];
    slot({stress::leaf({3}, rng).a, stress::leaf({3}, rng).a});
  });
  maker.join();
  EXPECT_EQ(compiler::cache_size(slot), 2u);
  EXPECT_EQ(compiler::live_cache_entries(), base + 2);
  std::weak_ptr<CompiledFunction::Impl> watch = slot.impl();
  std::thread freer([&] { CompiledFunction last = std::move(slot); });
  freer.join();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(compiler::live_cache_entries(), base);
  EXPECT_EQ(stress::mismatch(out.to_vector<float>(), body_ref(a.v, b.v)), "");
}

// Functions compiled, called and handed to the next thread to free, from 8 threads.
// A new function never sees an older one's entries, even at the same address: its own
// trace runs (the lambda counts it) and its own constant shows in the result.
TEST(Threads, NewFunctionAtAReusedAddressStartsEmpty) {
  constexpr int kIters = 40;
  size_t base = compiler::live_cache_entries();
  std::mutex mu;  // guards mailbox, freed, reused
  std::vector<std::vector<CompiledFunction>> mailbox(kThreads);
  std::unordered_set<const void*> freed;  // addresses of Impls known to be destroyed
  int reused = 0;
  Stats before = stats();
  stress::run_together([&](int t) {
    std::mt19937_64 rng(700 + static_cast<uint64_t>(t));
    for (int it = 0; it < kIters; ++it) {
      float c = static_cast<float>(t * 1000 + it);
      auto traced = std::make_shared<std::atomic<int>>(0);
      Array k = array(c);
      auto f = compile([k, traced](const std::vector<Array>& in) {
        traced->fetch_add(1);
        return std::vector<Array>{in[0] * 2.0f + k};
      });
      {
        std::lock_guard<std::mutex> lock(mu);
        if (freed.erase(f.impl().get())) ++reused;
      }
      Ref x = stress::leaf({16}, rng);
      std::vector<float> want(x.v.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = x.v[i] * 2.0f + c;
      check(f({x.a})[0], want, "first call");
      check(f({x.a})[0], want, "second call");
      if (traced->load() != 1) stress::fail_in_thread("a new function did not trace exactly once");
      std::vector<CompiledFunction> mine;
      {
        std::lock_guard<std::mutex> lock(mu);
        mailbox[static_cast<size_t>((t + 1) % kThreads)].push_back(std::move(f));
        mine.swap(mailbox[static_cast<size_t>(t)]);
      }
      for (auto& g : mine) {
        const void* addr = g.impl().get();
        bool last = g.impl().use_count() == 1;
        g = CompiledFunction();  // traced on another thread, freed on this one
        if (last) {
          std::lock_guard<std::mutex> lock(mu);
          freed.insert(addr);
        }
      }
    }
  });
  for (auto& box : mailbox) box.clear();
  Stats d = delta(before);
  EXPECT_EQ(d.traces, static_cast<uint64_t>(kThreads * kIters));
  EXPECT_EQ(d.cache_hits, static_cast<uint64_t>(kThreads * kIters));
  EXPECT_EQ(compiler::live_cache_entries(), base);
  RecordProperty("reused_addresses", reused);
  std::printf("[ info ] %d of %d functions were allocated at the address of a freed one\n", reused, kThreads * kIters);
}

// Bad input and throwing traces on some threads while others call the same
// functions: only the failing calls fail, and no entry is poisoned.
TEST(Threads, FailuresStayWithTheirCall) {
  constexpr int kIters = 30;
  auto f = compile(body, {.name = "shared_body"});
  auto picky = compile([](const std::vector<Array>& in) {
    if (in[0].shape(0) == 13) throw std::runtime_error("13 is unlucky");
    return body(in);
  });
  std::atomic<int> failures{0};
  stress::run_together([&](int t) {
    std::mt19937_64 rng(800 + static_cast<uint64_t>(t));
    for (int it = 0; it < kIters; ++it) {
      int kind = static_cast<int>(rng() % 4);
      if (kind == 0) {  // shapes that cannot broadcast: a kiln error from the trace
        try {
          f({stress::leaf({3, 4}, rng).a, stress::leaf({5}, rng).a});
          stress::fail_in_thread("bad shapes did not throw");
        } catch (const Error& e) {
          if (std::string(e.what()).find("[add]") == std::string::npos &&
              std::string(e.what()).find("[multiply]") == std::string::npos) {
            stress::fail_in_thread(std::string("unexpected message: ") + e.what());
          }
          failures.fetch_add(1);
        }
      } else if (kind == 1) {  // the user's function throws for this shape
        try {
          picky({stress::leaf({13}, rng).a, stress::leaf({13}, rng).a});
          stress::fail_in_thread("picky did not throw");
        } catch (const std::runtime_error& e) {
          failures.fetch_add(1);
        }
      } else {
        Shape s{1 + static_cast<int64_t>(rng() % 12)};  // never 13
        Ref a = stress::leaf(s, rng), b = stress::leaf(s, rng);
        check((kind == 2 ? f : picky)({a.a, b.a})[0], body_ref(a.v, b.v), "good call");
      }
    }
  });
  EXPECT_GT(failures.load(), 0);
  // Failed traces leave no entries behind: only good shapes are cached.
  EXPECT_LE(compiler::cache_size(f), 12u);
  EXPECT_LE(compiler::cache_size(picky), 12u);
}

// A trace that throws once (say, a transient resource error) while 7 others wait for
// it: exactly the tracing call fails; the waiters trace again and succeed.
TEST(Threads, WaitersRetryAfterATraceThatThrows) {
  for (int round = 0; round < 4; ++round) {
    std::atomic<int> attempts{0};
    auto flaky = compile([&](const std::vector<Array>& in) {
      std::this_thread::sleep_for(10ms);
      if (attempts.fetch_add(1) == 0) throw std::runtime_error("transient");
      return body(in);
    });
    std::atomic<int> thrown{0};
    stress::run_together([&](int t) {
      std::mt19937_64 rng(900 + static_cast<uint64_t>(round * kThreads + t));
      Ref a = stress::leaf({9}, rng), b = stress::leaf({9}, rng);
      try {
        check(flaky({a.a, b.a})[0], body_ref(a.v, b.v), "after retry");
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) != "transient") throw;
        thrown.fetch_add(1);
      }
    });
    EXPECT_EQ(thrown.load(), 1) << "round " << round;
    EXPECT_EQ(attempts.load(), 2) << "round " << round;
    EXPECT_EQ(compiler::cache_size(flaky), 1u);
  }
}

// Errors at evaluation (an index out of bounds) surface on the thread that evaluates
// that array, including after async_eval, and nowhere else.
TEST(Threads, EvaluationErrorsStayWithTheirArrays) {
  auto pick = compile([](const std::vector<Array>& in) { return std::vector<Array>{take(in[0] * 2.0f, in[1], 0)}; });
  stress::run_together([&](int t) {
    std::mt19937_64 rng(1000 + static_cast<uint64_t>(t));
    for (int it = 0; it < 10; ++it) {
      Ref x = stress::leaf({10}, rng);
      bool bad = (t + it) % 3 == 0;
      std::vector<int32_t> idx = {1, 4, bad ? 99 : 9};
      Array out = pick({x.a, array(idx, {3})})[0];
      if (it % 2) async_eval({out});
      if (bad) {
        try {
          eval({out});
          stress::fail_in_thread("an out-of-bounds index did not throw");
        } catch (const Error& e) {
          if (std::string(e.what()).find("out of bounds") == std::string::npos) throw;
        }
      } else {
        check(out, {x.v[1] * 2.0f, x.v[4] * 2.0f, x.v[9] * 2.0f}, "good take");
      }
    }
  });
  EXPECT_EQ(compiler::cache_size(pick), 1u);
}

// Each thread's async_eval runs on that thread's own stream: 8 streams are inside a
// kernel at the same moment, and one blocked stream does not hold up another's work.
TEST(Threads, EachThreadHasItsOwnStream) {
  // Nobody evaluates the gated arrays synchronously before the gate opens, so only
  // stream workers can be inside it: all 8 at once means 8 streams run in parallel.
  auto gate = std::make_shared<GateState>();
  std::atomic<bool> all_inside{false};
  stress::run_together([&](int t) {
    std::mt19937_64 rng(1100 + static_cast<uint64_t>(t));
    Ref x = stress::leaf({32}, rng);
    Array held = gated(x.a, gate);
    async_eval({held});
    if (t == 0) {
      all_inside = wait_for([&] { return gate->inside.load() == kThreads; });
      gate->open = true;
    }
    wait_for([&] { return gate->open.load(); }, 60s);
    check(held, x.v, "gated");
  });
  EXPECT_TRUE(all_inside.load()) << "only " << gate->inside.load() << " streams ran at once";
  EXPECT_EQ(gate->inside.load(), kThreads);

  // One thread's blocked stream does not delay another thread's asynchronous work.
  auto stuck = std::make_shared<GateState>();
  std::latch queued(1);
  bool other_ran = false;
  std::thread a([&] {
    std::mt19937_64 rng(1200);
    Ref x = stress::leaf({8}, rng);
    Array held = gated(x.a, stuck);
    async_eval({held});
    queued.count_down();
    wait_for([&] { return stuck->open.load(); }, 60s);
    eval({held});
  });
  std::thread b([&] {
    queued.wait();
    std::mt19937_64 rng(1201);
    Ref y = stress::leaf({8}, rng);
    Array z = y.a * 3.0f;
    async_eval({z});
    other_ran = wait_for([&] { return z.is_evaluated(); });
    stuck->open = true;
  });
  a.join();
  b.join();
  EXPECT_TRUE(other_ran);
  EXPECT_EQ(stuck->inside.load(), 1);
}

// Least recently used entries go first; a hit refreshes an entry.
TEST(Threads, CacheEvictsLeastRecentlyUsed) {
  CapacityGuard guard;
  set_compile_cache_capacity(3);
  int traced = 0;
  auto f = compile([&](const std::vector<Array>& in) {
    ++traced;
    return body(in);
  });
  auto call = [&](int64_t n) {
    std::mt19937_64 rng(static_cast<uint64_t>(n));
    f({stress::leaf({n}, rng).a, stress::leaf({n}, rng).a});
  };
  call(1), call(2), call(3);
  call(1);  // refreshes 1
  call(4);  // evicts 2
  EXPECT_EQ(traced, 4);
  call(1), call(3), call(4);
  EXPECT_EQ(traced, 4);
  call(2);
  EXPECT_EQ(traced, 5);
  EXPECT_EQ(compiler::cache_size(f), 3u);
  // Lowering the capacity shrinks a cache at its next call, even a hit.
  set_compile_cache_capacity(1);
  call(2);
  EXPECT_EQ(traced, 5);
  EXPECT_EQ(compiler::cache_size(f), 1u);
}

// Under contention the cache stays within its capacity, results stay right, and the
// recompile warning is said exactly once, naming the function.
TEST(Threads, BoundedCacheAndOneRecompileWarning) {
  CapacityGuard guard;
  set_compile_cache_capacity(4);
  set_recompile_warning(6);
  auto f = compile(body, {.name = "stress_bounded"});
  testing::internal::CaptureStderr();
  Stats before = stats();
  stress::run_together([&](int t) {
    std::mt19937_64 rng(1300 + static_cast<uint64_t>(t));
    for (int it = 0; it < 30; ++it) {
      Shape s{1 + static_cast<int64_t>(rng() % 12)};
      Ref a = stress::leaf(s, rng), b = stress::leaf(s, rng);
      check(f({a.a, b.a})[0], body_ref(a.v, b.v), "bounded");
    }
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_LE(compiler::cache_size(f), 4u);
  EXPECT_GE(delta(before).traces, 12u);
  const std::string needle = "compiled function 'stress_bounded' has been traced";
  size_t first = err.find(needle);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(needle, first + 1), std::string::npos) << err;
}

// The kernel cache is bounded too: with room for 2 kernels, a third evicts the least
// recently used, which must then come from disk or the compiler again.
TEST(Threads, KernelCacheIsBounded) {
  if (!cpu::jit_available()) GTEST_SKIP() << "no C++ compiler: fused regions are interpreted";
  struct Restore {
    ~Restore() { cpu::set_jit_cache_capacity(4096); }
  } restore;
  kt::FusedKernelsScope wait(FusedKernels::wait);  // counts lookups of each call's kernel
  using Fn = std::vector<Array> (*)(const std::vector<Array>&);
  const Fn programs[3] = {
      [](const std::vector<Array>& in) { return std::vector<Array>{maximum(in[0], in[1]) + in[0]}; },
      [](const std::vector<Array>& in) { return std::vector<Array>{minimum(in[0], in[1]) - in[1]}; },
      [](const std::vector<Array>& in) { return std::vector<Array>{(in[0] + in[1]) * (in[0] - in[1])}; }};
  auto refs = [](int p, float x, float y) {
    return p == 0 ? ref_max(x, y) + x : p == 1 ? ref_min(x, y) - y : (x + y) * (x - y);
  };
  auto run = [&](int p, std::mt19937_64& rng) {
    Ref a = stress::leaf({100}, rng), b = stress::leaf({100}, rng);
    auto f = compile(programs[p]);  // a fresh function: its fused kernel is looked up again
    check(f({a.a, b.a})[0], zip(a.v, b.v, [&](float x, float y) { return refs(p, x, y); }), "program");
  };
  cpu::set_jit_cache_capacity(2);
  std::mt19937_64 rng(1400);
  for (int p : {0, 1, 2}) run(p, rng);
  auto before = cpu::jit_stats();
  run(0, rng);  // evicted by program 2
  auto after = cpu::jit_stats();
  EXPECT_EQ(after.memory_hits, before.memory_hits);
  EXPECT_EQ(after.compiles + after.disk_loads, before.compiles + before.disk_loads + 1);
  stress::run_together([&](int t) {
    std::mt19937_64 r(1500 + static_cast<uint64_t>(t));
    for (int it = 0; it < 6; ++it) run((t + it) % 3, r);
  });
}

// The randomized mix: from 8 threads, a fixed number of random actions over a shared
// pool of arrays and functions: create, combine lazily, evaluate (sync and async),
// free, call shared compiled functions with random shapes, compile and free new ones,
// bad inputs, and changes of the cache capacity. Counters must add up at the end.
TEST(Threads, RandomizedMix) {
  CapacityGuard guard;
  constexpr int kIters = 250, kPool = 16;
  const std::vector<Shape> shapes = {{5}, {4, 6}, {300}, {2, 2, 3}, {34000}};
  std::mutex mu;  // guards pool and fn_pool
  std::vector<Ref> pool(kPool);
  std::vector<CompiledFunction> fn_pool(4);
  {
    std::mt19937_64 rng(1600);
    for (auto& r : pool) r = stress::leaf({257}, rng);
  }
  auto shared = compile(body, {.name = "mix_shared"});
  auto shapeless = compile(body, {.shapeless = true, .name = "mix_shapeless"});
  std::atomic<uint64_t> compiled_calls{0}, nodes_built{0};
  Stats before = stats();
  size_t base_entries = compiler::live_cache_entries();
  stress::run_together([&](int t) {
    std::mt19937_64 rng(1700 + static_cast<uint64_t>(t));
    std::vector<Ref> pending;  // async_eval'd, checked later
    auto slot = [&] { return static_cast<size_t>(rng() % kPool); };
    for (int it = 0; it < kIters; ++it) {
      switch (rng() % 10) {
        case 0: {  // create a leaf and replace a slot (the old one may be freed here)
          Ref r = stress::leaf({257}, rng);
          std::lock_guard<std::mutex> lock(mu);
          std::swap(pool[slot()], r);
          break;
        }
        case 1: {  // combine two slots lazily and publish the unevaluated result
          Ref a, b;
          {
            std::lock_guard<std::mutex> lock(mu);
            a = pool[slot()];
            b = pool[slot()];
          }
          Ref r{minimum(a.a, b.a) * 0.5f, zip(a.v, b.v, [](float x, float y) { return ref_min(x, y) * 0.5f; })};
          nodes_built.fetch_add(2);
          std::lock_guard<std::mutex> lock(mu);
          pool[slot()] = std::move(r);
          break;
        }
        case 2: {  // evaluate whatever is in a slot, maybe built by another thread
          Ref r;
          {
            std::lock_guard<std::mutex> lock(mu);
            r = pool[slot()];
          }
          check(r.a, r.v, "pool slot");
          break;
        }
        case 3: {  // asynchronous evaluation, checked a few iterations later
          Ref r;
          {
            std::lock_guard<std::mutex> lock(mu);
            r = pool[slot()];
          }
          async_eval({r.a});
          pending.push_back(std::move(r));
          if (pending.size() > 3) {
            for (auto& p : pending) check(p.a, p.v, "async");
            pending.clear();
          }
          break;
        }
        case 4:
        case 5: {  // a shared compiled function with a random shape
          const Shape& s = shapes[rng() % shapes.size()];
          Ref a = stress::leaf(s, rng), b = stress::leaf(s, rng);
          compiled_calls.fetch_add(1);
          nodes_built.fetch_add(1);
          check(((rng() & 1) ? shared : shapeless)({a.a, b.a})[0], body_ref(a.v, b.v), "shared fn");
          break;
        }
        case 6: {  // a compiled call on pooled (possibly lazy) arrays, published unevaluated
          Ref a, b;
          {
            std::lock_guard<std::mutex> lock(mu);
            a = pool[slot()];
            b = pool[slot()];
          }
          compiled_calls.fetch_add(1);
          nodes_built.fetch_add(1);
          Ref r{shared({a.a, b.a})[0], body_ref(a.v, b.v)};
          std::lock_guard<std::mutex> lock(mu);
          pool[slot()] = std::move(r);
          break;
        }
        case 7: {  // compile a new function, call it, and leave it for any thread to free
          float c = static_cast<float>(rng() % 100);
          Array k = array(c);
          auto f = compile([k](const std::vector<Array>& in) { return std::vector<Array>{in[0] - k}; });
          Ref a = stress::leaf({33}, rng);
          compiled_calls.fetch_add(1);
          nodes_built.fetch_add(1);
          check(f({a.a})[0], zip(a.v, a.v, [c](float x, float) { return x - c; }), "new fn");
          std::lock_guard<std::mutex> lock(mu);
          std::swap(fn_pool[rng() % fn_pool.size()], f);
          break;  // the function swapped out is freed here, traced by whoever made it
        }
        case 8: {  // bad input: a failed trace, nothing cached
          compiled_calls.fetch_add(1);
          try {
            shared({stress::leaf({3}, rng).a, stress::leaf({4}, rng).a});
            stress::fail_in_thread("bad shapes did not throw");
          } catch (const Error&) {
          }
          break;
        }
        default:  // resize the cache while others use it
          set_compile_cache_capacity(2 + rng() % 8);
          break;
      }
    }
    for (auto& p : pending) check(p.a, p.v, "async at end");
  });
  Stats d = delta(before);
  // A caller that waited for a trace that failed traces again itself: one more miss.
  EXPECT_GE(d.cache_hits + d.cache_misses, compiled_calls.load());
  EXPECT_EQ(d.traces, d.cache_misses);  // every miss traced once, every trace was a miss
  EXPECT_LE(d.arrays_materialized, nodes_built.load());  // never twice
  // A lowered capacity applies at each function's next call; then every cache fits,
  // and the entries alive are exactly those of the live functions.
  size_t cap = compile_cache_capacity();
  {
    std::mt19937_64 rng(1800);
    Ref a = stress::leaf({5}, rng), b = stress::leaf({5}, rng);
    shared({a.a, b.a});
    shapeless({a.a, b.a});
  }
  EXPECT_LE(compiler::cache_size(shared), cap);
  EXPECT_LE(compiler::cache_size(shapeless), cap);
  size_t live = compiler::cache_size(shared) + compiler::cache_size(shapeless);
  for (auto& f : fn_pool) live += compiler::cache_size(f);
  EXPECT_EQ(compiler::live_cache_entries(), base_entries + live);
  fn_pool.clear();
  pool.clear();
}
