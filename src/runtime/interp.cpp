#include "runtime/interp.h"

#include <memory>

#include "core/tensor.h"
#include "kiln/ops.h"
#include "runtime/attrs.h"
#include "runtime/ops.h"

namespace kiln::runtime {

std::string where(const Graph& file, const Graph& g, size_t i) {
  const GraphNode& n = g.nodes[i];
  std::string what = n.kind == GraphNode::Kind::op ? " (" + n.op + ")" : "";
  std::string name = n.outputs.empty() ? "" : " '" + n.outputs[0] + "'";
  if (n.loc.line > 0)
    return detail::concat(file.source_path.empty() ? "<text>" : file.source_path, ":", n.loc.line, ":", n.loc.column,
                          ": node", name, what, ": ");
  return detail::concat("graph '", g.name, "', node ", i, name, what, ": ");
}

bool truthy(const Array& a, const char* op) {
  if (a.size() != 1) fail(op, "condition must have one element, got shape ", detail::shape_str(a.shape()));
  return astype(a, float64).item<double>() != 0.0;
}

namespace {

bool same_types(const std::vector<Array>& a, const std::vector<Array>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype()) return false;
  return true;
}

std::string types_str(const std::vector<Array>& v) {
  std::string s;
  for (const Array& a : v)
    s += (s.empty() ? "" : ", ") + std::string(dtype_name(a.dtype())) + detail::shape_str(a.shape());
  return "(" + s + ")";
}

std::vector<Array> run_if(const Graph& file, const GraphNode& n, const std::vector<Array>& in, const Hooks& h) {
  AttrReader at("if", n.attrs);
  const Graph* t = file.find_subgraph(at.graph("then"));
  const Graph* e = file.find_subgraph(at.graph("else"));
  at.done();
  if (!t || !e) fail("if", "unknown subgraph");
  if (in.empty()) fail("if", "needs a condition input");
  std::vector<Array> args(in.begin() + 1, in.end());
  if (h.symbolic) {
    if (in[0].size() != 1) fail("if", "condition must have one element, got shape ", detail::shape_str(in[0].shape()));
    auto a = h.call(*t, args);
    auto b = h.call(*e, args);
    if (!same_types(a, b)) fail("if", "branches disagree: then gives ", types_str(a), ", else gives ", types_str(b));
    return a;
  }
  return h.call(truthy(in[0], "if") ? *t : *e, args);
}

std::vector<Array> run_while(const Graph& file, const GraphNode& n, const std::vector<Array>& in, const Hooks& h) {
  AttrReader at("while", n.attrs);
  const Graph* c = file.find_subgraph(at.graph("cond"));
  const Graph* b = file.find_subgraph(at.graph("body"));
  // Small enough that a loop that never ends fails in about a second, even in eager mode.
  int64_t max_iters = at.int_or("max_iters", kDefaultMaxIters);
  if (max_iters < 0) fail("while", "max_iters must be at least 0, got ", max_iters);
  at.done();
  if (!c || !b) fail("while", "unknown subgraph");
  if (h.symbolic) {
    auto p = h.call(*c, in);
    if (p.size() != 1 || p[0].size() != 1) fail("while", "cond must return one one-element value, got ", types_str(p));
    auto next = h.call(*b, in);
    if (!same_types(in, next))
      fail("while", "body must keep the loop state's types: takes ", types_str(in), ", returns ", types_str(next));
    return in;
  }
  std::vector<Array> state = in;
  for (int64_t it = 0;; ++it) {
    auto p = h.call(*c, state);
    if (p.size() != 1) fail("while", "cond must return one value");
    if (!truthy(p[0], "while")) break;
    if (it >= max_iters)
      fail("while", "did not finish within max_iters=", max_iters, " iterations",
           n.attrs.count("max_iters") ? "" : " (the default; give max_iters for a longer loop)");
    auto next = h.call(*b, state);
    if (!same_types(state, next))
      fail("while", "body changed the loop state's types from ", types_str(state), " to ", types_str(next));
    state = std::move(next);
  }
  return state;
}

// Active extent: a reshape/broadcast_to target whose leading entry was the bucket's
// row count follows the live row count instead.
Attrs follow_rows(const GraphNode& n, const std::vector<Array>& in) {
  Attrs a = n.attrs;
  auto it = a.find("shape");
  if (it != a.end())
    if (auto* v = std::get_if<std::vector<int64_t>>(&it->second); v && !v->empty() && !in.empty() && in[0].ndim() > 0)
      (*v)[0] = in[0].shape(0);
  return a;
}

}  // namespace

