// quantized_matmul with integer activations on the CPU (QmmActivations::int8 and int16, kiln/nn.h).
#pragma once

#include <cstdint>

#include "backend/cpu/copy.h"
#include "ops/nn.h"

namespace kiln::detail {

/* y [M, N] (float32) = x [M, K] (float32, row-major) rounded to int8 or int16 blocks of 32, times
   dequantize(w)^T for packed rows w [N, K*bits/32] with scales and biases [N, K/group] (float32,
   float16 or bfloat16, any layout). */
void quantized_matmul_integer(const float* x, int64_t m, int64_t k, const uint32_t* w, int64_t n, const Tensor& scales,
                              const Tensor& biases, const QuantParams& q, QmmActivations activations, float* y);

/* Whether the CPU has AVX-VNNI (vpdpbusd, vpdpwssd on 256-bit registers) besides AVX2. */
bool cpu_has_vnni();

/* Whether the integer kernels use VNNI where the CPU has it, else AVX2 (the same bits):
   KILN_CPU_VNNI, read at the first product, until this changes it (the tests compare the two).
   Returns the previous setting. */
bool use_cpu_vnni(bool yes);

}  // namespace kiln::detail
