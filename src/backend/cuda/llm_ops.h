// The language-model primitives (ops/nn.h) on a CUDA device: kernels in kernels/llm.cuh.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace kiln {
class Primitive;
}

namespace kiln::cuda {

/* Checks what the device kernels cannot (a cache update's start held on the host), before
   the inputs are uploaded; the kernels never read or write outside their operands. */
void check_llm_inputs(const Primitive& prim, const std::vector<detail::Tensor>& in);

/* Blocks of the thread-block cluster that shares each head's keys in decode attention, or 0 for
   none: on compute capability `major` with `sms` SMs, a cache of `cache_keys`, `heads` blocks
   without splits (batch x key/value heads), `decoding` when one row tile holds a head's rows,
   at most `most` blocks (KILN_CUDA_ATTENTION_CLUSTER). */
int64_t attention_cluster(int major, int64_t sms, int64_t cache_keys, int64_t heads, bool decoding, int64_t most);

/* Runs a primitive of the nn category on the device (its inputs already there). Quantize,
   a one-off at load time, runs on the host. */
void eval_llm(int device, Primitive& prim, std::vector<detail::Tensor>& in, std::vector<detail::Tensor>& out);

}  // namespace kiln::cuda
