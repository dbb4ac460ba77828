// kiln::compile: trace a function once per input signature, optimize the graph,
// and replay the result on later calls.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/array.h"

namespace kiln {

/* disabled: call the function directly; no_simplify: trace and replay without
   graph passes; no_fuse: passes but no fusion; enabled: everything. The default comes
   from KILN_MODE: eager and lazy disable compile, no_simplify and no_fuse are those
   modes, compiled (the default) enables it. */
enum class CompileMode { disabled, no_simplify, no_fuse, enabled };
void set_compile_mode(CompileMode mode);
CompileMode compile_mode();

struct CompileOptions {
  /* Trace once per input rank and dtype, not per shape (axes of size 1, which may be
     broadcasts, are traced apart from other sizes). */
  bool shapeless = false;
  /* Shown in warnings and DOT output. */
  std::string name = "";
};

using Function = std::function<std::vector<Array>(const std::vector<Array>&)>;

/* A compiled function: a cheap handle, callable from any number of threads. */
class CompiledFunction {
 public:
  CompiledFunction() = default;
  /* Returns lazy outputs; traces on the first call for a new input signature. */
  std::vector<Array> operator()(const std::vector<Array>& inputs) const;
  bool valid() const { return impl_ != nullptr; }

  struct Impl;
  explicit CompiledFunction(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

CompiledFunction compile(Function fn, CompileOptions options = {});

/* Helpers for functions of one, two or three arrays returning one array. */
std::function<Array(const Array&)> compile(std::function<Array(const Array&)> fn, CompileOptions options = {});
std::function<Array(const Array&, const Array&)> compile(std::function<Array(const Array&, const Array&)> fn,
                                                         CompileOptions options = {});
std::function<Array(const Array&, const Array&, const Array&)> compile(
    std::function<Array(const Array&, const Array&, const Array&)> fn, CompileOptions options = {});

/* Each compiled function keeps at most this many traced signatures (least recently
   used dropped first). Default 64. A lower value applies to a function at its next call. */
void set_compile_cache_capacity(size_t entries);
size_t compile_cache_capacity();
/* kiln warns once (on stderr, naming the function) when a function has been traced
   more than this many times. Default 32. */
void set_recompile_warning(size_t traces);

/* How compiled calls get the generated kernels of their fused CPU regions (docs/codegen.md,
   "Tiers"). background, the default: a call whose kernels are neither in memory nor in the
   disk cache runs those regions at once through the interpreter (exact, slower) while a small
   pool compiles them, and later calls use them once ready. wait: a call compiles (or waits
   for) them first, for benchmarks and tests that need generated code. off: never generated.
   The default comes from KILN_FUSED_KERNELS. */
enum class FusedKernels { background, wait, off };
void set_fused_kernels(FusedKernels policy);
FusedKernels fused_kernels();
/* Fused kernels queued or compiling in the background now. */
size_t kernels_compiling();
/* Returns when no fused kernel is queued or compiling. */
void wait_for_kernels();

/* Writes the lazy graph that produces `outputs` in Graphviz DOT. */
void export_to_dot(std::ostream& os, const std::vector<Array>& outputs);
/* Writes f's graph for these inputs after the compile passes (fused regions as single nodes). */
void export_to_dot(std::ostream& os, const CompiledFunction& f, const std::vector<Array>& inputs);
/* Labels for export_to_dot instead of "input i" and "const": the inputs' names in order,
   and captured arrays (parameters) with their names. */
struct DotNames {
  std::vector<std::string> inputs;
  std::vector<std::pair<Array, std::string>> captured;
};
void export_to_dot(std::ostream& os, const CompiledFunction& f, const std::vector<Array>& inputs,
                   const DotNames& names);

}  // namespace kiln
