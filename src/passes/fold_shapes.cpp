// With fixed shapes, shape-derived values (AxisSize: mean's divisor) are constants.
#include "ops/creation.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class FoldShapes : public Pass {
 public:
  const char* name() const override { return "fold_shapes"; }
  bool run(Graph& g) override {
    bool changed = false;
    for (auto& node : g.nodes) {
      if (node.prim->kind() != OpKind::AxisSize) continue;
      auto& prim = static_cast<const AxisSize&>(*node.prim);
      const Value& out = g.values[static_cast<size_t>(node.outputs[0])];
      Value c;
      c.shape = out.shape;
      c.dtype = out.dtype;
      c.constant = scalar(prim.count(g.values[static_cast<size_t>(node.inputs[0])].shape), out.dtype).tensor();
      g.values.push_back(std::move(c));
      g.replace_uses(node.outputs[0], static_cast<int>(g.values.size()) - 1);
      changed = true;
    }
    return changed;  // the AxisSize nodes are now dead; dce removes them
  }
};

}  // namespace

std::unique_ptr<Pass> make_fold_shapes() { return std::make_unique<FoldShapes>(); }

}  // namespace kiln::compiler
