// The .kgraph parser: recursive descent over tokens; every error carries
// path:line:column. The result is verified before it is returned.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "kiln/graph.h"
#include "runtime/text_lexer.h"

namespace kiln {

namespace {

using runtime::Token;

bool is_keyword(const std::string& s) {
  return s == "input" || s == "param" || s == "const" || s == "output" || s == "graph" || s == "params" ||
         s == "kgraph";
}

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string path) : t_(std::move(toks)), path_(std::move(path)) {}

  Graph file() {
    expect_word("kgraph");
    const Token& v = next();
    if (v.kind != Token::Kind::number || v.text != std::to_string(kGraphFormatVersion))
      error(v, "unsupported format version '" + v.text + "' (this kiln reads version " +
                   std::to_string(kGraphFormatVersion) + ")");
    std::string params;
    while (peek_word("params")) {
      next();
      const Token& s = next();
      if (s.kind != Token::Kind::string) error(s, "expected a quoted file name after 'params'");
      params = s.text;
    }
    std::vector<Graph> graphs;
    while (peek().kind != Token::Kind::end) graphs.push_back(graph());
    if (graphs.empty()) error(peek(), "expected 'graph'");
    Graph top = std::move(graphs.back());
    graphs.pop_back();
    top.subgraphs = std::move(graphs);
    top.params_file = params;
    top.source_path = path_;
    return top;
  }

