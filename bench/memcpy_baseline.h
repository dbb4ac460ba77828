// The bandwidth baseline of the CPU benchmarks: memcpy between two warmed buffers (every
// page touched before timing); bytes processed count the read and the write.
#pragma once

#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>

namespace bench {

inline void time_memcpy(benchmark::State& state, size_t bytes) {
  std::unique_ptr<char[]> src(new char[bytes]), dst(new char[bytes]);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 2, bytes);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(bytes));
}

}  // namespace bench
