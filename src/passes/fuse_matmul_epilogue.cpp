// Matmul epilogues: matmul(x, w) + bias, optionally followed by gelu or gelu_tanh, becomes
// one MatmulEpilogue node, for floating dtypes, when the bias is a vector along the
// product's last axis ((N,) or (1, ..., N), the product's dtype) and the product (and the
// sum, when the activation is taken in) has no other reader. On a GPU cuBLASLt then adds
// the bias and applies the tanh GELU in the product's epilogue; on the CPU the node rounds
// every step as the separate ops do. Runs before the fusion passes, which would otherwise
// take the add and the activation into an elementwise or row region.
#include "ops/linalg.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

using Activation = MatmulEpilogue::Activation;

class FuseMatmulEpilogue : public Pass {
 public:
  const char* name() const override { return "fuse_matmul_epilogue"; }

  bool run(Graph& g) override {
    const size_t nn = g.nodes.size();
    std::vector<int> uses = g.use_counts();
    std::vector<int> reader(g.values.size(), -1);  // a node reading the value (the only use when uses == 1)
    for (size_t n = 0; n < nn; ++n) {
      for (int v : g.nodes[n].inputs) reader[static_cast<size_t>(v)] = static_cast<int>(n);
    }
    // The node that alone reads value v, or -1.
    auto sole_reader = [&](int v) { return uses[static_cast<size_t>(v)] == 1 ? reader[static_cast<size_t>(v)] : -1; };
    std::vector<bool> removed(nn, false);
    std::vector<GNode> added;
    for (size_t n = 0; n < nn; ++n) {
      const GNode& mm = g.nodes[n];
      if (mm.prim->kind() != OpKind::Matmul) continue;
      const int product = mm.outputs[0];
      const Value& pv = g.values[static_cast<size_t>(product)];
      if (!is_floating(pv.dtype)) continue;
      const int an = sole_reader(product);
      // (An add of two products, the second read as the bias, is taken once.)
      if (an < 0 || removed[static_cast<size_t>(an)] || g.nodes[static_cast<size_t>(an)].prim->kind() != OpKind::Add) {
        continue;
      }
      const GNode& add = g.nodes[static_cast<size_t>(an)];
      const int bias = add.inputs[0] == product ? add.inputs[1] : add.inputs[0];
      const int sum = add.outputs[0];
      if (!is_bias_vector(g, product, bias, sum)) continue;
      Activation act = Activation::none;
      int result = sum;
      const int gn = sole_reader(sum);
      if (gn >= 0) {
        const GNode& a = g.nodes[static_cast<size_t>(gn)];
        OpKind k = a.prim->kind();
        // float_unary keeps a floating dtype, so the activation reads the sum uncast.
        if ((k == OpKind::Gelu || k == OpKind::GeluTanh) &&
            g.values[static_cast<size_t>(a.outputs[0])].dtype == pv.dtype) {
          act = k == OpKind::Gelu ? Activation::gelu : Activation::gelu_tanh;
          result = a.outputs[0];
          removed[static_cast<size_t>(gn)] = true;
        }
      }
      removed[n] = removed[static_cast<size_t>(an)] = true;
      added.push_back(GNode{std::make_shared<MatmulEpilogue>(act), {mm.inputs[0], mm.inputs[1], bias}, {result}});
    }
    if (added.empty()) return false;
    replace_nodes(g, removed, std::move(added));
    return true;
  }

 private:
  // bias: (N,) or (1, ..., N) where the product is (..., N), of the product's dtype, and the
  // sum keeps the product's shape and dtype (no cast and no broadcast beyond the product).
  static bool is_bias_vector(const Graph& g, int product, int bias, int sum) {
    if (bias == product) return false;
    const Value& p = g.values[static_cast<size_t>(product)];
    const Value& b = g.values[static_cast<size_t>(bias)];
    const Value& s = g.values[static_cast<size_t>(sum)];
    if (b.dtype != p.dtype || s.dtype != p.dtype || s.shape != p.shape) return false;
    if (b.shape.empty() || b.shape.size() > p.shape.size() || b.shape.back() != p.shape.back()) return false;
    for (size_t i = 0; i + 1 < b.shape.size(); ++i) {
      if (b.shape[i] != 1) return false;
    }
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_fuse_matmul_epilogue() { return std::make_unique<FuseMatmulEpilogue>(); }

}  // namespace kiln::compiler
