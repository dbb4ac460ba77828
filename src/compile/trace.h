// Tracing: run the user's function on placeholder arrays and turn what it built
// into a Graph.
#pragma once

#include "compile/graph.h"
#include "kiln/compile.h"

namespace kiln::compiler {

/* Traces fn on placeholders shaped like `inputs`. Arrays fn captures from outside
   become constants (evaluated now); capturing an array that is also passed as an
   input is an error. Exceptions from fn propagate. */
Graph trace(const Function& fn, const std::vector<Array>& inputs);

/* The unevaluated graph behind `outputs`, for display (leaves become data-less constants). */
Graph graph_of(const std::vector<Array>& outputs);

/* True while this thread is inside a trace (compiled calls are then inlined). */
bool tracing();

}  // namespace kiln::compiler