std::vector<Array> run_node(const Graph& file, const Graph& g, size_t i, const Env& env, const Hooks& h) {
  const GraphNode& n = g.nodes[i];
  try {
    std::vector<Array> in;
    in.reserve(n.inputs.size());
    for (const auto& name : n.inputs) {
      auto it = env.find(name);
      if (it == env.end()) fail("graph", "undefined value '", name, "'");
      in.push_back(it->second);
    }
    std::vector<Array> out;
    if (n.op == "if")
      out = run_if(file, n, in, h);
    else if (n.op == "while")
      out = run_while(file, n, in, h);
    else if (h.follow_rows && h.follow_rows->count(&n))
      out = apply_op(n.op, in, follow_rows(n, in), n.outputs.size());
    else
      out = apply_op(n.op, in, n.attrs, n.outputs.size());
    if (out.size() != n.outputs.size())
      fail(n.op.c_str(), "produces ", out.size(), " value(s) but the node names ", n.outputs.size());
    return out;
  } catch (const Error& e) {
    std::string msg = e.what();
    // Errors from nested subgraphs already carry their own location.
    if (msg.rfind("[", 0) != 0) throw;
    throw Error(where(file, g, i) + msg);
  }
}

void run_nodes(const Graph& file, const Graph& g, size_t begin, size_t end, Env& env, const Hooks& h) {
  for (size_t i = begin; i < end; ++i) {
    const GraphNode& n = g.nodes[i];
    if (n.kind != GraphNode::Kind::op) continue;
    auto out = run_node(file, g, i, env, h);
    if (h.after_node) h.after_node(out);
    for (size_t k = 0; k < out.size(); ++k) env[n.outputs[k]] = std::move(out[k]);
  }
}

void call_each_signature_once(const Graph& file, Hooks& h) {
  using Types = std::vector<std::pair<Shape, Dtype>>;
  auto seen = std::make_shared<std::unordered_map<std::string, Types>>();  // one run's; single-threaded
  h.call = [&file, &h, seen](const Graph& sub, const std::vector<Array>& args) {
    std::string key = sub.name;
    for (const Array& a : args) {  // appended: GCC 12 warns falsely (-Wrestrict) on ";" + std::string
      key += ';';
      key += dtype_name(a.dtype());
      key += detail::shape_str(a.shape());
    }
    std::vector<Array> out;
    if (auto it = seen->find(key); it != seen->end()) {
      for (const auto& [shape, dtype] : it->second) out.push_back(broadcast_to(zeros({}, dtype), shape));
      return out;
    }
    out = call_graph(file, sub, args, h);
    Types t;
    for (const Array& a : out) t.emplace_back(a.shape(), a.dtype());
    seen->emplace(std::move(key), std::move(t));
    return out;
  };
}

std::vector<Array> call_graph(const Graph& file, const Graph& g, const std::vector<Array>& args, const Hooks& h) {
  Env env;
  size_t next_arg = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (n.kind == GraphNode::Kind::op) continue;
    if (n.kind == GraphNode::Kind::input) {
      if (next_arg >= args.size())
        throw Error(where(file, g, i) + detail::concat("[", g.name, "] called with ", args.size(), " argument(s)"));
      env[n.outputs[0]] = args[next_arg++];
    } else {
      env[n.outputs[0]] = h.leaf(n);
    }
  }
  if (next_arg != args.size()) fail(g.name.c_str(), "takes ", next_arg, " argument(s), called with ", args.size());
  run_nodes(file, g, 0, g.nodes.size(), env, h);
  std::vector<Array> out;
  for (const auto& o : g.outputs) out.push_back(env.at(o));
  return out;
}

}  // namespace kiln::runtime
