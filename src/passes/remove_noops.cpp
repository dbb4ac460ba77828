// Removes nodes that return their input unchanged: astype to the same dtype,
// reshapes/broadcasts/slices that keep the shape, and
// multiplication or division by one (addition or subtraction of zero for integers).
#include "backend/common/dispatch.h"
#include "backend/common/math.h"
#include "ops/elementwise.h"
#include "ops/views.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

// The value of a one-element constant, as a double.
std::optional<double> scalar_value(const Graph& g, int v) {
  const Value& val = g.values[static_cast<size_t>(v)];
  if (!val.is_constant() || val.constant->size() != 1) return std::nullopt;
  return detail::dispatch_dtype(val.dtype, [&](auto t) {
    using T = decltype(t);
    return static_cast<double>(math::convert<double>(*val.constant->data<T>()));
  });
}

class RemoveNoops : public Pass {
 public:
  explicit RemoveNoops(PassOptions o) : options_(o) {}
  const char* name() const override { return "remove_noops"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (auto& node : g.nodes) {
      if (node.outputs.size() != 1) continue;
      int out = node.outputs[0];
      int same = passthrough(g, node);
      if (same < 0) continue;
      const Value &o = g.values[static_cast<size_t>(out)], &i = g.values[static_cast<size_t>(same)];
      if (o.shape != i.shape || o.dtype != i.dtype) continue;
      g.replace_uses(out, same);
      changed = true;
    }
    return changed;  // the bypassed nodes are dead; dce removes them
  }

 private:
  // The input value the node passes through unchanged, or -1.
  int passthrough(const Graph& g, const GNode& node) const {
    OpKind k = node.prim->kind();
    if (k == OpKind::AsType) return node.inputs[0];
    // These keep the shape only at the traced sizes; a shapeless replay must still check them.
    if (options_.shapeless) return -1;
    if (k == OpKind::Reshape || k == OpKind::BroadcastTo) return node.inputs[0];
    if (k == OpKind::Slice) {  // same shape and forward unit steps from 0: the whole array
      for (auto& a : static_cast<const Slice&>(*node.prim).args()) {
        if (a.step != 1 || (a.start && *a.start != 0)) return -1;
      }
      return node.inputs[0];
    }
    if (node.inputs.size() != 2) return -1;
    int a = node.inputs[0], b = node.inputs[1];
    Dtype d = g.values[static_cast<size_t>(node.outputs[0])].dtype;
    auto is = [&](int v, double x) {
      auto s = scalar_value(g, v);
      return s && *s == x;
    };
    if (k == OpKind::Multiply) return is(b, 1) ? a : is(a, 1) ? b : -1;
    if (k == OpKind::Divide) return is(b, 1) ? a : -1;
    // x + 0 is not x for floats (-0 + 0 is +0), so only integers.
    if (is_integral(d) && k == OpKind::Add) return is(b, 0) ? a : is(a, 0) ? b : -1;
    if (is_integral(d) && k == OpKind::Subtract) return is(b, 0) ? a : -1;
    return -1;
  }

  PassOptions options_;
};

}  // namespace

std::unique_ptr<Pass> make_remove_noops(PassOptions options) { return std::make_unique<RemoveNoops>(options); }

}  // namespace kiln::compiler
