// The CPU JIT: compile, caches in memory and on disk, errors, threads, the missing-compiler
// fallback and the headers generated kernels include. Each compile of a tiny source costs
// a fraction of a second, so the tests share few sources.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <sstream>
#include <sys/stat.h>
#include <string>
#include <thread>
#include <vector>

#include "backend/common/math.h"
#include "backend/cpu/jit.h"
#include "backend/cpu/jit_support.h"
#include "backend/cpu/kernel_store.h"
#include "core/config.h"
#include "kiln/error.h"
#include "spawn_self.h"

namespace fs = std::filesystem;
using namespace kiln::cpu;
using kt::spawn_self;
using kt::wait_exit_code;

namespace {

using AddFn = int (*)(int);

// A source whose function adds `k`; different k, different source.
std::string add_source(int k) {
  return "extern \"C\" int kiln_jit_add(int a) { return a + " + std::to_string(k) + "; }\n";
}
int call_add(const JitKernel& k, int a) { return reinterpret_cast<AddFn>(k.fn)(a); }

std::string make_temp_dir() {
  std::string templ = (fs::temp_directory_path() / "kiln-test-jit-XXXXXX").string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

JitStats delta(const JitStats& before) {
  JitStats now = jit_stats();
  return {now.compiles - before.compiles, now.disk_loads - before.disk_loads, now.memory_hits - before.memory_hits};
}

class Jit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir();
    set_jit_cache_dir(dir_);
    if (!jit_available()) GTEST_SKIP() << "no working C++ compiler on this machine";
  }
  void TearDown() override {
    set_jit_cache_capacity(4096);
    set_jit_dump_dir("");
    set_jit_cache_dir("");
    fs::remove_all(dir_);
  }
  std::string so_path(const std::string& source) { return dir_ + "/" + jit_cache_key(source) + ".so"; }
  std::string dir_;
};

TEST_F(Jit, CompilesCachesInMemoryThenLoadsFromDisk) {
  std::string dump = dir_ + "/dump";
  set_jit_dump_dir(dump);
  std::string src = add_source(1);
  JitStats before = jit_stats();
  JitKernel k = jit_compile(src, "kiln_jit_add");
  ASSERT_TRUE(k);
  EXPECT_EQ(call_add(k, 41), 42);
  EXPECT_EQ(delta(before).compiles, 1u);
  EXPECT_TRUE(fs::is_regular_file(so_path(src)));
  EXPECT_EQ(slurp(dump + "/" + jit_cache_key(src) + ".cpp"), src);

  JitKernel again = jit_compile(src, "kiln_jit_add");
  EXPECT_EQ(again.fn, k.fn);
  EXPECT_EQ(delta(before).memory_hits, 1u);

  // As if a new process started: nothing in memory, the library comes from disk.
  k = {};
  again = {};
  set_jit_cache_dir(dir_);
  JitKernel loaded = jit_compile(src, "kiln_jit_add");
  ASSERT_TRUE(loaded);
  EXPECT_EQ(call_add(loaded, 1), 2);
  JitStats d = delta(before);
  EXPECT_EQ(d.compiles, 1u);
  EXPECT_EQ(d.disk_loads, 1u);

  // A symbol the source does not define is an error, after one rebuild (a stored library
  // without the symbol may be a wrong one: it is built again before the error).
  ::testing::internal::CaptureStderr();
  try {
    jit_compile(src, "kiln_jit_missing");
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("[jit]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kiln_jit_missing"), std::string::npos) << e.what();
  }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("has no symbol 'kiln_jit_missing'; rebuilding it"), std::string::npos) << err;
  EXPECT_EQ(delta(before).compiles, 2u);
}

