// Matrix products on the GPU: cuBLASLt for float16, bfloat16 (float32 accumulation),
// float32 (TF32 only when allowed) and float64; a generated kernel for the rest.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace kiln::cuda {

/* y = a @ b with batch broadcasting; y is allocated row-major on the device. */
void matmul(int device, const detail::Tensor& a, const detail::Tensor& b, detail::Tensor& y);
/* y = a @ b + bias, then GELU when `gelu` is set, all in cuBLASLt's epilogue: bias holds
   one value per column of y (y's dtype, any layout) and is the same for every batch;
   the sum (and cuBLASLt's GELU, its tanh approximation) is taken in the compute type
   (float32; float64 for float64) before y is rounded once. Returns false, y untouched,
   where cuBLASLt cannot (an integer dtype, K = 0, no algorithm for the epilogue). y is
   allocated row-major on the device. */
bool matmul_bias(int device, const detail::Tensor& a, const detail::Tensor& b, const detail::Tensor& bias, bool gelu,
                 detail::Tensor& y);
/* How often matmul_bias ran in cuBLASLt's epilogue, and how often it declined. */
struct EpilogueStats {
  uint64_t in_cublaslt = 0, declined = 0;
};
EpilogueStats matmul_epilogue_stats();
/* src (broadcast) into dst (any strides) on the device, converting the dtype (eval.cpp). */
void copy_into(int device, const detail::Tensor& src, const detail::Tensor& dst);

}  // namespace kiln::cuda
