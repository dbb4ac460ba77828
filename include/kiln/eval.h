// Running the lazy graph, and counters that show what ran.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/array.h"

namespace kiln {

/* Computes the given arrays and everything they depend on, once per node even when
   other threads evaluate overlapping graphs at the same time. */
void eval(const std::vector<Array>& arrays);
/* Starts evaluation and returns without waiting for the results: GPU work is launched
   on the calling thread's CUDA stream (as eval does, minus the final wait); work with
   any CPU part goes to the calling thread's default CPU stream, a worker thread. A
   later eval, item or to_vector waits for it. Errors surface on that later call. */
void async_eval(const std::vector<Array>& arrays);

/* Evaluate every op as it is built (debugging). The default is on with KILN_MODE=eager. */
void set_eager(bool eager);
bool eager();

struct Stats {
  uint64_t kernels_launched = 0;  // backend kernels run (views launch none)
  uint64_t arrays_materialized = 0;  // nodes given data by evaluation
  uint64_t traces = 0;  // compile traces
  uint64_t cache_hits = 0;  // compile cache hits
  uint64_t cache_misses = 0;  // compile cache misses
  uint64_t interim_calls = 0;  // compiled calls that ran a fused region through the interpreter (its kernel not ready)
  uint64_t fused_calls = 0;  // compiled calls that ran every fused region's generated kernel (or had none)
  uint64_t fused_arrivals = 0;  // traced plans that have made their first fully fused call
  uint64_t fused_arrival_ns = 0;  // summed over those: from the cache miss until the plan's last kernel was ready
};
/* Process-wide counters (atomic; safe to read while other threads work). */
Stats stats();
void reset_stats();

}  // namespace kiln
