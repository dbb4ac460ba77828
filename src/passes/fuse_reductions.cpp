// Reduction fusion: a reduction over trailing axes, the elementwise work that
// feeds it (prologue), other reductions over the same rows, and the elementwise
// work on the results (epilogue) become one RowFused node. RMSNorm, softmax and
// LayerNorm each become a single kernel that makes a few passes over each row.
#include <algorithm>
#include <map>
#include <set>

#include "compile/row_fused.h"
#include "ops/reduce.h"
#include "passes/pass.h"

namespace kiln::compiler {
namespace {

// The row space of a region: full shape, per-row shape, number of reduced axes.
struct Space {
  Shape full, row;
  int k = 0;
};

class FuseReductions : public Pass {
 public:
  const char* name() const override { return "fuse_reductions"; }

  bool run(Graph& g) override {
    g_ = &g;
    prod_ = g.producers();
    in_region_.assign(g.nodes.size(), false);
    std::vector<std::vector<size_t>> regions;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      if (in_region_[n]) continue;
      auto space = reduction_space(g.nodes[n]);
      if (!space) continue;
      std::vector<size_t> members = grow(n, *space);
      if (members.size() < 2) continue;
      for (size_t m : members) in_region_[m] = true;
      regions.push_back(std::move(members));
      spaces_.push_back(*space);
    }
    if (regions.empty()) return false;
    std::vector<bool> removed(g.nodes.size(), false);
    std::vector<GNode> added;
    for (size_t r = 0; r < regions.size(); ++r) {
      std::sort(regions[r].begin(), regions[r].end());
      added.push_back(build(regions[r], spaces_[r]));
      for (size_t m : regions[r]) removed[m] = true;
    }
    replace_nodes(g, removed, std::move(added));
    return true;
  }

 private:
  const Shape& shape(int v) const { return g_->values[static_cast<size_t>(v)].shape; }

  // A reduction over the trailing axes, each longer than 1 (so per-row and
  // per-element values can be told apart at every size).
  std::optional<Space> reduction_space(const GNode& node) const {
    if (op_category(node.prim->kind()) != OpCategory::reduce) return std::nullopt;
    const auto& axes = reduce_axes_of(*node.prim);
    const Shape& in = shape(node.inputs[0]);
    int d = static_cast<int>(in.size()), k = static_cast<int>(axes.size());
    if (k == 0) return std::nullopt;
    for (int i = 0; i < k; ++i) {
      if (axes[static_cast<size_t>(i)] != d - k + i || in[static_cast<size_t>(d - k + i)] <= 1) return std::nullopt;
    }
    Space s{in, in, k};
    for (int i = d - k; i < d; ++i) s.row[static_cast<size_t>(i)] = 1;
    return s;
  }

  // Whether value v can be read by the region: it broadcasts into the full shape
  // and is either per-row (trailing axes 1) or per-element along the trailing axes.
  static bool readable(const Shape& v, const Space& s) {
    if (v.size() > s.full.size()) return false;
    size_t lead = s.full.size() - v.size();
    bool all_one = true, all_full = true;
    for (size_t i = 0; i < v.size(); ++i) {
      size_t j = lead + i;
      if (v[i] != 1 && v[i] != s.full[j]) return false;
      if (j >= s.full.size() - static_cast<size_t>(s.k)) {
        all_one = all_one && v[i] == 1;
        all_full = all_full && v[i] == s.full[j];
      }
    }
    // Trailing axes the value lacks count as broadcast (size 1).
    if (lead > s.full.size() - static_cast<size_t>(s.k)) all_full = false;
    return all_one || all_full;
  }

  bool fits(const GNode& node, const Space& s) const {
    if (node.outputs.size() != 1) return false;
    const Shape& out = shape(node.outputs[0]);
    if (is_elementwise(node.prim->kind())) {
      if (out != s.full && out != s.row) return false;
    } else if (auto rs = reduction_space(node)) {
      if (rs->full != s.full || rs->k != s.k) return false;
    } else {
      return false;
    }
    for (int v : node.inputs) {
      if (!readable(shape(v), s)) return false;
    }
    return true;
  }

