// A compiled call on a CUDA device: its plan is recorded once per input layout and calling
// stream, then replayed as one CUDA graph launch, its cuBLASLt products captured into the
// graph, with the new input and output buffers patched into the recorded kernel parameters
// instead of recording again (a product's small per-call operands are copied through
// buffers of the graph's own; a product that cannot be captured runs from the host
// between two graph launches).
#pragma once

#include <cstdint>
#include <vector>

#include "compile/plan.h"
#include "core/tensor.h"

namespace kiln::cuda {

/* Runs the call's plan on the device (inputs already there), giving its outputs. */
void run_compiled(int device, const compiler::CompiledCall& call, const std::vector<detail::Tensor>& in,
                  std::vector<detail::Tensor>& out);

/* Compiled calls replayed as a graph launch so far (tests check graphs are used). */
uint64_t graph_replays();
/* Over all replays so far: products run from the host between graph launches, and
   products captured again because an operand too large to stage had moved. */
struct GraphStepStats {
  uint64_t host_steps = 0, recaptures = 0;
};
GraphStepStats graph_step_stats();

}  // namespace kiln::cuda
