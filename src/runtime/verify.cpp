// The verifier: structure first (names, ops, references, cycles), then shapes and
// dtypes by running the graph on placeholders with symbols bound to sample sizes.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "kiln/ops.h"
#include "runtime/interp.h"
#include "runtime/ops.h"

namespace kiln {

namespace {

using runtime::where;

[[noreturn]] void bad(const Graph& file, const Graph& g, size_t i, const std::string& msg) {
  throw Error(where(file, g, i) + "[verify] " + msg);
}

bool valid_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

// Words the text format reserves, so printed graphs always parse again.
bool reserved(const std::string& s) {
  return s == "input" || s == "param" || s == "const" || s == "output" || s == "graph" || s == "params" ||
         s == "kgraph";
}

// A name defined after its use: either a cycle (reported with its path) or a misordering.
[[noreturn]] void late_use(const Graph& file, const Graph& g, size_t i, const std::string& name,
                           const std::unordered_map<std::string, size_t>& def) {
  // Depth-first search from the definition back to node i, with a stack of its own (one
  // recursion per node overflowed on a chain of 150,000); parent links give the path.
  const size_t start = def.at(name);
  std::unordered_map<size_t, size_t> parent{{start, start}};
  std::vector<size_t> stack{start};
  bool found = start == i;
  size_t last = start;  // the node that uses i's value
  while (!found && !stack.empty()) {
    const size_t k = stack.back();
    stack.pop_back();
    for (const auto& in : g.nodes[k].inputs) {
      auto it = def.find(in);
      if (it == def.end()) continue;
      if (it->second == i) {
        found = true;
        last = k;
        break;
      }
      if (parent.emplace(it->second, k).second) stack.push_back(it->second);
    }
  }
  if (found) {
    std::vector<size_t> path;  // start's successors on the way to i, then i
    if (start != i) {
      for (size_t k = last; k != start; k = parent.at(k)) path.push_back(k);
      std::reverse(path.begin(), path.end());
      path.push_back(i);
    }
    std::string s = g.nodes[i].outputs[0];
    for (size_t j = 0; j < path.size(); ++j) {
      if (path.size() > 16 && j == 8) {  // a long cycle: its ends, not megabytes of names
        s += " -> ... (" + std::to_string(path.size() - 16) + " more)";
        j = path.size() - 8;
      }
      s += " -> " + g.nodes[path[j]].outputs[0];
    }
    bad(file, g, i, "cycle: '" + g.nodes[i].outputs[0] + "' depends on itself (" + name + " <- " + s + ")");
  }
  bad(file, g, i, "'" + name + "' is used before its definition");
}

void check_structure(const Graph& file, const Graph& g, size_t sub_index) {
  if (g.nodes.empty() && g.outputs.empty())
    throw Error(detail::concat("graph '", g.name, "': [verify] graph is empty"));
  std::unordered_map<std::string, size_t> def;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (n.outputs.empty()) bad(file, g, i, "node defines no value");
    if (n.kind != GraphNode::Kind::op && n.outputs.size() != 1) bad(file, g, i, "a declaration defines one value");
    for (const auto& o : n.outputs) {
      if (!valid_name(o) || reserved(o)) bad(file, g, i, "invalid value name '" + o + "'");
      if (!def.emplace(o, i).second) bad(file, g, i, "'" + o + "' is defined twice");
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    int64_t count = 1;
    for (const Dim& d : n.type.dims) {
      if (d.symbolic()) {
        if (n.kind != GraphNode::Kind::input) bad(file, g, i, "only inputs may have symbolic dimensions");
        if (!valid_name(d.symbol)) bad(file, g, i, "invalid dimension symbol '" + d.symbol + "'");
        if (d.bound == 0 || d.bound < -1) bad(file, g, i, "symbol " + d.symbol + " needs a positive bound");
        // At their bounds the symbols must fit as fixed sizes do (arena layout, sample inputs).
        if (d.bound > 0 && count > (int64_t{1} << 40) / d.bound)
          bad(file, g, i, "shape is too large at its symbols' bounds");
        if (d.bound > 0) count *= d.bound;
      } else {
        if (d.size < 0) bad(file, g, i, "negative dimension " + std::to_string(d.size));
        if (d.size > 0 && count > (int64_t{1} << 40) / d.size) bad(file, g, i, "shape is too large");
        count *= d.size;
      }
    }
    if (n.kind == GraphNode::Kind::constant &&
        n.data.size() != static_cast<size_t>(count) * static_cast<size_t>(size_of(n.type.dtype)))
      bad(file, g, i,
          detail::concat("constant holds ", n.data.size(), " bytes; its type needs ", count * size_of(n.type.dtype)));
    if (n.kind != GraphNode::Kind::op) continue;
    if (!runtime::is_known_op(n.op)) bad(file, g, i, "unknown op '" + n.op + "'");
    for (const auto& in : n.inputs) {
      auto it = def.find(in);
      if (it == def.end()) bad(file, g, i, "undefined value '" + in + "'");
      if (it->second >= i) late_use(file, g, i, in, def);
    }
    for (const auto& [k, v] : n.attrs) {
      if (!valid_name(k)) bad(file, g, i, "invalid attribute name '" + k + "'");
      auto* ref = std::get_if<GraphRef>(&v);
      if (!ref) continue;
      size_t limit = sub_index;  // a subgraph may call only those listed before it
      bool found = false;
      for (size_t s = 0; s < limit && s < file.subgraphs.size(); ++s) found |= file.subgraphs[s].name == ref->name;
      if (!found) {
        bool later = file.find_subgraph(ref->name) != nullptr;
        bad(file, g, i,
            later ? "@" + ref->name + " is not defined before graph '" + g.name + "' (no recursion)"
                  : "unknown graph @" + ref->name);
      }
    }
  }
  if (g.outputs.empty()) throw Error(detail::concat("graph '", g.name, "': [verify] graph has no outputs"));
  for (const auto& o : g.outputs)
    if (!def.count(o)) {
      std::string at = g.outputs_loc.line > 0 ? detail::concat(file.source_path.empty() ? "<text>" : file.source_path,
                                                               ":", g.outputs_loc.line, ":", g.outputs_loc.column, ": ")
                                              : detail::concat("graph '", g.name, "': ");
      throw Error(at + "[verify] output '" + o + "' is not defined");
    }
}

Array placeholder(Dtype dtype, const Shape& shape) { return broadcast_to(zeros({}, dtype), shape); }

}  // namespace

void verify(const Graph& g) {
  std::unordered_set<std::string> names;
  for (size_t s = 0; s < g.subgraphs.size(); ++s) {
    const Graph& sub = g.subgraphs[s];
    if (!valid_name(sub.name)) fail("verify", "invalid graph name '", sub.name, "'");
    if (!names.insert(sub.name).second) fail("verify", "graph '", sub.name, "' is defined twice");
    if (!sub.subgraphs.empty()) fail("verify", "graph '", sub.name, "': subgraphs are listed at the top level only");
    check_structure(g, sub, s);
  }
  if (names.count(g.name)) fail("verify", "graph '", g.name, "' is defined twice");
  check_structure(g, g, g.subgraphs.size());

  // Parameters are shared by name across the file, so their declarations must agree.
  std::unordered_map<std::string, TensorType> params;
  auto check_params = [&](const Graph& x) {
    for (size_t i = 0; i < x.nodes.size(); ++i) {
      const GraphNode& n = x.nodes[i];
      if (n.kind != GraphNode::Kind::param) continue;
      auto [it, fresh] = params.emplace(n.outputs[0], n.type);
      if (!fresh && !(it->second == n.type))
        bad(g, x, i, "parameter '" + n.outputs[0] + "' is declared with two types");
    }
  };
  for (const Graph& s : g.subgraphs) check_params(s);
  check_params(g);

  runtime::Hooks h;
  h.symbolic = true;
  h.leaf = [](const GraphNode& n) {
    Shape s;
    for (const Dim& d : n.type.dims) s.push_back(d.size);
    return placeholder(n.type.dtype, s);
  };
  runtime::call_each_signature_once(g, h);
  std::map<std::string, int64_t> bounds;
  try {
    bounds = g.symbol_bounds();
  } catch (const Error& e) {
    if (g.source_path.empty()) throw;
    throw Error(g.source_path + ": " + e.what());
  }
  std::vector<Array> args;
  for (const GraphNode* n : g.inputs()) {
    Shape s;
    for (const Dim& d : n->type.dims) {
      const int64_t b = d.symbolic() ? bounds.at(d.symbol) : 0;
      s.push_back(d.symbolic() ? (b > 0 ? b : 8) : d.size);
    }
    args.push_back(placeholder(n->type.dtype, s));
  }
  runtime::call_graph(g, g, args, h);
}

}  // namespace kiln
