// Copies that move elements without reading them: bytes from one buffer to another (the
// graph replay's staging copies), and transposing copies through tiles in shared memory.
// Generated source includes "backend/cuda/kernels/support.cuh" before this file.
#pragma once

#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::copy {

// a.bytes bytes from a.from to a.to, 16 a thread where both ends are 16-byte aligned.
__device__ inline void bytes(const args::CopyBytes& a) {
  const long n = a.bytes;
  const unsigned char* s = static_cast<const unsigned char*>(a.from);
  unsigned char* d = static_cast<unsigned char*>(a.to);
  const long n16 =
      (reinterpret_cast<unsigned long>(a.from) | reinterpret_cast<unsigned long>(a.to)) % 16 == 0 ? n / 16 : 0;
  for (long i = kiln_gid(); i < n16; i += kiln_gstride())
    reinterpret_cast<uint4*>(d)[i] = reinterpret_cast<const uint4*>(s)[i];
  for (long i = n16 * 16 + kiln_gid(); i < n; i += kiln_gstride()) d[i] = s[i];
}

// Transposing copies: dst element (b, r, c) at b * db + r * dr + c from src element
// b * sb + r + c * sc (the source runs down the destination's columns). Square tiles pass
// through shared memory, so the reads (along r) and the writes (along c) are both
// coalesced; blocks are 32 x 8 threads and tile coordinates are 32-bit (fewer than 2^31
// tiles). Arguments: args::Transpose (sb, sc, db, dr: its src_batch, src_col, dst_batch, dst_row).
struct Tiles {
  long R, C, sb, sc, db, dr;
  unsigned tiles_r, tiles_c, tiles;
  __device__ Tiles(const args::Transpose& a, int side)
      : R(a.rows),
        C(a.cols),
        sb(a.src_batch),
        sc(a.src_col),
        db(a.dst_batch),
        dr(a.dst_row),
        tiles_r(static_cast<unsigned>((R + side - 1) / side)),
        tiles_c(static_cast<unsigned>((C + side - 1) / side)),
        tiles(static_cast<unsigned>(a.batch) * tiles_r * tiles_c) {}
  // Tile t's batch and its first row and column.
  __device__ void at(unsigned t, int side, long& b, long& r0, long& c0) const {
    b = t / (tiles_r * tiles_c);
    r0 = static_cast<long>(t / tiles_c % tiles_r) * side;
    c0 = static_cast<long>(t % tiles_c) * side;
  }
};

