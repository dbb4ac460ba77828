// Tiers on the GPU (docs/codegen.md, "Tiers"): a compiled call's fused elementwise regions run
// through the precompiled interpreter while NVRTC compiles their kernels in the background,
// with the same values as the kernels and as eager; then the kernels, as a CUDA graph. Needs a
// GPU; each test uses a fresh kernel cache and a function of its own constant, so that no
// earlier test's kernel is found in memory or on disk.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

#include "backend/cpu/jit.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda/plan_graph.h"
#include "backend/cuda/tiers.h"
#include "core/config.h"
#include "fused_kernels.h"
#include "spawn_self.h"
#include "fuzz/random_graph.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

const Device gpu = Device::cuda(0);

// bench::chain10 with a constant of the test's own, then `extra` more products: a kernel source
// no other test compiled (the generated kernels take scalar constants as arguments, so the
// constant alone leaves the source the same).
struct Recipe {
  float c;
  int extra;
};
Array chain(const Array& x, Recipe r) {
  Array y = sin(x);
  for (int i = 0; i < r.extra; ++i) y = y * x;
  y = y * r.c;
  y = y + x;
  y = sin(y);
  y = y * x;
  y = y + 0.25f;
  y = sin(y);
  y = y * 2.0f;
  y = y + x;
  return sin(y);
}

/* chain with the recipe's constant and length, compiled. */
std::function<Array(const Array&)> compiled_chain(Recipe r) {
  return compile(std::function<Array(const Array&)>([r](const Array& a) { return chain(a, r); }));
}

Array gpu_input() {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.001f - 0.5f;
  return to(array(v, {1000}), gpu);
}

class CudaTiers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: GPU tiers not checked";
    if (!cuda::interp_kernel(0).fn) GTEST_SKIP() << "kiln was built without the interpreter's images";
    dir_ = fs::temp_directory_path() / ("kiln-cuda-tiers-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::chmod(dir_.c_str(), 0700);
    cpu::set_jit_cache_dir(dir_.string());
    reset_stats();
  }
  void TearDown() override {
    if (!config::flag(config::Knob::test_child)) wait_for_kernels();
    cpu::set_jit_cache_dir("");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A constant no other test (and no earlier run of this one) used.
  static Recipe fresh_recipe() {
    static std::atomic<int> n{0};
    const int k = n.fetch_add(1);
    return {1.5f + static_cast<float>(::getpid() % 1000) * 1e-3f + static_cast<float>(k) * 1e-6f, k};
  }
  fs::path dir_;
  kt::FusedKernelsScope policy_{FusedKernels::background};
};

TEST_F(CudaTiers, FirstCallRunsInterimThenTheKernelAsAGraph) {
  const Recipe c = fresh_recipe();
  Array x = gpu_input();
  Array eager = chain(x, c);
  eager.eval();
  auto f = compiled_chain(c);
  Array first = f(x);
  first.eval();
  EXPECT_EQ(stats().interim_calls, 1u) << "the first call waited for NVRTC";
  kt::expect_bits_equal(first, eager);
  wait_for_kernels();
  EXPECT_EQ(kernels_compiling(), 0u);
  Array second = f(x);  // records the fused run
  second.eval();
  EXPECT_EQ(stats().fused_calls, 1u);
  EXPECT_EQ(stats().fused_arrivals, 1u);
  kt::expect_bits_equal(second, eager);
  const uint64_t replays = cuda::graph_replays();
  Array third = f(x);
  third.eval();
  EXPECT_EQ(cuda::graph_replays(), replays + 1) << "the fused call was not kept as a graph";
  kt::expect_bits_equal(third, eager);
}

TEST_F(CudaTiers, InterimCallsAreNotKeptAsGraphs) {
  const Recipe c = fresh_recipe();
  Array x = gpu_input();
  kt::FusedKernelsScope off(FusedKernels::off);
  auto f = compiled_chain(c);
  const uint64_t replays = cuda::graph_replays();
  for (int i = 0; i < 4; ++i) f(x).eval();
  EXPECT_EQ(stats().interim_calls, 4u);
  EXPECT_EQ(cuda::graph_replays(), replays);
}

TEST_F(CudaTiers, WaitMakesTheFirstCallFused) {
  const Recipe c = fresh_recipe();
  Array x = gpu_input();
  kt::FusedKernelsScope wait(FusedKernels::wait);
  auto f = compiled_chain(c);
  f(x).eval();
  EXPECT_EQ(stats().interim_calls, 0u);
  EXPECT_EQ(stats().fused_calls, 1u);
}

TEST_F(CudaTiers, ThreadsMissingTheSameEntryShareOneCompile) {
  const Recipe c = fresh_recipe();
  Array x = gpu_input();
  Array eager = chain(x, c);
  eager.eval();
  auto f = compiled_chain(c);
  const uint64_t compiles = cuda::nvrtc_stats().compiles;
  const int threads = static_cast<int>(config::integer(config::Knob::test_threads));
  std::vector<std::vector<float>> got(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) got[static_cast<size_t>(t)] = f(x).to_vector<float>();
    });
  }
  for (auto& t : pool) t.join();
  wait_for_kernels();
  EXPECT_EQ(cuda::nvrtc_stats().compiles, compiles + 1) << "one compile for every thread's region";
  for (auto& g : got) EXPECT_EQ(g, eager.to_vector<float>());
  EXPECT_GE(stats().interim_calls, 1u);
}

TEST_F(CudaTiers, FreeingTheFunctionLeavesNothingQueued) {
  for (int k = 0; k < 8; ++k) {
    const Recipe c = fresh_recipe();
    auto f = compiled_chain(c);
    f(gpu_input()).eval();
  }  // each function freed: its queued compile is dropped, a running one ends
  wait_for_kernels();
  EXPECT_EQ(kernels_compiling(), 0u);
}

// Every fuzzer program on the GPU in both tiers (fuzz::check runs the interim tier with
// KILN_FUSED_KERNELS=off, the interpreter, and the fused one with wait), against eager.
TEST_F(CudaTiers, FuzzerGraphsInBothTiersEqualEager) {
  const uint64_t count = static_cast<uint64_t>(config::integer(config::Knob::test_cuda_fuzz_count));
  set_default_device(gpu);
  for (uint64_t seed = 1; seed <= count; ++seed) {
    fuzz::Program p = fuzz::generate(seed);
    fuzz::CheckResult r = fuzz::check(p, {.shapeless = false, .shapeless_variants = false});
    EXPECT_TRUE(r.ok) << "seed " << seed << ": " << r.failure;
  }
  set_default_device(Device::cpu());
  EXPECT_GT(stats().interim_calls, 0u) << "no fuzzer region ran through the interpreter";
}

// Run as a child process: a compile in flight when main returns.
TEST_F(CudaTiers, DISABLED_ExitsWithACompileInFlight) {
  const Recipe c = fresh_recipe();
  static auto f = compiled_chain(c);
  f(gpu_input()).eval();
  ASSERT_GE(kernels_compiling(), 1u);
}

TEST(CudaTiersExit, ProcessExitsPromptlyWithACompileInFlight) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = kt::spawn_self("CudaTiers.DISABLED_ExitsWithACompileInFlight", {"KILN_TEST_CHILD=1"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(kt::wait_exit_code(pid), 0);  // sanitizers make a report fail the exit status
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

}  // namespace
