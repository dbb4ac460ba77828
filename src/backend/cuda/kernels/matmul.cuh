// The batched matrix product for the types cuBLASLt does not take (integers, bool). Generated
// source includes "backend/cuda/kernels/support.cuh" before this file.
#pragma once

#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::matmul {

// y = a @ b, one thread per output (y row-major [batch..., m, n]).
template <class T>
__device__ void naive(const args::Matmul& g) {
  using CT = kiln::math::compute_t<T>;
  const long total = g.total, M = g.m, Nn = g.n, K = g.k;
  const int nb = static_cast<int>(g.batch_axes);
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* y = static_cast<T*>(g.y);
  for (long i = kiln_gid(); i < total; i += kiln_gstride()) {
    const long col = i % Nn, row = (i / Nn) % M, batch = i / (Nn * M);
    const T* pa = a + kiln_offset(batch, nb, g.batch_shape, g.a_batch_strides) + row * g.a_row_stride;
    const T* pb = b + kiln_offset(batch, nb, g.batch_shape, g.b_batch_strides) + col * g.b_col_stride;
    CT acc = CT(0);
    for (long k = 0; k < K; ++k)
      acc = kiln::math::Add{}(acc, kiln::math::Multiply{}(static_cast<CT>(pa[k * g.a_col_stride]),
                                                          static_cast<CT>(pb[k * g.b_row_stride])));
    y[i] = static_cast<T>(acc);
  }
}

}  // namespace kiln::cuda::matmul
