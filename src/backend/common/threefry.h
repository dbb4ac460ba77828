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

/* One round: add, rotate by R, xor. */
template <int R>
KILN_HD inline void mix(uint32_t& x0, uint32_t& x1) {
  x0 += x1;
  x1 = (x1 << R) | (x1 >> (32 - R));
  x1 ^= x0;
}

/* Group G (1 to 5) of four rounds, then the key injected after it: key words G and
   G + 1 (of three) and the count G. Odd and even groups rotate by different amounts. */
template <int G>
KILN_HD inline void group(const uint32_t* ks, uint32_t& x0, uint32_t& x1) {
  if constexpr (G % 2 == 1) {
    mix<13>(x0, x1), mix<15>(x0, x1), mix<26>(x0, x1), mix<6>(x0, x1);
  } else {
    mix<17>(x0, x1), mix<29>(x0, x1), mix<16>(x0, x1), mix<24>(x0, x1);
  }
  x0 += ks[G % 3];
  x1 += ks[(G + 1) % 3] + static_cast<uint32_t>(G);
}

/* Hashes the counter pair (x0, x1) under the key (k0, k1) in place: 20 rounds, the
   rotations spelled out so every shift is a constant. */
KILN_HD inline void hash(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0];
  x1 += ks[1];
  group<1>(ks, x0, x1);
  group<2>(ks, x0, x1);
  group<3>(ks, x0, x1);
  group<4>(ks, x0, x1);
  group<5>(ks, x0, x1);
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
