// kiln.Executable: programs that arrive as data (.kgraph text, docs/executable.md), run
// eagerly, lazily or compiled. Runs release the GIL.
#include <nanobind/stl/map.h>
#include <nanobind/stl/unique_ptr.h>

#include <kiln/executable.h>

#include "common.h"

namespace kpy {

namespace {

std::unique_ptr<kiln::Executable> make(kiln::Graph g, const std::optional<std::string>& mode, kiln::Device device) {
  const kiln::ExecMode m = mode ? kiln::exec_mode_from_name(*mode) : kiln::default_exec_mode();
  return std::make_unique<kiln::Executable>(std::move(g), m, device);
}

std::map<std::string, kiln::Array> inputs_arg(const nb::dict& inputs) {
  std::map<std::string, kiln::Array> out;
  for (auto [k, v] : inputs) out[nb::cast<std::string>(k)] = to_array_like(v).get();
  return out;
}

kiln::RunOptions options_arg(std::optional<int64_t> active_extent) {
  kiln::RunOptions o;
  o.active_extent = active_extent;
  return o;
}

}  // namespace

void init_executable(nb::module_& m) {
  nb::class_<kiln::Executable>(m, "Executable",
                               "A .kgraph program (docs/executable.md), run eagerly, lazily or compiled.")
      .def_static(
          "load",
          [](const std::string& path, const std::optional<std::string>& mode, kiln::Device device) {
            return make(kiln::load_graph(path), mode, device);
          },
          "path"_a, "mode"_a = nb::none(), "device"_a = kiln::Device::cpu(),
          "Reads a .kgraph file. mode: \"eager\", \"lazy\" or \"compiled\" (None: KILN_MODE, else compiled).")
      .def_static(
          "parse",
          [](const std::string& text, const std::optional<std::string>& mode, kiln::Device device) {
            return make(kiln::parse_graph(text), mode, device);
          },
          "text"_a, "mode"_a = nb::none(), "device"_a = kiln::Device::cpu(), "A program from .kgraph text.")
      .def_prop_ro("mode", [](const kiln::Executable& e) { return std::string(kiln::exec_mode_name(e.mode())); })
      .def_prop_ro("device", &kiln::Executable::device)
      .def_prop_ro("input_names", &kiln::Executable::input_names)
      .def_prop_ro("output_names", &kiln::Executable::output_names)
      .def_prop_ro(
          "text", [](const kiln::Executable& e) { return kiln::print_graph(e.graph()); },
          "The program's canonical .kgraph text.")
      .def(
          "set_param",
          [](kiln::Executable& e, const std::string& name, const ArrayLike& value) {
            kiln::Array a = value.get();
            std::vector<uint8_t> bytes(a.nbytes());
            {
              nb::gil_scoped_release nogil;
              a.copy_to(bytes.data(), a.dtype());
            }
            e.set_param_typed(name, bytes.data(), bytes.size(), a.dtype());
          },
          "name"_a, "value"_a, "Sets a parameter (copied).")
      .def("load_params", &kiln::Executable::load_params, "path"_a, "Parameters from a .safetensors file.")
      .def("has_param", &kiln::Executable::has_param, "name"_a)
      .def(
          "run",
          [](kiln::Executable& e, const nb::dict& inputs, std::optional<int64_t> active_extent) {
            auto in = inputs_arg(inputs);
            nb::gil_scoped_release nogil;
            return e.run_typed(in, options_arg(active_extent));
          },
          "inputs"_a, "active_extent"_a = nb::none(),
          "Runs on inputs by name and returns the outputs (evaluated). active_extent: only the first n\n"
          "rows of inputs with a symbolic leading axis are live.");
  m.def(
      "sample_inputs", [](const kiln::Executable& e, uint64_t seed) { return kiln::sample_inputs(e.graph(), seed); },
      "executable"_a, "seed"_a = 1, "Deterministic pseudo-random inputs for a program (floats in [-1, 1)).");
}

}  // namespace kpy
