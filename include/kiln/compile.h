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
   graph passes; no_fuse: passes but no fusion; enabled: everything. Also set by
   KILN_COMPILE_MODE=disabled|no_simplify|no_fuse|enabled. */
enum class CompileMode { disabled, no_simplify, no_fuse, enabled };
void set_compile_mode(CompileMode mode);
CompileMode compile_mode();

struct CompileOptions {
  /* Trace once per input rank and dtype, not per shape. */
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

/* Writes the graph that produces `outputs` in Graphviz DOT. */
void export_to_dot(std::ostream& os, const std::vector<Array>& outputs);

}  // namespace kiln
