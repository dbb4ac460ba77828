// Device kernels for gathers (take, take_along_axis): index normalization on the device, so a
// compiled call replayed as a CUDA graph needs no host round trip for its indices, and the
// gather itself. Generated source includes "backend/cuda/kernels/support.cuh" (kiln_gid,
// kiln_offset) before this file.
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

/* y[i] = a[a_off(i) + idx[idx_off(i)] * axis_stride] for elements of width sizeof(E), a
   thread an element; the indices are normalized int64 (normalize_indices). */
template <class E>
__device__ void take(const args::Gather& g) {
  const long n = g.n, as = g.axis_stride;
  const int nd = static_cast<int>(g.nd);
  E* y = static_cast<E*>(g.y);
  const E* a = static_cast<const E*>(g.a);
  const long* idx = static_cast<const long*>(g.idx);
  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {
    const long k = idx[kiln_offset(i, nd, g.shape, g.idx_strides)];
    y[kiln_offset(i, nd, g.shape, g.y_strides)] = a[kiln_offset(i, nd, g.shape, g.a_strides) + k * as];
  }
}

}  // namespace kiln::cuda::gather
