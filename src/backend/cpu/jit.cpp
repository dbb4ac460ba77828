// CPU JIT: compile generated C++ with the system compiler, load it with dlopen, and cache
// the result in memory (bounded LRU) and on disk (one shared library per source).
#include "backend/cpu/jit.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "backend/cpu/jit_headers.h"
#include "backend/cpu/jit_support.h"
#include "core/config.h"
#include "core/bounded_cache.h"
#include "kiln/cache.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

using detail::Hash128;
using Library = std::shared_ptr<void>;

// No -ffast-math: fused kernels must match the eager ones bit for bit, so no contraction
// into FMAs either (clang contracts by default). -frounding-math stops the compiler folding
// libm calls on arguments it can prove (expm1f(1) is correctly rounded at compile time, one
// ulp away from glibc's run-time result); tests/fuzz/test_fuzz_regressions.cpp has the case.
const std::vector<std::string> base_flags = {"-O3",   "-march=native",   "-std=c++20",       "-fPIC",
                                             "-shared", "-fno-math-errno", "-ffp-contract=off",
                                             "-frounding-math"};
constexpr size_t max_diagnostics = 16000;

// Everything a compile or lookup depends on; immutable once built, replaced as a whole.
struct JitConfig {
  bool available = false;
  std::vector<std::string> compiler;  // argv prefix: the program and any words from KILN_CXX
  std::string identity;               // the compiler's --version output
  std::vector<std::string> flags;
  std::string cache_dir;    // where <key>.so files live; empty: not writable, compile privately
  std::string work_dir;     // where compiles run: cache_dir or a private temporary directory
  std::string include_dir;  // the embedded headers, written out
  std::string dump_dir;     // KILN_DUMP_KERNELS, or empty
  Hash128 fingerprint;      // compiler identity, flags, headers and CPU: the source is added to it
};

// Settings the tests (and tools) override; otherwise the environment decides.
struct Settings {
  std::optional<std::string> cache_dir;
  std::optional<std::string> dump_dir;
  std::string compiler;  // empty: $KILN_CXX, else c++ / g++ / clang++ from PATH
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t b = s.find_first_not_of(" \t", i);
    if (b == std::string::npos) break;
    size_t e = s.find_first_of(" \t", b);
    if (e == std::string::npos) e = s.size();
    out.push_back(s.substr(b, e - b));
    i = e;
  }
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

const std::string& header_hash() {
  static const std::string h = [] {
    Hash128 hash;
    for (size_t i = 0; i < detail::embedded_header_count; ++i)
      hash.field(detail::embedded_headers[i].path).field(detail::embedded_headers[i].text);
    return hash.hex();
  }();
  return h;
}

// -march=native makes code specific to this CPU, so a cache shared between machines
// (a network home directory) must not hand one machine's kernels to another.
std::string cpu_fingerprint() {
  std::string info, out;
  if (!detail::read_file("/proc/cpuinfo", &info)) return "unknown";
  size_t pos = 0;
  while (pos < info.size()) {
    size_t end = info.find('\n', pos);
    if (end == std::string::npos) end = info.size();
    std::string line = info.substr(pos, end - pos);
    pos = end + 1;
    if (trim(line).empty()) break;  // first processor only
    for (const char* k : {"vendor_id", "cpu family", "model", "flags", "Features", "CPU implementer",
                          "CPU architecture", "CPU variant", "CPU part", "isa"}) {
      if (line.rfind(k, 0) == 0) {
        out += line + "\n";
        break;
      }
    }
  }
  return out;
}

bool usable_cache_dir(const std::string& dir) {
  if (!detail::make_dirs(dir) || ::access(dir.c_str(), W_OK | X_OK) != 0) return false;
  // A directory in the shared /tmp is trusted only if it is ours alone: we load code from it.
  if (dir.rfind("/tmp/kiln-cache-", 0) == 0) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || st.st_uid != ::getuid() || (st.st_mode & 022) != 0) return false;
  }
  return true;
}

