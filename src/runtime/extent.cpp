#include "runtime/extent.h"

#include <algorithm>
#include <unordered_map>

#include "runtime/attrs.h"
#include "runtime/ops.h"

namespace kiln::runtime {

namespace {

const std::set<std::string> kElementwise = {
    "abs", "negative", "sign", "exp", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "square", "reciprocal",
    "sin", "cos", "tan", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh", "floor", "ceil", "round", "isnan", "isinf",
    "isfinite",
    "logical_not", "bitwise_not", "astype", "copy", "add", "subtract", "multiply", "divide", "floor_divide",
    "remainder", "power", "maximum", "minimum", "arctan2", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
    "right_shift", "where", "clip"};
const std::set<std::string> kReductions = {"sum", "prod", "mean", "max", "min", "all", "any", "logsumexp", "var",
                                           "softmax"};

int norm_axis(int64_t a, int rank) { return static_cast<int>(a < 0 ? a + rank : a); }

// Why this node would mix rows ("" if it keeps them apart). Inputs flagged in `rows`
// carry the row axis first; the others do not depend on the rows at all.
std::string rule(const GraphNode& n, const std::vector<Array>& in, const std::vector<bool>& rows,
                 const std::vector<Array>& out, int64_t B, bool& follow) {
  const std::string& op = n.op;
  auto attrs = [&](const char* key) -> const AttrValue* {
    auto it = n.attrs.find(key);
    return it == n.attrs.end() ? nullptr : &it->second;
  };
  auto ints = [&](const char* key, std::vector<int64_t> def) {
    const AttrValue* v = attrs(key);
    if (!v) return def;
    if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
    if (auto* i = std::get_if<int64_t>(v)) return std::vector<int64_t>{*i};
    return def;
  };
  auto int_or = [&](const char* key, int64_t def) {
    const AttrValue* v = attrs(key);
    auto* i = v ? std::get_if<int64_t>(v) : nullptr;
    return i ? *i : def;
  };
  size_t k = 0;
  while (k < in.size() && !rows[k]) ++k;
  const Array& r = in[k];  // the first row-carrying input
  int rank = r.ndim();
  if (kElementwise.count(op)) {
    int out_rank = out[0].ndim();
    for (size_t i = 0; i < in.size(); ++i) {
      if (rows[i] && in[i].ndim() != out_rank) return "a row input is broadcast to a higher rank, so its rows move";
      if (!rows[i] && in[i].ndim() == out_rank && in[i].shape(0) != 1)
        return "another operand has its own leading axis of size " + std::to_string(in[i].shape(0));
    }
    return "";
  }
  if (kReductions.count(op)) {
    std::vector<int64_t> axes = ints("axes", op == "softmax" ? std::vector<int64_t>{-1} : std::vector<int64_t>{});
    if (axes.empty()) return "reduces over every axis, the row axis included";
    for (int64_t a : axes)
      if (norm_axis(a, rank) == 0) return "reduces over the row axis";
    return "";
  }
  if (op == "argmax" || op == "argmin") {
    const AttrValue* a = attrs("axis");
    if (!a) return "reduces the flattened array";
    return norm_axis(std::get<int64_t>(*a), rank) == 0 ? "reduces over the row axis" : "";
  }
  if (op == "sort" || op == "argsort" || op == "partition" || op == "argpartition" || op == "topk") {
    return norm_axis(int_or("axis", -1), rank) == 0 ? "works along the row axis" : "";
  }
  if (op == "cumsum") {
    // A forward scan along the rows only looks back, so a prefix of rows is exact.
    if (norm_axis(int_or("axis", 0), rank) == 0 && int_or("reverse", 0)) return "scans the row axis backwards";
    return "";
  }
  if (op == "matmul") {
    const Array& a = in[0];
    const Array& b = in[1];
    if (rows[0] && rows[1]) {
      if (a.ndim() >= 3 && a.ndim() == b.ndim()) return "";  // batched over the row axis
      return "both operands carry rows, so every output row reads every input row";
    }
    if (rows[0]) {
      if (a.ndim() < 2) return "contracts the row axis";
      if (a.ndim() < b.ndim()) return "the other operand's batch axes lead";
      return "";
    }
    if (b.ndim() < 3) return "contracts the row axis of the right operand";
    if (a.ndim() >= b.ndim() && a.shape(0) != 1) return "the left operand has its own batch axis";
    return "";
  }
  if (op == "reshape" || op == "broadcast_to") {
    if (out[0].ndim() == 0 || out[0].shape(0) != B || rank == 0 || r.shape(0) != B ||
        (op == "broadcast_to" && rank != out[0].ndim()))
      return "moves elements across the row axis";
    follow = true;
    return "";
  }
  if (op == "transpose" || op == "swapaxes") {
    std::vector<int64_t> perm = ints("perm", {});
    if (op == "swapaxes") {
      int a1 = norm_axis(int_or("axis1", 0), rank), a2 = norm_axis(int_or("axis2", 0), rank);
      return (a1 == 0) != (a2 == 0) ? "moves the row axis" : "";
    }
    if (perm.empty()) return rank <= 1 ? "" : "moves the row axis";
    return norm_axis(perm[0], rank) == 0 ? "" : "moves the row axis";
  }
  if (op == "expand_dims") return norm_axis(int_or("axis", 0), rank + 1) == 0 ? "adds an axis before the rows" : "";
  if (op == "squeeze") {
    std::vector<int64_t> axes = ints("axes", {});
    if (axes.empty()) return B == 1 ? "squeezes the row axis" : "";
    for (int64_t a : axes)
      if (norm_axis(a, rank) == 0) return "squeezes the row axis";
    return "";
  }
  if (op == "flatten") return rank == 1 ? "" : "merges the row axis with the others";
  if (op == "slice") {
    std::vector<int64_t> axes = ints("axes", {});
    std::vector<int64_t> start = ints("start", {}), stop = ints("stop", {}), step = ints("step", {});
    size_t count = std::max({axes.size(), start.size(), stop.size(), step.size()});
    for (size_t i = 0; i < count; ++i) {
      int64_t ax = axes.empty() ? static_cast<int64_t>(i) : norm_axis(axes[i], rank);
      if (ax != 0) continue;
      bool whole = (i >= start.size() || start[i] == 0) && (i >= stop.size() || stop[i] >= B) &&
                   (i >= step.size() || step[i] == 1);
      if (!whole) return "slices the row axis";
    }
    return "";
  }
  if (op == "concatenate" || op == "stack" || op == "split") {
    for (size_t i = 0; i < in.size(); ++i)
      if (!rows[i]) return "joins an operand that does not carry rows";
    int axis = norm_axis(int_or("axis", 0), op == "stack" ? rank + 1 : rank);
    return axis == 0 ? "works along the row axis" : "";
  }
  if (op == "pad") {
    std::vector<int64_t> w = ints("widths", {});
    return (w.size() >= 2 && (w[0] != 0 || w[1] != 0)) ? "pads the row axis" : "";
  }
  if (op == "take") {
    int axis = static_cast<int>(int_or("axis", 0));
    if (rows[0] && !rows[1]) return norm_axis(axis, rank) == 0 ? "gathers along the row axis" : "";
    if (!rows[0] && rows[1]) return norm_axis(axis, in[0].ndim()) == 0 ? "" : "indices carry rows into an inner axis";
    return "gathers rows by row-dependent indices";
  }
  if (op == "take_along_axis") {
    if (!(rows[0] && rows[1])) return "only one operand carries rows";
    return norm_axis(int_or("axis", 0), rank) == 0 ? "gathers along the row axis" : "";
  }
  if (is_control_flow(op)) return "control flow on row-carrying values";
  return "op '" + op + "' is not known to keep rows apart";
}

}  // namespace

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
      if (!why.empty()) res.blocker = where(file, file, i) + why;
      else if (follow) res.follow_rows.insert(&n);
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
