#include "compile/graph.h"

#include <sstream>

#include "core/buffer.h"
#include "kiln/compile.h"

namespace kiln::compiler {

std::vector<int> Graph::producers() const {
  std::vector<int> p(values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int v : nodes[n].outputs) p[static_cast<size_t>(v)] = static_cast<int>(n);
  }
  return p;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> c(values.size(), 0);
  for (auto& n : nodes) {
    for (int v : n.inputs) ++c[static_cast<size_t>(v)];
  }
  for (int v : outputs) ++c[static_cast<size_t>(v)];
  return c;
}

void Graph::replace_uses(int from, int to) {
  for (auto& n : nodes) {
    for (int& v : n.inputs) v = v == from ? to : v;
  }
  for (int& v : outputs) v = v == from ? to : v;
}

std::vector<GNode> topological_order(const Graph& g, std::vector<GNode> nodes) {
  std::vector<int> prod(g.values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int v : nodes[n].outputs) prod[static_cast<size_t>(v)] = static_cast<int>(n);
  }
  std::vector<int> state(nodes.size(), 0);  // 0 new, 1 visiting, 2 done
  std::vector<size_t> order;
  for (size_t root = 0; root < nodes.size(); ++root) {
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (state[n] == 2) {
        stack.pop_back();
        continue;
      }
      state[n] = 1;
      if (next < nodes[n].inputs.size()) {
        int p = prod[static_cast<size_t>(nodes[n].inputs[next++])];
        if (p >= 0 && state[static_cast<size_t>(p)] == 0)
          stack.push_back({static_cast<size_t>(p), 0});
        else if (p >= 0 && state[static_cast<size_t>(p)] == 1)
          fail("compile", "fusion created a cycle");
        continue;
      }
      state[n] = 2;
      order.push_back(n);
      stack.pop_back();
    }
  }
  std::vector<GNode> out;
  for (size_t n : order) out.push_back(std::move(nodes[n]));
  return out;
}

void replace_nodes(Graph& g, const std::vector<bool>& removed, std::vector<GNode> added) {
  std::vector<GNode> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!removed[n]) kept.push_back(std::move(g.nodes[n]));
  }
  for (auto& a : added) kept.push_back(std::move(a));
  g.nodes = topological_order(g, std::move(kept));
}

void verify(const Graph& g, const char* after_pass) {
  auto bad = [&](const auto&... parts) { fail("compile", "graph invalid after pass '", after_pass, "': ", parts...); };
  std::vector<bool> defined(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v) {
    defined[v] = g.values[v].is_input() || g.values[v].is_constant();
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const GNode& node = g.nodes[n];
    std::vector<Shape> in_shapes;
    for (int v : node.inputs) {
      if (v < 0 || static_cast<size_t>(v) >= g.values.size()) bad("node ", n, " reads unknown value ", v);
      if (!defined[static_cast<size_t>(v)])
        bad("node ", n, " (", node.prim->name(), ") reads value ", v, " before it is written");
      in_shapes.push_back(g.values[static_cast<size_t>(v)].shape);
    }
    auto shapes = node.prim->output_shapes(in_shapes);
    if (shapes.size() != node.outputs.size())
      bad("node ", n, " has ", node.outputs.size(), " outputs, primitive gives ", shapes.size());
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      int v = node.outputs[i];
      if (defined[static_cast<size_t>(v)]) bad("value ", v, " written twice");
      if (shapes[i] != g.values[static_cast<size_t>(v)].shape) {
        bad("node ", n, " (", node.prim->name(), ") output shape ", detail::shape_str(shapes[i]), " differs from ",
            detail::shape_str(g.values[static_cast<size_t>(v)].shape));
      }
      defined[static_cast<size_t>(v)] = true;
    }
  }
  for (int v : g.outputs) {
    if (!defined[static_cast<size_t>(v)]) bad("output value ", v, " is never written");
  }
}

// An input's or captured array's label: its name when `names` has one.
static std::string leaf_label(const Value& val, const DotNames* names) {
  if (val.is_input()) {
    const size_t i = static_cast<size_t>(val.input_index);
    if (names && i < names->inputs.size()) return names->inputs[i];
    std::string label = "input ";  // appended, not "input " + ...: GCC 12 warns falsely (-Wrestrict) on that
    return label += std::to_string(i);
  }
  if (names && val.constant->buffer) {
    for (const auto& [a, name] : names->captured)
      if (a.is_evaluated() && a.tensor().buffer && a.tensor().buffer->data() == val.constant->buffer->data() &&
          a.shape() == val.shape)
        return name;
  }
  return "const";
}

void write_dot(std::ostream& os, const Graph& g, const std::string& title, const DotNames* names) {
  os << "digraph \"" << title << "\" {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n";
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    if (val.is_input() || val.is_constant()) {
      os << "  v" << v << " [shape=box,label=\"" << leaf_label(val, names) << "\\n"
         << dtype_name(val.dtype) << detail::shape_str(val.shape) << "\"];\n";
    }
  }
  auto prod = g.producers();
  auto source = [&](int v) {
    int p = prod[static_cast<size_t>(v)];
    std::string id(1, p >= 0 ? 'n' : 'v');
    return id += std::to_string(p >= 0 ? p : v);
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    std::ostringstream label;
    g.nodes[n].prim->print(label);
    std::string text = label.str();
    for (auto& c : text) c = c == '"' ? '\'' : c;
    os << "  n" << n << " [shape=ellipse,label=\"" << text << "\"];\n";
    for (int v : g.nodes[n].inputs) os << "  " << source(v) << " -> n" << n << ";\n";
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    os << "  out" << i << " [shape=doublecircle,label=\"out " << i << "\"];\n";
    os << "  " << source(g.outputs[i]) << " -> out" << i << ";\n";
  }
  os << "}\n";
}

}  // namespace kiln::compiler