// Writes the embedded headers under <root>/include-<hash>/ (each file atomically) and
// returns that directory; empty on failure.
std::string write_headers(const std::string& root) {
  if (root.empty()) return {};
  std::string dir = root + "/include-" + header_hash().substr(0, 16);
  for (size_t i = 0; i < detail::embedded_header_count; ++i) {
    const detail::EmbeddedHeader& h = detail::embedded_headers[i];
    std::string path = dir + "/" + h.path;
    std::string current;
    if (detail::read_file(path, &current) && current == h.text) continue;
    if (!detail::make_dirs(path.substr(0, path.rfind('/'))) || !detail::write_file_atomic(path, h.text)) return {};
  }
  return dir;
}

Library open_library(const std::string& path, std::string* why) {
  if (!detail::plausible_shared_library(path, why)) return nullptr;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    *why = e ? e : "unknown dlopen error";
    return nullptr;
  }
  return Library(handle, [](void* h) { ::dlclose(h); });
}

class JitState {
 public:
  std::shared_ptr<const JitConfig> config();
  JitKernel compile(const std::string& source, const std::string& symbol);
  // Applies `change` to the settings and forces a new config (and compiler probe).
  template <class F>
  void reconfigure(F change, bool clear_memory);

  std::atomic<uint64_t> compiles_{0};     // statistics; relaxed
  std::atomic<uint64_t> disk_loads_{0};   // statistics; relaxed
  kiln::detail::BoundedCache<JitKernel> kernels_{4096};  // by cache key and symbol; guarded inside

 private:
  std::shared_ptr<JitConfig> build_config(const Settings& s);
  Library load_or_compile(const JitConfig& c, const std::string& key, const std::string& source,
                          const std::string& symbol);
  Library run_compiler(const JitConfig& c, const std::string& key, const std::string& source,
                       const std::string& symbol);
  void dump_source(const JitConfig& c, const std::string& key, const std::string& source);
  bool warn_once(std::atomic<bool>& flag, const std::string& message);

  std::mutex probe_mu_;  // held while a config is built, so the compiler is probed once
  std::shared_mutex mu_;  // guards settings_, config_ and retired_
  Settings settings_;     // guarded by mu_
  std::shared_ptr<const JitConfig> config_;                 // guarded by mu_; null until built
  std::vector<std::shared_ptr<const JitConfig>> retired_;  // guarded by mu_; keeps include-dir references valid

 public:
  std::atomic<bool> warned_compiler_{false};  // said once; reset by reset_jit_for_tests
  std::atomic<bool> warned_cache_{false};     // said once; reset by reset_jit_for_tests
  std::atomic<bool> warned_dump_{false};      // said once; reset by reset_jit_for_tests
};

JitState& state() {
  // Never destroyed: kernels may still be held (and dlclose'd) during static destruction.
  static JitState* s = new JitState;
  return *s;
}

bool JitState::warn_once(std::atomic<bool>& flag, const std::string& message) {
  if (flag.exchange(true)) return false;
  std::fprintf(stderr, "kiln: %s\n", message.c_str());
  return true;
}

std::shared_ptr<const JitConfig> JitState::config() {
  {
    std::shared_lock lock(mu_);
    if (config_) return config_;
  }
  std::lock_guard probe(probe_mu_);
  Settings s;
  {
    std::shared_lock lock(mu_);
    if (config_) return config_;
    s = settings_;
  }
  std::shared_ptr<const JitConfig> c = build_config(s);
  std::unique_lock lock(mu_);
  config_ = c;
  return c;
}

