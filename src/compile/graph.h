// The graph form a trace is turned into: values and nodes by index, which the
// passes rewrite and lowering turns into a plan.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "ops/primitive.h"

namespace kiln {
struct DotNames;
}

namespace kiln::compiler {

struct Value {
  Shape shape;
  Dtype dtype = float32;
  int input_index = -1;  // >= 0 for function inputs
  std::optional<detail::Tensor> constant;  // data frozen at trace time
  bool is_input() const { return input_index >= 0; }
  bool is_constant() const { return constant.has_value(); }
};

struct GNode {
  std::shared_ptr<Primitive> prim;
  std::vector<int> inputs;  // value ids
  std::vector<int> outputs;  // value ids
};

struct Graph {
  std::vector<Value> values;
  std::vector<GNode> nodes;  // in an order where inputs come first
  std::vector<int> inputs;  // value id of each function input
  std::vector<int> outputs;  // value id of each function output (may repeat)

  /* Node index producing each value, -1 for inputs and constants. */
  std::vector<int> producers() const;
  /* Number of node inputs and graph outputs reading each value. */
  std::vector<int> use_counts() const;
  /* Replaces every read of value `from` by value `to`. */
  void replace_uses(int from, int to);
};

/* `nodes` (whose values live in g) reordered so each comes after the producers of its
   inputs; throws when they form a cycle. */
std::vector<GNode> topological_order(const Graph& g, std::vector<GNode> nodes);
/* A fusion's result: g's nodes less those marked in `removed`, plus `added`, in
   topological order. */
void replace_nodes(Graph& g, const std::vector<bool>& removed, std::vector<GNode> added);

/* Throws with the pass's name when the graph is malformed (reads before writes,
   dangling ids, shape mismatches between a node and its primitive). */
void verify(const Graph& g, const char* after_pass);

/* Graphviz DOT of the graph. */
void write_dot(std::ostream& os, const Graph& g, const std::string& title, const DotNames* names = nullptr);

}  // namespace kiln::compiler
