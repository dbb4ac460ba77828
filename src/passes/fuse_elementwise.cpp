// Elementwise fusion: connected elementwise nodes of one output shape become a
// single Fused node (with as many outputs as values used outside the region).
// Regions grow along producer edges and merge where they meet, unless a path
// through a node outside would make the merged region depend on itself.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "compile/fused.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

class FuseElementwise : public Pass {
 public:
  const char* name() const override { return "fuse_elementwise"; }

  bool run(Graph& g) override {
    size_t nn = g.nodes.size();
    auto prod = g.producers();
    parent_.assign(nn, -1);
    std::vector<int> region(nn, -1);                      // region (a node index) per node
    std::vector<std::set<int>> depends(g.values.size());  // regions each value depends on
    std::vector<std::set<int>> ext_deps(nn);              // per region: regions its outside inputs depend on
    for (size_t n = 0; n < nn; ++n) {
      const GNode& node = g.nodes[n];
      if (fusable(g, node)) {
        const Shape& shape = g.values[static_cast<size_t>(node.outputs[0])].shape;
        int r = static_cast<int>(n);
        parent_[n] = r;
        region[n] = r;
        region_shape_[r] = shape;
        // Join each producer region of the same shape that can be merged without a cycle.
        for (int v : node.inputs) {
          int p = prod[static_cast<size_t>(v)];
          if (p < 0 || region[static_cast<size_t>(p)] < 0) continue;
          int pr = find(region[static_cast<size_t>(p)]);
          int me = find(r);
          if (pr == me || region_shape_[pr] != shape) continue;
          if (mentions(ext_deps[static_cast<size_t>(pr)], me) || mentions(ext_deps[static_cast<size_t>(me)], pr)) continue;
          bool cycle = false;
          for (int w : node.inputs) {  // another input reaching pr from outside
            int wp = prod[static_cast<size_t>(w)];
            bool inside = wp >= 0 && region[static_cast<size_t>(wp)] >= 0 && find(region[static_cast<size_t>(wp)]) == pr;
            if (!inside && mentions(depends[static_cast<size_t>(w)], pr)) cycle = true;
          }
          if (cycle) continue;
          parent_[static_cast<size_t>(me)] = pr;
          ext_deps[static_cast<size_t>(pr)].insert(ext_deps[static_cast<size_t>(me)].begin(),
                                                   ext_deps[static_cast<size_t>(me)].end());
        }
        int me = find(r);
        for (int v : node.inputs) {
          int p = prod[static_cast<size_t>(v)];
          bool inside = p >= 0 && region[static_cast<size_t>(p)] >= 0 && find(region[static_cast<size_t>(p)]) == me;
          if (!inside) ext_deps[static_cast<size_t>(me)].insert(depends[static_cast<size_t>(v)].begin(), depends[static_cast<size_t>(v)].end());
        }
      }
      std::set<int> d;
      for (int v : node.inputs) d.insert(depends[static_cast<size_t>(v)].begin(), depends[static_cast<size_t>(v)].end());
      if (region[n] >= 0) d.insert(static_cast<int>(n));
      for (int v : node.outputs) depends[static_cast<size_t>(v)] = d;
    }
    // Collect members per final region.
    std::map<int, std::vector<size_t>> members;
    for (size_t n = 0; n < nn; ++n) {
      if (region[n] >= 0) members[find(region[n])].push_back(n);
    }
    bool changed = false;
    std::vector<bool> removed(nn, false);
    std::vector<GNode> added;
    for (auto& [r, nodes] : members) {
      if (nodes.size() < 2) continue;
      added.push_back(build(g, nodes));
      for (size_t n : nodes) removed[n] = true;
      changed = true;
    }
    if (!changed) return false;
    std::vector<GNode> all;
    for (size_t n = 0; n < nn; ++n) {
      if (!removed[n]) all.push_back(std::move(g.nodes[n]));
    }
    for (auto& a : added) all.push_back(std::move(a));
    g.nodes = topological_order(g, std::move(all));
    return true;
  }

 private:
  static bool fusable(const Graph& g, const GNode& node) {
    return is_elementwise(node.prim->kind()) && node.outputs.size() == 1;
  }

  int find(int r) {
    while (parent_[static_cast<size_t>(r)] != r) r = parent_[static_cast<size_t>(r)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(r)])];
    return r;
  }

  bool mentions(const std::set<int>& s, int r) {
    for (int x : s) {
      if (find(x) == r) return true;
    }
    return false;
  }

  // The Fused node for a region's members (in graph order).
  GNode build(const Graph& g, const std::vector<size_t>& nodes) {
    auto program = std::make_shared<FusedProgram>();
    std::map<int, int> op_of;  // value id -> op index
    std::set<int> produced;
    for (size_t n : nodes) produced.insert(g.nodes[n].outputs[0]);
    GNode fused;
    for (size_t n : nodes) {
      for (int v : g.nodes[n].inputs) {
        if (produced.count(v) || op_of.count(v)) continue;
        FusedOp in;
        in.dtype = g.values[static_cast<size_t>(v)].dtype;
        in.input = static_cast<int>(fused.inputs.size());
        const Value& val = g.values[static_cast<size_t>(v)];
        in.uniform = val.is_constant() && val.constant->size() == 1;
        op_of[v] = static_cast<int>(program->ops.size());
        program->ops.push_back(in);
        fused.inputs.push_back(v);
      }
    }
    for (size_t n : nodes) {
      FusedOp op;
      op.prim = g.nodes[n].prim;
      op.dtype = g.values[static_cast<size_t>(g.nodes[n].outputs[0])].dtype;
      for (int v : g.nodes[n].inputs) op.args.push_back(op_of.at(v));
      op_of[g.nodes[n].outputs[0]] = static_cast<int>(program->ops.size());
      program->ops.push_back(op);
    }
    // Region outputs: values read outside the region or returned.
    std::set<size_t> member_set(nodes.begin(), nodes.end());
    std::set<int> used_outside(g.outputs.begin(), g.outputs.end());
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      if (member_set.count(n)) continue;
      for (int v : g.nodes[n].inputs) used_outside.insert(v);
    }
    for (size_t n : nodes) {
      int v = g.nodes[n].outputs[0];
      if (!used_outside.count(v)) continue;
      program->outputs.push_back(op_of.at(v));
      fused.outputs.push_back(v);
    }
    fused.prim = std::make_shared<Fused>(std::move(program));
    return fused;
  }

  std::vector<int> parent_;
  std::map<int, Shape> region_shape_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_elementwise() { return std::make_unique<FuseElementwise>(); }

}  // namespace kiln::compiler
