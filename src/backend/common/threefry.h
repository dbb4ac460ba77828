// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3"), and the layout of a draw's words over counters that MLX and JAX (with
// jax_threefry_partitionable off) use. Written once: the CPU kernel and the CUDA kernel
// both include this file, so a key gives the same bits on every device.
#pragma once

#include <cstdint>

#ifndef KILN_HD
#define KILN_HD
#endif

namespace kiln::threefry {

KILN_HD inline uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* Hashes the counter pair (x0, x1) under the key (k0, k1) in place. */
KILN_HD inline void hash(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  x0 += ks[0];
  x1 += ks[1];
  // Five groups of four rounds; after group g the key words g+1, g+2 and the count g+1 go in.
  for (int g = 0; g < 5; ++g) {
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl(x1, rot[g % 2][r]);
      x1 ^= x0;
    }
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + static_cast<uint32_t>(g + 1);
  }
}

/* A draw of n words (n < 2^32) is hashed in pairs: pair j of h = ceil(n / 2) hashes the
   counters (j, h + j) into words j and h + j; when n is odd the last pair's second
   counter is 0 and its second word is dropped. Writes the pair's words to w[j] and, when
   it exists, w[h + j]. */
KILN_HD inline void pair(uint32_t k0, uint32_t k1, uint64_t n, uint64_t j, uint32_t* w) {
  const uint64_t h = (n + 1) / 2;
  uint32_t x0 = static_cast<uint32_t>(j), x1 = h + j < n ? static_cast<uint32_t>(h + j) : 0u;
  hash(k0, k1, x0, x1);
  w[j] = x0;
  if (h + j < n) w[h + j] = x1;
}

}  // namespace kiln::threefry
