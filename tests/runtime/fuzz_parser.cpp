// libFuzzer target for .kgraph files: any input either parses (and then prints and parses
// back to the same graph) or throws kiln::Error; a graph that parses and is small at its
// symbols' sample sizes then runs in lazy mode on sample inputs and parameters, where
// every failure must again be a kiln::Error. Inputs starting with "PARAMS" fuzz the
// params loader instead (the rest is a safetensors-layout file).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <kiln/executable.h>
#include <kiln/graph.h>

#include "core/mapped_file.h"
#include "kiln/ops.h"
#include "runtime/interp.h"
#include "runtime/safetensors.h"

namespace {

constexpr int64_t kSymbol = 2;  // symbolic dimensions of the inputs that run
constexpr int64_t kMaxValue = 1 << 16;  // elements of any one value of a graph that runs
constexpr int64_t kMaxTotal = 1 << 20;  // elements of all its values together

// Whether every value of g stays small on inputs of kSymbol rows (checked on placeholders,
// which cost nothing), so that running it fits the fuzzer's time and memory budget.
bool small(const kiln::Graph& g) {
  int64_t total = 0;
  bool ok = true;
  kiln::runtime::Hooks h;
  h.symbolic = true;
  h.leaf = [](const kiln::GraphNode& n) {
    kiln::Shape s;
    for (const kiln::Dim& d : n.type.dims) s.push_back(d.size);
    return kiln::broadcast_to(kiln::zeros({}, n.type.dtype), s);
  };
  h.after_node = [&](const std::vector<kiln::Array>& out) {
    for (const kiln::Array& a : out) {
      ok = ok && a.size() <= kMaxValue;
      total += a.size();
    }
    if (!ok || total > kMaxTotal) throw kiln::Error("too large to run");
  };
  kiln::runtime::call_each_signature_once(g, h);
  std::vector<kiln::Array> args;
  for (const kiln::GraphNode* n : g.inputs()) {
    kiln::Shape s;
    for (const kiln::Dim& d : n->type.dims) s.push_back(d.symbolic() ? kSymbol : d.size);
    args.push_back(kiln::broadcast_to(kiln::zeros({}, n->type.dtype), s));
  }
  try {
    kiln::runtime::call_graph(g, g, args, h);
  } catch (const kiln::Error&) {
    return false;
  }
  return ok && total <= kMaxTotal;
}

void run(const kiln::Graph& g) {
  if (!small(g)) return;
  try {
    kiln::Executable exe(g, kiln::ExecMode::lazy);
    for (const auto& [name, a] : kiln::sample_params(g)) {
      std::vector<uint8_t> bytes(a.nbytes());
      a.copy_to(bytes.data(), a.dtype());
      exe.set_param_typed(name, bytes.data(), bytes.size(), a.dtype());
    }
    for (const kiln::Array& a : exe.run_typed(kiln::sample_inputs(g, 1, kSymbol))) a.eval();
  } catch (const kiln::Error&) {
  }
}

void params(const uint8_t* data, size_t size) {
  auto file = kiln::detail::MappedFile::from_bytes("fuzz.safetensors", std::vector<uint8_t>(data, data + size));
  try {
    for (const auto& t : kiln::runtime::parse_safetensors(*file, "load_params").tensors) {
      kiln::Array a = kiln::runtime::safetensors_array(file, t);
      if (a.size() <= kMaxValue) kiln::sum(kiln::astype(a, kiln::float64)).eval();
    }
  } catch (const kiln::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.rfind("PARAMS", 0) == 0) {
    params(data + 6, size - 6);
    return 0;
  }
  kiln::Graph g;
  try {
    g = kiln::parse_graph(text, "fuzz.kgraph");
  } catch (const kiln::Error&) {
    return 0;
  }
  std::string printed = kiln::print_graph(g);
  kiln::Graph back = kiln::parse_graph(printed, "printed.kgraph");  // must not throw
  if (!back.same_as(g) || kiln::print_graph(back) != printed) std::abort();
  run(g);
  return 0;
}
