// libFuzzer target for the .kgraph parser: any input either parses (and then prints
// and parses back to the same graph) or throws kiln::Error; nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <kiln/graph.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kiln::Graph g;
  try {
    g = kiln::parse_graph(text, "fuzz.kgraph");
  } catch (const kiln::Error&) {
    return 0;
  }
  std::string printed = kiln::print_graph(g);
  kiln::Graph back = kiln::parse_graph(printed, "printed.kgraph");  // must not throw
  if (!back.same_as(g) || kiln::print_graph(back) != printed) std::abort();
  return 0;
}
