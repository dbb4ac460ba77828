// Quantized products with what surrounds them in a model: an rms_norm read only by a
// quantized_matmul of transposed weights (a projection's input) and an add of a tensor of the
// product's shape and dtype reading only the product (the residual) join the product in one
// FusedQuantizedMatmul node, so a GPU decode product normalizes its rows as it reads them and
// adds the residual as it writes: one launch instead of up to three (the CPU runs the ops in
// turn). Runs before the fusion passes, which would take the add into an elementwise region.
#include "ops/nn.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class FuseQuantizedMatmul : public Pass {
 public:
  const char* name() const override { return "fuse_quantized_matmul"; }

  bool run(Graph& g) override {
    const size_t nn = g.nodes.size();
    std::vector<int> uses = g.use_counts();
    std::vector<int> producer(g.values.size(), -1), reader(g.values.size(), -1);
    for (size_t n = 0; n < nn; ++n) {
      for (int v : g.nodes[n].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(n);
      for (int v : g.nodes[n].inputs) reader[static_cast<size_t>(v)] = static_cast<int>(n);
    }
    auto only_use = [&](int v) { return uses[static_cast<size_t>(v)] == 1; };
    std::vector<bool> removed(nn, false);
    std::vector<GNode> added;
    for (size_t n = 0; n < nn; ++n) {
      const GNode& mm = g.nodes[n];
      if (mm.prim->kind() != OpKind::QuantizedMatmul) continue;
      auto& q = static_cast<const QuantizedMatmul&>(*mm.prim);
      if (q.activations() != QmmActivations::exact) continue;  // the fused node multiplies x as it is
      // The norm in front: a weighted rms_norm whose result only this product reads.
      int norm = -1;
      const int h = mm.inputs[0], pn = producer[static_cast<size_t>(h)];
      if (q.transpose() && pn >= 0 && !removed[static_cast<size_t>(pn)] && only_use(h) &&
          g.nodes[static_cast<size_t>(pn)].prim->kind() == OpKind::RmsNorm &&
          static_cast<const RmsNorm&>(*g.nodes[static_cast<size_t>(pn)].prim).has_weight()) {
        norm = pn;
      }
      // The add behind: the only reader of the product, adding a same-shaped, same-dtype tensor.
      int add = -1, addend = -1;
      const int y = mm.outputs[0], an = reader[static_cast<size_t>(y)];
      if (an >= 0 && only_use(y) && !removed[static_cast<size_t>(an)] && g.nodes[static_cast<size_t>(an)].prim->kind() == OpKind::Add) {
        const GNode& a = g.nodes[static_cast<size_t>(an)];
        const int other = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
        const Value& yv = g.values[static_cast<size_t>(y)];
        const Value& ov = g.values[static_cast<size_t>(other)];
        const Value& sv = g.values[static_cast<size_t>(a.outputs[0])];
        if (other != y && ov.shape == yv.shape && ov.dtype == yv.dtype && sv.shape == yv.shape && sv.dtype == yv.dtype) {
          add = an;
          addend = other;
        }
      }
      if (norm < 0 && add < 0) continue;
      std::vector<int> inputs{norm >= 0 ? g.nodes[static_cast<size_t>(norm)].inputs[0] : h};
      std::optional<float> eps;
      if (norm >= 0) {
        inputs.push_back(g.nodes[static_cast<size_t>(norm)].inputs[1]);
        eps = static_cast<const RmsNorm&>(*g.nodes[static_cast<size_t>(norm)].prim).eps();
        removed[static_cast<size_t>(norm)] = true;
      }
      inputs.insert(inputs.end(), mm.inputs.begin() + 1, mm.inputs.end());
      if (add >= 0) {
        inputs.push_back(addend);
        removed[static_cast<size_t>(add)] = true;
      }
      removed[n] = true;
      added.push_back(GNode{std::make_shared<FusedQuantizedMatmul>(q.params(), q.transpose(), eps, add >= 0),
                            std::move(inputs), {add >= 0 ? g.nodes[static_cast<size_t>(add)].outputs[0] : y}});
    }
    if (added.empty()) return false;
    replace_nodes(g, removed, std::move(added));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_quantized_matmul() { return std::make_unique<FuseQuantizedMatmul>(); }

}  // namespace kiln::compiler