// Elements of 4 or 8 bytes: W elements a load or store where `words` allows (8 bytes of
// 4-byte elements; tiles of 32 W on a side, 16 KiB).
template <class T>
__device__ void transpose_tiles(const args::Transpose& a) {
  constexpr int W = sizeof(T) == 4 ? 2 : 1, S = 32 * W;
  const Tiles g(a, S);
  const T* src = static_cast<const T*>(a.src);
  T* dst = static_cast<T*>(a.dst);
  const bool words = a.words != 0;
  __shared__ T tile[S][S + 1];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for (unsigned t = blockIdx.x; t < g.tiles; t += gridDim.x) {
    long b, r0, c0;
    g.at(t, S, b, r0, c0);
    const T* from = src + b * g.sb;
#pragma unroll
    for (int k = 0; k < S; k += 8) {  // W elements along r at each column c
      const long r = r0 + tx * W, c = c0 + ty + k;
      if (c >= g.C) continue;
      if (words && r + W <= g.R) {
        const kiln_vec<T, W> x = *reinterpret_cast<const kiln_vec<T, W>*>(from + r + c * g.sc);
#pragma unroll
        for (int e = 0; e < W; ++e) tile[ty + k][tx * W + e] = x.v[e];
      } else {
        for (int e = 0; e < W && r + e < g.R; ++e) tile[ty + k][tx * W + e] = from[r + e + c * g.sc];
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < S; k += 8) {  // W elements along c at each row r
      const long r = r0 + ty + k, c = c0 + tx * W;
      if (r >= g.R) continue;
      T* to = dst + b * g.db + r * g.dr;
      if (words && c + W <= g.C) {
        kiln_vec<T, W> x;
#pragma unroll
        for (int e = 0; e < W; ++e) x.v[e] = tile[tx * W + e][ty + k];
        *reinterpret_cast<kiln_vec<T, W>*>(to + c) = x;
      } else {
        for (int e = 0; e < W && c + e < g.C; ++e) to[c + e] = tile[tx * W + e][ty + k];
      }
    }
    __syncthreads();  // the tile is written again for the next one
  }
}

// P x P elements of P = 4 / sizeof(T) words transposed in registers: word j holds elements
// (0..P-1, j) on entry and (j, 0..P-1) on return.
template <int P>
__device__ inline void transpose_in_words(uint32_t (&w)[P]) {
  if constexpr (P == 2) {
    const uint32_t a = __byte_perm(w[0], w[1], 0x5410), b = __byte_perm(w[0], w[1], 0x7632);
    w[0] = a;
    w[1] = b;
  } else {  // 4 bytes: pairs interleaved, then the pairs of pairs
    const uint32_t lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
    const uint32_t lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
    w[0] = __byte_perm(lo01, lo23, 0x5410);
    w[1] = __byte_perm(lo01, lo23, 0x7632);
    w[2] = __byte_perm(hi01, hi23, 0x5410);
    w[3] = __byte_perm(hi01, hi23, 0x7632);
  }
}

// Elements of 1 or 2 bytes (T: uint8_t or uint16_t): tiles of 32 P on a side held as 4-byte
// words of P neighbours along c. Inside a tile a thread loads the words of P rows at P
// columns and transposes them in registers, so shared memory sees only whole words; tile
// row i * 32 + q holds row q * P + i, so a warp's stores fall in 32 banks. Edge tiles, and
// copies whose words are not all aligned, move one element at a time the same way.
template <class T>
__device__ void transpose_packed(const args::Transpose& a) {
  constexpr int P = 4 / sizeof(T), S = 32 * P;
  const Tiles g(a, S);
  const T* src = static_cast<const T*>(a.src);
  T* dst = static_cast<T*>(a.dst);
  const bool words = a.words != 0;
  __shared__ uint32_t tile[S][33];
  T(*elems)[33 * P] = reinterpret_cast<T(*)[33 * P]>(tile);
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  for (unsigned t = blockIdx.x; t < g.tiles; t += gridDim.x) {
    long b, r0, c0;
    g.at(t, S, b, r0, c0);
    const T* from = src + b * g.sb;
    if (words && r0 + S <= g.R && c0 + S <= g.C) {
#pragma unroll
      for (int k = 0; k < 32; k += 8) {  // word column q = ty + k: P rows at each of P columns
        uint32_t w[P];
#pragma unroll
        for (int j = 0; j < P; ++j)
          w[j] = *reinterpret_cast<const uint32_t*>(from + r0 + tx * P + (c0 + (ty + k) * P + j) * g.sc);
        transpose_in_words<P>(w);
#pragma unroll
        for (int i = 0; i < P; ++i) tile[i * 32 + tx][ty + k] = w[i];
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < S; k += 8) {  // one word along c at each row r
        const int r = ty + k;
        *reinterpret_cast<uint32_t*>(dst + b * g.db + (r0 + r) * g.dr + c0 + tx * P) = tile[r % P * 32 + r / P][tx];
      }
    } else {
      for (int k = 0; k < S; k += 8) {  // P elements along r at each column c
        const long c = c0 + ty + k;
        for (int e = 0; e < P && c < g.C; ++e) {
          const int r = tx * P + e;
          if (r0 + r < g.R) elems[e * 32 + tx][ty + k] = from[r0 + r + c * g.sc];
        }
      }
      __syncthreads();
      for (int k = 0; k < S; k += 8) {  // P elements along c at each row r
        const int r = ty + k;
        if (r0 + r >= g.R) continue;
        for (int e = 0; e < P && c0 + tx * P + e < g.C; ++e) {
          dst[b * g.db + (r0 + r) * g.dr + c0 + tx * P + e] = elems[r % P * 32 + r / P][tx * P + e];
        }
      }
    }
    __syncthreads();  // the tile is written again for the next one
  }
}

}  // namespace kiln::cuda::copy
