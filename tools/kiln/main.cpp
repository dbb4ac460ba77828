// The kiln command: run a .kgraph in each mode and time it, draw it as DOT before
// and after fusion, write deterministic parameters, and report the installation.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "dot.h"
#include "llm_commands.h"

namespace fs = std::filesystem;
using namespace kiln;

namespace {

int usage(int code) {
  std::fprintf(code ? stderr : stdout, "usage:\n%s", llm_usage());
  std::fprintf(code ? stderr : stdout,
               ""
               "  kiln run FILE [--mode eager|lazy|compiled]... [--device cpu|cuda[:N]] [--input NAME=FILE]...\n"
               "           [--bench N] [--extent N] [--seed N] [--size N] [--random-params]\n"
               "      runs FILE in each mode (all three unless --mode is given), prints a summary of each\n"
               "      output, the time per run in each mode and the largest difference between modes.\n"
               "      In compiled mode it says how many fused kernels compile in the background and which\n"
               "      tier each run used (interim: fused regions interpreted meanwhile; fused: their kernels).\n"
               "      --input takes a safetensors file (the tensor named NAME, or its only tensor);\n"
               "      inputs not given are deterministic samples, symbolic dimensions at --size (64)\n"
               "      or their bound when smaller; --extent N runs with an active extent of N rows.\n"
               "      Parameters must come from the graph's params file, unless --random-params.\n"
               "  kiln dot FILE [--fused] [--out PREFIX] [--random-params]\n"
               "      one Graphviz DOT document on stdout: the graph as written, or --fused after fusion;\n"
               "      --out writes PREFIX.dot and PREFIX.fused.dot instead\n"
               "  kiln fmt FILE              the graph in canonical text\n"
               "  kiln init-params FILE [--seed N] [--out PATH]\n"
               "      writes deterministic parameters (to the file the graph names, unless --out)\n"
               "  kiln info                  version, devices, kernel cache directory and its size, every\n"
               "                             KILN_* knob with its value and help\n");
  return code;
}

struct Options {
  std::string file;
  std::vector<ExecMode> modes;
  Device device = Device::cpu();
  std::vector<std::pair<std::string, std::string>> inputs;
  int bench = 20;
  int64_t extent = -1;
  uint64_t seed = 1;
  int64_t size = 64;  // symbolic dimensions of sample inputs (or their bound, when smaller)
  std::string out;
  bool fused = false;  // kiln dot: after fusion
  bool random_params = false;  // parameters the params file lacks: deterministic samples
};

int64_t to_int(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used == v.size()) return x;
  } catch (...) {
  }
  fail("kiln", flag, " needs an integer, got '", v, "'");
}

Options parse_args(int argc, char** argv, int first) {
  Options o;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail("kiln", a, " needs a value");
      return argv[++i];
    };
    if (a == "--mode")
      o.modes.push_back(exec_mode_from_name(value()));
    else if (a == "--device") {
      std::string d = value();
      if (d == "cpu")
        o.device = Device::cpu();
      else if (d.rfind("cuda", 0) == 0)
        o.device = Device::cuda(d.size() > 5 ? static_cast<int>(to_int(a, d.substr(5))) : 0);
      else
        fail("kiln", "unknown device '", d, "' (cpu or cuda[:N])");
    } else if (a == "--input") {
      std::string kv = value();
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) fail("kiln", "--input takes NAME=FILE, got '", kv, "'");
      o.inputs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (a == "--bench") {
      o.bench = static_cast<int>(to_int(a, value()));
      if (o.bench < 1) fail("kiln", "--bench needs at least 1");
    } else if (a == "--extent")
      o.extent = to_int(a, value());
    else if (a == "--size")
      o.size = to_int(a, value());
    else if (a == "--seed")
      o.seed = static_cast<uint64_t>(to_int(a, value()));
    else if (a == "--out")
      o.out = value();
    else if (a == "--fused")
      o.fused = true;
    else if (a == "--random-params")
      o.random_params = true;
    else if (!a.empty() && a[0] == '-')
      fail("kiln", "unknown option '", a, "'");
    else if (o.file.empty())
      o.file = a;
    else
      fail("kiln", "unexpected argument '", a, "'");
  }
  if (o.file.empty()) fail("kiln", "missing FILE");
  return o;
}

