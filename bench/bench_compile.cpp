// Compiled against eager (one kernel per op) on the CPU, float32, 16M elements:
// GELU (tanh form), SwiGLU, RMSNorm, softmax and LayerNorm over rows of 4096, and a
// 10-op chain of sin, multiply and add, and transpose(a) * b + 0.5 on 4096 x 4096 (a fused
// program with a transposed input). Every workload reports bytes/s (inputs read
// plus outputs written, once each), next to std::memcpy of 64 MiB between warmed
// buffers. BM_HostCall32 measures the host cost of one compiled call of a 32-op
// elementwise graph on 1k elements (call + eval), with the per-call median as a counter.
// bench/run_compile.sh runs it; bench/summarize_compile.py prints the ratios vs targets.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include <kiln/kiln.h>

#include "memcpy_baseline.h"
#include "workloads.h"

namespace {

using kiln::Array;
using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

constexpr int64_t kElems = int64_t{1} << 24;  // 16M float32: 64 MiB per array
constexpr int64_t kRows = 4096, kCols = 4096;  // the same count as rows for the norms
constexpr int64_t kF = sizeof(float);

Array random_array(kiln::Shape shape, uint32_t seed, float lo = -3.0f, float hi = 3.0f) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  Array a = kiln::array(v, std::move(shape));
  a.eval();
  return a;
}

// ---- workloads ------------------------------------------------------------------
using bench::chain10;
using bench::gelu_ops;
using bench::layernorm;
using bench::softmax_rows;
using bench::swiglu;
Array rmsnorm(const Array& x, const Array& w) { return bench::rmsnorm(x, w, 1e-5f); }

struct Workload {
  const char* name;
  Fn fn;
  std::function<std::vector<Array>()> inputs;
  int64_t bytes;  // per call: inputs read once plus the output written once
};

const std::vector<Workload>& workloads() {
  static const std::vector<Workload> w = {
      {"Gelu", [](const std::vector<Array>& in) { return std::vector<Array>{gelu_ops(in[0])}; },
       [] { return std::vector<Array>{random_array({kElems}, 1)}; }, 2 * kElems * kF},
      {"Swiglu", [](const std::vector<Array>& in) { return std::vector<Array>{swiglu(in[0], in[1])}; },
       [] {
         return std::vector<Array>{random_array({kElems}, 2), random_array({kElems}, 3)};
       },
       3 * kElems * kF},
      {"RMSNorm", [](const std::vector<Array>& in) { return std::vector<Array>{rmsnorm(in[0], in[1])}; },
       [] {
         return std::vector<Array>{random_array({kRows, kCols}, 4), random_array({kCols}, 5)};
       },
       (2 * kRows * kCols + kCols) * kF},
      {"Softmax", [](const std::vector<Array>& in) { return std::vector<Array>{softmax_rows(in[0])}; },
       [] {
         return std::vector<Array>{random_array({kRows, kCols}, 6)};
       },
       2 * kRows * kCols * kF},
      {"LayerNorm", [](const std::vector<Array>& in) { return std::vector<Array>{layernorm(in[0], in[1], in[2])}; },
       [] {
         return std::vector<Array>{random_array({kRows, kCols}, 7), random_array({kCols}, 8), random_array({kCols}, 9)};
       },
       (2 * kRows * kCols + 2 * kCols) * kF},
      {"Chain10", [](const std::vector<Array>& in) { return std::vector<Array>{chain10(in[0])}; },
       [] { return std::vector<Array>{random_array({kElems}, 10)}; }, 2 * kElems * kF},
      // A fused program with a transposed input: transpose(a) * b + 0.5.
      {"TransposeFma",
       [](const std::vector<Array>& in) { return std::vector<Array>{kiln::transpose(in[0]) * in[1] + 0.5f}; },
       [] {
         return std::vector<Array>{random_array({kRows, kCols}, 11), random_array({kRows, kCols}, 12)};
       },
       3 * kRows * kCols * kF},
  };
  return w;
}

// range(0): workload index; range(1): 0 eager, 1 compiled.
void BM_Workload(benchmark::State& state) {
  const Workload& w = workloads()[static_cast<size_t>(state.range(0))];
  bool compiled = state.range(1) != 0;
  state.SetLabel(std::string(w.name) + (compiled ? "/compiled" : "/eager"));
  std::vector<Array> in = w.inputs();
  kiln::CompiledFunction cf = kiln::compile(w.fn, {.name = w.name});
  auto call = [&] { return compiled ? cf(in) : w.fn(in); };
  kiln::eval(call());  // trace, compile the kernels, and touch the output allocator before timing
  for (auto _ : state) {
    std::vector<Array> out = call();
    kiln::eval(out);
    benchmark::DoNotOptimize(out[0].id());
  }
  state.SetBytesProcessed(state.iterations() * w.bytes);
}

void workload_args(benchmark::internal::Benchmark* b) {
  for (int64_t i = 0; i < static_cast<int64_t>(workloads().size()); ++i) {
    b->Args({i, 0});
    b->Args({i, 1});
  }
}
BENCHMARK(BM_Workload)->Apply(workload_args)->Unit(benchmark::kMillisecond)->UseRealTime();

// The bandwidth baseline: memcpy of 64 MiB between warmed buffers; bytes: read + write.
void BM_Memcpy(benchmark::State& state) { bench::time_memcpy(state, static_cast<size_t>(kElems * kF)); }
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

using bench::graph32;

// Host time of one compiled call on 1k elements, evaluated: call, then eval of the output.
// Each call is timed on its own; the median is reported as the counter median_ns.
void BM_HostCall32(benchmark::State& state) {
  const int64_t n = 1000;
  Array x = random_array({n}, 11), y = random_array({n}, 12);
  kiln::CompiledFunction f = kiln::compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{graph32(in[0], in[1])}; }, {.name = "graph32"});
  for (int i = 0; i < 100; ++i) f({x, y})[0].eval();  // warm-up: trace, compile, caches
  std::vector<double> ns;
  ns.reserve(1 << 20);
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    Array out = f({x, y})[0];
    out.eval();
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(out.id());
    if (ns.size() < ns.capacity()) ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  state.counters["median_ns"] = ns.empty() ? 0.0 : ns[ns.size() / 2];
  state.counters["p90_ns"] = ns.empty() ? 0.0 : ns[ns.size() * 9 / 10];
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_HostCall32)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(0.5);

// The same graph unfused and uncompiled, for scale.
void BM_HostEager32(benchmark::State& state) {
  const int64_t n = 1000;
  Array x = random_array({n}, 11), y = random_array({n}, 12);
  for (auto _ : state) {
    Array out = graph32(x, y);
    out.eval();
    benchmark::DoNotOptimize(out.id());
  }
}
BENCHMARK(BM_HostEager32)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  kiln::set_fused_kernels(kiln::FusedKernels::wait);  // timed calls run generated kernels from the first
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
