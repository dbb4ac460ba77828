// Device kernels for gathers (take, take_along_axis): index normalization on the device, so a
// compiled call replayed as a CUDA graph needs no host round trip for its indices.
// Generated source includes "kiln/cuda_support.h" (kiln_gid) before this file.
#pragma once

#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::gather {

/* A thread an index: counted from the end when negative, clamped into [0, size) so that no
   gather reads outside the axis (the host checks them first wherever it cannot be replayed). */
template <class I>
__device__ void normalize_indices(const args::Indices& a) {
  const I* in = static_cast<const I*>(a.in);
  int64_t* out = static_cast<int64_t*>(a.out);
  for (long i = kiln_gid(); i < a.n; i += kiln_gstride()) {
    long v = static_cast<long>(in[i]);
    if (v < 0) v += a.size;
    out[i] = v < 0 ? 0 : (v >= a.size ? a.size - 1 : v);
  }
}

}  // namespace kiln::cuda::gather
