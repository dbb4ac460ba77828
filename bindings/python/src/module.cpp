// The extension module kiln._kiln: dtypes, devices, errors, settings and counters, then the
// parts defined in the other files. The package kiln (kiln/__init__.py) re-exports it.
#include "common.h"

namespace kpy {

void init_dtypes(nb::module_& m) {
  nb::enum_<kiln::Dtype> dtype(m, "Dtype", "An element type. kiln.float32 and the others are its members.");
  for (int i = 0; i < kiln::kNumDtypes; ++i) {
    auto d = static_cast<kiln::Dtype>(i);
    dtype.value(kiln::dtype_name(d) == std::string("bool") ? "bool_" : kiln::dtype_name(d), d);
  }
  dtype.export_values();
  dtype.def_prop_ro(
      "itemsize", [](kiln::Dtype d) { return kiln::size_of(d); }, "Bytes per element.");
  m.def("promote_types", &kiln::promote_types, "a"_a, "b"_a,
        "The dtype two array operands combine to (docs/dtypes.md has the table).");
  m.def("is_floating", &kiln::is_floating, "dtype"_a);
  m.def("is_integral", &kiln::is_integral, "dtype"_a, "Integers, not bool.");
  m.def("is_unsigned", &kiln::is_unsigned, "dtype"_a);
}

namespace {

void init_devices(nb::module_& m) {
  nb::class_<kiln::Device> device(m, "Device", "Where an array lives: the CPU or a CUDA device.");
  nb::enum_<kiln::Device::Type>(device, "Type")
      .value("cpu", kiln::Device::Type::cpu)
      .value("cuda", kiln::Device::Type::cuda);
  device.def(nb::init<kiln::Device::Type, int>(), "type"_a, "index"_a = 0)
      .def_rw("type", &kiln::Device::type)
      .def_rw("index", &kiln::Device::index)
      .def("__eq__", [](const kiln::Device& a, const kiln::Device& b) { return a == b; })
      .def("__hash__", [](const kiln::Device& d) { return static_cast<int>(d.type) * 1024 + d.index; })
      .def("__repr__", [](const kiln::Device& d) { return "Device(" + d.str() + ")"; })
      .def("__str__", &kiln::Device::str);
  m.attr("cpu") = kiln::Device::cpu();
  m.def("cuda", &kiln::Device::cuda, "index"_a = 0, "The CUDA device of that index.");
  m.def("default_device", &kiln::default_device, "The device new arrays are placed on.");
  m.def("set_default_device", &kiln::set_default_device, "device"_a);
  m.def("cuda_available", &kiln::cuda_available, "Whether kiln was built with CUDA and finds a driver and a GPU.");
  m.def("cuda_device_count", &kiln::cuda_device_count);
  m.def(
      "to",
      [](const kiln::Array& a, kiln::Device d) {
        nb::gil_scoped_release nogil;
        return kiln::to(a, d);
      },
      "a"_a, "device"_a, "The array's data on `device` (evaluates, then copies).");
}

void init_settings(nb::module_& m) {
  m.def("set_eager", &kiln::set_eager, "eager"_a, "Evaluate every op as it is built (debugging).");
  m.def("eager", &kiln::eager);
  nb::enum_<kiln::CompileMode>(m, "CompileMode", "What kiln.compile does (KILN_MODE sets the default).")
      .value("disabled", kiln::CompileMode::disabled)
      .value("no_simplify", kiln::CompileMode::no_simplify)
      .value("no_fuse", kiln::CompileMode::no_fuse)
      .value("enabled", kiln::CompileMode::enabled);
  m.def("set_compile_mode", &kiln::set_compile_mode, "mode"_a);
  m.def("compile_mode", &kiln::compile_mode);
  nb::enum_<kiln::FusedKernels>(m, "FusedKernels",
                                "How compiled calls get the generated kernels of their fused CPU regions "
                                "(KILN_FUSED_KERNELS sets the default; docs/codegen.md, \"Tiers\").")
      .value("background", kiln::FusedKernels::background,
             "Interpret a region whose kernel is not ready while a pool compiles it (the default).")
      .value("wait", kiln::FusedKernels::wait, "A call compiles (or waits for) its kernels first.")
      .value("off", kiln::FusedKernels::off, "Never generate kernels: the interpreter runs fused regions.");
  m.def("set_fused_kernels", &kiln::set_fused_kernels, "policy"_a, "Process-wide, from the next compiled call on.");
  m.def("fused_kernels", &kiln::fused_kernels);
  m.def("set_compile_cache_capacity", &kiln::set_compile_cache_capacity, "entries"_a,
        "Traced signatures each compiled function keeps (least recently used dropped first).");
  m.def("compile_cache_capacity", &kiln::compile_cache_capacity);
  m.def(
      "stats",
      [] {
        kiln::Stats s = kiln::stats();
        nb::dict d;
        d["kernels_launched"] = s.kernels_launched;
        d["arrays_materialized"] = s.arrays_materialized;
        d["traces"] = s.traces;
        d["cache_hits"] = s.cache_hits;
        d["cache_misses"] = s.cache_misses;
        d["interim_calls"] = s.interim_calls;
        d["fused_calls"] = s.fused_calls;
        d["fused_arrivals"] = s.fused_arrivals;
        d["fused_arrival_ns"] = s.fused_arrival_ns;
        return d;
      },
      "Process-wide counters: kernels launched, arrays materialized, compile traces, cache hits and misses, "
      "compiled calls per tier (interim, fused) and the time until plans reached the fused tier.");
  m.def("reset_stats", &kiln::reset_stats);
}

}  // namespace

nb::module_ random_module(nb::module_& m) {
  if (nb::hasattr(m, "random")) return nb::borrow<nb::module_>(m.attr("random"));
  return m.def_submodule("random", "Counter-based random numbers (Threefry-2x32) under explicit keys.");
}

}  // namespace kpy

NB_MODULE(_kiln, m) {
  m.doc() = "kiln: lazy arrays, compile with fused kernels, language models. Import it as `kiln`.";
  nb::exception<kiln::Error>(m, "Error", PyExc_ValueError);
  kpy::init_dtypes(m);
  kpy::init_devices(m);
  kpy::init_settings(m);
  kpy::init_array(m);
  kpy::init_generated_ops(m);
  kpy::init_class_ops(m);
  kpy::init_compile(m);
  kpy::init_executable(m);
  kpy::init_llm(m);
}
