// Memory returns to its baseline after many compile / call / free cycles from 8
// threads: cache entries are counted directly, and in builds without a sanitizer the
// bytes held through operator new are counted too (a sanitizer owns operator new, and
// its LeakSanitizer checks the same thing at exit).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>

#include "compile/cache_probe.h"
#include "stress_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_COUNT_NEW 0
#else
#define KILN_COUNT_NEW 1
#endif

#if KILN_COUNT_NEW
namespace {
std::atomic<int64_t> g_live_bytes{0};  // atomic: bytes held through operator new, any thread
// Each block carries its size in a 16-byte header so that unsized delete can subtract it.
constexpr size_t kHeader = 16;
void* counted_alloc(size_t n) {
  void* p = std::malloc(n + kHeader);
  if (!p) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  g_live_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
  return static_cast<char*>(p) + kHeader;
}
void counted_free(void* q) noexcept {
  if (!q) return;
  void* p = static_cast<char*>(q) - kHeader;
  g_live_bytes.fetch_sub(static_cast<int64_t>(*static_cast<size_t*>(p)), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
#endif

using namespace kiln;

namespace {

// One pass: every thread compiles functions with its own captured constants, calls
// them with a few shapes (sync and async), and hands each to the next thread to free.
void cycles(int per_thread, uint64_t seed) {
  std::mutex mu;  // guards mailbox
  std::vector<std::vector<CompiledFunction>> mailbox(stress::kThreads);
  stress::run_together([&](int t) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(t));
    for (int it = 0; it < per_thread; ++it) {
      // The same program every time, so the kernel cache does not grow with the cycles.
      Array k = kiln::array(stress::random_floats(8, rng), {8});
      auto f = compile([k](const std::vector<Array>& in) { return std::vector<Array>{maximum(in[0], k) * 2.0f}; });
      for (int64_t rows : {1, 3, 5}) {
        Array x = kiln::array(stress::random_floats(rows * 8, rng), {rows, 8});
        Array y = f({x})[0];
        if (it % 2) async_eval({y});
        y.eval();
      }
      std::vector<CompiledFunction> mine;
      {
        std::lock_guard<std::mutex> lock(mu);
        mailbox[static_cast<size_t>((t + 1) % stress::kThreads)].push_back(std::move(f));
        mine.swap(mailbox[static_cast<size_t>(t)]);
      }
      mine.clear();  // freed on a thread that did not trace them
    }
  });
}

}  // namespace

TEST(MemoryCycles, CompileAndFreeReturnsToBaseline) {
  size_t entries = compiler::live_cache_entries();
  cycles(10, 100);  // warm-up: thread pool, kernel cache, once-only state
#if KILN_COUNT_NEW
  int64_t warm = g_live_bytes.load();
#endif
  EXPECT_EQ(compiler::live_cache_entries(), entries);
  for (int pass = 0; pass < 3; ++pass) {
    cycles(40, 200 + static_cast<uint64_t>(pass) * 10);
    EXPECT_EQ(compiler::live_cache_entries(), entries) << "pass " << pass;
#if KILN_COUNT_NEW
    int64_t now = g_live_bytes.load();
    // A little slack for allocator-independent library state (e.g. a grown hash table).
    EXPECT_LT(now - warm, 64 * 1024) << "pass " << pass << ": " << now - warm << " bytes more than after warm-up";
    std::printf("[ info ] pass %d: %lld bytes live through operator new (%lld after warm-up)\n", pass,
                static_cast<long long>(now), static_cast<long long>(warm));
#endif
  }
}

namespace {

// The process's peak resident bytes since the last reset_peak() (Linux: VmHWM).
int64_t peak_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lld kB", reinterpret_cast<long long*>(&kb)) == 1) break;
  std::fclose(f);
  return kb * 1024;
}
bool reset_peak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

// Evaluating a lazy chain frees each intermediate once the op after it has read it: a chain of
// 32 ops on 12 MB arrays peaks near 3 arrays, not 32 (384 MB).
TEST(MemoryCycles, LazyChainFreesEachIntermediateOnceRead) {
  if (eager()) GTEST_SKIP() << "KILN_MODE=eager evaluates each op as it is built";
  clear_memory_cache();  // no cached block from earlier tests serves the chain
  const int64_t n = 3'000'000;  // 12 MB of float32
  Array y = ones({n});
  y.eval();
  if (!reset_peak() || peak_bytes() < 0) GTEST_SKIP() << "no /proc/self/clear_refs or VmHWM here";
  const int64_t before = peak_bytes();
  for (int i = 0; i < 32; ++i) y = y * 0.5f + 1.0f;
  y.eval();
  const int64_t grew = peak_bytes() - before;
  EXPECT_LT(grew, 8 * n * 4) << "the chain's peak grew by " << grew / (1 << 20) << " MiB";
  EXPECT_NEAR(y.to_vector<float>()[0], 2.0f, 1e-5f);  // 1 -> 1.5 -> 1.75 ... -> 2
}