std::shared_ptr<JitConfig> JitState::build_config(const Settings& s) {
  auto c = std::make_shared<JitConfig>();
  std::string requested = !s.compiler.empty() ? s.compiler : config::text(config::Knob::cxx);
  std::vector<std::vector<std::string>> candidates;
  if (!trim(requested).empty()) {
    candidates.push_back(split_words(requested));
  } else {
    candidates = {{"c++"}, {"g++"}, {"clang++"}};
  }
  std::vector<std::string> tried;
  for (const std::vector<std::string>& cand : candidates) {
    std::vector<std::string> argv = cand;
    argv.push_back("--version");
    detail::ProcessResult r = detail::run_process(argv);
    if (r.succeeded() && !trim(r.output).empty()) {
      c->available = true;
      c->compiler = cand;
      c->identity = trim(r.output);
      break;
    }
    tried.push_back("'" + join(cand, " ") + "' (" + r.describe() + ")");
  }
  c->flags = base_flags;
  // GCC marks some inline statics STB_GNU_UNIQUE, which makes a library impossible to unload.
  bool gcc = c->identity.find("Free Software Foundation") != std::string::npos &&
             c->identity.find("clang") == std::string::npos;
  if (gcc) c->flags.push_back("-fno-gnu-unique");

  std::string dir = s.cache_dir ? *s.cache_dir : kernel_cache_dir();
  if (usable_cache_dir(dir)) {
    c->cache_dir = dir;
    detail::remove_stale_temporaries(dir, 3600);  // an hour: no live compile takes that long
  } else {
    warn_once(warned_cache_, "the kernel cache directory '" + dir +
                                 "' is not writable; compiling kernels in a private temporary directory "
                                 "instead (nothing is reused across runs)");
  }
  c->work_dir = c->cache_dir.empty() ? detail::private_temp_dir() : c->cache_dir;
  c->include_dir = write_headers(c->work_dir);
  if (c->include_dir.empty() && c->work_dir != detail::private_temp_dir()) {
    c->work_dir = detail::private_temp_dir();
    c->include_dir = write_headers(c->work_dir);
  }
  c->dump_dir = s.dump_dir ? *s.dump_dir : config::text(config::Knob::dump_kernels);

  const char* fallback = "fused regions run through an interpreter over cache-sized tiles (no generated code)";
  if (!c->available) {
    warn_once(warned_compiler_, "no working C++ compiler (tried " + join(tried, ", ") + "); " + fallback +
                                    ". Set KILN_CXX to a C++20 compiler to enable code generation.");
  } else if (c->include_dir.empty()) {
    c->available = false;
    warn_once(warned_compiler_, "no writable directory for compiled kernels (tried '" + dir + "' and $TMPDIR); " +
                                    fallback + ".");
  }
  c->fingerprint.field("kiln-jit-1").field(c->identity).field(join(c->flags, " ")).field(header_hash());
  c->fingerprint.field(cpu_fingerprint());
  return c;
}

std::string cache_key(const JitConfig& c, const std::string& source) {
  Hash128 h = c.fingerprint;
  return h.field(source).hex();
}

void JitState::dump_source(const JitConfig& c, const std::string& key, const std::string& source) {
  if (c.dump_dir.empty()) return;
  if (!detail::make_dirs(c.dump_dir) || !detail::write_file_atomic(c.dump_dir + "/" + key + ".cpp", source))
    warn_once(warned_dump_, "cannot write kernel sources into KILN_DUMP_KERNELS='" + c.dump_dir + "'");
}

Library JitState::load_or_compile(const JitConfig& c, const std::string& key, const std::string& source,
                                  const std::string& symbol) {
  dump_source(c, key, source);
  if (!c.cache_dir.empty()) {
    std::string path = c.cache_dir + "/" + key + ".so";
    if (detail::file_exists(path)) {
      std::string why;
      if (Library lib = open_library(path, &why)) {
        disk_loads_.fetch_add(1, std::memory_order_relaxed);
        return lib;
      }
      // Truncated or corrupt (a crash, a full disk): throw it away and build it again.
      std::fprintf(stderr, "kiln: removing unloadable cached kernel %s (%s)\n", path.c_str(), why.c_str());
      ::unlink(path.c_str());
    }
  }
  return run_compiler(c, key, source, symbol);
}

