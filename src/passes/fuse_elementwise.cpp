// Elementwise fusion: connected elementwise nodes of one output shape become a
// single Fused node (with as many outputs as values used outside the region).
// Regions grow along producer edges and merge where they meet, unless a path
// through a node outside both would make the merged region depend on itself, or
// the merged region would exceed kMaxFusedOps.
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
  explicit FuseElementwise(PassOptions options) : options_(options) {}
  const char* name() const override { return "fuse_elementwise"; }

  bool run(Graph& g) override {
    g_ = &g;
    size_t nn = g.nodes.size();
    prod_ = g.producers();
    parent_.assign(nn, -1);
    region_.assign(nn, -1);
    members_.assign(nn, {});
    for (size_t n = 0; n < nn; ++n) {
      const GNode& node = g.nodes[n];
      if (!fusable(node)) continue;
      const Shape& shape = g.values[static_cast<size_t>(node.outputs[0])].shape;
      int r = static_cast<int>(n);
      parent_[n] = r;
      region_[n] = r;
      members_[n] = {n};
      // Join each producer region of the same shape that can be merged without a cycle.
      for (int v : node.inputs) {
        int p = prod_[static_cast<size_t>(v)];
        if (p < 0 || region_[static_cast<size_t>(p)] < 0) continue;
        int pr = find(region_[static_cast<size_t>(p)]), me = find(r);
        if (pr == me || g.values[static_cast<size_t>(g.nodes[static_cast<size_t>(pr)].outputs[0])].shape != shape)
          continue;
        if (members_[static_cast<size_t>(pr)].size() + members_[static_cast<size_t>(me)].size() > kMaxFusedOps)
          continue;
        if (path_outside(pr, me) || path_outside(me, pr)) continue;
        parent_[static_cast<size_t>(me)] = pr;
        auto& into = members_[static_cast<size_t>(pr)];
        into.insert(into.end(), members_[static_cast<size_t>(me)].begin(), members_[static_cast<size_t>(me)].end());
        members_[static_cast<size_t>(me)].clear();
      }
    }
    bool changed = false;
    std::vector<bool> removed(nn, false);
    std::vector<GNode> added;
    for (size_t r = 0; r < nn; ++r) {
      if (region_[r] < 0 || find(static_cast<int>(r)) != static_cast<int>(r) || members_[r].size() < 2) continue;
      std::vector<size_t> nodes = members_[r];
      std::sort(nodes.begin(), nodes.end());
      added.push_back(build(g, nodes));
      for (size_t n : nodes) removed[n] = true;
      changed = true;
    }
    if (!changed) return false;
    replace_nodes(g, removed, std::move(added));
    return true;
  }

 private:
  // In a shapeless compile a size-1 axis may be a broadcast at other sizes, so
  // shapes with one cannot be told equal; those nodes stay unfused.
  bool fusable(const GNode& node) const {
    if (!is_elementwise(node.prim->kind()) || node.outputs.size() != 1) return false;
    if (!options_.shapeless) return true;
    for (auto d : g_->values[static_cast<size_t>(node.outputs[0])].shape) {
      if (d <= 1) return false;
    }
    return true;
  }

  int find(int r) {
    while (parent_[static_cast<size_t>(r)] != r)
      r = parent_[static_cast<size_t>(r)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(r)])];
    return r;
  }

  // The group of a node: its region, or the node alone.
  int group(size_t n) { return region_[n] >= 0 ? find(region_[n]) : -1 - static_cast<int>(n); }

  // True when region `from` reads, through at least one node outside both regions,
  // a value of region `to`: merging them would then make a cycle.
  bool path_outside(int from, int to) {
    std::vector<std::pair<int, bool>> stack;  // value, reached through an outside node
    std::set<int> seen;
    auto push_inputs = [&](size_t n, bool outside) {
      for (int v : g_->nodes[n].inputs) stack.push_back({v, outside});
    };
    for (size_t m : members_[static_cast<size_t>(from)]) push_inputs(m, false);
    while (!stack.empty()) {
      auto [v, outside] = stack.back();
      stack.pop_back();
      int p = prod_[static_cast<size_t>(v)];
      if (p < 0) continue;
      int gp = group(static_cast<size_t>(p));
      if (gp == from) continue;
      if (gp == to) {
        if (outside) return true;
        continue;  // a direct edge is fine
      }
      if (!seen.insert(gp).second) continue;
      if (gp < 0) {
        push_inputs(static_cast<size_t>(p), true);
      } else {
        for (size_t m : members_[static_cast<size_t>(gp)]) push_inputs(m, true);
      }
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

  PassOptions options_;
  Graph* g_ = nullptr;
  std::vector<int> prod_;
  std::vector<int> parent_;  // union-find over regions (node indices)
  std::vector<int> region_;  // region of each node, -1 if none
  std::vector<std::vector<size_t>> members_;  // members of each region root
};

}  // namespace

std::unique_ptr<Pass> make_fuse_elementwise(PassOptions options) { return std::make_unique<FuseElementwise>(options); }

}  // namespace kiln::compiler
