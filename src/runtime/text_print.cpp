// The canonical .kgraph text: subgraphs first, the entry graph last, attributes in
// name order, numbers with enough digits to read back exactly.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "kiln/graph.h"

namespace kiln {

namespace {

std::string fmt_double(double v, int digits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  std::string s(buf);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // keeps it a float when read back
  return s;
}

bool bare_word(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return s != "true" && s != "false" && s != "inf" && s != "nan";
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

std::string attr_str(const AttrValue& v) {
  struct V {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return fmt_double(d, 17); }
    std::string operator()(const std::string& s) const { return bare_word(s) ? s : quote(s); }
    std::string operator()(const GraphRef& g) const { return "@" + g.name; }
    std::string operator()(const std::vector<int64_t>& l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + std::to_string(l[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<double>& l) const {
      std::string s = "[";
      for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + fmt_double(l[i], 17);
      return s + "]";
    }
  };
  return std::visit(V{}, v);
}

std::string type_str(const TensorType& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const Dim& d = t.dims[i];
    if (i) s += ", ";
    if (d.symbolic()) {
      s += d.symbol;
      if (d.bound > 0) s += "<=" + std::to_string(d.bound);
    } else {
      s += std::to_string(d.size);
    }
  }
  return s + "]";
}

std::string element_str(Dtype dt, const uint8_t* p) {
  switch (dt) {
    case bool_: return *p ? "true" : "false";
    case uint8: return std::to_string(*p);
    case int8: return std::to_string(*reinterpret_cast<const int8_t*>(p));
    case float16: {
      float16_t h;
      std::memcpy(&h, p, 2);
      return fmt_double(static_cast<float>(h), 9);
    }
    case bfloat16: {
      bfloat16_t h;
      std::memcpy(&h, p, 2);
      return fmt_double(static_cast<float>(h), 9);
    }
    case float32: {
      float f;
      std::memcpy(&f, p, 4);
      return fmt_double(f, 9);
    }
    case float64: {
      double d;
      std::memcpy(&d, p, 8);
      return fmt_double(d, 17);
    }
    default: break;
  }
  int n = size_of(dt);
  if (is_unsigned(dt)) {
    uint64_t u = 0;
    std::memcpy(&u, p, static_cast<size_t>(n));
    return std::to_string(u);
  }
  int64_t v = 0;
  std::memcpy(&v, p, static_cast<size_t>(n));
  if (n < 8) v = (v << (64 - 8 * n)) >> (64 - 8 * n);  // sign-extend
  return std::to_string(v);
}

void print_one(std::string& out, const Graph& g) {
  out += "graph " + g.name + " {\n";
  for (const GraphNode& n : g.nodes) {
    out += "  ";
    switch (n.kind) {
      case GraphNode::Kind::input: out += "input " + n.outputs[0] + " : " + type_str(n.type); break;
      case GraphNode::Kind::param: out += "param " + n.outputs[0] + " : " + type_str(n.type); break;
      case GraphNode::Kind::constant: {
        out += "const " + n.outputs[0] + " : " + type_str(n.type) + " = [";
        size_t isz = static_cast<size_t>(size_of(n.type.dtype));
        for (size_t k = 0; k * isz < n.data.size(); ++k)
          out += (k ? ", " : "") + element_str(n.type.dtype, &n.data[k * isz]);
        out += "]";
        break;
      }
      case GraphNode::Kind::op: {
        for (size_t k = 0; k < n.outputs.size(); ++k) out += (k ? ", " : "") + n.outputs[k];
        out += " = " + n.op + "(";
        for (size_t k = 0; k < n.inputs.size(); ++k) out += (k ? ", " : "") + n.inputs[k];
        out += ")";
        if (!n.attrs.empty()) {
          out += " {";
          bool first = true;
          for (const auto& [key, v] : n.attrs) {
            out += (first ? "" : ", ") + key + "=" + attr_str(v);
            first = false;
          }
          out += "}";
        }
        break;
      }
    }
    out += "\n";
  }
  out += "  output ";
  for (size_t k = 0; k < g.outputs.size(); ++k) out += (k ? ", " : "") + g.outputs[k];
  out += "\n}\n";
}

}  // namespace

std::string print_graph(const Graph& g) {
  std::string out = "kgraph " + std::to_string(kGraphFormatVersion) + "\n";
  if (!g.params_file.empty()) out += "params " + quote(g.params_file) + "\n";
  for (const Graph& s : g.subgraphs) {
    out += "\n";
    print_one(out, s);
  }
  out += "\n";
  print_one(out, g);
  return out;
}

void save_graph(const Graph& g, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("save_graph", "cannot write '", path, "'");
  f << print_graph(g);
  if (!f) fail("save_graph", "write to '", path, "' failed");
}

}  // namespace kiln
