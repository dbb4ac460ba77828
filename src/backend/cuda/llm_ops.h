// The language-model primitives (ops/nn.h) on a CUDA device: kernels in kernels/llm.cuh.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {
class Primitive;
}

namespace kiln::cuda {

/* Checks what the device kernels cannot (a cache update's start held on the host), before
   the inputs are uploaded; the kernels never read or write outside their operands. */
void check_llm_inputs(const Primitive& prim, const std::vector<detail::Tensor>& in);

/* Runs a primitive of the nn category on the device (its inputs already there). Quantize,
   a one-off at load time, runs on the host. */
void eval_llm(int device, Primitive& prim, std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out);

}  // namespace kiln::cuda
