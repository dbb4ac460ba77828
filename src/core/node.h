// The graph node behind an Array, and the producer that computes one or more
// sibling nodes at once.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor.h"
#include "kiln/array.h"

namespace kiln::detail {

/* Runs a primitive once for all the nodes it produces. */
struct Producer {
  std::shared_ptr<Primitive> prim;  // immutable after construction; eval_cpu may run on any thread
  std::vector<Array> inputs;  // immutable while the producer lives
  std::mutex mu;  // guards done and results
  bool done = false;
  std::vector<Tensor> results;  // one per output, shapes and dtypes set at construction
  // Guarded by mu: a failed run after inputs were donated (their buffers may be
  // overwritten), rethrown instead of running again on spoiled inputs.
  std::exception_ptr error_after_donation;

  /* Computes the results if not yet done; inputs must already be evaluated. */
  void run(Device device);
  ~Producer();
};

struct Node {
  // shape, dtype, device, output_index and trace_id: immutable once the node is shared.
  Shape shape;
  Dtype dtype = float32;
  Device device;
  int output_index = 0;
  uint64_t trace_id = 0;  // the compile trace that built this node, 0 outside any trace

  std::atomic<bool> ready{false};  // set (release) once `tensor` holds the data
  std::mutex mu;  // guards producer and the write of tensor
  std::shared_ptr<Producer> producer;  // null for leaves and once ready
  Tensor tensor;  // valid once ready

  /* The producer while not yet evaluated, else null (takes mu). */
  std::shared_ptr<Producer> pending_producer();
  /* Evaluates this node given that its inputs are evaluated; idempotent, thread-safe. */
  void materialize();
};

/* Runs prim on `device`: a CUDA device through the CUDA backend (host inputs uploaded),
   the CPU through eval_cpu (device-resident inputs copied to the host first). */
void run_primitive(Device device, Primitive& prim, std::vector<Tensor>& in, std::vector<Tensor>& out);
/* The device of the first device-resident tensor, else the CPU. */
Device device_of(const std::vector<Tensor>& ts);

/* The id of the compile trace running on this thread, or 0. Nodes built while it is
   set belong to that trace; eager evaluation is off inside a trace. */
uint64_t current_trace_id();
void set_current_trace_id(uint64_t id);

}  // namespace kiln::detail
