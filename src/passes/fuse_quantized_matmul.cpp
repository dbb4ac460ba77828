// Quantized products with what surrounds them in a model: an rms_norm read only by a
// quantized_matmul of transposed weights (a projection's input), and either an add of a tensor
// of the product's shape and dtype reading only the product (the residual) or the gated unit
// silu(gate) * up over the product's two halves (a stacked gate and up projection), join the
// product in one FusedQuantizedMatmul node, so a GPU decode product normalizes its rows as it
// reads them and adds the residual or gates as it writes: one launch instead of up to three (the
// CPU runs the ops in turn). Runs before the fusion passes, which would take the add or the gate
// into an elementwise region.
#include "core/tensor.h"
#include "ops/nn.h"
#include "ops/views.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

/* Whether node n slices y's last axis to [start, start + len) and takes every other axis whole. */
bool last_axis_slice(const Graph& g, const GNode& n, int y, int64_t start, int64_t len) {
  if (n.prim->kind() != OpKind::Slice || n.inputs[0] != y) return false;
  const Shape& shape = g.values[static_cast<size_t>(y)].shape;
  const ResolvedSlice r = resolve_slice("slice", shape, static_cast<const Slice&>(*n.prim).args());
  for (size_t d = 0; d < shape.size(); ++d) {
    const bool last = d + 1 == shape.size();
    if (r.step[d] != 1 || r.start[d] != (last ? start : 0) || r.length[d] != (last ? len : shape[d])) return false;
  }
  return true;
}

class FuseQuantizedMatmul : public Pass {
 public:
  const char* name() const override { return "fuse_quantized_matmul"; }

  bool run(Graph& g) override {
    const size_t nn = g.nodes.size();
    std::vector<int> uses = g.use_counts();
    std::vector<bool> removed(nn, false);
    std::vector<int> producer(g.values.size(), -1), reader(g.values.size(), -1);
    std::vector<std::vector<int>> readers(g.values.size());
    for (size_t n = 0; n < nn; ++n) {
      for (int v : g.nodes[n].outputs) producer[static_cast<size_t>(v)] = static_cast<int>(n);
      for (int v : g.nodes[n].inputs) {
        reader[static_cast<size_t>(v)] = static_cast<int>(n);
        auto& r = readers[static_cast<size_t>(v)];
        if (r.empty() || r.back() != static_cast<int>(n)) r.push_back(static_cast<int>(n));
      }
    }
    auto only_use = [&](int v) { return uses[static_cast<size_t>(v)] == 1; };
    auto node = [&](int n) -> const GNode& { return g.nodes[static_cast<size_t>(n)]; };
    auto other_input = [&](const GNode& n, int v) { return n.inputs[0] == v ? n.inputs[1] : n.inputs[0]; };
    // The gated unit behind a product y of 2F columns: g = y[..., :F], u = y[..., F:],
    // multiply(multiply(g, sigmoid(g)), u), each value read only there. The nodes it covers, or none.
    auto glu_after = [&](int y) -> std::vector<int> {
      const auto& rs = readers[static_cast<size_t>(y)];
      const Value& yv = g.values[static_cast<size_t>(y)];
      if (rs.size() != 2 || uses[static_cast<size_t>(y)] != 2 || yv.shape.empty() || yv.shape.back() % 2) return {};
      const int64_t f = yv.shape.back() / 2;
      int gs = rs[0], us = rs[1];
      if (!last_axis_slice(g, node(gs), y, 0, f)) std::swap(gs, us);
      if (!last_axis_slice(g, node(gs), y, 0, f) || !last_axis_slice(g, node(us), y, f, f)) return {};
      const int gv = node(gs).outputs[0], uv = node(us).outputs[0];
      const auto& gr = readers[static_cast<size_t>(gv)];
      if (gr.size() != 2 || uses[static_cast<size_t>(gv)] != 2 || !only_use(uv)) return {};
      int sig = gr[0], m1 = gr[1];
      if (node(sig).prim->kind() != OpKind::Sigmoid) std::swap(sig, m1);
      if (node(sig).prim->kind() != OpKind::Sigmoid || node(m1).prim->kind() != OpKind::Multiply) return {};
      const int sv = node(sig).outputs[0], m1v = node(m1).outputs[0];
      if (!only_use(sv) || other_input(node(m1), gv) != sv || !only_use(m1v)) return {};
      const int m2 = reader[static_cast<size_t>(m1v)];
      if (node(m2).prim->kind() != OpKind::Multiply || other_input(node(m2), m1v) != uv) return {};
      for (int v : {gv, uv, sv, m1v, node(m2).outputs[0]}) {  // no broadcasting, one dtype
        const Value& val = g.values[static_cast<size_t>(v)];
        if (val.dtype != yv.dtype || val.shape != g.values[static_cast<size_t>(gv)].shape) return {};
      }
      for (int n : {gs, us, sig, m1, m2})
        if (removed[static_cast<size_t>(n)]) return {};
      return {gs, us, sig, m1, m2};
    };
    std::vector<GNode> added;
    for (size_t n = 0; n < nn; ++n) {
      const GNode& mm = g.nodes[n];
      if (mm.prim->kind() != OpKind::QuantizedMatmul) continue;
      auto& q = static_cast<const QuantizedMatmul&>(*mm.prim);
      // Integer activations join only where the GPU's integer decode product takes the norm and
      // the epilogue: weights held on a GPU, up to 8 rows of x. The CPU runs a joined node's ops
      // in turn, which lost the row fusion of the residual add with the next norm.
      const Shape& xs = g.values[static_cast<size_t>(mm.inputs[0])].shape;
      const Value& packed = g.values[static_cast<size_t>(mm.inputs[1])];
      const bool on_gpu = packed.constant && packed.constant->buffer && !packed.constant->buffer->on_host();
      if (q.activations() != QmmActivations::exact &&
          (!on_gpu || xs.empty() || xs.back() == 0 || detail::shape_size(xs) / xs.back() > kDecodeRows))
        continue;
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
      if (an >= 0 && only_use(y) && !removed[static_cast<size_t>(an)] &&
          g.nodes[static_cast<size_t>(an)].prim->kind() == OpKind::Add) {
        const GNode& a = g.nodes[static_cast<size_t>(an)];
        const int other = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
        const Value& yv = g.values[static_cast<size_t>(y)];
        const Value& ov = g.values[static_cast<size_t>(other)];
        const Value& sv = g.values[static_cast<size_t>(a.outputs[0])];
        if (other != y && ov.shape == yv.shape && ov.dtype == yv.dtype && sv.shape == yv.shape &&
            sv.dtype == yv.dtype) {
          add = an;
          addend = other;
        }
      }
      const std::vector<int> glu = add < 0 && q.transpose() ? glu_after(y) : std::vector<int>{};
      if (norm < 0 && add < 0 && glu.empty()) continue;
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
      for (int r : glu) removed[static_cast<size_t>(r)] = true;
      removed[n] = true;
      const int out = add >= 0 ? node(add).outputs[0] : !glu.empty() ? node(glu.back()).outputs[0] : y;
      added.push_back(GNode{std::make_shared<FusedQuantizedMatmul>(q.params(), q.transpose(), eps, add >= 0,
                                                                   !glu.empty(), q.activations()),
                            std::move(inputs),
                            {out}});
    }
    if (added.empty()) return false;
    replace_nodes(g, removed, std::move(added));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_quantized_matmul() { return std::make_unique<FuseQuantizedMatmul>(); }

}  // namespace kiln::compiler
