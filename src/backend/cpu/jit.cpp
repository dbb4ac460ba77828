// CPU JIT: compile generated C++ with the system compiler, load it with dlopen, and cache
// the result in memory (bounded LRU) and on disk (one verified shared library per source).
#include "backend/cpu/jit.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <system_error>
#include <utility>
#include <vector>

#include "backend/cpu/jit_headers.h"
#include "backend/cpu/jit_support.h"
#include "backend/cpu/kernel_store.h"
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
const std::vector<std::string> base_flags = {"-O3",     "-march=native",   "-std=c++20",        "-fPIC",
                                             "-shared", "-fno-math-errno", "-ffp-contract=off", "-frounding-math"};
constexpr size_t max_diagnostics = 16000;

// Everything a compile or lookup depends on; immutable once built, replaced as a whole.
struct JitConfig {
  bool available = false;
  std::vector<std::string> compiler;  // argv prefix: the program and any words from KILN_CXX
  std::string identity;  // the compiler's --version output
  std::vector<std::string> flags;
  std::shared_ptr<detail::KernelStore> store;  // the disk cache; null: refused, nothing persists
  std::string dump_dir;  // KILN_DUMP_KERNELS, or empty
  Hash128 fingerprint;  // compiler identity, flags, headers and CPU: the source is added to it
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
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    *why = e ? e : "unknown dlopen error";
    return nullptr;
  }
  return Library(handle, [](void* h) { ::dlclose(h); });
}

// Where compiles run: a private directory (mkdtemp, 0700) holding the embedded headers,
// made again if something deletes it while the process runs.
class Workspace {
 public:
  // The directory and its include directory, both empty when none can be made.
  std::pair<std::string, std::string> get() {
    std::lock_guard<std::mutex> lock(mu_);
    if (include_.empty() || !detail::file_exists(include_ + "/" + detail::embedded_headers[0].path)) {
      dir_ = detail::new_private_temp_dir();  // a fresh name: an old one may have been taken meanwhile
      include_ = write_headers(dir_);
      if (include_.empty()) dir_.clear();
    }
    return {dir_, include_};
  }

 private:
  std::mutex mu_;  // guards dir_ and include_
  std::string dir_, include_;
};

class JitState {
 public:
  std::shared_ptr<const JitConfig> config();
  JitKernel compile(const std::string& source, const std::string& symbol, detail::ProcessCanceller* cancel,
                    int niceness);
  JitKernel lookup(const std::string& source, const std::string& symbol);
  // Applies `change` to the settings and forces a new config (and compiler probe).
  template <class F>
  void reconfigure(F change, bool clear_memory);

  std::atomic<uint64_t> compiles_{0};  // statistics; relaxed
  std::atomic<uint64_t> disk_loads_{0};  // statistics; relaxed
  kiln::detail::BoundedCache<JitKernel> kernels_{4096};  // by cache key and symbol; guarded inside

 private:
  std::shared_ptr<JitConfig> build_config(const Settings& s);
  Library load_cached(const JitConfig& c, const std::string& key);
  Library run_compiler(const JitConfig& c, const std::string& key, const std::string& source, const std::string& symbol,
                       bool replacing, detail::ProcessCanceller* cancel, int niceness);
  void dump_source(const JitConfig& c, const std::string& key, const std::string& source);
  bool warn_once(std::atomic<bool>& flag, const std::string& message);

  std::mutex probe_mu_;  // held while a config is built, so the compiler is probed once
  std::shared_mutex mu_;  // guards settings_ and config_
  Settings settings_;  // guarded by mu_
  std::shared_ptr<const JitConfig> config_;  // guarded by mu_; null until built

 public:
  std::atomic<bool> warned_compiler_{false};  // said once; reset by reset_jit_for_tests
  std::atomic<bool> warned_cache_{false};  // said once; reset by reset_jit_for_tests
  std::atomic<bool> warned_dump_{false};  // said once; reset by reset_jit_for_tests
  std::atomic<bool> warned_store_{false};  // said once; reset by reset_jit_for_tests
  Workspace workspace_;  // guarded inside
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
  std::string why;
  c->store = detail::KernelStore::open(dir, &why);
  if (c->store) {
    c->store->sweep_temporaries(3600);  // an hour: no live write takes that long
  } else {
    warn_once(warned_cache_, "not using the kernel cache directory '" + dir + "': " + why +
                                 "; compiling kernels in a private temporary directory instead (nothing is "
                                 "reused across runs)");
  }
  c->dump_dir = s.dump_dir ? *s.dump_dir : config::text(config::Knob::dump_kernels);

