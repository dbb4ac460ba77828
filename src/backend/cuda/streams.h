// Streams: each thread has its own per device (recycled when it exits), and a block
// written on one stream is waited for once by each other stream that reads it.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "core/tensor.h"

namespace kiln::cuda {

/* This thread's default stream on the device (binds the context). */
CUstream stream(int device);
/* Waits for the work this thread queued on the device (also declared in cuda.h). */
void synchronize(int device);

/* Before a launch on this thread's stream: uploads host inputs, and makes the stream wait
   for inputs written on other streams. */
void prepare_inputs(int device, std::vector<detail::Tensor>& in);
/* After a launch: records that the outputs' blocks were written on this stream. */
void finish_outputs(int device, const std::vector<detail::Tensor>& out);
/* Times a stream was made to wait for an input written on another stream (tests check
   that each stream waits for a block once). */
size_t input_stream_waits();

}  // namespace kiln::cuda
