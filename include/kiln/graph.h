// kiln::Graph: a program as data. Inputs, parameters, constants and op nodes over
// the front-end op table, a builder, a verifier and the `.kgraph` text format
// (docs/executable.md has the grammar).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kiln/array.h"

namespace kiln {

/* The text format's version; files start with "kgraph 1". */
inline constexpr int kGraphFormatVersion = 1;

/* One dimension of a declared shape: a fixed size, or a symbol (same symbol, same
   size within one run) with an optional upper bound (-1: none). */
struct Dim {
  int64_t size = 0;
  std::string symbol;
  int64_t bound = -1;
  Dim() = default;
  Dim(int64_t s) : size(s) {}  // NOLINT: fixed sizes read naturally as integers
  static Dim sym(std::string name, int64_t upper = -1) {
    Dim d;
    d.size = -1;
    d.symbol = std::move(name);
    d.bound = upper;
    return d;
  }
  bool symbolic() const { return !symbol.empty(); }
  bool operator==(const Dim&) const = default;
};

struct TensorType {
  Dtype dtype = float32;
  std::vector<Dim> dims;
  bool operator==(const TensorType&) const = default;
};

/* A reference to another graph of the same file, written @name. */
struct GraphRef {
  std::string name;
  bool operator==(const GraphRef&) const = default;
};

/* Attribute values: integers (bools are 0/1), floats, strings (dtype names too),
   graph references and lists of integers or floats. */
using AttrValue = std::variant<int64_t, double, std::string, GraphRef, std::vector<int64_t>, std::vector<double>>;
using Attrs = std::map<std::string, AttrValue>;

/* Where a node came from in a text file (0 when built in code). */
struct SourceLoc {
  int line = 0;
  int column = 0;
  bool operator==(const SourceLoc&) const = default;
};

struct GraphNode {
  enum class Kind { input, param, constant, op };
  Kind kind = Kind::op;
  std::vector<std::string> outputs;  // value names this node defines (one unless a multi-output op)
  TensorType type;  // input, param, constant
  std::vector<uint8_t> data;  // constant: row-major elements in type.dtype
  std::string op;  // op: front-end name (add, matmul, if, while, ...)
  std::vector<std::string> inputs;  // op: value names
  Attrs attrs;  // op
  SourceLoc loc;
  /* Equal in content; source locations are ignored. */
  bool same_as(const GraphNode& o) const;
};

class Graph {
 public:
  std::string name = "main";
  std::vector<GraphNode> nodes;
  std::vector<std::string> outputs;
  SourceLoc outputs_loc;
  /* Graphs that If/While nodes call through @name; only the top-level graph has them,
     and each may only call graphs listed before it (so calls cannot recurse). */
  std::vector<Graph> subgraphs;
  /* Safetensors-layout parameter file named by the text (relative to source_path's folder). */
  std::string params_file;
  /* The file this graph was parsed from, used in error messages ("" when built in code). */
  std::string source_path;

  const Graph* find_subgraph(const std::string& name) const;
  /* Declared inputs and parameters, in node order. */
  std::vector<const GraphNode*> inputs() const;
  std::vector<const GraphNode*> params() const;
  /* Each symbol of the inputs with its upper bound (-1: none). A bound written on one
     input holds wherever the symbol appears; two different bounds are an error. */
  std::map<std::string, int64_t> symbol_bounds() const;
  /* Equal in content (nodes, outputs, subgraphs, params file); locations ignored. */
  bool same_as(const Graph& o) const;
};

/* Builds a graph node by node; op() returns the name of the value it defines. */
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name = "main");
  std::string input(const std::string& name, Dtype dtype, std::vector<Dim> dims);
  std::string param(const std::string& name, Dtype dtype, Shape shape);
  /* A constant holding the (evaluated) contents of value. */
  std::string constant(const std::string& name, const Array& value);
  std::string constant(const std::string& name, Dtype dtype, Shape shape, const void* data);
  std::string op(const std::string& op, std::vector<std::string> inputs, Attrs attrs = {});
  /* An op with several results (split, if, while). */
  std::vector<std::string> op_n(const std::string& op, std::vector<std::string> inputs, size_t n_outputs,
                                Attrs attrs = {});
  void output(const std::vector<std::string>& names);
  /* Adds a graph that If/While nodes refer to as @name. */
  void subgraph(Graph g);
  void params_file(const std::string& path);
  /* Verifies and returns the graph; throws kiln::Error when it is invalid. */
  Graph build() const;

 private:
  std::string fresh();
  Graph g_;
  int next_ = 0;
};

/* Throws kiln::Error naming the node (and file:line:column for parsed graphs) on:
   duplicate or undefined names, cycles, unknown ops, bad attributes, wrong input
   counts, shape or dtype errors (checked with symbolic dimensions bound to sample
   sizes) and mismatched If/While subgraphs. */
void verify(const Graph& g);

/* Parses `.kgraph` text; `path` appears in errors as path:line:column. Verifies. */
Graph parse_graph(const std::string& text, const std::string& path = "<text>");
/* Reads and parses a file. */
Graph load_graph(const std::string& path);
/* The canonical text; parse_graph(print_graph(g)) is the same graph. */
std::string print_graph(const Graph& g);
void save_graph(const Graph& g, const std::string& path);

/* Parameters in a safetensors-layout file (8-byte little-endian header size, JSON
   header, then data). Loading maps the file with mmap; arrays view the mapping
   and keep it alive. */
std::map<std::string, Array> load_params(const std::string& path);
void save_params(const std::string& path, const std::map<std::string, Array>& params);

}  // namespace kiln
