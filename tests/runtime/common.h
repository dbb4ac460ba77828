// Helpers shared by the runtime tests: example graph paths and array comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace kiln_test {

inline std::string examples_dir() { return std::string(KILN_SOURCE_DIR) + "/examples/graphs/"; }
inline std::vector<std::string> example_graphs() {
  return {"decoder.kgraph", "mlp.kgraph", "control.kgraph", "ops_tour.kgraph", "sampling.kgraph"};
}

/* Largest absolute difference, scaled by max(1, |reference|); NaNs must match. */
inline double rel_diff(const kiln::Array& a, const kiln::Array& ref) {
  EXPECT_EQ(a.shape(), ref.shape());
  EXPECT_EQ(a.dtype(), ref.dtype());
  if (a.shape() != ref.shape()) return INFINITY;
  auto x = kiln::astype(a, kiln::float64).to_vector<double>();
  auto y = kiln::astype(ref, kiln::float64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (!(std::isnan(x[i]) && std::isnan(y[i]))) return INFINITY;
      continue;
    }
    if (x[i] == y[i]) continue;
    m = std::max(m, std::fabs(x[i] - y[i]) / std::max(1.0, std::fabs(y[i])));
  }
  return m;
}

/* The device executables of the runtime tests run on: the default device, which
   KILN_TEST_DEVICE=cuda makes the GPU (tests/cuda/device_env.cpp). */
inline kiln::Device test_device() { return kiln::default_device(); }

/* An executable of the example with its parameters set (from its file or samples). */
inline std::unique_ptr<kiln::Executable> load_example(const std::string& name, kiln::ExecMode mode,
                                                      kiln::Device device = test_device()) {
  kiln::Graph g = kiln::load_graph(examples_dir() + name);
  auto exe = std::make_unique<kiln::Executable>(g, mode, device);
  for (const auto& [pname, a] : kiln::sample_params(g)) {
    if (exe->has_param(pname)) continue;
    std::vector<uint8_t> bytes(a.nbytes());
    a.copy_to(bytes.data(), a.dtype());
    exe->set_param_typed(pname, bytes.data(), bytes.size(), a.dtype());
  }
  return exe;
}

}  // namespace kiln_test
