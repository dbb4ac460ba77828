// Norms feeding quantized products: rms_norm(x, w) read only by quantized_matmul (transposed
// weights, as a model's projections) becomes one NormQuantizedMatmul node, so that a GPU
// decode step normalizes the activation rows inside the product instead of launching a norm
// kernel before it (the CPU runs the two ops as before). Runs before the fusion passes.
#include "ops/nn.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class FuseNormMatmul : public Pass {
 public:
  const char* name() const override { return "fuse_norm_matmul"; }

  bool run(Graph& g) override {
    const size_t nn = g.nodes.size();
    std::vector<int> uses = g.use_counts();
    std::vector<int> producer(g.values.size(), -1);
    for (size_t n = 0; n < nn; ++n) {
      for (int v : g.nodes[n].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(n);
    }
    std::vector<bool> removed(nn, false);
    std::vector<GNode> added;
    for (size_t n = 0; n < nn; ++n) {
      const GNode& mm = g.nodes[n];
      if (mm.prim->kind() != OpKind::QuantizedMatmul) continue;
      auto& q = static_cast<const QuantizedMatmul&>(*mm.prim);
      const int h = mm.inputs[0];
      const int pn = producer[static_cast<size_t>(h)];
      if (!q.transpose() || pn < 0 || removed[static_cast<size_t>(pn)] || uses[static_cast<size_t>(h)] != 1) continue;
      const GNode& norm = g.nodes[static_cast<size_t>(pn)];
      if (norm.prim->kind() != OpKind::RmsNorm) continue;
      auto& r = static_cast<const RmsNorm&>(*norm.prim);
      if (!r.has_weight()) continue;
      removed[n] = removed[static_cast<size_t>(pn)] = true;
      added.push_back(GNode{std::make_shared<NormQuantizedMatmul>(q.params(), true, r.eps()),
                            {norm.inputs[0], norm.inputs[1], mm.inputs[1], mm.inputs[2], mm.inputs[3]},
                            {mm.outputs[0]}});
    }
    if (added.empty()) return false;
    replace_nodes(g, removed, std::move(added));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_norm_matmul() { return std::make_unique<FuseNormMatmul>(); }

}  // namespace kiln::compiler