 private:
  const Token& peek(size_t k = 0) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < t_.size() - 1) ++pos_;
    return t;
  }
  bool peek_punct(const char* p, size_t k = 0) const { return peek(k).kind == Token::Kind::punct && peek(k).text == p; }
  bool peek_word(const char* w) const { return peek().kind == Token::Kind::ident && peek().text == w; }
  [[noreturn]] void error(const Token& t, const std::string& msg) const {
    throw Error(detail::concat(path_, ":", t.line, ":", t.column, ": [parse] ", msg));
  }
  std::string describe(const Token& t) const {
    if (t.kind == Token::Kind::end) return "end of file";
    if (t.kind == Token::Kind::string) return "a string";
    return "'" + t.text + "'";
  }
  void expect(const char* p) {
    if (!peek_punct(p)) error(peek(), std::string("expected '") + p + "', found " + describe(peek()));
    next();
  }
  void expect_word(const char* w) {
    if (!peek_word(w)) error(peek(), std::string("expected '") + w + "', found " + describe(peek()));
    next();
  }
  std::string ident(const char* what) {
    const Token& t = peek();
    if (t.kind != Token::Kind::ident) error(t, std::string("expected ") + what + ", found " + describe(t));
    next();
    return t.text;
  }
  std::string value_name() {
    const Token& t = peek();
    std::string s = ident("a value name");
    if (is_keyword(s)) error(t, "'" + s + "' is a keyword, not a value name");
    return s;
  }

  int64_t integer(const Token& t) {
    if (t.kind != Token::Kind::number) error(t, "expected an integer, found " + describe(t));
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.text.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0') error(t, "'" + t.text + "' is not an integer in range");
    return v;
  }

  Graph graph() {
    expect_word("graph");
    Graph g;
    g.name = ident("a graph name");
    expect("{");
    while (!peek_punct("}")) {
      if (peek().kind == Token::Kind::end) error(peek(), "unexpected end of file inside graph '" + g.name + "'");
      statement(g);
      if (peek_punct(";")) next();
    }
    expect("}");
    return g;
  }

  TensorType type() {
    TensorType tt;
    const Token& d = peek();
    std::string dn = ident("a dtype");
    try {
      tt.dtype = dtype_from_name(dn);
    } catch (const Error&) {
      error(d, "unknown dtype '" + dn + "'");
    }
    expect("[");
    if (!peek_punct("]")) {
      while (true) {
        const Token& t = peek();
        if (t.kind == Token::Kind::number) {
          int64_t v = integer(next());
          if (v < 0) error(t, "dimension must not be negative");
          tt.dims.emplace_back(v);
        } else if (t.kind == Token::Kind::ident) {
          std::string sym = next().text;
          int64_t bound = -1;
          if (peek_punct("<=")) {
            next();
            const Token& b = peek();
            bound = integer(next());
            if (bound <= 0) error(b, "a bound must be positive");
          }
          tt.dims.push_back(Dim::sym(sym, bound));
        } else {
          error(t, "expected a dimension, found " + describe(t));
        }
        if (peek_punct(",")) {
          next();
          continue;
        }
        break;
      }
    }
    expect("]");
    return tt;
  }

  // One literal element into dst, in the constant's dtype.
  void element(const Token& t, Dtype dt, uint8_t* dst) {
    bool word =
        t.kind == Token::Kind::ident && (t.text == "true" || t.text == "false" || t.text == "inf" || t.text == "nan");
    if (t.kind != Token::Kind::number && !word) error(t, "expected a number, found " + describe(t));
    if (dt == bool_) {
      uint8_t v;
      if (t.text == "true" || t.text == "1")
        v = 1;
      else if (t.text == "false" || t.text == "0")
        v = 0;
      else
        error(t, "a bool constant takes true, false, 0 or 1");
      *dst = v;
      return;
    }
    if (is_floating(dt)) {
      double v;
      if (t.text == "inf")
        v = std::numeric_limits<double>::infinity();
      else if (t.text == "-inf")
        v = -std::numeric_limits<double>::infinity();
      else if (t.text == "nan")
        v = std::numeric_limits<double>::quiet_NaN();
      else {
        if (word) error(t, "expected a number, found " + describe(t));
        char* end = nullptr;
        v = std::strtod(t.text.c_str(), &end);
        if (*end != '\0') error(t, "'" + t.text + "' is not a number");
      }
      switch (dt) {
        case float16: {
          float16_t h(static_cast<float>(v));
          std::memcpy(dst, &h, 2);
          break;
        }
        case bfloat16: {
          bfloat16_t h(static_cast<float>(v));
          std::memcpy(dst, &h, 2);
          break;
        }
        case float32: {
          float f = static_cast<float>(v);
          std::memcpy(dst, &f, 4);
          break;
        }
        default: std::memcpy(dst, &v, 8); break;
      }
      return;
    }
    if (t.kind != Token::Kind::number) error(t, "expected an integer, found " + describe(t));
    errno = 0;
    char* end = nullptr;
    if (is_unsigned(dt)) {
      if (t.text[0] == '-') error(t, "negative value for an unsigned constant");
      unsigned long long u = std::strtoull(t.text.c_str(), &end, 10);
      if (errno == ERANGE || *end != '\0') error(t, "'" + t.text + "' is not an integer in range");
      uint64_t maxv = size_of(dt) == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size_of(dt))) - 1;
      if (u > maxv) error(t, "'" + t.text + "' does not fit in " + dtype_name(dt));
      std::memcpy(dst, &u, static_cast<size_t>(size_of(dt)));  // little-endian: low bytes first
      return;
    }
    long long s = std::strtoll(t.text.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0') error(t, "'" + t.text + "' is not an integer in range");
    int bits = 8 * size_of(dt);
    if (bits < 64 && (s < -(1LL << (bits - 1)) || s >= (1LL << (bits - 1))))
      error(t, "'" + t.text + "' does not fit in " + dtype_name(dt));
    std::memcpy(dst, &s, static_cast<size_t>(size_of(dt)));
  }

  void constant_data(GraphNode& n) {
    size_t count = 1;
    for (const Dim& d : n.type.dims) {
      if (d.symbolic()) error(peek(), "a constant's shape must be fixed");
      // Large data belongs in a params file; the cap also bounds what hostile text can allocate.
      if (d.size > 0 && count > (size_t{1} << 24) / static_cast<size_t>(d.size))
        error(peek(), "constant is too large for the text format (over 16M elements)");
      count *= static_cast<size_t>(d.size);
    }
    size_t isz = static_cast<size_t>(size_of(n.type.dtype));
    n.data.assign(count * isz, 0);
    if (!peek_punct("[")) {  // one value fills the whole constant
      std::vector<uint8_t> one(isz);
      element(next(), n.type.dtype, one.data());
      for (size_t k = 0; k < count; ++k) std::memcpy(n.data.data() + k * isz, one.data(), isz);
      return;
    }
    const Token& open = next();
    size_t k = 0;
    while (!peek_punct("]")) {
      const Token& t = next();
      if (k >= count) error(t, detail::concat("too many values: the type holds ", count));
      element(t, n.type.dtype, n.data.data() + k * isz);
      ++k;
      if (peek_punct(","))
        next();
      else if (!peek_punct("]"))
        error(peek(), "expected ',' or ']', found " + describe(peek()));
    }
    next();
    if (k != count) error(open, detail::concat("constant has ", k, " values; its type holds ", count));
  }

  AttrValue attr_value() {
    const Token& t = peek();
    if (peek_punct("@")) {
      next();
      return GraphRef{ident("a graph name after '@'")};
    }
    if (t.kind == Token::Kind::string) return next().text;
    if (t.kind == Token::Kind::ident) {
      next();
      if (t.text == "true") return int64_t{1};
      if (t.text == "false") return int64_t{0};
      if (t.text == "inf") return std::numeric_limits<double>::infinity();
      if (t.text == "nan") return std::numeric_limits<double>::quiet_NaN();
      return t.text;
    }
    if (t.kind == Token::Kind::number) return number(next());
    if (peek_punct("[")) {
      next();
      std::vector<AttrValue> items;
      while (!peek_punct("]")) {
        const Token& e = peek();
        if (e.kind != Token::Kind::number && !(e.kind == Token::Kind::ident && (e.text == "inf" || e.text == "nan")))
          error(e, "list attributes hold numbers; found " + describe(e));
        items.push_back(attr_value());
        if (peek_punct(","))
          next();
        else if (!peek_punct("]"))
          error(peek(), "expected ',' or ']', found " + describe(peek()));
      }
      next();
      bool any_float = false;
      for (auto& v : items) any_float |= std::holds_alternative<double>(v);
      if (any_float) {
        std::vector<double> f;
        for (auto& v : items)
          f.push_back(std::holds_alternative<double>(v) ? std::get<double>(v)
                                                        : static_cast<double>(std::get<int64_t>(v)));
        return f;
      }
      std::vector<int64_t> ints;
      for (auto& v : items) ints.push_back(std::get<int64_t>(v));
      return ints;
    }
    error(t, "expected an attribute value, found " + describe(t));
  }

  AttrValue number(const Token& t) {
    if (t.text == "-inf") return -std::numeric_limits<double>::infinity();
    bool is_float = t.text.find_first_of(".eE") != std::string::npos;
    if (!is_float) return integer(t);
    char* end = nullptr;
    double v = std::strtod(t.text.c_str(), &end);
    if (*end != '\0') error(t, "'" + t.text + "' is not a number");
    return v;
  }

  void statement(Graph& g) {
    const Token& first = peek();
    auto decl = [&](GraphNode::Kind kind) {
      next();
      GraphNode n;
      n.kind = kind;
      n.loc = {first.line, first.column};
      n.outputs = {value_name()};
      expect(":");
      n.type = type();
      if (kind == GraphNode::Kind::constant) {
        expect("=");
        constant_data(n);
      }
      g.nodes.push_back(std::move(n));
    };
    if (peek_word("input")) return decl(GraphNode::Kind::input);
    if (peek_word("param")) return decl(GraphNode::Kind::param);
    if (peek_word("const")) return decl(GraphNode::Kind::constant);
    if (peek_word("output")) {
      next();
      if (!g.outputs.empty()) error(first, "graph '" + g.name + "' already has an output statement");
      g.outputs_loc = {first.line, first.column};
      g.outputs.push_back(value_name());
      while (peek_punct(",")) {
        next();
        g.outputs.push_back(value_name());
      }
      return;
    }
    GraphNode n;
    n.kind = GraphNode::Kind::op;
    n.loc = {first.line, first.column};
    n.outputs.push_back(value_name());
    while (peek_punct(",")) {
      next();
      n.outputs.push_back(value_name());
    }
    expect("=");
    n.op = ident("an op name");
    expect("(");
    if (!peek_punct(")")) {
      n.inputs.push_back(value_name());
      while (peek_punct(",")) {
        next();
        n.inputs.push_back(value_name());
      }
    }
    expect(")");
    if (peek_punct("{")) {
      next();
      while (!peek_punct("}")) {
        const Token& k = peek();
        std::string key = ident("an attribute name");
        expect("=");
        if (n.attrs.count(key)) error(k, "attribute '" + key + "' is given twice");
        n.attrs[key] = attr_value();
        if (peek_punct(","))
          next();
        else if (!peek_punct("}"))
          error(peek(), "expected ',' or '}', found " + describe(peek()));
      }
      next();
    }
    g.nodes.push_back(std::move(n));
  }

  std::vector<Token> t_;
  std::string path_;
  size_t pos_ = 0;
};

}  // namespace

Graph parse_graph(const std::string& text, const std::string& path) {
  Parser p(runtime::tokenize(text, path), path);
  Graph g = p.file();
  verify(g);
  return g;
}

Graph load_graph(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("load_graph", "cannot open '", path, "': ", std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_graph(ss.str(), path);
}

}  // namespace kiln
