// A lowered graph: the kernel launches of a compiled function with the values
// they read and write, replayed without tracing or building graph nodes.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "compile/graph.h"

namespace kiln::compiler {

struct Step {
  std::shared_ptr<Primitive> prim;
  std::vector<int> inputs;  // register slots
  std::vector<int> outputs;  // register slots
  std::vector<int> release;  // slots no longer needed after this step
};

// Immutable once lowered: one plan is replayed by many threads at once (run is const,
// registers are per call), so its steps' primitives must not change in eval_cpu.
struct Plan {
  size_t num_values = 0;  // register slots: values the steps touch
  std::vector<int> inputs;  // slot per function input
  std::vector<std::pair<int, detail::Tensor>> constants;  // slot, frozen data
  std::vector<Step> steps;
  size_t kernels = 0;  // steps that launch work (not views)
  std::vector<int> outputs;  // slot per function output
  std::vector<Shape> shapes;  // each slot's shape at trace time
  std::vector<Dtype> dtypes;  // each slot's dtype
  bool shapeless = false;
  int64_t miss_ns = 0;  // steady clock: when the cache miss that traced this plan began
  mutable std::atomic<bool> fused_arrived{false};  // a call has run every fused region compiled (stats)
  // CUDA graphs of this plan by device and input layout (backend/cuda/plan_graph.cpp).
  mutable std::shared_mutex gpu_graphs_mu;
  mutable std::shared_ptr<void> gpu_graphs;  // guarded by gpu_graphs_mu

  /* Output shapes for the given input shapes (re-inferred step by step when shapeless). */
  std::vector<Shape> output_shapes(const std::vector<Shape>& input_shapes) const;
  /* Runs the steps on evaluated inputs, returning the outputs. */
  std::vector<detail::Tensor> run(const std::vector<detail::Tensor>& inputs) const;
};

/* Lowers an optimized graph: orders steps, and frees each intermediate after its last use
   so its buffer can serve a later step. */
std::shared_ptr<const Plan> lower(const Graph& g, bool shapeless);

/* The primitive behind a compiled call's outputs: one node that runs a whole plan. */
class CompiledCall : public Primitive {
 public:
  explicit CompiledCall(std::shared_ptr<const Plan> plan) : Primitive(OpKind::CompiledCall), plan_(std::move(plan)) {}
  void eval_cpu(const std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out) override;
  std::vector<Shape> output_shapes(const std::vector<Shape>& in) const override { return plan_->output_shapes(in); }
  bool is_equivalent(const Primitive& o) const override {
    return o.kind() == kind() && static_cast<const CompiledCall&>(o).plan_ == plan_;
  }
  const Plan& plan() const { return *plan_; }

 private:
  std::shared_ptr<const Plan> plan_;
};

}  // namespace kiln::compiler
