// The device kernel of gathers (take, take_along_axis), which normalizes each index as it reads
// it, so a compiled call replayed as a CUDA graph needs no host round trip for them. Generated
// source includes "backend/cuda/kernels/support.cuh" (kiln_gid, kiln_offset) before this file.
#pragma once

#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::gather {

/* y[i] = a[a_off(i) + idx[idx_off(i)] * axis_stride] for elements of width sizeof(E), a
   thread an element. An index of type I counts from the end when negative and is clamped into
   [0, size), so that no gather reads outside the axis (the host checks them first wherever it
   cannot be replayed). */
template <class E, class I>
__device__ void take(const args::Gather& g) {
  const long n = g.n, as = g.axis_stride;
  const int nd = static_cast<int>(g.nd);
  E* y = static_cast<E*>(g.y);
  const E* a = static_cast<const E*>(g.a);
  const I* idx = static_cast<const I*>(g.idx);
  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {
    long k = static_cast<long>(idx[kiln_offset(i, nd, g.shape, g.idx_strides)]);
    if (k < 0) k += g.size;
    k = k < 0 ? 0 : (k >= g.size ? g.size - 1 : k);
    y[kiln_offset(i, nd, g.shape, g.y_strides)] = a[kiln_offset(i, nd, g.shape, g.a_strides) + k * as];
  }
}

}  // namespace kiln::cuda::gather
