// Dead-code elimination: drops nodes none of whose outputs is used.
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class Dce : public Pass {
 public:
  const char* name() const override { return "dce"; }
  bool run(Graph& g) override {
    std::vector<bool> live(g.values.size(), false);
    for (int v : g.outputs) live[static_cast<size_t>(v)] = true;
    std::vector<bool> keep(g.nodes.size(), false);
    for (size_t n = g.nodes.size(); n-- > 0;) {
      for (int v : g.nodes[n].outputs) keep[n] = keep[n] || live[static_cast<size_t>(v)];
      if (!keep[n]) continue;
      for (int v : g.nodes[n].inputs) live[static_cast<size_t>(v)] = true;
    }
    std::vector<GNode> kept;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      if (keep[n]) kept.push_back(std::move(g.nodes[n]));
    }
    bool changed = kept.size() != g.nodes.size();
    g.nodes = std::move(kept);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dce() { return std::make_unique<Dce>(); }

}  // namespace kiln::compiler
