// Time of the first call of a fresh compiled 10-op function (sin, multiply, add) on
// 1k float32 elements, evaluated, in this process. Run it once with an empty
// KILN_CACHE_DIR (cold: trace, passes, lowering and the system compiler) and again as a
// new process with the same directory (warm disk cache: trace, passes, and loading the
// kernel's shared library). Prints one JSON object on stdout:
//   {"first_call_ms": ..., "second_call_us": ..., "cache_dir": "..."}
// bench/run_compile.sh runs it both ways.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "core/config.h"
#include "workloads.h"

namespace {

using kiln::Array;

using bench::chain10;

}  // namespace

int main() {
  const std::string dir = kiln::config::text(kiln::config::Knob::cache_dir);
  if (dir.empty()) {
    std::fprintf(stderr, "compile_latency: set KILN_CACHE_DIR (empty for a cold run, reused for a warm one)\n");
    return 2;
  }
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.001f - 0.5f;
  Array x = kiln::array(v, {static_cast<int64_t>(v.size())});
  x.eval();
  // Touch eager kernels and the thread pool first, so the first compiled call pays only for compiling.
  kiln::sin(x + 1.0f).eval();

  using clock = std::chrono::steady_clock;
  auto f = kiln::compile(std::function<Array(const Array&)>(chain10));
  auto t0 = clock::now();
  Array y = f(x);
  y.eval();
  auto t1 = clock::now();
  Array z = f(x);
  z.eval();
  auto t2 = clock::now();
  if (y.to_vector<float>() != z.to_vector<float>()) {
    std::fprintf(stderr, "compile_latency: first and second calls disagree\n");
    return 1;
  }
  kiln::Stats s = kiln::stats();
  std::printf("{\"first_call_ms\": %.3f, \"second_call_us\": %.3f, \"cache_misses\": %llu, \"cache_dir\": \"%s\"}\n",
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::micro>(t2 - t1).count(),
              static_cast<unsigned long long>(s.cache_misses), dir.c_str());
  return 0;
}
