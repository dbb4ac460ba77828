// Tiers: a compiled call never waits for the C++ compiler. Its fused regions run through the
// interpreter while their kernels compile on the background pool, and later calls use them.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <kiln/kiln.h>

#include "backend/cpu/compile_pool.h"
#include "backend/cpu/jit.h"
#include "core/config.h"
#include "../../bench/workloads.h"
#include "fused_kernels.h"
#include "spawn_self.h"

using namespace kiln;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using bench::chain10;  // the benchmarks' ten-op chain

std::vector<Array> softmax_and_chain(const std::vector<Array>& in) {
  return {softmax(in[0] * 2.0f, {-1}), chain10(in[0])};
}

Array input() {
  std::vector<float> v(4096);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.02f - 1.0f;
  return array(v, {64, 64});
}

// A compiler that sleeps before compiling (not before --version, which names its identity),
// in a fresh kernel cache: the background compile of every test is slow and its own.
class SlowCompiler : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::jit_available()) GTEST_SKIP() << "no C++ compiler: fused regions are always interpreted";
    if (default_device().type != Device::Type::cpu)
      GTEST_SKIP() << "the tiers are the CPU's (a GPU compiles its kernels with NVRTC before the first call)";
    dir_ = fs::temp_directory_path() / ("kiln-tiers-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cache");
    ::chmod((dir_ / "cache").c_str(), 0700);
    cpu::set_jit_cache_dir((dir_ / "cache").string());
    reset_stats();
  }
  void TearDown() override {
    if (!config::flag(config::Knob::test_child)) wait_for_kernels();  // the child exits with its compile in flight
    cpu::reset_jit_for_tests("");
    cpu::set_jit_cache_dir("");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void slow_compiler(double seconds) {
    const fs::path script = dir_ / "slow-c++";
    std::ofstream(script) << "#!/bin/sh\n"
                             "for a in \"$@\"; do [ \"$a\" = --version ] && exec c++ \"$@\"; done\n"
                             "sleep "
                          << seconds
                          << "\n"
                             "exec c++ \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    cpu::reset_jit_for_tests(script.string());
    ASSERT_TRUE(cpu::jit_available());
  }

  fs::path dir_;
  kt::FusedKernelsScope policy_{FusedKernels::background};
};

