// Common-subexpression elimination: a node equivalent to an earlier one (same
// primitive and parameters, same inputs) is replaced by it.
#include <map>

#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class Cse : public Pass {
 public:
  const char* name() const override { return "cse"; }
  bool run(Graph& g) override {
    bool changed = false;
    // (kind, inputs) -> earlier nodes with that signature
    std::map<std::pair<OpKind, std::vector<int>>, std::vector<size_t>> seen;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      GNode& node = g.nodes[n];
      auto& candidates = seen[{node.prim->kind(), node.inputs}];
      bool merged = false;
      for (size_t c : candidates) {
        const GNode& earlier = g.nodes[c];
        if (earlier.outputs.size() != node.outputs.size() || !earlier.prim->is_equivalent(*node.prim)) continue;
        for (size_t i = 0; i < node.outputs.size(); ++i) g.replace_uses(node.outputs[i], earlier.outputs[i]);
        merged = changed = true;
        break;
      }
      if (!merged) candidates.push_back(n);
    }
    return changed;  // merged nodes are now unused; dce removes them
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse() { return std::make_unique<Cse>(); }

}  // namespace kiln::compiler
