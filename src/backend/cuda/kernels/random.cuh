// Random words on the device: a thread a Threefry pair (backend/common/threefry.h, the CPU's
// bits), the key read on the device. Generated source includes
// "backend/cuda/kernels/support.cuh" before this file.
#pragma once

#include "backend/common/threefry.h"
#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::random {

// a.n random words into a.out from the key's two words (a.key_stride apart).
__device__ inline void bits(const args::RandomBits& a) {
  const unsigned long n = static_cast<unsigned long>(a.n);
  const uint32_t* key = static_cast<const uint32_t*>(a.key);
  const uint32_t k0 = key[0], k1 = key[a.key_stride];
  uint32_t* out = static_cast<uint32_t*>(a.out);
  for (long j = kiln_gid(); j < static_cast<long>((n + 1) / 2); j += kiln_gstride()) {
    kiln::threefry::pair(k0, k1, n, static_cast<unsigned long>(j), out);
  }
}

}  // namespace kiln::cuda::random
