// What one run of a compiled plan did on the device, kept so that later runs replay it as a
// CUDA graph (plan_graph.cpp): its kernel launches, the host steps between them and the
// buffers it allocated.
#pragma once

#include <cuda.h>

#include <memory>
#include <vector>

#include "backend/cuda/nvrtc.h"
#include "core/buffer.h"
#include "core/tensor.h"

namespace kiln::cuda {

/* Device work a run issues from the host (a cuBLASLt product), kept so that a replay can
   capture it into its graph, or run it again between its graph launches, with the
   pointers in `words`, on this thread's stream. */
struct HostStep {
  virtual ~HostStep() = default;
  virtual void run(int device, const std::vector<long>& words) = 0;
  /* The same work with these pointers captured from this thread's stream as a graph (the
     caller destroys it), whose other buffers `keep` then holds; null where it cannot be. */
  virtual CUgraph capture(int device, const std::vector<long>& words,
                          std::vector<std::shared_ptr<detail::Buffer>>& keep) = 0;
  /* Whether a replay may capture it again with new pointers into the same graph node (a
     collective is not: it runs from the host between graph launches wherever a pointer moves). */
  virtual bool recapturable() const { return true; }
};
/* One kernel launch as a CUDA graph node holds it: function, shape and the parameter; or,
   with `host` set, a host step and the pointers it was given. */
struct LaunchRecord {
  Kernel kernel;
  unsigned grid = 0, block = 0, shared = 0;
  std::vector<long> words;  // the kernel's one by-value parameter (an argument struct), or the host step's pointers
  std::shared_ptr<HostStep> host;
};
/* The launches and allocations of one run of a compiled plan on this thread, kept so the
   run can be replayed as a CUDA graph (plan_graph.cpp). */
struct Recording {
  std::vector<LaunchRecord> launches;
  std::vector<std::shared_ptr<detail::Buffer>> buffers;  // allocated while recording
  bool replayable = true;  // false after device work that is not a recorded kernel launch
  bool interim = false;  // a fused region ran interpreted: record again once its kernel is ready
};
/* This thread's recording, or null when none is under way. */
inline Recording*& recording() {
  thread_local Recording* r = nullptr;
  return r;
}
/* Whether t's memory is fixed for the whole of the recorded run, so a kernel of its graph may read
   it before the kernels ahead of it finish: not allocated by the run, not a donated input that
   the run updates in place. False when nothing is recorded (nothing runs ahead then). */
inline bool fixed_during_recording(const detail::Tensor& t) {
  const Recording* r = recording();
  if (!r || t.donated || !t.buffer) return false;
  for (const auto& b : r->buffers)
    if (b == t.buffer) return false;
  return true;
}
/* Marks the recording (if any) as not replayable: copies and host round trips. */
inline void not_replayable() {
  if (Recording* r = recording()) r->replayable = false;
}

}  // namespace kiln::cuda
