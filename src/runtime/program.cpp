#include "runtime/program.h"

#include <unordered_set>

#include "core/tensor.h"
#include "runtime/ops.h"

namespace kiln::runtime {

Program::Program(const Graph& file, std::function<Array(const GraphNode&)> leaf,
                 const std::set<const GraphNode*>* follow_rows)
    : file_(file), leaf_(std::move(leaf)), follow_(follow_rows) {
  for (const Graph& s : file.subgraphs) graphs_[&s] = build(s);
  graphs_[&file] = build(file);
}

std::shared_ptr<Program::Compiled> Program::build(const Graph& g) {
  auto c = std::make_shared<Compiled>();
  // Constants are captured by the traced function; everything else it reads is an argument.
  std::unordered_set<std::string> consts;
  for (const GraphNode& n : g.nodes)
    if (n.kind == GraphNode::Kind::constant) {
      consts.insert(n.outputs[0]);
      c->constants.insert(leaf_(n).id());
    }
  std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) of op nodes between control flow
  size_t begin = SIZE_MAX;
  for (size_t i = 0; i <= g.nodes.size(); ++i) {
    bool end = i == g.nodes.size();
    bool cf = !end && g.nodes[i].kind == GraphNode::Kind::op && is_control_flow(g.nodes[i].op);
    bool op = !end && g.nodes[i].kind == GraphNode::Kind::op && !cf;
    if (op && begin == SIZE_MAX) begin = i;
    if ((cf || end) && begin != SIZE_MAX) {
      runs.emplace_back(begin, i);
      begin = SIZE_MAX;
      Step segment;
      segment.node = SIZE_MAX;  // marks a segment; filled in below
      c->steps.push_back(segment);
    }
    if (cf) {
      Step s;
      s.node = i;
      c->steps.push_back(s);
    }
  }
  size_t r = 0;
  for (size_t si = 0; si < c->steps.size(); ++si) {
    Step& s = c->steps[si];
    if (s.node != SIZE_MAX) continue;
    auto [b, e] = runs[r++];
    std::unordered_set<std::string> defined, used_later;
    std::vector<std::string> ins;
    std::unordered_set<std::string> seen;
    for (size_t i = b; i < e; ++i) {
      for (const auto& in : g.nodes[i].inputs)
        if (!defined.count(in) && !consts.count(in) && seen.insert(in).second) ins.push_back(in);
      for (const auto& o : g.nodes[i].outputs) defined.insert(o);
    }
    for (size_t i = e; i < g.nodes.size(); ++i)
      for (const auto& in : g.nodes[i].inputs) used_later.insert(in);
    for (const auto& o : g.outputs) used_later.insert(o);
    std::vector<std::string> outs;
    for (size_t i = b; i < e; ++i)
      for (const auto& o : g.nodes[i].outputs)
        if (used_later.count(o)) outs.push_back(o);
    s.ins = ins;
    s.outs = outs;
    s.node = b;
    const Graph* gp = &g;
    auto leaf = leaf_;
    auto follow = follow_;
    const Graph* file = &file_;
    std::vector<std::pair<std::string, Array>> captured;
    for (const GraphNode& n : g.nodes)
      if (n.kind == GraphNode::Kind::constant) captured.emplace_back(n.outputs[0], leaf(n));
    s.fn = compile(
        [gp, file, b, e, ins, outs, follow, captured](const std::vector<Array>& args) {
          Env env;
          for (const auto& [name, v] : captured) env[name] = v;
          for (size_t k = 0; k < ins.size(); ++k) env[ins[k]] = args[k];
          Hooks h;
          h.follow_rows = follow;
          run_nodes(*file, *gp, b, e, env, h);
          std::vector<Array> out;
          for (const auto& o : outs) out.push_back(env.at(o));
          return out;
        },
        CompileOptions{false, g.name});
  }
  return c;
}

// An If/While that returns one of g's constants unchanged hands the segment after it the
// very array the segment's trace captures; compile refuses an argument that is also
// captured, so such an argument is passed as a new array over the same data.
Array Program::pass_through(const Array& a, const Compiled& c) {
  if (c.constants.empty() || !c.constants.count(a.id())) return a;
  return Array::from_tensor(a.tensor(), a.device());
}

std::vector<Array> Program::call(const Graph& g, const std::vector<Array>& args, const Leaf& leaf) const {
  const Compiled& c = *graphs_.at(&g);
  Env env;
  size_t next = 0;
  for (const GraphNode& n : g.nodes) {
    if (n.kind == GraphNode::Kind::input) {
      if (next >= args.size()) fail(g.name.c_str(), "called with ", args.size(), " argument(s)");
      env[n.outputs[0]] = args[next++];
    } else if (n.kind != GraphNode::Kind::op) {
      env[n.outputs[0]] = leaf(n);
    }
  }
  if (next != args.size()) fail(g.name.c_str(), "takes ", next, " argument(s), called with ", args.size());
  Hooks h;
  h.leaf = leaf;
  h.follow_rows = follow_;
  h.call = [this, &leaf](const Graph& sub, const std::vector<Array>& a) { return call(sub, a, leaf); };
  for (const Step& s : c.steps) {
    if (!s.fn.valid()) {
      auto out = run_node(file_, g, s.node, env, h);
      for (size_t k = 0; k < out.size(); ++k) env[g.nodes[s.node].outputs[k]] = out[k];
      continue;
    }
    std::vector<Array> in;
    for (const auto& name : s.ins) in.push_back(pass_through(env.at(name), c));
    auto out = s.fn(in);
    for (size_t k = 0; k < out.size(); ++k) env[s.outs[k]] = out[k];
  }
  std::vector<Array> out;
  for (const auto& o : g.outputs) out.push_back(env.at(o));
  return out;
}

}  // namespace kiln::runtime
