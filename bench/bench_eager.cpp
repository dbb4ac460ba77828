// Eager (one kernel per op) CPU throughput, each kiln op next to the baseline it
// should approach: float32 add against memcpy of the same bytes, and matmul
// against cblas_sgemm on the same data. bench/summarize_eager.py prints the ratios.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <kiln/kiln.h>

#include "memcpy_baseline.h"

namespace {

using kiln::Array;

constexpr int64_t kElems = int64_t{1} << 24;  // 16M float32: 64 MiB per array, far past the caches
constexpr int64_t kRows = 4096, kCols = 4096;
constexpr int kMat = 1024;

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

Array random_array(kiln::Shape shape, uint32_t seed) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return kiln::array(random_floats(n, seed), std::move(shape));
}

// c = a + b on two evaluated 16M-element arrays. Bytes: read a, read b, write c.
void BM_Add(benchmark::State& state) {
  Array a = random_array({kElems}, 1), b = random_array({kElems}, 2);
  kiln::eval({a, b});
  for (auto _ : state) {
    Array c = a + b;
    c.eval();
    benchmark::DoNotOptimize(c.id());
  }
  state.SetBytesProcessed(state.iterations() * 3 * kElems * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * kElems);
}
BENCHMARK(BM_Add)->Unit(benchmark::kMillisecond)->UseRealTime();

// The bandwidth baseline: one memcpy of one array's bytes between warmed buffers.
// Bytes: read the source, write the destination.
void BM_Memcpy(benchmark::State& state) {
  bench::time_memcpy(state, static_cast<size_t>(kElems) * sizeof(float));
  state.SetItemsProcessed(state.iterations() * kElems);
}
BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();

// A transpose made contiguous: copy(transpose(x)) of a 4096 x 4096 float32 array.
// Bytes: read x, write the copy.
void BM_Transpose(benchmark::State& state) {
  Array a = kiln::reshape(random_array({kElems}, 5), {4096, kElems / 4096});
  a.eval();
  for (auto _ : state) {
    Array c = kiln::copy(kiln::transpose(a));
    c.eval();
    benchmark::DoNotOptimize(c.id());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kElems * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * kElems);
}
BENCHMARK(BM_Transpose)->Unit(benchmark::kMillisecond)->UseRealTime();

// A binary op with a transposed operand: transpose(a) + b, 4096 x 4096 float32 arrays.
// Bytes: read a and b, write the sum (as BM_Add).
void BM_TransposeAdd(benchmark::State& state) {
  Array a = random_array({kRows, kCols}, 6), b = random_array({kRows, kCols}, 7);
  kiln::eval({a, b});
  for (auto _ : state) {
    Array c = kiln::transpose(a) + b;
    c.eval();
    benchmark::DoNotOptimize(c.id());
  }
  state.SetBytesProcessed(state.iterations() * 3 * kRows * kCols * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}
BENCHMARK(BM_TransposeAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

// A transcendental: exp over 16M elements (compute-bound rather than memory-bound).
void BM_Exp(benchmark::State& state) {
  Array a = random_array({kElems}, 3);
  a.eval();
  for (auto _ : state) {
    Array c = kiln::exp(a);
    c.eval();
    benchmark::DoNotOptimize(c.id());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kElems * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * kElems);
}
BENCHMARK(BM_Exp)->Unit(benchmark::kMillisecond)->UseRealTime();

// Row sums: sum over the last axis of a 4096x4096 float32 array.
void BM_RowSum(benchmark::State& state) {
  Array a = random_array({kRows, kCols}, 4);
  a.eval();
  for (auto _ : state) {
    Array s = kiln::sum(a, {-1});
    s.eval();
    benchmark::DoNotOptimize(s.id());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * int64_t{sizeof(float)});
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}
BENCHMARK(BM_RowSum)->Unit(benchmark::kMillisecond)->UseRealTime();

// 1024x1024 @ 1024x1024 float32 through kiln::matmul.
void BM_Matmul(benchmark::State& state) {
  Array a = random_array({kMat, kMat}, 5), b = random_array({kMat, kMat}, 6);
  kiln::eval({a, b});
  for (auto _ : state) {
    Array c = kiln::matmul(a, b);
    c.eval();
    benchmark::DoNotOptimize(c.id());
  }
  state.counters["flops"] = benchmark::Counter(2.0 * kMat * kMat * kMat, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Matmul)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same product with cblas_sgemm called directly into a preallocated output.
void BM_Sgemm(benchmark::State& state) {
  std::vector<float> a = random_floats(int64_t{kMat} * kMat, 5), b = random_floats(int64_t{kMat} * kMat, 6);
  std::vector<float> c(static_cast<size_t>(kMat) * kMat, 0.0f);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kMat, kMat, kMat, 1.0f, a.data(), kMat, b.data(), kMat, 0.0f,
                c.data(), kMat);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["flops"] = benchmark::Counter(2.0 * kMat * kMat * kMat, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sgemm)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
