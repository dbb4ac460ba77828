// The configuration registry (src/core/config.def): typed, strict knobs, one mode scheme,
// and sources that read the environment only through the registry.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include <kiln/kiln.h>

#include "core/config.h"
#include "spawn_self.h"

using namespace kiln;
using config::Knob;

namespace fs = std::filesystem;

namespace {

// Sets a variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Config, EveryDefaultIsAcceptedAndEveryNameIsUnique) {
  std::set<std::string> names;
  for (const config::Spec& s : config::specs()) {
    EXPECT_EQ(std::string(s.name).rfind("KILN_", 0), 0u) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " declared twice";
    EXPECT_EQ(config::problem(s, s.fallback), "") << s.name << "'s default '" << s.fallback << "'";
    EXPECT_NE(std::string(s.help), "") << s.name;
  }
  EXPECT_EQ(config::spec(Knob::num_threads).name, std::string("KILN_NUM_THREADS"));
}

TEST(Config, BadValuesAreErrorsNamingTheKnobAndWhatItAccepts) {
  {
    ScopedEnv e("KILN_NUM_THREADS", "abc");
    EXPECT_EQ(error_of([] { config::integer(Knob::num_threads); }),
              "[config] KILN_NUM_THREADS='abc' is not accepted: expected an integer from 0 to 4096 "
              "(kiln info lists every knob)");
    EXPECT_THROW(check_config(), Error);
  }
  for (const char* bad : {"4097", "-1", "3x", " 2", "2.0"}) {
    ScopedEnv e("KILN_NUM_THREADS", bad);
    EXPECT_THROW(config::integer(Knob::num_threads), Error) << bad;
  }
  for (const char* bad : {"maybe", "2", "tru"}) {
    ScopedEnv e("KILN_CUDA_ROW_SPLIT", bad);
    EXPECT_NE(error_of([] { config::flag(Knob::cuda_row_split); }).find("KILN_CUDA_ROW_SPLIT"), std::string::npos);
  }
  {
    ScopedEnv e("KILN_CUDA_ROW_THREADS", "384");  // in range, not a power of two
    EXPECT_NE(error_of([] { config::integer(Knob::cuda_row_threads); }).find("a power of two from 32 to 1024"),
              std::string::npos);
  }
  {
    ScopedEnv e("KILN_MODE", "fast");
    EXPECT_NE(error_of([] { config::choice(Knob::mode); }).find("one of compiled|lazy|eager|no_fuse|no_simplify"),
              std::string::npos);
    EXPECT_THROW(default_exec_mode(), Error);
  }
  check_config();  // nothing bad left set
}

TEST(Config, ValuesAndDefaults) {
  EXPECT_EQ(config::integer(Knob::num_threads), 0);
  EXPECT_TRUE(config::flag(Knob::cuda_row_split));
  EXPECT_EQ(config::choice(Knob::mode), "compiled");
  EXPECT_EQ(config::text(Knob::cxx), "");
  for (const char* on : {"1", "true", "ON", "yes"}) {
    ScopedEnv e("KILN_CUDA_FMAD", on);
    EXPECT_TRUE(config::flag(Knob::cuda_fmad)) << on;
  }
  for (const char* off : {"0", "false", "off", "No"}) {
    ScopedEnv e("KILN_CUDA_ROW_SPLIT", off);
    EXPECT_FALSE(config::flag(Knob::cuda_row_split)) << off;
  }
  {
    ScopedEnv e("KILN_CUDA_ROW_SPLIT", "");  // empty means the default
    EXPECT_TRUE(config::flag(Knob::cuda_row_split));
  }
  {
    ScopedEnv e("KILN_CUDA_LONG_ROW_THREADS", "0");  // 0 is its default: accepted
    EXPECT_EQ(config::integer(Knob::cuda_long_row_threads), 0);
  }
  {
    ScopedEnv e("KILN_CUDA_ROW_THREADS", "0");  // 0 is not its default
    EXPECT_THROW(config::integer(Knob::cuda_row_threads), Error);
  }
  {
    ScopedEnv e("KILN_NUM_THREADS", "7");
    auto knobs = config_knobs();
    auto it =
        std::find_if(knobs.begin(), knobs.end(), [](const ConfigKnob& k) { return k.name == "KILN_NUM_THREADS"; });
    ASSERT_NE(it, knobs.end());
    EXPECT_EQ(it->value, "7");
    EXPECT_EQ(it->fallback, "0");
    EXPECT_EQ(it->problem, "");
  }
}

TEST(Config, UnknownVariablesAreListed) {
  ScopedEnv e("KILN_EAGER", "1");  // replaced by KILN_MODE=eager
  auto unknown = unknown_config_variables();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "KILN_EAGER=1"), unknown.end());
}

// KILN_MODE is read once per process (by eager(), compile_mode() and default_exec_mode()),
// so each value runs in a child.
TEST(Config, OneModeSchemeSetsEagerCompileAndExecutables) {
  for (const char* mode : {"compiled", "lazy", "eager", "no_fuse", "no_simplify"}) {
    pid_t child =
        kt::spawn_self("ConfigChild.DISABLED_ModeScheme", {std::string("KILN_MODE=") + mode, "KILN_TEST_CHILD=1"});
    ASSERT_GT(child, 0);
    EXPECT_EQ(kt::wait_exit_code(child), 0) << "KILN_MODE=" << mode;
  }
}

