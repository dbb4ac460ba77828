// Scans along an axis (cumsum). Generated source includes "backend/cuda/kernels/support.cuh"
// before this file.
#pragma once

#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::scan {

// Cumulative sum along an axis, a thread a line (the other axes index the lines).
template <class T>
__device__ void cumsum(const args::Cumsum& a) {
  using A = kiln::math::compute_t<T>;
  const long lines = a.lines, len = a.length, ias = a.in_axis_stride, oas = a.out_axis_stride;
  const bool reverse = a.reverse != 0, inclusive = a.inclusive != 0;
  const int nd = static_cast<int>(a.nd);
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  for (long r = kiln_gid(); r < lines; r += kiln_gstride()) {
    const long ib = kiln_offset(r, nd, a.shape, a.in_strides), ob = kiln_offset(r, nd, a.shape, a.out_strides);
    A acc = A(0);
    for (long s = 0; s < len; ++s) {
      const long k = reverse ? len - 1 - s : s;
      const A v = static_cast<A>(in[ib + k * ias]);
      if (inclusive) acc = kiln::math::Add{}(acc, v);
      out[ob + k * oas] = static_cast<T>(acc);
      if (!inclusive) acc = kiln::math::Add{}(acc, v);
    }
  }
}

}  // namespace kiln::cuda::scan
