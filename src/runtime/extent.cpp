#include "runtime/extent.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/attrs.h"
#include "ops/op_traits.h"
#include "runtime/ops.h"

namespace kiln::runtime {

namespace {

int64_t norm_axis(int64_t a, int rank) { return a < 0 ? a + rank : a; }  // int64: no truncation of odd attributes

// One node as its extent rule sees it. Inputs flagged in `rows` carry the row axis first;
// the others do not depend on the rows at all.
struct Site {
  const GraphNode& n;
  const std::vector<Array>& in;
  const std::vector<bool>& rows;
  const std::vector<Array>& out;
  int64_t B;
  bool& follow;  // set when a reshape or broadcast target must follow the live rows
  const Array& r;  // the first row-carrying input
  int rank;  // its rank

  const AttrValue* attr(const char* key) const {
    auto it = n.attrs.find(key);
    return it == n.attrs.end() ? nullptr : &it->second;
  }
  std::vector<int64_t> ints(const char* key, std::vector<int64_t> def) const {
    const AttrValue* v = attr(key);
    if (!v) return def;
    if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
    if (auto* i = std::get_if<int64_t>(v)) return std::vector<int64_t>{*i};
    return def;
  }
  int64_t int_or(const char* key, int64_t def) const {
    const AttrValue* v = attr(key);
    auto* i = v ? std::get_if<int64_t>(v) : nullptr;
    return i ? *i : def;
  }
};

// Each rule says why its node would mix rows ("" if it keeps them apart).
using Rule = std::string (*)(const Site& s);

std::string elementwise_rule(const Site& s) {
  int out_rank = s.out[0].ndim();
  for (size_t i = 0; i < s.in.size(); ++i) {
    if (s.rows[i] && s.in[i].ndim() != out_rank) return "a row input is broadcast to a higher rank, so its rows move";
    if (!s.rows[i] && s.in[i].ndim() == out_rank && s.in[i].shape(0) != 1)
      return "another operand has its own leading axis of size " + std::to_string(s.in[i].shape(0));
  }
  return "";
}

std::string axes_reduction_rule(const Site& s) {
  std::vector<int64_t> axes = s.ints("axes", s.n.op == "softmax" ? std::vector<int64_t>{-1} : std::vector<int64_t>{});
  if (axes.empty()) return "reduces over every axis, the row axis included";
  for (int64_t a : axes)
    if (norm_axis(a, s.rank) == 0) return "reduces over the row axis";
  return "";
}

std::string arg_reduction_rule(const Site& s) {
  const AttrValue* a = s.attr("axis");
  if (!a) return "reduces the flattened array";
  return norm_axis(std::get<int64_t>(*a), s.rank) == 0 ? "reduces over the row axis" : "";
}

std::string cumsum_rule(const Site& s) {
  // A forward scan along the rows only looks back, so a prefix of rows is exact.
  if (norm_axis(s.int_or("axis", 0), s.rank) == 0 && s.int_or("reverse", 0)) return "scans the row axis backwards";
  return "";
}

std::string matmul_rule(const Site& s) {
  const Array& a = s.in[0];
  const Array& b = s.in[1];
  if (s.rows[0] && s.rows[1]) {
    if (a.ndim() >= 3 && a.ndim() == b.ndim()) return "";  // batched over the row axis
    return "both operands carry rows, so every output row reads every input row";
  }
  if (s.rows[0]) {
    if (a.ndim() < 2) return "contracts the row axis";
    if (a.ndim() < b.ndim()) return "the other operand's batch axes lead";
    return "";
  }
  if (b.ndim() < 3) return "contracts the row axis of the right operand";
  if (a.ndim() >= b.ndim() && a.shape(0) != 1) return "the left operand has its own batch axis";
  return "";
}

std::string reshape_rule(const Site& s) {
  const Array& o = s.out[0];
  if (o.ndim() == 0 || o.shape(0) != s.B || s.rank == 0 || s.r.shape(0) != s.B ||
      (s.n.op == "broadcast_to" && s.rank != o.ndim()))
    return "moves elements across the row axis";
  s.follow = true;
  return "";
}

std::string transpose_rule(const Site& s) {
  std::vector<int64_t> perm = s.ints("perm", {});
  if (perm.empty()) return s.rank <= 1 ? "" : "moves the row axis";
  return norm_axis(perm[0], s.rank) == 0 ? "" : "moves the row axis";
}

std::string swapaxes_rule(const Site& s) {
  int64_t a1 = norm_axis(s.int_or("axis1", 0), s.rank), a2 = norm_axis(s.int_or("axis2", 0), s.rank);
  return (a1 == 0) != (a2 == 0) ? "moves the row axis" : "";
}

std::string expand_dims_rule(const Site& s) {
  return norm_axis(s.int_or("axis", 0), s.rank + 1) == 0 ? "adds an axis before the rows" : "";
}

std::string squeeze_rule(const Site& s) {
  std::vector<int64_t> axes = s.ints("axes", {});
  if (axes.empty()) return s.B == 1 ? "squeezes the row axis" : "";
  for (int64_t a : axes)
    if (norm_axis(a, s.rank) == 0) return "squeezes the row axis";
  return "";
}

std::string flatten_rule(const Site& s) { return s.rank == 1 ? "" : "merges the row axis with the others"; }

std::string slice_rule(const Site& s) {
  std::vector<int64_t> axes = s.ints("axes", {});
  std::vector<int64_t> start = s.ints("start", {}), stop = s.ints("stop", {}), step = s.ints("step", {});
  size_t count = std::max({axes.size(), start.size(), stop.size(), step.size()});
  for (size_t i = 0; i < count; ++i) {
    int64_t ax = axes.empty() ? static_cast<int64_t>(i) : norm_axis(axes[i], s.rank);
    if (ax != 0) continue;
    bool whole = (i >= start.size() || start[i] == 0) && (i >= stop.size() || stop[i] >= s.B) &&
                 (i >= step.size() || step[i] == 1);
    if (!whole) return "slices the row axis";
  }
  return "";
}

std::string join_rule(const Site& s) {
  for (size_t i = 0; i < s.in.size(); ++i)
    if (!s.rows[i]) return "joins an operand that does not carry rows";
  int64_t axis = norm_axis(s.int_or("axis", 0), s.n.op == "stack" ? s.rank + 1 : s.rank);
  return axis == 0 ? "works along the row axis" : "";
}

std::string pad_rule(const Site& s) {
  std::vector<int64_t> w = s.ints("widths", {});
  return (w.size() >= 2 && (w[0] != 0 || w[1] != 0)) ? "pads the row axis" : "";
}

std::string take_rule(const Site& s) {
  int64_t axis = s.int_or("axis", 0);
  if (s.rows[0] && !s.rows[1]) return norm_axis(axis, s.rank) == 0 ? "gathers along the row axis" : "";
  if (!s.rows[0] && s.rows[1])
    return norm_axis(axis, s.in[0].ndim()) == 0 ? "" : "indices carry rows into an inner axis";
  return "gathers rows by row-dependent indices";
}

std::string take_along_axis_rule(const Site& s) {
  if (!(s.rows[0] && s.rows[1])) return "only one operand carries rows";
  return norm_axis(s.int_or("axis", 0), s.rank) == 0 ? "gathers along the row axis" : "";
}

std::string creation_rule(const Site&) { return ""; }  // no inputs, so no rows to mix

std::string selection_rule(const Site& s) {
  return norm_axis(s.int_or("axis", -1), s.rank) == 0 ? "works along the row axis" : "";
}

// A draw's words are laid out over its whole shape (random.md): fewer rows, other numbers.
std::string random_rule(const Site& s) {
  for (bool r : s.rows) {
    if (r) return "draws numbers that depend on the whole shape";
  }
  return "";
}

std::string always_mixes(const Site& s) { return "op '" + s.n.op + "' is not known to keep rows apart"; }

// The rules of ops whose registry category does not decide it alone.
const std::unordered_map<std::string, Rule>& own_rules() {
  static const std::unordered_map<std::string, Rule> rules = {
      {"copy", elementwise_rule},
      {"var", axes_reduction_rule},
      {"softmax", axes_reduction_rule},
      {"argmax", arg_reduction_rule},
      {"argmin", arg_reduction_rule},
      {"cumsum", cumsum_rule},
      {"matmul", matmul_rule},
      {"reshape", reshape_rule},
      {"broadcast_to", reshape_rule},
      {"transpose", transpose_rule},
      {"swapaxes", swapaxes_rule},
      {"expand_dims", expand_dims_rule},
      {"squeeze", squeeze_rule},
      {"flatten", flatten_rule},
      {"slice", slice_rule},
      {"concatenate", join_rule},
      {"stack", join_rule},
      {"split", join_rule},
      {"pad", pad_rule},
      {"take", take_rule},
      {"take_along_axis", take_along_axis_rule},
      {"slice_update", always_mixes},
      {"quantize", always_mixes},
      {"dequantize", always_mixes},
      {"quantized_matmul", always_mixes},
      {"rms_norm", always_mixes},
      {"layer_norm", always_mixes},
      {"rope", always_mixes},
      {"scaled_dot_product_attention", always_mixes},
      {"slice_update", always_mixes},
      {"sort", selection_rule},
      {"argsort", selection_rule},
      {"partition", selection_rule},
      {"argpartition", selection_rule},
      {"topk", selection_rule},
      {"all_sum", elementwise_rule},
      {"all_gather", always_mixes},
      {"reduce_scatter", always_mixes},
  };
  return rules;
}

Rule find_rule(const std::string& op) {
  auto it = own_rules().find(op);
  if (it != own_rules().end()) return it->second;
  const OpTraits* t = find_op(op.c_str());
  if (!t) return nullptr;
  switch (t->category) {
    case OpCategory::unary:
    case OpCategory::binary:
    case OpCategory::elementwise: return elementwise_rule;
    case OpCategory::reduce: return axes_reduction_rule;
    case OpCategory::creation: return creation_rule;
    case OpCategory::random: return random_rule;
    default: return nullptr;
  }
}

std::string rule(const GraphNode& n, const std::vector<Array>& in, const std::vector<bool>& rows,
                 const std::vector<Array>& out, int64_t B, bool& follow) {
  if (is_control_flow(n.op)) return "control flow on row-carrying values";
  size_t k = 0;
  while (k < in.size() && !rows[k]) ++k;
  const Site site{n, in, rows, out, B, follow, in[k], in[k].ndim()};
  Rule r = find_rule(n.op);
  return r ? r(site) : always_mixes(site);
}

}  // namespace

bool has_extent_rule(const std::string& op) { return find_rule(op) != nullptr; }

ExtentAnalysis analyze_extent(const Graph& file, const std::vector<Array>& inputs, const std::vector<bool>& rows,
                              int64_t B, const std::function<Array(const GraphNode&)>& leaf) {
  ExtentAnalysis res;
  Hooks h;
  h.symbolic = true;
  h.leaf = leaf;
  h.call = [&](const Graph& sub, const std::vector<Array>& args) { return call_graph(file, sub, args, h); };
  Env env;
  std::unordered_map<std::string, bool> carries;
  size_t next = 0;
  for (const GraphNode& n : file.nodes) {
    if (n.kind == GraphNode::Kind::op) continue;
    if (n.kind == GraphNode::Kind::input) {
      carries[n.outputs[0]] = rows[next];
      env[n.outputs[0]] = inputs[next++];
    } else {
      carries[n.outputs[0]] = false;
      env[n.outputs[0]] = leaf(n);
    }
  }
  for (size_t i = 0; i < file.nodes.size(); ++i) {
    const GraphNode& n = file.nodes[i];
    if (n.kind != GraphNode::Kind::op) continue;
    std::vector<Array> in;
    std::vector<bool> in_rows;
    bool any = false;
    for (const auto& name : n.inputs) {
      in.push_back(env.at(name));
      in_rows.push_back(carries.at(name));
      any |= in_rows.back();
    }
    auto out = run_node(file, file, i, env, h);
    bool follow = false;
    if (any && res.blocker.empty()) {
      std::string why = rule(n, in, in_rows, out, B, follow);
      if (!why.empty())
        res.blocker = where(file, file, i) + why;
      else if (follow)
        res.follow_rows.insert(&n);
    }
    for (size_t k = 0; k < out.size(); ++k) {
      carries[n.outputs[k]] = any && out[k].ndim() > 0 && out[k].shape(0) == B;
      env[n.outputs[k]] = std::move(out[k]);
    }
  }
  for (const auto& o : file.outputs) res.output_rows.push_back(carries.at(o));
  return res;
}

}  // namespace kiln::runtime
