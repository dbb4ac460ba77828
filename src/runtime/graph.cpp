// Graph queries and the builder.
#include <cstring>

#include "core/checked.h"
#include "kiln/eval.h"
#include "kiln/graph.h"

namespace kiln {

bool GraphNode::same_as(const GraphNode& o) const {
  return kind == o.kind && outputs == o.outputs && type == o.type && data == o.data && op == o.op &&
         inputs == o.inputs && attrs == o.attrs;
}

const Graph* Graph::find_subgraph(const std::string& n) const {
  for (const Graph& s : subgraphs)
    if (s.name == n) return &s;
  return nullptr;
}

std::vector<const GraphNode*> Graph::inputs() const {
  std::vector<const GraphNode*> v;
  for (const auto& n : nodes)
    if (n.kind == GraphNode::Kind::input) v.push_back(&n);
  return v;
}

std::vector<const GraphNode*> Graph::params() const {
  std::vector<const GraphNode*> v;
  for (const auto& n : nodes)
    if (n.kind == GraphNode::Kind::param) v.push_back(&n);
  return v;
}

std::map<std::string, int64_t> Graph::symbol_bounds() const {
  std::map<std::string, int64_t> bounds;
  std::map<std::string, std::string> bounded_by;  // the input whose bound holds, for the message
  for (const GraphNode* n : inputs()) {
    for (const Dim& d : n->type.dims) {
      if (!d.symbolic()) continue;
      auto it = bounds.try_emplace(d.symbol, -1).first;
      if (d.bound <= 0) continue;
      if (it->second > 0 && it->second != d.bound)
        fail("verify", "symbol ", d.symbol, " is bounded by ", it->second, " at input '", bounded_by[d.symbol],
             "' but by ", d.bound, " at input '", n->outputs[0], "'");
      if (it->second <= 0) bounded_by[d.symbol] = n->outputs[0];
      it->second = d.bound;
    }
  }
  return bounds;
}

bool Graph::same_as(const Graph& o) const {
  if (name != o.name || outputs != o.outputs || params_file != o.params_file) return false;
  if (nodes.size() != o.nodes.size() || subgraphs.size() != o.subgraphs.size()) return false;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].same_as(o.nodes[i])) return false;
  for (size_t i = 0; i < subgraphs.size(); ++i)
    if (!subgraphs[i].same_as(o.subgraphs[i])) return false;
  return true;
}

GraphBuilder::GraphBuilder(std::string name) { g_.name = std::move(name); }

std::string GraphBuilder::fresh() {
  std::string s = std::to_string(next_++);
  return s.insert(0, 1, 't');  // GCC 12 warns falsely (-Wrestrict) on "t" + to_string(...)
}

std::string GraphBuilder::input(const std::string& name, Dtype dtype, std::vector<Dim> dims) {
  GraphNode n;
  n.kind = GraphNode::Kind::input;
  n.outputs = {name};
  n.type = {dtype, std::move(dims)};
  g_.nodes.push_back(std::move(n));
  return name;
}

std::string GraphBuilder::param(const std::string& name, Dtype dtype, Shape shape) {
  GraphNode n;
  n.kind = GraphNode::Kind::param;
  n.outputs = {name};
  n.type.dtype = dtype;
  for (int64_t d : shape) n.type.dims.emplace_back(d);
  g_.nodes.push_back(std::move(n));
  return name;
}

std::string GraphBuilder::constant(const std::string& name, const Array& value) {
  Array v = value;
  v.eval();
  std::vector<uint8_t> bytes(v.nbytes());
  v.copy_to(bytes.data(), v.dtype());
  return constant(name, v.dtype(), v.shape(), bytes.data());
}

std::string GraphBuilder::constant(const std::string& name, Dtype dtype, Shape shape, const void* data) {
  GraphNode n;
  n.kind = GraphNode::Kind::constant;
  n.outputs = {name};
  n.type.dtype = dtype;
  for (int64_t d : shape) {
    if (d < 0) fail("graph", "constant '", name, "' has a negative dimension");
    n.type.dims.emplace_back(d);
  }
  detail::checked_resize("graph", n.data, static_cast<int64_t>(detail::checked_bytes("graph", shape, dtype)));
  if (!n.data.empty()) std::memcpy(n.data.data(), data, n.data.size());
  g_.nodes.push_back(std::move(n));
  return name;
}

std::string GraphBuilder::op(const std::string& op, std::vector<std::string> inputs, Attrs attrs) {
  return op_n(op, std::move(inputs), 1, std::move(attrs))[0];
}

std::vector<std::string> GraphBuilder::op_n(const std::string& op, std::vector<std::string> inputs, size_t n_outputs,
                                            Attrs attrs) {
  GraphNode n;
  n.kind = GraphNode::Kind::op;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < n_outputs; ++i) n.outputs.push_back(fresh());
  g_.nodes.push_back(n);
  return n.outputs;
}

void GraphBuilder::output(const std::vector<std::string>& names) {
  g_.outputs.insert(g_.outputs.end(), names.begin(), names.end());
}

void GraphBuilder::subgraph(Graph g) {
  auto subs = std::move(g.subgraphs);  // nested definitions flatten into the file's list
  g.subgraphs.clear();
  for (auto& s : subs) subgraph(std::move(s));
  g_.subgraphs.push_back(std::move(g));
}

void GraphBuilder::params_file(const std::string& path) { g_.params_file = path; }

Graph GraphBuilder::build() const {
  verify(g_);
  return g_;
}

}  // namespace kiln
