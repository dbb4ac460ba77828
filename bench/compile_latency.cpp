// First-call latency of compiled code, in a new process. Run it with an empty
// KILN_CACHE_DIR (cold: the kernels are not compiled yet) and again as a new process with
// the same directory (warm disk cache). Prints one JSON object on stdout.
//
//   compile_latency
//     a fresh 10-op function (sin, multiply, add) on 1k float32 elements: its first call
//     (call + eval) and the tier it ran, the second call, the time until the fused tier
//     arrived, and host time per call once fused against a function compiled under
//     KILN_FUSED_KERNELS=wait (the behaviour before tiers), interleaved in this process.
//   compile_latency --device cuda
//     the same on the GPU: its first call runs the fused region through the precompiled
//     interpreter while NVRTC compiles the kernel (docs/codegen.md, "Tiers").
//   compile_latency --graph FILE [--size N]
//     a .kgraph in compiled mode (sample inputs, symbolic dimensions at N, default 64): its
//     first run and tier, the time until every kernel was compiled, and the steady-state time
//     per run against an executable made under KILN_FUSED_KERNELS=wait, interleaved.
// bench/run_compile.sh runs both.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "core/config.h"
#include "workloads.h"

namespace {

using kiln::Array;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Medians of a and b (ms per call), alternating blocks so that load changes hit both alike.
std::pair<double, double> interleaved(const std::function<void()>& a, const std::function<void()>& b, int blocks,
                                      int per_block) {
  std::vector<double> ta, tb;
  for (int k = 0; k < blocks; ++k) {
    for (auto [fn, out] : {std::pair{&a, &ta}, std::pair{&b, &tb}}) {
      for (int i = 0; i < per_block; ++i) {
        auto t0 = Clock::now();
        (*fn)();
        out->push_back(ms_since(t0));
      }
    }
  }
  return {median(ta), median(tb)};
}

const char* tier(uint64_t interim_before) { return kiln::stats().interim_calls > interim_before ? "interim" : "fused"; }

int chain10_latency(const std::string& dir, const kiln::Device& device) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.001f - 0.5f;
  Array x = kiln::to(kiln::array(v, {static_cast<int64_t>(v.size())}), device);
  x.eval();
  // Touch eager kernels and the thread pool first, so the first compiled call pays only for compiling.
  kiln::sin(x + 1.0f).eval();

  auto f = kiln::compile(std::function<Array(const Array&)>(bench::chain10));
  auto t0 = Clock::now();
  Array y = f(x);
  y.eval();
  const double first_ms = ms_since(t0);
  const char* first_tier = tier(0);
  const size_t compiling = kiln::kernels_compiling();
  auto t1 = Clock::now();
  Array z = f(x);
  z.eval();
  const double second_us = ms_since(t1) * 1000;
  if (y.to_vector<float>() != z.to_vector<float>()) {
    std::fprintf(stderr, "compile_latency: first and second calls disagree\n");
    return 1;
  }
  kiln::wait_for_kernels();
  f(x).eval();  // the first fused call counts the arrival
  const kiln::Stats s = kiln::stats();

  // Host time per call, fused: this function against one compiled under wait.
  kiln::set_fused_kernels(kiln::FusedKernels::wait);
  auto g = kiln::compile(std::function<Array(const Array&)>(bench::chain10));
  g(x).eval();
  kiln::set_fused_kernels(kiln::FusedKernels::background);
  auto [tiered_ms, wait_ms] = interleaved([&] { f(x).eval(); }, [&] { g(x).eval(); }, 20, 200);
  std::printf(
      "{\"workload\": \"chain10\", \"device\": \"%s\", \"first_call_ms\": %.3f, \"first_tier\": \"%s\", "
      "\"kernels_compiling\": %zu, "
      "\"second_call_us\": %.3f, \"fused_arrival_ms\": %.3f, \"host_call_us\": %.3f, \"host_call_us_wait\": %.3f, "
      "\"cache_misses\": %llu, \"cache_dir\": \"%s\"}\n",
      device.str().c_str(), first_ms, first_tier, compiling, second_us, static_cast<double>(s.fused_arrival_ns) / 1e6,
      tiered_ms * 1000, wait_ms * 1000, static_cast<unsigned long long>(s.cache_misses), dir.c_str());
  return 0;
}

