// Independent compiled calls from 1 and 2 threads: kiln has no global lock, so two
// threads calling the same compiled function on their own inputs should run at
// nearly twice the throughput of one. bench/run_threads.sh runs it and reports the ratio.
//
// The kernels' own thread pool is turned off (KILN_NUM_THREADS=1 unless set), so the
// parallelism measured is the callers', not the pool's.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include <kiln/kiln.h>

#include "core/config.h"

namespace {

// CPU-bound per element (transcendentals), so memory bandwidth does not set the pace.
kiln::CompiledFunction& work() {
  static kiln::CompiledFunction f = kiln::compile(
      [](const std::vector<kiln::Array>& in) {
        const kiln::Array &x = in[0], &y = in[1];
        return std::vector<kiln::Array>{kiln::tanh(x) * kiln::exp(-(y * y)) + kiln::sigmoid(x * y) + kiln::sin(x + y)};
      },
      {.name = "bench_threads"});
  return f;
}

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i % 1000) / 1000.0f - 0.5f;
  return v;
}

void BM_IndependentCompiledCalls(benchmark::State& state) {
  int64_t n = state.range(0);
  // Each thread has its own inputs; the function (and its cache) is shared.
  kiln::Array x = kiln::array(ramp(n, 2.0f), {n});
  kiln::Array y = kiln::array(ramp(n, 3.0f), {n});
  work()({x, y})[0].eval();  // traced and its kernel compiled before timing
  for (auto _ : state) {
    kiln::Array out = work()({x, y})[0];
    out.eval();
    benchmark::DoNotOptimize(out.id());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["kernel_threads"] = benchmark::Counter(
      static_cast<double>(kiln::config::integer(kiln::config::Knob::num_threads)), benchmark::Counter::kAvgThreads);
}

// Real time: with 2 threads, items_per_second is the total over both threads.
BENCHMARK(BM_IndependentCompiledCalls)->Arg(1 << 18)->Threads(1)->Threads(2)->UseRealTime()->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) {
  setenv("KILN_NUM_THREADS", "1", /*overwrite=*/0);  // before kiln reads it
  kiln::set_fused_kernels(kiln::FusedKernels::wait);  // timed calls run generated kernels from the first
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
