// Walks a graph's nodes over a name -> Array environment. The verifier, every
// Executable mode and compiled segments all run graphs through here.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/graph.h"

namespace kiln::runtime {

using Env = std::unordered_map<std::string, Array>;

struct Hooks {
  /* Called with each op node's results (eager mode evaluates them). */
  std::function<void(const std::vector<Array>&)> after_node;
  /* Runs a subgraph on arguments (mode-specific); required for graphs with If/While. */
  std::function<std::vector<Array>(const Graph& sub, const std::vector<Array>& args)> call;
  /* Values for param and constant nodes. */
  std::function<Array(const GraphNode&)> leaf;
  /* Shape checking: If checks both branches, While checks its body once. */
  bool symbolic = false;
  /* Reshape/broadcast_to nodes whose leading target size follows their input's rows
     (active extent). */
  const std::set<const GraphNode*>* follow_rows = nullptr;
};

/* While's iteration limit when the node gives no max_iters (docs/executable.md). */
inline constexpr int64_t kDefaultMaxIters = 1 << 16;
/* "file:line:column: " for parsed nodes, else "graph 'g', node i: ". */
std::string where(const Graph& file, const Graph& g, size_t node_index);
/* The node's results; errors are rethrown with where() in front. */
std::vector<Array> run_node(const Graph& file, const Graph& g, size_t node_index, const Env& env, const Hooks& h);
/* Runs op nodes [begin, end) of g, adding their results to env. */
void run_nodes(const Graph& file, const Graph& g, size_t begin, size_t end, Env& env, const Hooks& h);
/* Binds args to g's inputs in order, resolves leaves, runs g and returns its outputs. */
std::vector<Array> call_graph(const Graph& file, const Graph& g, const std::vector<Array>& args, const Hooks& h);
/* Sets h.call for a symbolic run: each subgraph runs once per argument signature, and
   later calls get placeholders of its output types (nested If/While checked both
   branches of every level: 2^depth runs). h must outlive the run. */
void call_each_signature_once(const Graph& file, Hooks& h);
/* True when a 1-element array is non-zero; evaluates it. */
bool truthy(const Array& a, const char* op);

}  // namespace kiln::runtime
