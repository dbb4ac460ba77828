// The op registry (src/ops/op_table.def) against the lists that are not generated from it:
// the kgraph runtime's op table and extent rules, and the docs' op list. The C API's lists,
// the front-end declarations, the fuzzer's pool and the Rust binding are generated; the Go
// binding is checked by CTest's registry_go_bindings; the per-op tables by their own suites.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "kiln/kiln.h"
#include "ops/op_traits.h"
#include "runtime/extent.h"
#include "runtime/ops.h"

using namespace kiln;

namespace {

std::set<std::string> kgraph_ops() {
  std::set<std::string> names;
  for (const std::string& n : runtime::op_names())
    if (!runtime::is_control_flow(n)) names.insert(n);
  return names;
}

// The op of each table row of docs/ops.md: the first `name` of a line starting "| `".
std::set<std::string> documented_ops() {
  std::ifstream in(KILN_SOURCE_DIR "/docs/ops.md");
  EXPECT_TRUE(in) << "cannot read docs/ops.md";
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    size_t end = line.find('`', 3);
    if (end != std::string::npos) names.insert(line.substr(3, end - 3));
  }
  return names;
}

}  // namespace

TEST(Registry, NamesAreUniqueAndTraitsConsistent) {
  std::set<std::string> seen;
  for (const OpTraits& t : op_registry()) {
    EXPECT_TRUE(seen.insert(t.name).second) << "op '" << t.name << "' has two rows";
    if (t.category == OpCategory::unary || t.category == OpCategory::binary) {
      EXPECT_EQ(t.arity, t.category == OpCategory::unary ? 1 : 2) << t.name;
      EXPECT_NE(t.dtypes, DtypeRule::own) << t.name;
    }
    if (t.c_api) {
      EXPECT_NE(t.kgraph, nullptr) << "op '" << t.name << "' is in the C API but not in kgraph";
    }
  }
}

TEST(Registry, KgraphSpellsEveryPublicOp) {
  const std::set<std::string> kgraph = kgraph_ops();
  for (const OpTraits& t : op_registry()) {
    if (t.kgraph) {
      EXPECT_TRUE(kgraph.count(t.kgraph))
          << "op '" << t.name << "' has no entry in the kgraph op table (src/runtime/ops.cpp)";
    }
  }
  for (const std::string& n : kgraph)
    EXPECT_NE(find_op(n.c_str()), nullptr) << "kgraph op '" << n << "' is not a row of the op registry";
}

// Each generated kgraph entry gives what the C++ front end gives (NaN where it does).
TEST(Registry, KgraphRunsEveryElementwiseRow) {
  const Array a = array({0.25f, -0.5f, 0.75f}), b = array({0.5f, 0.5f, -0.25f});
  const Array ai = array({1, -2, 3}), bi = array({2, 1, 3});
  std::map<std::string, std::pair<std::vector<Array>, Array>> runs;  // op -> (inputs, front end's result)
#define KILN_UNARY(F, n, dtypes, ...)                                  \
  {                                                                    \
    const Array& x = DtypeRule::dtypes == DtypeRule::integer ? ai : a; \
    runs[#n] = {{x}, kiln::n(x)};                                      \
  }
#define KILN_BINARY(F, n, dtypes, ...)                                                  \
  {                                                                                     \
    const bool ints = DtypeRule::dtypes == DtypeRule::integer;                          \
    runs[#n] = {{ints ? ai : a, ints ? bi : b}, kiln::n(ints ? ai : a, ints ? bi : b)}; \
  }
#include "ops/op_table.def"
  for (const auto& [name, run] : runs) {
    try {
      const Array got = runtime::apply_op(name, run.first, {}, 1).at(0);
      const std::vector<double> g = got.to_vector<double>(), w = run.second.to_vector<double>();
      EXPECT_EQ(got.dtype(), run.second.dtype()) << name;
      ASSERT_EQ(g.size(), w.size()) << name;
      for (size_t i = 0; i < g.size(); ++i)
        EXPECT_TRUE(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) << name << " element " << i;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "kgraph op '" << name << "': " << e.what();
    }
  }
}

TEST(Registry, ExtentAnalysisHasARuleForEveryKgraphOp) {
  for (const std::string& n : kgraph_ops())
    EXPECT_TRUE(runtime::has_extent_rule(n)) << "kgraph op '" << n << "' has no extent rule (src/runtime/extent.cpp)";
}

TEST(Registry, DocsListEveryPublicOp) {
  const std::set<std::string> docs = documented_ops();
  for (const OpTraits& t : op_registry()) {
    if (t.kgraph) {
      EXPECT_TRUE(docs.count(t.name)) << "op '" << t.name << "' is missing from docs/ops.md";
    }
  }
  for (const std::string& n : docs) {
    const OpTraits* t = find_op(n.c_str());
    EXPECT_TRUE(t && t->kgraph) << "docs/ops.md lists '" << n << "', which is not a public op of the registry";
  }
}