int graph_latency(const std::string& dir, const std::string& file, int64_t size) {
  kiln::Graph graph = kiln::load_graph(file);
  auto inputs = kiln::sample_inputs(graph, 1, size);
  auto make = [&] {
    auto exe = std::make_unique<kiln::Executable>(graph, kiln::ExecMode::compiled);
    for (const auto& [name, a] : kiln::sample_params(graph, 1)) {
      if (exe->has_param(name)) continue;
      std::vector<uint8_t> bytes(a.nbytes());
      a.copy_to(bytes.data(), a.dtype());
      exe->set_param_typed(name, bytes.data(), bytes.size(), a.dtype());
    }
    return exe;
  };
  auto exe = make();
  auto t0 = Clock::now();
  auto first = exe->run_typed(inputs);
  const double first_ms = ms_since(t0);
  const char* first_tier = tier(0);
  const size_t compiling = kiln::kernels_compiling();
  kiln::wait_for_kernels();
  const double compiled_ms = ms_since(t0);
  uint64_t before = kiln::stats().interim_calls;
  auto fused = exe->run_typed(inputs);
  const char* next_tier = tier(before);
  for (size_t i = 0; i < first.size(); ++i) {
    // The tiers agree (exactly, where eager and compiled do; the outputs are checked by the tests).
    if (first[i].to_vector<float>() != fused[i].to_vector<float>())
      std::fprintf(stderr, "compile_latency: note: output %zu differs between the tiers\n", i);
  }
  const kiln::Stats s = kiln::stats();
  kiln::set_fused_kernels(kiln::FusedKernels::wait);
  auto waited = make();
  waited->run_typed(inputs);
  kiln::set_fused_kernels(kiln::FusedKernels::background);
  auto [tiered_ms, wait_ms] = interleaved([&] { exe->run_typed(inputs); }, [&] { waited->run_typed(inputs); }, 10, 20);
  std::printf(
      "{\"workload\": \"%s\", \"first_run_ms\": %.3f, \"first_tier\": \"%s\", \"kernels_compiling\": %zu, "
      "\"all_compiled_ms\": %.3f, \"next_tier\": \"%s\", \"fused_arrival_ms\": %.3f, \"run_ms\": %.4f, "
      "\"run_ms_wait\": %.4f, \"cache_dir\": \"%s\"}\n",
      file.c_str(), first_ms, first_tier, compiling, compiled_ms, next_tier,
      static_cast<double>(s.fused_arrival_ns) / 1e6, tiered_ms, wait_ms, dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = kiln::config::text(kiln::config::Knob::cache_dir);
  if (dir.empty()) {
    std::fprintf(stderr, "compile_latency: set KILN_CACHE_DIR (empty for a cold run, reused for a warm one)\n");
    return 2;
  }
  std::string graph;
  int64_t size = 64;
  kiln::Device device = kiln::Device::cpu();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--graph" && i + 1 < argc)
      graph = argv[++i];
    else if (a == "--size" && i + 1 < argc)
      size = std::atoll(argv[++i]);
    else if (a == "--device" && i + 1 < argc && std::string(argv[i + 1]) == "cuda")
      device = kiln::Device::cuda(0), ++i;
    else if (a == "--device" && i + 1 < argc && std::string(argv[i + 1]) == "cpu")
      ++i;
    else {
      std::fprintf(stderr, "usage: compile_latency [--device cpu|cuda] [--graph FILE [--size N]]\n");
      return 2;
    }
  }
  if (!graph.empty() && device.type != kiln::Device::Type::cpu) {
    std::fprintf(stderr, "compile_latency: --graph runs on the CPU only\n");
    return 2;
  }
  try {
    return graph.empty() ? chain10_latency(dir, device) : graph_latency(dir, graph, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compile_latency: %s\n", e.what());
    return 1;
  }
}
