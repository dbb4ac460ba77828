// The op registry (src/ops/op_table.def) against the lists that are not generated from it:
// the kgraph runtime's op table and extent rules, and the docs' op list. The C API's lists,
// the front-end declarations, the fuzzer's pool and the Rust binding are generated; the Go
// binding is checked by CTest's registry_go_bindings; the per-op tables by their own suites.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

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
    if (t.c_api) EXPECT_NE(t.kgraph, nullptr) << "op '" << t.name << "' is in the C API but not in kgraph";
  }
}

TEST(Registry, KgraphSpellsEveryPublicOp) {
  const std::set<std::string> kgraph = kgraph_ops();
  for (const OpTraits& t : op_registry()) {
    if (t.kgraph)
      EXPECT_TRUE(kgraph.count(t.kgraph)) << "op '" << t.name << "' has no entry in the kgraph op table (src/runtime/ops.cpp)";
  }
  for (const std::string& n : kgraph)
    EXPECT_NE(find_op(n.c_str()), nullptr) << "kgraph op '" << n << "' is not a row of the op registry";
}

TEST(Registry, ExtentAnalysisHasARuleForEveryKgraphOp) {
  for (const std::string& n : kgraph_ops())
    EXPECT_TRUE(runtime::has_extent_rule(n)) << "kgraph op '" << n << "' has no extent rule (src/runtime/extent.cpp)";
}

TEST(Registry, DocsListEveryPublicOp) {
  const std::set<std::string> docs = documented_ops();
  for (const OpTraits& t : op_registry()) {
    if (t.kgraph) EXPECT_TRUE(docs.count(t.name)) << "op '" << t.name << "' is missing from docs/ops.md";
  }
  for (const std::string& n : docs) {
    const OpTraits* t = find_op(n.c_str());
    EXPECT_TRUE(t && t->kgraph) << "docs/ops.md lists '" << n << "', which is not a public op of the registry";
  }
}