  const char* fallback = "fused regions run through an interpreter over cache-sized tiles (no generated code)";
  if (!c->available) {
    warn_once(warned_compiler_, "no working C++ compiler (tried " + join(tried, ", ") + "); " + fallback +
                                    ". Set KILN_CXX to a C++20 compiler to enable code generation.");
  } else if (workspace_.get().second.empty()) {
    c->available = false;
    warn_once(warned_compiler_, "no private directory to compile kernels in (mkdtemp under $TMPDIR or /tmp failed); " +
                                    std::string(fallback) + ".");
  }
  c->fingerprint.field("kiln-jit-2").field(c->identity).field(join(c->flags, " ")).field(header_hash());
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

// The library of a verified cache entry, loaded through the directory's descriptor (or a
// private copy of the verified bytes where /proc is missing); null when not cached.
Library JitState::load_cached(const JitConfig& c, const std::string& key) {
  if (!c.store) return nullptr;
  const std::string name = key + ".so";
  std::string bytes, why;
  if (!c.store->read(name, &bytes, &why)) {
    if (!why.empty())
      std::fprintf(stderr, "kiln: removed cached kernel %s/%s (%s); rebuilding it\n", c.store->path().c_str(),
                   name.c_str(), why.c_str());
    return nullptr;
  }
  Library lib;
  if (std::string path = c.store->fd_path(name); !path.empty()) lib = open_library(path, &why);
  if (!lib) {
    auto [dir, include] = workspace_.get();
    std::string copy = detail::write_unique_file(dir, ".tmp-" + key + "-", ".so", bytes, &why);
    if (!copy.empty()) {
      lib = open_library(copy, &why);
      ::unlink(copy.c_str());  // the mapping outlives the name
    }
  }
  if (!lib) {
    std::fprintf(stderr, "kiln: removing unloadable cached kernel %s/%s (%s)\n", c.store->path().c_str(), name.c_str(),
                 why.c_str());
    c.store->remove(name);
    return nullptr;
  }
  disk_loads_.fetch_add(1, std::memory_order_relaxed);
  return lib;
}

// Compiles source in the workspace and stores the library. `replacing`: a library of this
// key is loaded already and wrong, so the new one must not be loaded under the same name.
Library JitState::run_compiler(const JitConfig& c, const std::string& key, const std::string& source,
                               const std::string& symbol, bool replacing, detail::ProcessCanceller* cancel,
                               int niceness) {
  auto [dir, include] = workspace_.get();
  if (include.empty()) fail("jit", "no private directory to compile kernels in (mkdtemp under $TMPDIR or /tmp failed)");
  std::string why;
  // Each compile in a directory of its own, its source under a fixed name: the name is in the
  // library's symbols, and a source must make the same bytes in every process, else two
  // processes storing one entry at once could pair one's library with the other's checksum.
  // It goes on every exit (a loaded library's mapping outlives its name).
  struct Workdir {
    std::string path, cpp, so;
    ~Workdir() {
      if (path.empty()) return;
      ::unlink(cpp.c_str());
      ::unlink(so.c_str());
      ::rmdir(path.c_str());
    }
  } work;
  work.path = dir + "/.tmp-" + key + "-XXXXXX";
  if (!::mkdtemp(work.path.data())) {
    const std::string err = std::error_code(errno, std::generic_category()).message();
    work.path.clear();
    fail("jit", "cannot make a directory to compile kernels in under '", dir, "': ", err);
  }
  work.cpp = work.path + "/" + key + ".cpp";
  work.so = work.path + "/" + key + ".so";
  if (!detail::write_file_atomic(work.cpp, source)) fail("jit", "cannot write kernel source into '", work.path, "'");
  const std::string &cpp = work.cpp, &so = work.so;

  std::vector<std::string> argv = c.compiler;
  argv.insert(argv.end(), c.flags.begin(), c.flags.end());
  argv.insert(argv.end(), {"-I" + include, "-o", so, cpp});
  detail::ProcessResult r = detail::run_process(argv, cancel, niceness);
  compiles_.fetch_add(1, std::memory_order_relaxed);
  if (!r.succeeded()) {
    if (cancel && cancel->cancelled())
      throw CompileCancelled("[jit] the compile of kernel '" + symbol + "' was cancelled");
    if (!r.started) fail("jit", "cannot run the C++ compiler '", c.compiler[0], "': ", r.error);
    std::string out = trim(r.output);
    if (out.size() > max_diagnostics)
      out = out.substr(0, max_diagnostics) + "\n... (" + std::to_string(out.size() - max_diagnostics) + " more bytes)";
    std::string where = c.dump_dir.empty() ? "set KILN_DUMP_KERNELS=<dir> to keep the source"
                                           : "source in " + c.dump_dir + "/" + key + ".cpp";
    fail("jit", "the C++ compiler rejected kernel '", symbol, "' (", c.compiler[0], " ", r.describe(), "; ", where,
         "):\n", out);
  }
  // Stored with its checksum for later processes, then loaded by the name disk loads use, so
  // that each symbol of one source shares one loaded library (dlopen matches names).
  std::string bytes, stored;
  if (c.store && detail::read_file(so, &bytes)) {
    if (c.store->write(key + ".so", bytes, &why))
      stored = c.store->fd_path(key + ".so");
    else
      warn_once(warned_store_, "cannot store compiled kernels in '" + c.store->path() + "' (" + why +
                                   "); they are compiled again by each process");
  }
  Library lib;
  if (!stored.empty() && !replacing) lib = open_library(stored, &why);
  if (!lib) lib = open_library(so, &why);
  if (!lib && !stored.empty()) lib = open_library(stored, &why);  // a temporary directory mounted noexec
  if (!lib) fail("jit", "cannot load the compiled kernel '", so, "': ", why);
  return lib;
}

JitKernel JitState::lookup(const std::string& source, const std::string& symbol) {
  std::shared_ptr<const JitConfig> c = config();
  if (!c->available) return {};
  const std::string key = cache_key(*c, source);
  JitKernel k;
  if (kernels_.find(key + "/" + symbol, &k)) return k;
  Library lib = load_cached(*c, key);
  void* fn = lib ? ::dlsym(lib.get(), symbol.c_str()) : nullptr;
  if (!fn) return {};  // the compile, in the background, rebuilds a library without the symbol
  dump_source(*c, key, source);
  // Another thread may have loaded it meanwhile: both name one dlopen handle, one is kept.
  return kernels_.get(key + "/" + symbol, [&] { return JitKernel{fn, lib}; });
}

JitKernel JitState::compile(const std::string& source, const std::string& symbol, detail::ProcessCanceller* cancel,
                            int niceness) {
  std::shared_ptr<const JitConfig> c = config();
  if (!c->available) return {};
  const std::string key = cache_key(*c, source);
  auto make = [&] {
    dump_source(*c, key, source);
    bool replacing = false;
    if (Library lib = load_cached(*c, key)) {
      if (void* fn = ::dlsym(lib.get(), symbol.c_str())) return JitKernel{fn, std::move(lib)};
      // A stored library without the symbol may not be what this source builds: build it again.
      std::fprintf(stderr, "kiln: cached kernel %s/%s.so has no symbol '%s'; rebuilding it\n", c->store->path().c_str(),
                   key.c_str(), symbol.c_str());
      c->store->remove(key + ".so");
      replacing = true;
    }
    Library lib = run_compiler(*c, key, source, symbol, replacing, cancel, niceness);
    void* fn = ::dlsym(lib.get(), symbol.c_str());
    if (!fn) fail("jit", "the compiled kernel has no symbol '", symbol, "' (declare it extern \"C\")");
    return JitKernel{fn, std::move(lib)};
  };
  for (;;) {
    try {
      return kernels_.get(key + "/" + symbol, make);
    } catch (const CompileCancelled&) {
      // Joined a compile whose own caller cancelled it (its function was freed): not this
      // caller's failure; the entry is gone, so the next get makes it (or joins a new one).
      if (cancel && cancel->cancelled()) throw;
    }
  }
}

template <class F>
void JitState::reconfigure(F change, bool clear) {
  {
    std::lock_guard probe(probe_mu_);
    std::unique_lock lock(mu_);
    change(settings_);
    config_.reset();  // compiles in flight keep theirs (and its cache directory) alive
  }
  if (clear) kernels_.clear();
}

}  // namespace

