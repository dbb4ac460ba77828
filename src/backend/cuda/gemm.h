// Matrix products on the GPU: cuBLASLt for float16, bfloat16 (float32 accumulation),
// float32 (TF32 only when allowed) and float64; a generated kernel for the rest.
#pragma once

#include "core/tensor.h"

namespace kiln::cuda {

/* y = a @ b with batch broadcasting; y is allocated row-major on the device. */
void matmul(int device, const detail::Tensor& a, const detail::Tensor& b, detail::Tensor& y);
/* src (broadcast) into dst (any strides) on the device, converting the dtype (eval.cpp). */
void copy_into(int device, const detail::Tensor& src, const detail::Tensor& dst);

}  // namespace kiln::cuda