TEST_F(Jit, RejectedSourceThrowsWithDiagnostics) {
  std::string bad = "extern \"C\" int kiln_jit_bad(int a) { return a + kiln_undeclared_name; }\n";
  try {
    jit_compile(bad, "kiln_jit_bad");
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind("[jit] ", 0), 0u) << what;
    EXPECT_NE(what.find("kiln_jit_bad"), std::string::npos) << what;
    EXPECT_NE(what.find("kiln_undeclared_name"), std::string::npos) << what;  // the compiler's own words
    EXPECT_NE(what.find("error"), std::string::npos) << what;
  }
  // Nothing half-written is left in the cache directory.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
}

TEST_F(Jit, SameSourceFromEightThreadsCompilesOnce) {
  std::string src = add_source(2);
  JitStats before = jit_stats();
  std::latch start(8);
  std::vector<JitKernel> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = jit_compile(src, "kiln_jit_add");
    });
  }
  for (auto& th : threads) th.join();
  for (const JitKernel& k : got) {
    ASSERT_TRUE(k);
    EXPECT_EQ(k.fn, got[0].fn);
    EXPECT_EQ(call_add(k, 40), 42);
  }
  JitStats d = delta(before);
  EXPECT_EQ(d.compiles, 1u);
  EXPECT_EQ(d.disk_loads, 0u);
  EXPECT_EQ(d.memory_hits, 7u);
}

