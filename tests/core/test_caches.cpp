// Every cache is bounded (docs/threading.md, "Caches and their bounds"): the kernel-cache
// class both kernel caches use, the CPU JIT's cache and the host buffer cache, each filled
// past its bound. The CUDA module cache and device memory pool: tests/cuda/test_cuda.cpp.
#include <gtest/gtest.h>

#include "fused_kernels.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

#include "backend/cpu/jit.h"
#include "core/buffer.h"
#include "core/bounded_cache.h"

using namespace kiln;

namespace {

using Cache = detail::BoundedCache<std::shared_ptr<int>>;

std::shared_ptr<int> get(Cache& c, int k, std::atomic<int>* makes = nullptr) {
  std::string key = "k";  // appended, not "k" + ...: GCC 12 warns falsely (-Wrestrict) on that
  key += std::to_string(k);
  return c.get(key, [&] {
    if (makes) makes->fetch_add(1);
    return std::make_shared<int>(k);
  });
}

TEST(BoundedCache, FilledPastItsBoundKeepsTheMostRecentlyUsed) {
  Cache c(8);
  std::shared_ptr<int> first = get(c, 0);
  for (int k = 1; k < 40; ++k) {
    get(c, k);
    get(c, 1);  // used all along: never the least recently used
    EXPECT_LE(c.size(), 8u) << "after " << k + 1 << " keys";
  }
  std::atomic<int> makes{0};
  EXPECT_EQ(*get(c, 1, &makes), 1);
  EXPECT_EQ(*get(c, 39, &makes), 39);
  EXPECT_EQ(makes.load(), 0) << "the most recent keys were dropped";
  EXPECT_EQ(*get(c, 0, &makes), 0);
  EXPECT_EQ(makes.load(), 1) << "the oldest key was kept";
  EXPECT_EQ(*first, 0) << "a dropped value lives on while held";
  EXPECT_EQ(c.misses(), 41u);
}

TEST(BoundedCache, LowerCapacityAndClearDropAtOnce) {
  Cache c(16);
  for (int k = 0; k < 10; ++k) get(c, k);
  get(c, 3);
  c.set_capacity(1);
  EXPECT_EQ(c.size(), 1u);
  std::atomic<int> makes{0};
  get(c, 3, &makes);
  EXPECT_EQ(makes.load(), 0) << "the most recently used key stays";
  c.clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.capacity(), 1u);
}

TEST(BoundedCache, OneMakePerKeyFromManyThreadsAndErrorsReachEveryWaiter) {
  Cache c(4);
  std::atomic<int> makes{0};
  auto slow = [&] {
    makes.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return std::make_shared<int>(7);
  };
  std::vector<std::thread> threads;
  std::vector<int> got(8, 0);
  for (int t = 0; t < 8; ++t) threads.emplace_back([&, t] { got[static_cast<size_t>(t)] = *c.get("same", slow); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(makes.load(), 1);
  for (int v : got) EXPECT_EQ(v, 7);

  std::atomic<int> errors{0};
  auto failing = [&]() -> std::shared_ptr<int> {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    throw std::runtime_error("compile failed");
  };
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      try {
        c.get("bad", failing);
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "compile failed") errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 4);
  EXPECT_EQ(*c.get("bad", [] { return std::make_shared<int>(1); }), 1) << "a failed make is not cached";
}

TEST(Caches, KernelCacheCapacityIsPublicAndChecked) {
  const size_t saved = kernel_cache_capacity();
  EXPECT_EQ(saved, 4096u);
  set_kernel_cache_capacity(3);
  EXPECT_EQ(kernel_cache_capacity(), 3u);
  EXPECT_EQ(cpu::jit_cache_capacity(), 3u);
  EXPECT_THROW(set_kernel_cache_capacity(0), Error);
  set_kernel_cache_capacity(saved);
}

// The CPU JIT's cache, filled past its bound through compiled functions.
TEST(Caches, JitCacheFilledPastItsBound) {
  if (!cpu::jit_available()) GTEST_SKIP() << "no C++ compiler: fused regions are interpreted";
  struct Restore {
    ~Restore() { set_kernel_cache_capacity(4096); }
  } restore;
  kt::FusedKernelsScope wait(FusedKernels::wait);  // each call fills the cache, not a background compile
  set_kernel_cache_capacity(2);
  Array x = array(std::vector<float>{0.5f, -1.0f, 2.0f}, {3});
  for (int k = 1; k <= 5; ++k) {
    const float c = static_cast<float>(k);
    auto f = compile([c](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0] * c) + c}; });
    auto y = f({x})[0].to_vector<float>();
    EXPECT_FLOAT_EQ(y[2], std::exp(2.0f * c) + c);
    EXPECT_LE(cpu::jit_cache_size(), 2u);
  }
}

// The host's cache of freed large buffers holds at most 1 GiB (the buffers are never
// touched, so this takes address space, not memory).
TEST(Caches, HostBufferCacheFilledPastItsBound) {
  clear_memory_cache();
  {
    std::vector<std::shared_ptr<detail::Buffer>> held;
    for (int i = 0; i < 10; ++i) held.push_back(detail::Buffer::allocate(size_t{128} << 20));
  }
  EXPECT_GT(detail::buffer_cache_bytes(), 0u);
  EXPECT_LE(detail::buffer_cache_bytes(), size_t{1} << 30);
  clear_memory_cache();
  EXPECT_EQ(detail::buffer_cache_bytes(), 0u);
}

}  // namespace