TEST(ConfigChild, DISABLED_ModeScheme) {
  if (!config::flag(Knob::test_child)) GTEST_SKIP();
  const std::string mode = config::choice(Knob::mode);
  const bool direct = mode == "eager" || mode == "lazy";
  EXPECT_EQ(eager(), mode == "eager");
  EXPECT_EQ(default_exec_mode(), mode == "eager"  ? ExecMode::eager
                                 : mode == "lazy" ? ExecMode::lazy
                                                  : ExecMode::compiled);
  EXPECT_EQ(compile_mode(), direct                  ? CompileMode::disabled
                            : mode == "no_fuse"     ? CompileMode::no_fuse
                            : mode == "no_simplify" ? CompileMode::no_simplify
                                                    : CompileMode::enabled);
}

// ---- the sources read the environment only through the registry ----

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Splits C++ source into code and the text of its comments and string literals (a macro
// defined in a compiler flag, "-DKILN_X=1", counts as code).
void split_source(const std::string& s, std::string* code, std::string* prose) {
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 2, "//") == 0) {
      size_t e = s.find('\n', i);
      e = e == std::string::npos ? s.size() : e;
      *prose += s.substr(i, e - i) + "\n";
      i = e;
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t e = s.find("*/", i + 2);
      e = e == std::string::npos ? s.size() : e + 2;
      *prose += s.substr(i, e - i) + "\n";
      i = e;
    } else if (s.compare(i, 2, "R\"") == 0) {  // raw strings hold device code and graphs: code
      size_t open = s.find('(', i);
      std::string close = ")" + s.substr(i + 2, open - i - 2) + "\"";
      size_t e = s.find(close, open);
      e = e == std::string::npos ? s.size() : e + close.size();
      *code += s.substr(i, e - i) + "\n";
      i = e;
    } else if (s[i] == '"' || s[i] == '\'') {
      size_t e = i + 1;
      while (e < s.size() && s[e] != s[i]) e += s[e] == '\\' ? 2 : 1;
      const std::string literal = s.substr(i, e + 1 - i);
      *(literal.find("-DKILN_") != std::string::npos ? code : prose) += literal + "\n";
      i = e + 1;
    } else {
      *code += s[i++];
    }
  }
}

std::vector<fs::path> sources(const std::vector<std::string>& dirs) {
  std::vector<fs::path> out;
  for (const std::string& d : dirs) {
    for (auto& e : fs::recursive_directory_iterator(fs::path(KILN_SOURCE_DIR) / d)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".cpp" || ext == ".h" || ext == ".def" || ext == ".cuh" || ext == ".in" || ext == ".c")
        out.push_back(e.path());
    }
  }
  return out;
}

// Every KILN_ name: the longest run of capitals, digits and underscores, less the underscores
// it ends with; a run followed by '*' names a family (KILN_CUDA_*), not a knob.
std::set<std::string> tokens(const std::string& text) {
  auto name_char = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; };
  std::set<std::string> out;
  const size_t prefix = std::string_view("KILN_").size();
  for (size_t at = text.find("KILN_"), end = 0; at != std::string::npos; at = text.find("KILN_", end)) {
    end = at + prefix;
    while (end < text.size() && name_char(text[end])) ++end;
    if (end < text.size() && text[end] == '*') continue;
    size_t last = end;
    while (last > at + prefix && text[last - 1] == '_') --last;
    if (last > at + prefix) out.insert(text.substr(at, last - at));
  }
  return out;
}

// getenv only in the registry; every KILN_ name that a comment or string mentions is a
// declared knob or a name the code itself defines (a macro, a C API enumerator).
TEST(Config, SourcesReadTheEnvironmentOnlyThroughTheRegistry) {
  const auto files = sources({"src", "tools", "tests", "include", "bench"});
  std::string all_code, all_prose;
  for (const fs::path& p : files) {
    // A stand-in driver library for benchmarks; it does not link kiln.
    if (p.filename() == "null_cuda.cpp") continue;
    std::string code, prose;
    split_source(read_text(p), &code, &prose);
    const bool registry = p.filename() == "config.cpp" && p.parent_path().filename() == "core";
    const bool this_test = p.filename() == "test_config.cpp";
    if (!registry && !this_test) {
      EXPECT_EQ(code.find("getenv"), std::string::npos) << p << " reads the environment: use src/core/config.h";
    }
    all_code += code;
    if (!this_test) all_prose += prose;
  }
  std::set<std::string> known = tokens(all_code);
  for (const config::Spec& s : config::specs()) known.insert(s.name);
  for (const std::string& t : tokens(all_prose)) {
    EXPECT_TRUE(known.count(t)) << t << " is mentioned but neither declared in src/core/config.def nor defined in code";
  }
}

}  // namespace

namespace {

// Layering reads one way: the compiler's files do not reach into the CPU JIT (the CPU
// backend runs fused regions: backend/cpu/fused.cpp), and nothing names the CUDA backend's
// old catch-all header.
TEST(Layering, CompileDoesNotIncludeTheCpuJit) {
  for (const fs::path& p : sources({"src/compile"})) {
    const std::string text = read_text(p);
    EXPECT_EQ(text.find("#include \"backend/cpu/jit"), std::string::npos) << p;
  }
  for (const fs::path& p : sources({"src", "tests", "bench"})) {
    EXPECT_EQ(read_text(p).find("#include \"backend/cuda/runtime.h\""), std::string::npos) << p;
  }
}

}  // namespace