std::map<std::string, Array> gather_inputs(const Graph& g, const Options& o) {
  auto in = sample_inputs(g, o.seed, o.size);
  for (const auto& [name, path] : o.inputs) {
    if (!in.count(name)) fail("kiln", "the graph has no input '", name, "'");
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      fail("kiln", "--input ", name, "=", path, ": ", fs::exists(path, ec) ? "not a regular file" : "no such file",
           " (", fs::absolute(path, ec).string(), ")");
    std::map<std::string, Array> tensors;
    try {
      tensors = load_params(path);
    } catch (const Error& e) {
      fail("kiln", "--input ", name, "=", path, ": ", e.what());
    }
    auto it = tensors.find(name);
    if (it == tensors.end() && tensors.size() == 1) it = tensors.begin();
    if (it == tensors.end()) fail("kiln", path, " has no tensor '", name, "'");
    in[name] = it->second;
  }
  return in;
}

void summarize(const std::string& name, const Array& a) {
  auto v = astype(a, float64).to_vector<double>();
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
  std::printf("  %-12s %-8s (", name.c_str(), dtype_name(a.dtype()));
  for (int i = 0; i < a.ndim(); ++i) std::printf(i ? ",%lld" : "%lld", static_cast<long long>(a.shape(i)));
  std::printf(")  min %.6g  max %.6g  mean %.6g  first [", v.empty() ? 0.0 : lo, v.empty() ? 0.0 : hi,
              v.empty() ? 0.0 : sum / static_cast<double>(v.size()));
  for (size_t i = 0; i < std::min<size_t>(4, v.size()); ++i) std::printf(i ? ", %.5g" : "%.5g", v[i]);
  std::printf("%s]\n", v.size() > 4 ? ", ..." : "");
}

double max_diff(const std::vector<Array>& a, const std::vector<Array>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = astype(a[i], float64).to_vector<double>();
    auto y = astype(b[i], float64).to_vector<double>();
    if (x.size() != y.size()) return INFINITY;
    for (size_t k = 0; k < x.size(); ++k) {
      if (std::isnan(x[k]) && std::isnan(y[k])) continue;
      m = std::max(m, std::fabs(x[k] - y[k]));
    }
  }
  return m;
}

// Parameters the params file lacks: an error naming them, unless --random-params asks
// for deterministic samples (then said once, on stderr).
void ensure_params(Executable& exe, const Graph& g, const Options& o) {
  std::vector<std::string> missing;
  for (const GraphNode* p : g.params())
    if (!exe.has_param(p->outputs[0])) missing.push_back(p->outputs[0]);
  for (const Graph& sub : g.subgraphs)
    for (const GraphNode* p : sub.params())
      if (!exe.has_param(p->outputs[0]) && std::find(missing.begin(), missing.end(), p->outputs[0]) == missing.end())
        missing.push_back(p->outputs[0]);
  if (missing.empty()) return;
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", " : "") + missing[i];
  if (missing.size() > 8) list += ", ... (" + std::to_string(missing.size()) + " in all)";
  if (!o.random_params) {
    std::string where = g.params_file.empty() ? "the graph names no params file" : "not in " + params_path(g);
    fail("kiln", "parameters without values: ", list, " (", where,
         "); pass --random-params for deterministic samples, or write a file with kiln init-params");
  }
  static bool noted = false;  // once per command, not once per mode
  if (!noted)
    std::fprintf(stderr, "note: random parameters (seed %llu): %s\n", static_cast<unsigned long long>(o.seed),
                 list.c_str());
  noted = true;
  for (const auto& [name, a] : sample_params(g, o.seed)) {
    if (exe.has_param(name)) continue;
    std::vector<uint8_t> bytes(a.nbytes());
    a.copy_to(bytes.data(), a.dtype());
    exe.set_param_typed(name, bytes.data(), bytes.size(), a.dtype());
  }
}

// Whether --extent computes only the live rows, or falls back to the whole bucket, and why.
void say_extent(const Executable& exe, const std::map<std::string, Array>& inputs, int64_t n) {
  std::map<std::string, Shape> shapes;
  int64_t bucket = -1;
  for (const GraphNode* in : exe.graph().inputs()) {
    shapes[in->outputs[0]] = inputs.at(in->outputs[0]).shape();
    if (!in->type.dims.empty() && in->type.dims[0].symbolic()) bucket = shapes[in->outputs[0]][0];
  }
  std::string why = exe.extent_blocker(shapes);
  if (why.empty())
    std::printf("active extent: %lld of %lld rows computed\n", static_cast<long long>(n),
                static_cast<long long>(bucket));
  else
    std::printf("active extent: falls back to the full bucket (%lld rows computed, %lld returned): %s\n",
                static_cast<long long>(bucket), static_cast<long long>(n), why.c_str());
}

