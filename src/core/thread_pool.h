// A process-wide pool of worker threads for data-parallel kernels.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln::detail {

/* Number of threads kernels may use (the cores, or KILN_NUM_THREADS). */
int num_threads();

/* Runs body(begin, end) over [0, n) split into chunks of at least `grain`
   elements, on the pool and the calling thread; returns when all are done.
   Runs inline when n is small, when one thread is configured, or when called
   from inside a pool task (no nested parallelism). Safe from any thread. */
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace kiln::detail