// A caller that joins a compile which its own caller then cancels (a compiled function freed
// while its kernel compiles in the background) gets the kernel, compiled again, not the other's
// cancellation; the cancelled caller gets CompileCancelled. The source takes about a second to
// compile, so the second caller joins while the first's compiler runs.
TEST_F(Jit, JoinerOfACancelledCompileCompilesItItself) {
  std::string src;
  for (int i = 0; i < 400; ++i)
    src += "static int f" + std::to_string(i) + "(int a) { int s = a; for (int j = 0; j < a; ++j) s = s * " +
           std::to_string(i + 3) + " + j; return s; }\n";
  src += "extern \"C\" int kiln_jit_add(int a) { return a + 2 + 0 * (0";
  for (int i = 0; i < 400; ++i) src += " + f" + std::to_string(i) + "(a & 1)";
  src += "); }\n";
  detail::ProcessCanceller cancel;
  bool cancelled = false;
  JitKernel first, joined;
  std::thread a([&] {
    try {
      first = jit_compile(src, "kiln_jit_add", &cancel);
    } catch (const CompileCancelled&) {
      cancelled = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a's compiler is running
  const JitStats before = jit_stats();
  std::thread b([&] { joined = jit_compile(src, "kiln_jit_add"); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (delta(before).memory_hits == 0 && std::chrono::steady_clock::now() < until)  // b waits on a's compile
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cancel.cancel();
  a.join();
  b.join();
  ASSERT_TRUE(joined) << "the joining caller got no kernel";
  EXPECT_EQ(call_add(joined, 40), 42);
  EXPECT_TRUE(cancelled || first) << "the cancelled caller neither failed nor got the kernel";
}

TEST_F(Jit, DifferentSourcesFromEightThreadsThenLeastRecentlyUsedEviction) {
  JitStats before = jit_stats();
  std::latch start(8);
  std::vector<JitKernel> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = jit_compile(add_source(100 + t), "kiln_jit_add");
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    ASSERT_TRUE(got[t]);
    EXPECT_EQ(call_add(got[t], 1), 101 + t);
  }
  EXPECT_EQ(delta(before).compiles, 8u);

  // Make 0 and 1 the most recent, then shrink the cache to two: only they stay in memory.
  jit_compile(add_source(100), "kiln_jit_add");
  jit_compile(add_source(101), "kiln_jit_add");
  set_jit_cache_capacity(2);
  JitStats mid = jit_stats();
  EXPECT_TRUE(jit_compile(add_source(100), "kiln_jit_add"));
  EXPECT_EQ(delta(mid).memory_hits, 1u);
  EXPECT_EQ(call_add(jit_compile(add_source(105), "kiln_jit_add"), 0), 105);
  EXPECT_EQ(delta(mid).disk_loads, 1u);
  EXPECT_EQ(delta(mid).compiles, 0u);
  // An evicted kernel that is still held keeps working.
  EXPECT_EQ(call_add(got[7], 0), 107);
}

TEST_F(Jit, CorruptCacheFileIsRemovedAndRebuilt) {
  std::string src = add_source(3);
  std::string path = so_path(src);
  ASSERT_TRUE(jit_compile(src, "kiln_jit_add"));
  std::string good = slurp(path);
  ASSERT_GT(good.size(), 1000u);
  for (const std::string& broken : {good.substr(0, good.size() / 2), std::string("not a library")}) {
    set_jit_cache_dir(dir_);  // empties memory; the library unloads since nothing holds it
    spit(path, broken);
    JitStats before = jit_stats();
    JitKernel k = jit_compile(src, "kiln_jit_add");
    ASSERT_TRUE(k);
    EXPECT_EQ(call_add(k, 0), 3);
    EXPECT_EQ(delta(before).compiles, 1u);
    EXPECT_EQ(slurp(path).size(), good.size());
  }
}

TEST_F(Jit, StaleTemporariesOfDeadProcessesAreSwept) {
  spit(dir_ + "/.tmp-old.cpp", "x");
  spit(dir_ + "/.tmp-new.cpp", "x");
  fs::last_write_time(dir_ + "/.tmp-old.cpp", fs::file_time_type::clock::now() - std::chrono::hours(2));
  set_jit_cache_dir(dir_);
  EXPECT_EQ(jit_cache_dir(), dir_);
  EXPECT_FALSE(fs::exists(dir_ + "/.tmp-old.cpp"));
  EXPECT_TRUE(fs::exists(dir_ + "/.tmp-new.cpp"));  // may belong to a compile running now
}

TEST_F(Jit, UnwritableCacheDirectoryCompilesPrivately) {
  spit(dir_ + "/file", "x");
  set_jit_cache_dir(dir_ + "/file/cache");  // under a regular file: not creatable, even by root
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(jit_cache_dir(), "");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not writable"), std::string::npos) << err;
  JitKernel k = jit_compile(add_source(4), "kiln_jit_add");
  ASSERT_TRUE(k);
  EXPECT_EQ(call_add(k, 0), 4);
  EXPECT_FALSE(fs::exists(dir_ + "/file/cache"));
}

TEST_F(Jit, GeneratedSourceIncludesKilnHeaders) {
  EXPECT_TRUE(fs::is_regular_file(jit_include_dir() + "/kiln/half.h"));
  EXPECT_TRUE(fs::is_regular_file(jit_include_dir() + "/backend/common/math.h"));
  std::string src = R"(
#include "kiln/half.h"
#include "backend/common/math.h"
extern "C" float kiln_jit_exp(float x) { return kiln::math::Exp{}(x); }
extern "C" float kiln_jit_half(float x) { return static_cast<float>(kiln::float16_t(x)); }
)";
  JitKernel e = jit_compile(src, "kiln_jit_exp");
  JitKernel h = jit_compile(src, "kiln_jit_half");
  ASSERT_TRUE(e);
  ASSERT_TRUE(h);
  EXPECT_EQ(e.library, h.library);  // one library, two symbols
  auto exp_fn = reinterpret_cast<float (*)(float)>(e.fn);
  auto half_fn = reinterpret_cast<float (*)(float)>(h.fn);
  for (float x : {1.0f, -0.5f, 3.25f, 88.0f}) {
    float want = kiln::math::Exp{}(x);
    float got = exp_fn(x);
    EXPECT_EQ(std::memcmp(&want, &got, sizeof want), 0) << x;  // bit for bit
  }
  EXPECT_EQ(half_fn(1.0f / 3.0f), static_cast<float>(kiln::float16_t(1.0f / 3.0f)));
}

TEST_F(Jit, TwoProcessesFillOneCacheAtOnce) {
  std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir_, "KILN_TEST_CHILD=1"};
  pid_t a = spawn_self("JitChild.DISABLED_FillCache", env);
  pid_t b = spawn_self("JitChild.DISABLED_FillCache", env);
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(wait_exit_code(a), 0);
  EXPECT_EQ(wait_exit_code(b), 0);
  // This process finds both kernels on disk and compiles nothing.
  set_jit_cache_dir(dir_);
  JitStats before = jit_stats();
  for (int k : {200, 201}) EXPECT_EQ(call_add(jit_compile(add_source(k), "kiln_jit_add"), 1), k + 1);
  EXPECT_EQ(delta(before).compiles, 0u);
  EXPECT_EQ(delta(before).disk_loads, 2u);
  int libraries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    std::string name = e.path().filename().string();
    EXPECT_EQ(name.rfind(".tmp-", 0), std::string::npos) << name;  // no temporary left behind
    libraries += e.path().extension() == ".so";
  }
  EXPECT_EQ(libraries, 2);
}

// ---- the disk cache is trusted only when it is ours alone (issue 24) ----

// A source whose function is kiln_jit_add, adding `k`, as a library built on its own.
std::string library_adding(int k) {
  JitKernel lib = jit_compile(add_source(k), "kiln_jit_add");
  return slurp(jit_cache_dir() + "/" + jit_cache_key(add_source(k)) + ".so");
}

// Whether any file in dir has a name ending with suffix.
bool has_file_ending(const std::string& dir, const std::string& suffix) {
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

TEST_F(Jit, SymlinkedCacheDirectoryIsRefused) {
  // The link could be re-pointed after any check made through it: refused, with one warning.
  fs::create_directory(dir_ + "/real");
  fs::create_directory_symlink(dir_ + "/real", dir_ + "/link");
  set_jit_cache_dir(dir_ + "/link");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(jit_cache_dir(), "");
  EXPECT_EQ(call_add(jit_compile(add_source(10), "kiln_jit_add"), 1), 11);
  EXPECT_EQ(call_add(jit_compile(add_source(11), "kiln_jit_add"), 1), 12);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("not using the kernel cache directory '" + dir_ + "/link': it is a symbolic link"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("kernel cache directory", err.find("kernel cache directory") + 1), std::string::npos) << err;
  EXPECT_FALSE(has_file_ending(dir_ + "/real", ".so"));
}

TEST_F(Jit, CacheDirectoryWritableByOthersIsRefused) {
  std::string open = dir_ + "/open";
  fs::create_directory(open);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  set_jit_cache_dir(open);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(jit_cache_dir(), "");
  EXPECT_EQ(call_add(jit_compile(add_source(12), "kiln_jit_add"), 1), 13);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("it is writable by group or others (mode 0777)"), std::string::npos) << err;
  EXPECT_FALSE(has_file_ending(open, ".so"));
  // The same through KILN_CACHE_DIR, in a process of its own (the variable is read once).
  pid_t p = spawn_self("JitChild.DISABLED_RefusedCache", {"KILN_CACHE_DIR=" + open, "KILN_TEST_CHILD=1"});
  ASSERT_GT(p, 0);
  EXPECT_EQ(wait_exit_code(p), 0);
  EXPECT_FALSE(has_file_ending(open, ".so"));
}

TEST_F(Jit, DirectorySwappedAfterOpeningIsNotFollowed) {
  // Once open, the cache is reached through its descriptor: a directory moved away and a link
  // put in its place (to someone else's files) is never read or written.
  ASSERT_EQ(call_add(jit_compile(add_source(13), "kiln_jit_add"), 0), 13);
  std::string planted = library_adding(999);
  std::string target = add_source(14);
  std::string key = jit_cache_key(target);
  std::string theirs = make_temp_dir();
  spit(theirs + "/" + key + ".so", planted);
  spit(theirs + "/" + key + ".so.sum", kiln::cpu::detail::checksum_text(planted));
  fs::rename(dir_, dir_ + "-moved");
  fs::create_directory_symlink(theirs, dir_);
  JitStats before = jit_stats();
  EXPECT_EQ(call_add(jit_compile(target, "kiln_jit_add"), 0), 14);
  EXPECT_EQ(delta(before).compiles, 1u);
  EXPECT_TRUE(fs::is_regular_file(dir_ + "-moved/" + key + ".so"));  // stored where the descriptor points
  fs::remove(dir_);
  fs::rename(dir_ + "-moved", dir_);
  fs::remove_all(theirs);
}

// ---- cached kernels are verified before loading (issue 24) ----

TEST_F(Jit, FlippedByteInCachedLibraryIsRemovedAndRebuilt) {
  // A same-size file with one byte changed crashed dlopen (SIGILL, SIGSEGV).
  std::string src = add_source(15);
  std::string path = so_path(src);
  ASSERT_TRUE(jit_compile(src, "kiln_jit_add"));
  std::string good = slurp(path);
  EXPECT_EQ(slurp(path + ".sum"), kiln::cpu::detail::checksum_text(good));
  for (size_t at : {size_t{0}, size_t{20}, good.size() / 2, good.size() - 1}) {
    set_jit_cache_dir(dir_);  // empties memory, as a new process
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    spit(path, bad);
    ::testing::internal::CaptureStderr();
    JitStats before = jit_stats();
    JitKernel k = jit_compile(src, "kiln_jit_add");
    std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(k);
    EXPECT_EQ(call_add(k, 0), 15);
    EXPECT_EQ(delta(before).compiles, 1u);
    EXPECT_EQ(delta(before).disk_loads, 0u);
    EXPECT_NE(err.find("checksum does not match"), std::string::npos) << err;
    EXPECT_EQ(slurp(path + ".sum"), kiln::cpu::detail::checksum_text(slurp(path)));
  }
}

TEST_F(Jit, CachedLibraryWithoutTheSymbolIsReplaced) {
  // A valid library lacking the symbol failed every run and was never replaced. Whether or not
  // its checksum file was rewritten to match, it is rebuilt once and then loads from disk.
  std::string other = "extern \"C\" int kiln_jit_other(int a) { return a; }\n";
  ASSERT_TRUE(jit_compile(other, "kiln_jit_other"));
  std::string lacking = slurp(so_path(other));
  std::string src = add_source(16);
  ASSERT_TRUE(jit_compile(src, "kiln_jit_add"));
  for (bool matching_sum : {false, true}) {
    set_jit_cache_dir(dir_);
    spit(so_path(src), lacking);
    if (matching_sum) spit(so_path(src) + ".sum", kiln::cpu::detail::checksum_text(lacking));
    ::testing::internal::CaptureStderr();
    JitStats before = jit_stats();
    EXPECT_EQ(call_add(jit_compile(src, "kiln_jit_add"), 1), 17);
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(delta(before).compiles, 1u);
    set_jit_cache_dir(dir_);
    before = jit_stats();
    EXPECT_EQ(call_add(jit_compile(src, "kiln_jit_add"), 2), 18);
    EXPECT_EQ(delta(before).compiles, 0u);
    EXPECT_EQ(delta(before).disk_loads, 1u);
  }
}

TEST_F(Jit, LibraryWithoutChecksumIsNotLoaded) {
  std::string src = add_source(17);
  ASSERT_TRUE(jit_compile(src, "kiln_jit_add"));
  fs::remove(so_path(src) + ".sum");
  set_jit_cache_dir(dir_);
  JitStats before = jit_stats();
  EXPECT_EQ(call_add(jit_compile(src, "kiln_jit_add"), 0), 17);
  EXPECT_EQ(delta(before).compiles, 1u);
  EXPECT_TRUE(fs::is_regular_file(so_path(src) + ".sum"));
}

// ---- deleting directories while a process runs (issue 24) ----

TEST_F(Jit, DeletingTheCacheDirectoryWhileRunningRecreatesIt) {
  // Every later compile failed ("kiln/half.h: No such file", "cannot open output file").
  ASSERT_EQ(call_add(jit_compile(add_source(18), "kiln_jit_add"), 0), 18);
  fs::remove_all(dir_);
  EXPECT_EQ(call_add(jit_compile(add_source(19), "kiln_jit_add"), 0), 19);
  EXPECT_TRUE(fs::is_regular_file(so_path(add_source(19))));  // made again, with its checks
  EXPECT_EQ(call_add(jit_compile(add_source(20), "kiln_jit_add"), 0), 20);
  // The private directory compiles run in (with the headers) is made again too.
  fs::remove_all(fs::path(jit_include_dir()).parent_path());
  EXPECT_EQ(call_add(jit_compile(add_source(21), "kiln_jit_add"), 0), 21);
  EXPECT_TRUE(fs::is_regular_file(jit_include_dir() + "/kiln/half.h"));
  set_jit_cache_dir(dir_);
  JitStats before = jit_stats();
  for (int k : {19, 20, 21}) EXPECT_EQ(call_add(jit_compile(add_source(k), "kiln_jit_add"), 0), k);
  EXPECT_EQ(delta(before).disk_loads, 3u);
  EXPECT_EQ(delta(before).compiles, 0u);
}

TEST_F(Jit, KilnCxxNamingNoCompilerMeansFallback) {
  pid_t p = spawn_self("JitChild.DISABLED_NoCompiler",
                       {"KILN_CACHE_DIR=" + dir_, "KILN_CXX=/nonexistent/kiln-c++", "KILN_TEST_CHILD=1"});
  ASSERT_GT(p, 0);
  EXPECT_EQ(wait_exit_code(p), 0);
}

// Does not need a compiler, so it is not skipped without one.
TEST(JitFallback, MissingCompilerReturnsEmptyKernelAndSaysSoOnce) {
  std::string dir = make_temp_dir();
  set_jit_cache_dir(dir);
  reset_jit_for_tests("/nonexistent/kiln-c++");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(jit_available());
  JitStats before = jit_stats();
  EXPECT_FALSE(jit_compile(add_source(5), "kiln_jit_add"));
  EXPECT_FALSE(jit_compile(add_source(6), "kiln_jit_add"));
  EXPECT_EQ(delta(before).compiles, 0u);
  std::string err = ::testing::internal::GetCapturedStderr();
  size_t first = err.find("no working C++ compiler");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("no working C++ compiler", first + 1), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent/kiln-c++"), std::string::npos) << err;
  EXPECT_NE(err.find("interpreter"), std::string::npos) << err;  // names the fallback
  reset_jit_for_tests("");
  set_jit_cache_dir("");
  fs::remove_all(dir);
}

// Helpers run in child processes by the tests above; skipped when run directly.
TEST(JitChild, DISABLED_FillCache) {
  if (!kiln::config::flag(kiln::config::Knob::test_child)) GTEST_SKIP();
  ASSERT_TRUE(jit_available());
  for (int k : {200, 201}) {
    JitKernel kernel = jit_compile(add_source(k), "kiln_jit_add");
    ASSERT_TRUE(kernel);
    EXPECT_EQ(call_add(kernel, 0), k);
  }
}

TEST(JitChild, DISABLED_RefusedCache) {
  if (!kiln::config::flag(kiln::config::Knob::test_child)) GTEST_SKIP();
  EXPECT_EQ(jit_cache_dir(), "");
  JitKernel k = jit_compile(add_source(22), "kiln_jit_add");
  ASSERT_TRUE(k);
  EXPECT_EQ(call_add(k, 0), 22);
}

TEST(JitChild, DISABLED_NoCompiler) {
  if (!kiln::config::flag(kiln::config::Knob::test_child)) GTEST_SKIP();
  EXPECT_FALSE(jit_available());
  EXPECT_FALSE(jit_compile(add_source(7), "kiln_jit_add"));
}

}  // namespace
