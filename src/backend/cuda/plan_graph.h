// A compiled call on a CUDA device: its plan is recorded once per input layout and calling
// stream, then replayed as one CUDA graph launch (one per run of kernels between cuBLASLt
// products, which run from the host), with the new input and output buffers patched into
// the recorded kernel parameters and product pointers instead of recording again.
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

}  // namespace kiln::cuda
