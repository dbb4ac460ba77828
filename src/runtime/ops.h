// The graph IR's op table: front-end names mapped onto kiln:: functions.
#pragma once

#include <string>
#include <vector>

#include "kiln/graph.h"

namespace kiln::runtime {

/* True for every name apply_op knows, control flow (if, while) included. */
bool is_known_op(const std::string& op);
bool is_control_flow(const std::string& op);
/* All op names, sorted (docs and error hints). */
std::vector<std::string> op_names();
/* Builds the op's lazy result; `n_outputs` is the number of names the node defines.
   Throws kiln::Error tagged with the op for bad counts, attributes or shapes. */
std::vector<Array> apply_op(const std::string& op, const std::vector<Array>& in, const Attrs& attrs, size_t n_outputs);

}  // namespace kiln::runtime
