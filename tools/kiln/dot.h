// `kiln dot`: a graph as written, in Graphviz DOT.
#pragma once

#include <ostream>

#include <kiln/kiln.h>

namespace kiln {

/* One DOT document: the entry graph's nodes, each subgraph as a cluster; inputs,
   parameters and constants labelled with their names. */
void write_graph_dot(std::ostream& os, const Graph& g);
/* Whether g (the entry graph) has If/While nodes, which run on the host: no single fused form. */
bool has_control_flow(const Graph& g);

}  // namespace kiln