JitKernel jit_compile(const std::string& source, const std::string& symbol, detail::ProcessCanceller* cancel,
                      int niceness) {
  return state().compile(source, symbol, cancel, niceness);
}

JitKernel jit_lookup(const std::string& source, const std::string& symbol) { return state().lookup(source, symbol); }

bool jit_available() { return state().config()->available; }

std::string jit_include_dir() { return state().workspace_.get().second; }

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
  state().warned_cache_.store(false);  // another directory: its refusal is said once too
}

void set_jit_dump_dir(const std::string& path) {
  state().reconfigure([&](Settings& s) { s.dump_dir = path.empty() ? std::nullopt : std::optional<std::string>(path); },
                      false);
}

void clear_jit_memory_cache() { state().kernels_.clear(); }

void reset_jit_for_tests(const std::string& compiler) {
  JitState& st = state();
  st.reconfigure([&](Settings& s) { s.compiler = compiler; }, true);
  st.warned_compiler_.store(false);
  st.warned_cache_.store(false);
  st.warned_dump_.store(false);
  st.warned_store_.store(false);
}

std::string jit_cache_dir() {
  std::shared_ptr<const JitConfig> c = state().config();
  return c->store ? c->store->path() : std::string();
}

bool read_cache_entry(const std::string& name, std::string* bytes) {
  std::shared_ptr<const JitConfig> c = state().config();
  std::string why;
  if (!c->store) return false;
  if (c->store->read(name, bytes, &why)) return true;
  if (!why.empty())
    std::fprintf(stderr, "kiln: removed cached kernel %s/%s (%s)\n", c->store->path().c_str(), name.c_str(),
                 why.c_str());
  return false;
}

void write_cache_entry(const std::string& name, const std::string& bytes) {
  std::shared_ptr<const JitConfig> c = state().config();
  std::string why;
  if (c->store) c->store->write(name, bytes, &why);
}

void remove_cache_entry(const std::string& name) {
  std::shared_ptr<const JitConfig> c = state().config();
  if (c->store) c->store->remove(name);
}

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