Library JitState::run_compiler(const JitConfig& c, const std::string& key, const std::string& source,
                               const std::string& symbol) {
  bool persist = !c.cache_dir.empty();
  std::string why;
  // A unique name in the cache directory itself, so the final rename(2) is atomic.
  std::string cpp = detail::write_unique_file(c.work_dir, ".tmp-" + key + "-", ".cpp", source, &why);
  if (cpp.empty() && persist && !detail::private_temp_dir().empty()) {
    persist = false;  // the cache directory stopped being writable: compile privately
    cpp = detail::write_unique_file(detail::private_temp_dir(), ".tmp-" + key + "-", ".cpp", source, &why);
  }
  if (cpp.empty()) fail("jit", "cannot write kernel source into '", c.work_dir, "': ", why);
  std::string so = cpp.substr(0, cpp.size() - 4) + ".so";

  std::vector<std::string> argv = c.compiler;
  argv.insert(argv.end(), c.flags.begin(), c.flags.end());
  argv.insert(argv.end(), {"-I" + c.include_dir, "-o", so, cpp});
  detail::ProcessResult r = detail::run_process(argv);
  ::unlink(cpp.c_str());
  compiles_.fetch_add(1, std::memory_order_relaxed);
  if (!r.succeeded()) {
    ::unlink(so.c_str());
    if (!r.started) fail("jit", "cannot run the C++ compiler '", c.compiler[0], "': ", r.error);
    std::string out = trim(r.output);
    if (out.size() > max_diagnostics)
      out = out.substr(0, max_diagnostics) + "\n... (" + std::to_string(out.size() - max_diagnostics) + " more bytes)";
    std::string where = c.dump_dir.empty() ? "set KILN_DUMP_KERNELS=<dir> to keep the source"
                                           : "source in " + c.dump_dir + "/" + key + ".cpp";
    fail("jit", "the C++ compiler rejected kernel '", symbol, "' (", c.compiler[0], " ", r.describe(), "; ",
         where, "):\n", out);
  }
  std::string path = so;
  if (persist) {
    std::string final_path = c.cache_dir + "/" + key + ".so";
    if (::rename(so.c_str(), final_path.c_str()) == 0) path = final_path;
  }
  Library lib = open_library(path, &why);
  if (path == so) ::unlink(so.c_str());  // not cached: the loaded mapping outlives the name
  if (!lib) fail("jit", "cannot load the compiled kernel '", path, "': ", why);
  return lib;
}

JitKernel JitState::compile(const std::string& source, const std::string& symbol) {
  std::shared_ptr<const JitConfig> c = config();
  if (!c->available) return {};
  const std::string key = cache_key(*c, source);
  return kernels_.get(key + "/" + symbol, [&] {
    Library lib = load_or_compile(*c, key, source, symbol);
    void* fn = ::dlsym(lib.get(), symbol.c_str());
    if (!fn) fail("jit", "the compiled kernel has no symbol '", symbol, "' (declare it extern \"C\")");
    return JitKernel{fn, std::move(lib)};
  });
}

template <class F>
void JitState::reconfigure(F change, bool clear) {
  {
    std::lock_guard probe(probe_mu_);
    std::unique_lock lock(mu_);
    change(settings_);
    if (config_) retired_.push_back(std::move(config_));
    config_.reset();
  }
  if (clear) kernels_.clear();
}

}  // namespace

JitKernel jit_compile(const std::string& source, const std::string& symbol) {
  return state().compile(source, symbol);
}

bool jit_available() { return state().config()->available; }

const std::string& jit_include_dir() {
  // The config stays alive in config_ or retired_, so the reference does too.
  return state().config()->include_dir;
}

JitStats jit_stats() {
  JitState& s = state();
  return JitStats{s.compiles_.load(std::memory_order_relaxed), s.disk_loads_.load(std::memory_order_relaxed),
                  s.kernels_.hits()};
}

void set_jit_cache_capacity(size_t n) { state().kernels_.set_capacity(n); }

size_t jit_cache_capacity() { return state().kernels_.capacity(); }

size_t jit_cache_size() { return state().kernels_.size(); }

void set_jit_cache_dir(const std::string& path) {
  state().reconfigure(
      [&](Settings& s) { s.cache_dir = path.empty() ? std::nullopt : std::optional<std::string>(path); }, true);
}

void set_jit_dump_dir(const std::string& path) {
  state().reconfigure(
      [&](Settings& s) { s.dump_dir = path.empty() ? std::nullopt : std::optional<std::string>(path); }, false);
}

void clear_jit_memory_cache() { state().kernels_.clear(); }

void reset_jit_for_tests(const std::string& compiler) {
  JitState& st = state();
  st.reconfigure([&](Settings& s) { s.compiler = compiler; }, true);
  st.warned_compiler_.store(false);
  st.warned_cache_.store(false);
  st.warned_dump_.store(false);
}

std::string jit_cache_dir() { return state().config()->cache_dir; }

std::string jit_cache_key(const std::string& source) { return cache_key(*state().config(), source); }

}  // namespace kiln::cpu

namespace kiln {

std::string kernel_cache_dir() {
  std::string dir = config::text(config::Knob::cache_dir);
  if (!dir.empty()) return dir;
  std::string home = config::system_variable("HOME");
  if (!home.empty()) return home + "/.cache/kiln";
  return "/tmp/kiln-cache-" + std::to_string(::getuid());
}

}  // namespace kiln
