// kiln::Executable: runs a kiln::Graph eagerly, lazily or compiled, with parameters,
// input handles, output feeds, asynchronous commits and an active extent.
// docs/executable.md describes the semantics, threading included.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/array.h"
#include "kiln/device.h"
#include "kiln/graph.h"

namespace kiln {

/* eager: evaluate after each node; lazy: build the whole graph, evaluate once;
   compiled: trace once per input signature, replay. */
enum class ExecMode { eager, lazy, compiled };
const char* exec_mode_name(ExecMode m);
/* Parses "eager", "lazy" or "compiled"; throws kiln::Error otherwise. */
ExecMode exec_mode_from_name(const std::string& s);
/* KILN_MODE from the environment, compiled when unset. */
ExecMode default_exec_mode();

/* Number of GPUs kiln can run on (0 when built without a CUDA backend). */
int cuda_device_count();
/* Why there is no GPU ("" when there is one): a build without the CUDA backend, or, in
   a CUDA build, what the driver said (no driver, no device, ...). */
std::string cuda_unavailable_reason();

/* Float32 host data with its shape, for run(). */
struct HostTensor {
  Shape shape;
  std::vector<float> data;
};

struct RunOptions {
  /* Only the first n rows along the leading axis of inputs whose first dimension is
     symbolic are live. Outputs that follow those rows come back with n rows. */
  std::optional<int64_t> active_extent;
};

/* Where run_slots writes output i inside the arena. */
struct OutputSlot {
  size_t offset = 0;  // bytes from the arena's start (64-byte aligned)
  size_t bytes = 0;  // capacity: the output at the symbols' upper bounds
  Shape shape;  // at the upper bounds
  Dtype dtype = float32;
};

using HandleId = int;

/* Deterministic pseudo-random inputs for g: floats in [-1, 1), integers in [0, 4),
   symbols at `symbol_size` (or their bound when smaller). For tools and tests. */
std::map<std::string, Array> sample_inputs(const Graph& g, uint64_t seed = 1, int64_t symbol_size = 8);
/* Deterministic parameters for every parameter of g: vectors near 1 (norm gains),
   matrices uniform in +-1/sqrt(rows). */
std::map<std::string, Array> sample_params(const Graph& g, uint64_t seed = 1);
/* The params file g names, resolved against the folder of g.source_path and made
   absolute ("" when g names none). */
std::string params_path(const Graph& g);

class Executable {
 public:
  /* Verifies g and prepares it; loads g.params_file when it names one. Throws for a
     CUDA device when cuda_device_count() is 0. Runs happen on `device`: parameters,
     constants and device handles are kept there, inputs are moved there on each run. */
  explicit Executable(Graph g, ExecMode mode = default_exec_mode(), Device device = Device::cpu());
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  ExecMode mode() const;
  Device device() const;
  const Graph& graph() const;
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;

  /* Parameters. set_param converts float32 data to the declared dtype; set_param_typed
     takes bytes already in the declared dtype (no widening or narrowing). */
  void set_param(const std::string& name, const float* data, size_t count);
  void set_param_typed(const std::string& name, const void* data, size_t nbytes, Dtype dtype);
  /* Sets every parameter found in a safetensors-layout file (mmap; no copy when the
     stored dtype matches). Unknown names are an error. */
  void load_params(const std::string& path);
  bool has_param(const std::string& name) const;
  /* The parameter's current value (on the executable's device); throws when unset. */
  Array param(const std::string& name) const;

  /* Float32 in and out: inputs are converted to their declared dtypes, outputs to float32. */
  std::vector<HostTensor> run(const std::map<std::string, HostTensor>& inputs, const RunOptions& opt = {});
  /* Native dtypes: inputs must match their declared dtypes; outputs are evaluated arrays
     on the executable's device (on a GPU nothing is copied back: item/to_vector do that). */
  std::vector<Array> run_typed(const std::map<std::string, Array>& inputs, const RunOptions& opt = {});
  /* Positional inputs (graph input order, declared dtype, symbols at their upper
     bounds); outputs written into `arena` at output_slot(i).offset. */
  void run_slots(const std::vector<const void*>& inputs, void* arena, const RunOptions& opt = {});
  /* The arena layout, fixed when the Executable is made (needs bounds on symbols). */
  size_t arena_bytes() const;
  const OutputSlot& output_slot(size_t i) const;

  /* Compiled mode: traces and compiles now what the first run with inputs of these
     shapes would (inputs not named: symbols at their bounds), by running the graph once
     on zeros; feeds and handles are left alone. Parameters must be set. Other modes
     compile nothing, and this does nothing. */
  void warm_compile(const std::map<std::string, Shape>& input_shapes = {});

  /* Starts a run and returns at once; results come from sync_pending, in commit order. */
  void commit_no_wait(const std::map<std::string, Array>& inputs, const RunOptions& opt = {});
  /* Waits for every committed run; the first error among them is thrown. */
  std::vector<std::vector<Array>> sync_pending();
  /* Runs each input set, overlapping the preparation of one with the evaluation of the last. */
  std::vector<std::vector<Array>> run_pipelined(const std::vector<std::map<std::string, Array>>& sets,
                                                const RunOptions& opt = {});

  /* Handles. A host handle reads caller memory (kept alive and unchanged by the caller
     while runs use it) on every run (on a GPU: one upload per run); a device handle holds
     an array kept on the executable's device (uploaded once). */
  HandleId host_handle(void* data, Shape shape, Dtype dtype);
  HandleId device_handle(const Array& value);
  /* Replaces a device handle's value (one upload), or copies into a host handle's memory. */
  void write_handle(HandleId h, const Array& value);
  /* The handle's current value (device handles: no copy). */
  Array read_handle(HandleId h) const;
  /* Input `name` reads handle h on every run where the caller does not pass it. */
  void bind_input(const std::string& name, HandleId h);
  void unbind_input(const std::string& name);
  /* After each run, output i becomes handle h's value (device handles keep the array:
     no host round trip). Runs of an executable with feeds are serialized. */
  void feed(size_t output_index, HandleId h);
  void clear_feeds();

  /* The outputs as an unevaluated lazy graph (lazy mode's build step; If/While
     conditions are still evaluated). For export_to_dot and for composing with compile. */
  std::vector<Array> build_lazy(const std::map<std::string, Array>& inputs);

  /* Why an active extent would fall back for inputs of these shapes: "" when it is
     safe, else the first node that mixes rows (and how). */
  std::string extent_blocker(const std::map<std::string, Shape>& input_shapes) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