int cmd_run(const Options& o) {
  Graph g = load_graph(o.file);
  auto inputs = gather_inputs(g, o);
  std::vector<ExecMode> modes = o.modes;
  if (modes.empty()) modes = {ExecMode::eager, ExecMode::lazy, ExecMode::compiled};
  RunOptions ro;
  if (o.extent >= 0) ro.active_extent = o.extent;
  std::printf("%s: graph '%s', %zu nodes, device %s\n", o.file.c_str(), g.name.c_str(), g.nodes.size(),
              o.device.str().c_str());
  std::vector<std::pair<ExecMode, std::vector<Array>>> results;
  std::vector<std::unique_ptr<Executable>> kept;  // alive to the end: freeing one cancels its compiles
  for (ExecMode m : modes) {
    Executable& exe = *kept.emplace_back(std::make_unique<Executable>(g, m, o.device));
    ensure_params(exe, g, o);
    if (results.empty() && o.extent >= 0) say_extent(exe, inputs, o.extent);
    // A run is interim when a fused region ran through the interpreter, its kernel not yet compiled.
    auto interim_calls = [] { return stats().interim_calls; };
    uint64_t before = interim_calls();
    auto t0 = std::chrono::steady_clock::now();
    auto out = exe.run_typed(inputs, ro);  // the first run: traces in compiled mode
    double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const bool first_interim = interim_calls() > before;
    if (m == ExecMode::compiled) {
      if (size_t n = kernels_compiling()) {
        std::printf("compiling %zu fused kernel%s in the background; runs use the interpreter until they are ready\n",
                    n, n == 1 ? "" : "s");
      }
      std::printf("first compiled run: %.3f ms, %s tier\n", first_ms, first_interim ? "interim" : "fused");
    }
    std::vector<double> ms, interim_ms;
    for (int i = 0; i < o.bench; ++i) {
      before = interim_calls();
      t0 = std::chrono::steady_clock::now();
      exe.run_typed(inputs, ro);
      double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      (interim_calls() > before ? interim_ms : ms).push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    std::sort(interim_ms.begin(), interim_ms.end());
    if (results.empty()) {
      std::printf("outputs:\n");
      for (size_t i = 0; i < out.size(); ++i) summarize(g.outputs[i], out[i]);
      std::printf("time per run (median of %d, min):\n", o.bench);
    }
    if (!ms.empty())
      std::printf("  %-9s %9.3f ms  %9.3f ms", exec_mode_name(m), ms[ms.size() / 2], ms[0]);
    else
      std::printf("  %-9s %9s     %9s    ", exec_mode_name(m), "-", "-");
    if (!interim_ms.empty()) {
      std::printf("  (%zu of %d runs interim: %.3f ms median%s)", interim_ms.size(), o.bench,
                  interim_ms[interim_ms.size() / 2], ms.empty() ? "" : "; the rest fused");
    }
    std::printf("\n");
    results.emplace_back(m, out);
  }
  if (results.size() > 1) {
    double worst = 0;
    for (size_t i = 1; i < results.size(); ++i) {
      double d = max_diff(results[0].second, results[i].second);
      std::printf("largest difference %s vs %s: %.3g\n", exec_mode_name(results[0].first),
                  exec_mode_name(results[i].first), d);
      worst = std::max(worst, d);
    }
    std::printf("largest difference between modes: %.3g\n", worst);
  }
  if (size_t n = kernels_compiling()) {
    // Finished rather than cancelled at exit, so that the next run takes them from the disk cache.
    std::printf("waiting for %zu fused kernel%s still compiling, for the kernel cache\n", n, n == 1 ? "" : "s");
    std::fflush(stdout);
    wait_for_kernels();
  }
  return 0;
}

// Draws after fusion: the graph traced as one compiled function on sample inputs.
void write_fused_dot(std::ostream& os, const Graph& g, const Options& o) {
  Executable exe(g, ExecMode::lazy, o.device);
  ensure_params(exe, g, o);
  auto named = sample_inputs(g, o.seed, o.size);
  DotNames names;
  std::vector<Array> in;
  for (const auto& n : exe.input_names()) {
    in.push_back(named.at(n));
    names.inputs.push_back(n);
  }
  for (const GraphNode* p : g.params()) names.captured.emplace_back(exe.param(p->outputs[0]), p->outputs[0]);
  Executable* e = &exe;
  auto ins = exe.input_names();
  auto f = compile(
      [e, ins](const std::vector<Array>& args) {
        std::map<std::string, Array> m;
        for (size_t i = 0; i < ins.size(); ++i) m[ins[i]] = args[i];
        return e->build_lazy(m);
      },
      CompileOptions{false, g.name});
  export_to_dot(os, f, in, names);
}

// One document on stdout (as written, or --fused); --out PREFIX writes PREFIX.dot and
// PREFIX.fused.dot. If/While run on the host, so such graphs have no single fused form.
int cmd_dot(const Options& o) {
  Graph g = load_graph(o.file);
  const bool cf = has_control_flow(g);
  const char* why = "its If/While nodes run on the host, calling each subgraph's own compiled function";
  if (o.out.empty()) {
    if (!o.fused)
      write_graph_dot(std::cout, g);
    else if (cf)
      fail("kiln", "dot --fused: graph '", g.name, "' has no single fused form (", why, ")");
    else
      write_fused_dot(std::cout, g, o);
    std::cout.flush();
    return 0;
  }
  auto write = [](const std::string& path, auto&& body) {
    std::ofstream f(path);
    if (!f) fail("kiln", "cannot write ", path);
    body(f);
    if (!f.flush()) fail("kiln", "cannot write ", path);
    std::fprintf(stderr, "wrote %s\n", path.c_str());
  };
  write(o.out + ".dot", [&](std::ostream& os) { write_graph_dot(os, g); });
  if (cf)
    std::fprintf(stderr, "no %s.fused.dot: %s\n", o.out.c_str(), why);
  else
    write(o.out + ".fused.dot", [&](std::ostream& os) { write_fused_dot(os, g, o); });
  return 0;
}

int cmd_init_params(const Options& o) {
  Graph g = load_graph(o.file);
  std::string path = o.out;
  if (path.empty()) {
    if (g.params_file.empty()) fail("kiln", o.file, " names no params file; give --out PATH");
    path = (fs::path(o.file).parent_path() / g.params_file).string();
  }
  auto params = sample_params(g, o.seed);
  save_params(path, params);
  std::printf("wrote %zu parameters to %s\n", params.size(), path.c_str());
  return 0;
}

uint64_t dir_size(const fs::path& p) {
  std::error_code ec;
  uint64_t total = 0;
  if (!fs::exists(p, ec)) return 0;
  for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  return total;
}

// Every knob with its value now and its help; a value kiln would reject is said so.
void print_knobs() {
  std::printf("configuration (KILN_* environment variables; unset or empty: the default):\n");
  for (const ConfigKnob& k : config_knobs()) {
    std::string value = !k.value.empty() ? k.value : k.fallback.empty() ? " (unset)" : k.fallback + " (default)";
    if (!k.problem.empty()) value += "  <- not accepted: " + k.problem;
    std::printf("  %s=%s\n      %s; %s\n", k.name.c_str(), value.c_str(), k.help.c_str(), k.accepts.c_str());
  }
  for (const std::string& kv : unknown_config_variables()) std::printf("  set but not read by kiln: %s\n", kv.c_str());
}

int cmd_info() {
  std::printf("kiln %s\n", KILN_VERSION);
  int gpus = cuda_device_count();
  std::printf("devices: cpu");
  for (int i = 0; i < gpus; ++i) std::printf(", cuda:%d", i);
  if (gpus)
    std::printf("\n");
  else
    std::printf("  (no GPU: %s)\n", cuda_unavailable_reason().c_str());
  fs::path dir = kernel_cache_dir();
  std::error_code ec;
  bool exists = fs::exists(dir, ec);
  std::printf("kernel cache: %s (%s, %.1f KiB)\n", dir.c_str(), exists ? "exists" : "not created yet",
              static_cast<double>(dir_size(dir)) / 1024.0);
  print_knobs();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(2);
  std::string cmd = argv[1];
  try {
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(0);
    if (cmd == "info") return cmd_info();
    if (cmd == "run") return cmd_run(parse_args(argc, argv, 2));
    if (cmd == "dot") return cmd_dot(parse_args(argc, argv, 2));
    if (cmd == "fmt") {
      std::fputs(print_graph(load_graph(parse_args(argc, argv, 2).file)).c_str(), stdout);
      return 0;
    }
    if (cmd == "init-params") return cmd_init_params(parse_args(argc, argv, 2));
    if (cmd == "generate" || cmd == "chat" || cmd == "bench-llm") return cmd_llm(cmd, argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n", cmd.c_str());
  return usage(2);
}