  // True when value v depends on a member of `members` (walking producers).
  bool depends_on(int v, const std::set<size_t>& members) const {
    std::vector<int> stack{v};
    std::set<int> seen;
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      if (!seen.insert(x).second) continue;
      int p = prod_[static_cast<size_t>(x)];
      if (p < 0) continue;
      if (members.count(static_cast<size_t>(p))) return true;
      for (int w : g_->nodes[static_cast<size_t>(p)].inputs) stack.push_back(w);
    }
    return false;
  }

  // The region is acyclic when none of its outside inputs depends on a member.
  bool acyclic(const std::set<size_t>& members) const {
    for (size_t m : members) {
      for (int v : g_->nodes[m].inputs) {
        int p = prod_[static_cast<size_t>(v)];
        if (p >= 0 && members.count(static_cast<size_t>(p))) continue;
        if (depends_on(v, members)) return false;
      }
    }
    return true;
  }

  std::vector<size_t> grow(size_t seed, const Space& s) {
    std::set<size_t> members{seed};
    std::set<int> member_values(g_->nodes[seed].outputs.begin(), g_->nodes[seed].outputs.end());
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t n = 0; n < g_->nodes.size() && members.size() < kMaxFusedOps; ++n) {
        if (members.count(n) || in_region_[n] || !fits(g_->nodes[n], s)) continue;
        const GNode& node = g_->nodes[n];
        bool adjacent = false;
        for (int v : node.inputs) adjacent = adjacent || member_values.count(v);
        for (size_t m : members) {
          for (int v : g_->nodes[m].inputs) adjacent = adjacent || v == node.outputs[0];
        }
        if (!adjacent) continue;
        members.insert(n);
        if (!acyclic(members)) {
          members.erase(n);
          continue;
        }
        member_values.insert(node.outputs[0]);
        changed = true;
      }
    }
    return {members.begin(), members.end()};
  }

  GNode build(const std::vector<size_t>& members, const Space& s) {
    auto program = std::make_shared<RowProgram>();
    program->reduced_axes = s.k;
    std::map<int, int> op_of;
    std::set<int> produced;
    for (size_t m : members) produced.insert(g_->nodes[m].outputs[0]);
    GNode fused;
    for (size_t m : members) {
      for (int v : g_->nodes[m].inputs) {
        if (produced.count(v) || op_of.count(v)) continue;
        const Value& val = g_->values[static_cast<size_t>(v)];
        RowOp in;
        in.dtype = val.dtype;
        in.input = static_cast<int>(fused.inputs.size());
        in.uniform = val.is_constant() && val.constant->size() == 1;
        Shape padded(s.full.size() - val.shape.size(), 1);
        padded.insert(padded.end(), val.shape.begin(), val.shape.end());
        bool trailing_one = true;
        for (size_t i = s.full.size() - static_cast<size_t>(s.k); i < s.full.size(); ++i)
          trailing_one = trailing_one && padded[i] == 1;
        in.per_row = in.uniform || trailing_one;
        op_of[v] = static_cast<int>(program->ops.size());
        program->ops.push_back(in);
        fused.inputs.push_back(v);
      }
    }
    for (size_t m : members) {
      const GNode& node = g_->nodes[m];
      RowOp op;
      op.prim = node.prim;
      op.dtype = g_->values[static_cast<size_t>(node.outputs[0])].dtype;
      op.per_row = shape(node.outputs[0]) == s.row;
      for (int v : node.inputs) op.args.push_back(op_of.at(v));
      op_of[node.outputs[0]] = static_cast<int>(program->ops.size());
      program->ops.push_back(op);
    }
    std::set<size_t> member_set(members.begin(), members.end());
    std::set<int> used_outside(g_->outputs.begin(), g_->outputs.end());
    for (size_t n = 0; n < g_->nodes.size(); ++n) {
      if (member_set.count(n)) continue;
      for (int v : g_->nodes[n].inputs) used_outside.insert(v);
    }
    for (size_t m : members) {
      int v = g_->nodes[m].outputs[0];
      if (!used_outside.count(v)) continue;
      program->outputs.push_back(op_of.at(v));
      fused.outputs.push_back(v);
    }
    fused.prim = std::make_shared<RowFused>(std::move(program));
    return fused;
  }

  Graph* g_ = nullptr;
  std::vector<int> prod_;
  std::vector<bool> in_region_;
  std::vector<Space> spaces_;
};

}  // namespace

std::unique_ptr<Pass> make_fuse_reductions() { return std::make_unique<FuseReductions>(); }

}  // namespace kiln::compiler
