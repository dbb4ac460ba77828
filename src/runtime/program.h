// The compiled form of a graph: runs of ordinary op nodes become compiled
// functions (traced once per input signature, then replayed); If/While nodes
// stay on the host and call the compiled programs of their subgraphs.
#pragma once

#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "kiln/compile.h"
#include "runtime/interp.h"

namespace kiln::runtime {

class Program {
 public:
  /* Compiles every graph of the file; `constant` gives constant nodes' values (captured by
     the traces); follow_rows as in Hooks (may be null). */
  Program(const Graph& file, std::function<Array(const GraphNode&)> constant,
          const std::set<const GraphNode*>* follow_rows);
  /* Runs graph g (the file or one of its subgraphs) on arguments bound to its inputs;
     leaf gives this run's parameters and constants. */
  using Leaf = std::function<Array(const GraphNode&)>;
  std::vector<Array> call(const Graph& g, const std::vector<Array>& args, const Leaf& leaf) const;

 private:
  struct Step {
    size_t node = 0;  // control-flow node, when fn is empty
    CompiledFunction fn;
    std::vector<std::string> ins, outs;
  };
  struct Compiled {
    std::vector<Step> steps;
    std::unordered_set<const void*> constants;  // ids of the graph's constant arrays (captured by its steps)
  };
  std::shared_ptr<Compiled> build(const Graph& g);
  static Array pass_through(const Array& a, const Compiled& c);

  const Graph& file_;
  std::function<Array(const GraphNode&)> leaf_;
  const std::set<const GraphNode*>* follow_;
  std::unordered_map<const Graph*, std::shared_ptr<Compiled>> graphs_;  // immutable after construction
};

}  // namespace kiln::runtime
