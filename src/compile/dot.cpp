// DOT export of lazy graphs (compiled functions: compile.cpp).
#include "compile/trace.h"
#include "kiln/compile.h"

namespace kiln {

void export_to_dot(std::ostream& os, const std::vector<Array>& outputs) {
  compiler::write_dot(os, compiler::graph_of(outputs), "kiln");
}

}  // namespace kiln