TEST_F(SlowCompiler, FirstCallRunsInterimWhileTheKernelsCompile) {
  slow_compiler(2);
  Array x = input();
  std::vector<Array> want;
  {
    kt::FusedKernelsScope off(FusedKernels::off);
    want = compile(softmax_and_chain)({x});
    eval(want);
  }
  reset_stats();
  auto f = compile(softmax_and_chain);
  auto t0 = Clock::now();
  auto got = f({x});
  eval(got);
  double first_s = seconds_since(t0);
  EXPECT_LT(first_s, 1.5) << "the first call waited for the compiler";
  EXPECT_EQ(stats().interim_calls, 1u);
  EXPECT_EQ(stats().fused_calls, 0u);
  const size_t regions = kernels_compiling();
  EXPECT_GE(regions, 1u);
  for (size_t i = 0; i < got.size(); ++i) kt::expect_bits_equal(got[i], want[i]);

  wait_for_kernels();
  EXPECT_EQ(kernels_compiling(), 0u);
  const auto before = cpu::jit_stats();
  got = f({x});
  eval(got);
  for (size_t i = 0; i < got.size(); ++i) kt::expect_bits_equal(got[i], want[i]);
  Stats s = stats();
  EXPECT_EQ(s.interim_calls, 1u);
  EXPECT_EQ(s.fused_calls, 1u);
  EXPECT_EQ(s.fused_arrivals, 1u);
  EXPECT_GE(s.fused_arrival_ns, 2'000'000'000u);  // the compiler slept that long
  EXPECT_EQ(cpu::jit_stats().compiles, before.compiles);  // the fused call compiled nothing
  got = f({x});
  eval(got);
  EXPECT_EQ(stats().fused_arrivals, 1u);  // arrivals are counted once per traced plan
}

// Threads missing the same entry all get the interim tier at once, and share one compile per
// source: two functions of the same program included.
TEST_F(SlowCompiler, ThreadsMissingTheSameEntryShareOneCompile) {
  slow_compiler(1);
  Array x = input();
  auto f = compile(std::function<Array(const Array&)>(chain10));
  auto g = compile(std::function<Array(const Array&)>(chain10));
  std::vector<float> want;
  {
    kt::FusedKernelsScope off(FusedKernels::off);
    want = chain10(x).to_vector<float>();
  }
  const auto before = cpu::jit_stats();
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  std::vector<double> took(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto t0 = Clock::now();
      auto y = (t % 2 ? f : g)(x).to_vector<float>();
      took[static_cast<size_t>(t)] = seconds_since(t0);
      if (y != want) ++wrong;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  for (double s : took) EXPECT_LT(s, 0.9) << "a caller waited for the compiler";
  EXPECT_EQ(stats().interim_calls, static_cast<uint64_t>(kThreads));
  EXPECT_EQ(kernels_compiling(), 1u);
  wait_for_kernels();
  EXPECT_EQ(cpu::jit_stats().compiles, before.compiles + 1);
  EXPECT_EQ(f(x).to_vector<float>(), want);
  EXPECT_EQ(g(x).to_vector<float>(), want);
  EXPECT_EQ(stats().fused_calls, 2u);
}

// Threads calling on while the kernel arrives: each call runs one tier or the other, whole,
// and every result is the interim tier's.
TEST_F(SlowCompiler, CallsSwitchTiersWhileThreadsRun) {
  slow_compiler(0.5);
  Array x = input();
  CompiledFunction f = compile([](const std::vector<Array>& in) { return std::vector<Array>{chain10(in[0])}; });
  std::vector<std::vector<float>> want;
  {
    kt::FusedKernelsScope off(FusedKernels::off);
    for (auto& a : f({x})) want.push_back(a.to_vector<float>());
  }
  reset_stats();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto t0 = Clock::now();
      while (kernels_compiling() > 0 || seconds_since(t0) < 0.2) {
        auto got = f({x});
        for (size_t i = 0; i < got.size(); ++i) wrong += got[i].to_vector<float>() != want[i];
        // Pauses leave the compiler (at a lower priority) some of a loaded machine's cores.
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (seconds_since(t0) > 120) break;
      }
      auto got = f({x});  // after the compile: fused
      for (size_t i = 0; i < got.size(); ++i) wrong += got[i].to_vector<float>() != want[i];
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  Stats s = stats();
  EXPECT_GT(s.interim_calls, 0u);
  EXPECT_GE(s.fused_calls, 4u);
  EXPECT_EQ(s.fused_arrivals, 1u);
}

TEST_F(SlowCompiler, FreeingTheFunctionCancelsItsCompile) {
  slow_compiler(60);
  Array x = input();
  {
    auto f = compile(std::function<Array(const Array&)>(chain10));
    f(x).eval();
    EXPECT_EQ(kernels_compiling(), 1u);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the worker start the compiler
  }
  // The last requester went: the compiler (a 60 s sleep) is killed, not waited for.
  auto t0 = Clock::now();
  while (kernels_compiling() > 0 && seconds_since(t0) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(kernels_compiling(), 0u);
  EXPECT_LT(seconds_since(t0), 10.0);
  EXPECT_EQ(cpu::jit_cache_size(), 0u);
}

TEST_F(SlowCompiler, WaitMakesTheFirstCallFused) {
  slow_compiler(0.2);
  kt::FusedKernelsScope wait(FusedKernels::wait);
  const auto before = cpu::jit_stats();
  Array x = input();
  auto f = compile(softmax_and_chain);
  eval(f({x}));
  EXPECT_EQ(stats().interim_calls, 0u);
  EXPECT_EQ(stats().fused_calls, 1u);
  EXPECT_EQ(stats().fused_arrivals, 1u);
  EXPECT_GE(cpu::jit_stats().compiles, before.compiles + 1);
  EXPECT_EQ(kernels_compiling(), 0u);
}

TEST_F(SlowCompiler, OffNeverCompiles) {
  slow_compiler(0);
  kt::FusedKernelsScope off(FusedKernels::off);
  const auto before = cpu::jit_stats();
  auto f = compile(softmax_and_chain);
  for (int i = 0; i < 3; ++i) eval(f({input()}));
  EXPECT_EQ(stats().interim_calls, 3u);
  EXPECT_EQ(kernels_compiling(), 0u);
  EXPECT_EQ(cpu::jit_stats().compiles, before.compiles);
}

// A later process (here: the same cache directory with the memory cache emptied) takes the
// kernels from disk in its first call, without compiling and without an interim tier.
TEST_F(SlowCompiler, DiskCacheServesALaterProcessAtOnce) {
  slow_compiler(0);
  Array x = input();
  uint64_t compiled = cpu::jit_stats().compiles;
  {
    kt::FusedKernelsScope wait(FusedKernels::wait);
    eval(compile(softmax_and_chain)({x}));
  }
  compiled = cpu::jit_stats().compiles - compiled;
  ASSERT_GE(compiled, 1u);
  cpu::set_jit_cache_dir((dir_ / "cache").string());  // empties the memory cache
  reset_stats();
  const auto before = cpu::jit_stats();
  eval(compile(softmax_and_chain)({x}));
  EXPECT_EQ(stats().interim_calls, 0u);
  EXPECT_EQ(stats().fused_calls, 1u);
  EXPECT_LT(stats().fused_arrival_ns, 500'000'000u);  // with the first call: trace and disk loads, no compile
  EXPECT_EQ(cpu::jit_stats().disk_loads, before.disk_loads + compiled);
  EXPECT_EQ(cpu::jit_stats().compiles, before.compiles);
  EXPECT_EQ(kernels_compiling(), 0u);
}

// A background compile the compiler rejects leaves the region interpreted (said on stderr);
// under wait the same failure is an error tagged [jit].
TEST_F(SlowCompiler, ARejectedKernelStaysInterpretedAndWaitRaisesIt) {
  const fs::path script = dir_ / "bad-c++";
  std::ofstream(script) << "#!/bin/sh\n"
                           "for a in \"$@\"; do [ \"$a\" = --version ] && exec c++ \"$@\"; done\n"
                           "echo 'kernel.cpp:1: error: rejected for the test' >&2\nexit 1\n";
  fs::permissions(script, fs::perms::owner_all);
  cpu::reset_jit_for_tests(script.string());
  Array x = input();
  std::vector<float> want;
  {
    kt::FusedKernelsScope off(FusedKernels::off);
    want = chain10(x).to_vector<float>();
  }
  auto f = compile(std::function<Array(const Array&)>(chain10));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(f(x).to_vector<float>(), want);
  wait_for_kernels();
  EXPECT_EQ(f(x).to_vector<float>(), want);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("rejected for the test"), std::string::npos) << err;
  EXPECT_EQ(stats().interim_calls, 2u);
  kt::FusedKernelsScope wait(FusedKernels::wait);
  try {
    f(x).eval();
    ADD_FAILURE() << "no error under wait";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[jit] ", 0), 0u) << e.what();
  }
}

// Run as a child process: a compile in flight (a 60 s compiler) when main returns.
TEST_F(SlowCompiler, DISABLED_ExitsWithACompileInFlight) {
  slow_compiler(60);
  static auto f = compile(std::function<Array(const Array&)>(chain10));  // still alive at exit
  f(input()).eval();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(kernels_compiling(), 1u);
}

TEST(Tiers, ProcessExitsPromptlyWithACompileInFlight) {
  if (!cpu::jit_available()) GTEST_SKIP() << "no C++ compiler";
  auto t0 = Clock::now();
  pid_t pid = kt::spawn_self("SlowCompiler.DISABLED_ExitsWithACompileInFlight", {"KILN_TEST_CHILD=1"});
  ASSERT_GT(pid, 0);
  EXPECT_EQ(kt::wait_exit_code(pid), 0);  // sanitizers make a report fail the exit status
  EXPECT_LT(seconds_since(t0), 30.0) << "the exit waited for the compiler";
}

// ---- the pool itself, with a stand-in compiler ----

struct FakeCompiler {
  explicit FakeCompiler(std::set<std::string> blocking) : blocking(std::move(blocking)) {}
  const std::set<std::string> blocking;  // sources whose compile waits for release() or a cancel
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;  // guarded by mu: blocked compiles may finish
  std::vector<std::string> ran;  // guarded by mu: sources, in the order they started
  std::vector<std::thread::id> on;  // guarded by mu: the thread of each
  cpu::CompileFn fn() {
    return [this](const std::string& source, const std::string&, cpu::detail::ProcessCanceller* c, int) {
      std::unique_lock<std::mutex> lock(mu);
      ran.push_back(source);
      on.push_back(std::this_thread::get_id());
      cv.notify_all();
      // Blocks until opened or cancelled (as a killed compiler would end).
      while (blocking.count(source) && !open && !c->cancelled()) cv.wait_for(lock, std::chrono::milliseconds(5));
      if (c->cancelled()) throw Error("[jit] cancelled compiler");
      return cpu::JitKernel{reinterpret_cast<void*>(&ran), nullptr};
    };
  }
  void wait_started(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ran.size() >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(CompilePool, OldestFirstAndABoundedQueue) {
  FakeCompiler fake({"a"});
  cpu::CompilePool pool(1, 3, fake.fn());
  auto a = pool.request("a", "k");
  fake.wait_started(1);
  auto b = pool.request("b", "k"), c = pool.request("c", "k"), d = pool.request("d", "k");
  ASSERT_TRUE(b && c && d);
  EXPECT_EQ(pool.request("e", "k"), nullptr);  // three queued: full
  auto b2 = pool.request("b", "k");  // the same source joins its job, full or not
  ASSERT_TRUE(b2);
  EXPECT_EQ(pool.pending(), 4u);
  fake.release();
  pool.drain();
  EXPECT_EQ(fake.ran, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_TRUE(b->done() && b2->done());
  EXPECT_TRUE(b->result().kernel);
}

TEST(CompilePool, TheLastTicketCancelsItsJob) {
  FakeCompiler fake({"a", "b"});
  cpu::CompilePool pool(1, 8, fake.fn());
  auto a = pool.request("a", "k");
  fake.wait_started(1);
  auto b = pool.request("b", "k"), b2 = pool.request("b", "k");
  EXPECT_EQ(pool.pending(), 2u);
  b.reset();
  EXPECT_EQ(pool.pending(), 2u);  // b2 still wants it
  b2.reset();
  EXPECT_EQ(pool.pending(), 1u);  // queued b dropped
  a.reset();  // running a: its compiler is cancelled
  pool.drain();
  EXPECT_EQ(fake.ran, (std::vector<std::string>{"a"}));
  EXPECT_EQ(pool.pending(), 0u);
}

TEST(CompilePool, WaitRunsAQueuedJobOnTheCaller) {
  FakeCompiler fake({"a"});
  cpu::CompilePool pool(1, 8, fake.fn());
  auto a = pool.request("a", "k");
  fake.wait_started(1);
  auto b = pool.request("b", "k");
  pool.wait(*b);  // the only worker is busy with a
  EXPECT_TRUE(b->done());
  EXPECT_FALSE(a->done());
  {
    std::lock_guard<std::mutex> lock(fake.mu);
    ASSERT_EQ(fake.ran.size(), 2u);
    EXPECT_EQ(fake.ran[1], "b");
    EXPECT_EQ(fake.on[1], std::this_thread::get_id());
  }
  fake.release();
  pool.wait(*a);
  EXPECT_TRUE(a->result().kernel);
}

TEST(CompilePool, ShutdownCancelsEverythingAndRefusesMore) {
  FakeCompiler fake({"a", "b"});
  cpu::CompilePool pool(2, 8, fake.fn());
  auto a = pool.request("a", "k"), b = pool.request("b", "k");
  fake.wait_started(2);
  auto c = pool.request("c", "k");
  auto t0 = Clock::now();
  pool.shutdown();
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_TRUE(a->done() && b->done() && c->done());
  EXPECT_FALSE(a->result().kernel);
  EXPECT_NE(c->result().error.find("cancelled"), std::string::npos);
  EXPECT_EQ(pool.request("d", "k"), nullptr);
}

TEST(Tiers, PolicyIsAKnobOfTheRegistry) {
  EXPECT_STREQ(config::spec(config::Knob::fused_kernels).name, "KILN_FUSED_KERNELS");
  EXPECT_EQ(config::problem(config::spec(config::Knob::fused_kernels), "sometimes").empty(), false);
  kt::FusedKernelsScope scope(FusedKernels::off);
  EXPECT_EQ(fused_kernels(), FusedKernels::off);
}

}  // namespace
