// The language-model ops on the CPU (eager), each next to its limit: memcpy for the
// bandwidth-bound ones (bytes processed = bytes read + written, as BM_Memcpy counts
// them) and sgemm on the dequantized weights for the prefill product.
// bench/run_llm_ops.sh runs it; bench/summarize_llm_ops.py prints the fractions.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <vector>

#include <kiln/kiln.h>

#include "memcpy_baseline.h"

namespace {

using kiln::Array;

Array random_array(kiln::Shape shape, uint32_t seed, kiln::Dtype d = kiln::float32) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  Array a = kiln::astype(kiln::array(v, std::move(shape)), d);
  a.eval();
  return a;
}

void BM_Memcpy(benchmark::State& state) { bench::time_memcpy(state, size_t{64} << 20); }
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode product: x [1, K] float32 against 4-bit group-64 weights [N, K] with bfloat16 scales.
// Bytes: the packed weights, scales and biases (x and y are noise).
void BM_QmmGemv(benchmark::State& state) {
  const int64_t n = state.range(0), k = state.range(1);
  auto [w, s, b] = kiln::quantize(random_array({n, k}, 1, kiln::bfloat16), 64, 4);
  Array x = random_array({1, k}, 2);
  kiln::eval({w, s, b});
  for (auto _ : state) {
    Array y = kiln::quantized_matmul(x, w, s, b);
    y.eval();
    benchmark::DoNotOptimize(y.id());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.nbytes() + s.nbytes() + b.nbytes()));
}
BENCHMARK(BM_QmmGemv)->Args({1536, 576})->Args({4096, 4096})->Unit(benchmark::kMicrosecond)->UseRealTime();

// Prefill product: x [512, K] against the same weights; items = multiply-adds.
void BM_QmmGemm(benchmark::State& state) {
  const int64_t m = 512, n = state.range(0), k = state.range(1);
  auto [w, s, b] = kiln::quantize(random_array({n, k}, 3, kiln::bfloat16), 64, 4);
  Array x = random_array({m, k}, 4);
  kiln::eval({w, s, b});
  for (auto _ : state) {
    Array y = kiln::quantized_matmul(x, w, s, b);
    y.eval();
    benchmark::DoNotOptimize(y.id());
  }
  state.SetItemsProcessed(state.iterations() * m * n * k);
}
BENCHMARK(BM_QmmGemm)->Args({1536, 576})->Unit(benchmark::kMillisecond)->UseRealTime();

// The same two products as the default model runs them on the CPU: groups of 32 with float16
// scales (Q4_1's). Arg 3, the activations: 0 exact, 1 int8, 2 int16 (QmmActivations' values).
void BM_QmmModel(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto act = static_cast<kiln::QmmActivations>(state.range(3));
  auto [w, s, b] = kiln::quantize(random_array({n, k}, 3, kiln::float16), 32, 4);
  Array x = random_array({m, k}, 4);
  kiln::eval({w, s, b});
  for (auto _ : state) {
    Array y = kiln::quantized_matmul(x, w, s, b, true, 32, 4, act);
    y.eval();
    benchmark::DoNotOptimize(y.id());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.nbytes() + s.nbytes() + b.nbytes()));
  state.SetItemsProcessed(state.iterations() * m * n * k);
}
BENCHMARK(BM_QmmModel)
    ->ArgNames({"m", "n", "k", "activations"})
    ->ArgsProduct({{1}, {1536}, {576}, {0, 1, 2}})
    ->ArgsProduct({{1}, {4096}, {4096}, {0, 1, 2}})
    ->ArgsProduct({{512}, {1536}, {576}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The limit of the prefill product: sgemm on the dequantized float32 weights.
void BM_SgemmDequantized(benchmark::State& state) {
  const int64_t m = 512, n = state.range(0), k = state.range(1);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), w(static_cast<size_t>(n * k), 0.25f),
      y(static_cast<size_t>(m * n));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0f, x.data(), static_cast<int>(k), w.data(), static_cast<int>(k), 0.0f, y.data(),
                static_cast<int>(n));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * m * n * k);
}
BENCHMARK(BM_SgemmDequantized)->Args({1536, 576})->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode attention: one query of 32 heads against 4096 keys of 8 key/value heads, D 128.
// Bytes: K and V. Arg: 0 float32, 1 bfloat16.
void BM_SdpaDecode(benchmark::State& state) {
  const kiln::Dtype d = state.range(0) ? kiln::bfloat16 : kiln::float32;
  Array q = random_array({1, 32, 1, 128}, 5, d), k = random_array({1, 8, 4096, 128}, 6, d),
        v = random_array({1, 8, 4096, 128}, 7, d);
  for (auto _ : state) {
    Array o = kiln::scaled_dot_product_attention(q, k, v, 0.088f);
    o.eval();
    benchmark::DoNotOptimize(o.id());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(k.nbytes() + v.nbytes()));
}
BENCHMARK(BM_SdpaDecode)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Causal prefill attention: 512 queries and keys, 32 heads, D 128, float32; items =
// multiply-adds of the two products over the visible half.
void BM_SdpaPrefill(benchmark::State& state) {
  Array q = random_array({1, 32, 512, 128}, 8), k = random_array({1, 32, 512, 128}, 9),
        v = random_array({1, 32, 512, 128}, 10);
  for (auto _ : state) {
    Array o = kiln::scaled_dot_product_attention(q, k, v, 0.088f, std::nullopt, true);
    o.eval();
    benchmark::DoNotOptimize(o.id());
  }
  state.SetItemsProcessed(state.iterations() * 32 * 2 * (512 * 513 / 2) * 128);
}
BENCHMARK(BM_SdpaPrefill)->Unit(benchmark::kMillisecond)->UseRealTime();

// rms_norm of [512, 4096] float32. Bytes: read x, write y.
void BM_RmsNorm(benchmark::State& state) {
  Array x = random_array({512, 4096}, 11), w = random_array({4096}, 12);
  for (auto _ : state) {
    Array y = kiln::rms_norm(x, w, 1e-5f);
    y.eval();
    benchmark::DoNotOptimize(y.id());
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(x.nbytes()));
}
BENCHMARK(BM_RmsNorm)->Unit(benchmark::kMillisecond)->UseRealTime();

// rope of [1, 32, 512, 128] float32 at offset 100. Bytes: read x, write y.
void BM_Rope(benchmark::State& state) {
  Array x = random_array({1, 32, 512, 128}, 13);
  for (auto _ : state) {
    Array y = kiln::rope(x, 128, false, 10000.0f, 1.0f, 100);
    y.eval();
    benchmark::DoNotOptimize(y.id());
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(x.nbytes()));
}
BENCHMARK(BM_Rope)->Unit(benchmark::kMillisecond)->UseRealTime();

// One token appended to a [1, 8, 4096, 128] float32 cache in place: the time of a step
// that moves 4 KiB, not the cache's 16 MiB.
void BM_CacheAppend(benchmark::State& state) {
  Array cache = random_array({1, 8, 4096, 128}, 14), tok = random_array({1, 8, 1, 128}, 15);
  int32_t t = 0;
  for (auto _ : state) {
    cache = kiln::slice_update(cache, tok, kiln::array({t}), {2});
    cache.eval();
    t = (t + 1) % 4096;
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(tok.nbytes()));
}
BENCHMARK(BM_CacheAppend)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
