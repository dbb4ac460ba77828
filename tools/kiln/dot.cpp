// `kiln dot`: one Graphviz document per output, the graph as written (If/While bodies
// as clusters) or after fusion, with inputs and parameters labelled by their names.
#include "dot.h"

#include <sstream>

namespace kiln {

namespace {

// Names are letters, digits, '_' and '.' (verify), so only quotes need care; labels keep \n.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\\\"") : std::string(1, c);
  return q + "\"";
}

std::string type_str(const TensorType& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (i) s += ",";
    s += t.dims[i].symbolic() ? t.dims[i].symbol : std::to_string(t.dims[i].size);
  }
  return s + "]";
}

// One graph's nodes inside a cluster; ids are prefixed by the graph's index.
void write_body(std::ostream& os, const Graph& g, const std::string& id, const std::string& indent) {
  std::map<std::string, std::string> source;  // value name -> the DOT node that defines it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    const std::string node = id + "_" + std::to_string(i);
    for (const auto& o : n.outputs) source[o] = node;
    std::string label, shape = "box";
    switch (n.kind) {
      case GraphNode::Kind::input: label = "input " + n.outputs[0] + "\\n" + type_str(n.type); break;
      case GraphNode::Kind::param: label = "param " + n.outputs[0] + "\\n" + type_str(n.type); break;
      case GraphNode::Kind::constant: label = "const " + n.outputs[0] + "\\n" + type_str(n.type); break;
      case GraphNode::Kind::op: {
        shape = "ellipse";
        std::string outs;
        for (const auto& o : n.outputs) outs += (outs.empty() ? "" : ", ") + o;
        label = outs + " = " + n.op;
        for (const auto& [k, v] : n.attrs)
          if (auto* ref = std::get_if<GraphRef>(&v)) label += "\\n" + k + "=@" + ref->name;
      }
    }
    os << indent << node << " [shape=" << shape << ",label=" << quoted(label) << "];\n";
    for (const auto& in : n.inputs) os << indent << source.at(in) << " -> " << node << ";\n";
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    os << indent << id << "_out" << i << " [shape=doublecircle,label=" << quoted(g.outputs[i]) << "];\n";
    os << indent << source.at(g.outputs[i]) << " -> " << id << "_out" << i << ";\n";
  }
}

}  // namespace

void write_graph_dot(std::ostream& os, const Graph& g) {
  os << "digraph " << quoted(g.name) << " {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n";
  for (size_t s = 0; s < g.subgraphs.size(); ++s) {
    std::string label = "@";  // appended, not "@" + ...: GCC 12 warns falsely (-Wrestrict) on that
    label += g.subgraphs[s].name;
    std::string id = "g";
    id += std::to_string(s);
    os << "  subgraph cluster_" << s << " {\n    label=" << quoted(label) << ";\n";
    write_body(os, g.subgraphs[s], id, "    ");
    os << "  }\n";
  }
  write_body(os, g, "main", "  ");
  os << "}\n";
}

bool has_control_flow(const Graph& g) {
  for (const GraphNode& n : g.nodes)
    if (n.kind == GraphNode::Kind::op && (n.op == "if" || n.op == "while")) return true;
  return false;
}

}  // namespace kiln
