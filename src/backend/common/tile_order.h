// Tile order: how the GPU's one-row decode product wants 4-bit transposed weights laid out.
// Each block of 16 weight rows is permuted so that a warp reads a step's 256 values of its 16
// rows, and their scales and biases, as contiguous runs; in row order the same reads ran at half
// the bandwidth on an H200's larger products. A permutation inside each 16-row block: the arrays
// keep their shapes and dtypes, and whole blocks slice and concatenate as rows do. Written once:
// the host's permutation (ops/quant_tiles.cpp) and the CUDA kernels both include this file.
#pragma once

#include <cstdint>

#ifndef KILN_HD
#define KILN_HD
#endif

namespace kiln::tile_order {

constexpr int64_t kRows = 16;  // rows of a tile
constexpr int64_t kChunk = 256;  // values of a row that a warp reads in one step

/* Whether transposed weights of n rows of k values at `bits` can take tile order. */
KILN_HD inline bool fits(int64_t n, int64_t k, int bits) { return bits == 4 && n % kRows == 0 && k % kChunk == 0; }

/* log2 of a group size of 32, 64 or 128. */
KILN_HD inline int group_bits_of(int64_t group_size) { return group_size == 32 ? 5 : group_size == 64 ? 6 : 7; }

/* Where row r's 16-byte word w (values 32w .. 32w + 31) sits in tile order, in 16-byte words.
   A step's 128 words: [half][row r or r + 8 of the tile][r mod 8][w mod 4], half = (w / 4) mod
   2, the order in which a warp's 32 lanes load four words each. */
KILN_HD inline int64_t word_at(int64_t r, int64_t w, int64_t k) {
  const int64_t tile = r >> 4, row = r & 15, step = w >> 3;  // shifts: kernels call it for every word
  return ((tile * (k >> 8) + step) * 4 + ((w >> 2) & 1) * 2 + (row >> 3)) * 32 + (row & 7) * 4 + (w & 3);
}

/* Which row of its tile (0-15) and which 16-byte word of its step (0-7) a step's word `at`
   (0-127) holds: word_at(tile * 16 + row, step * 8 + word, k) is the step's first word plus at. */
KILN_HD inline void in_step(int at, int& row, int& word) {
  row = (at >> 5 & 1) * 8 + (at >> 2 & 7);
  word = (at >> 6) * 4 + (at & 3);
}

/* Where row r's group j (of k / 2^group_bits) sits in tile order: a step's groups with rows r
   and r + 8 side by side, [row mod 8][group within the step][row / 8]. */
KILN_HD inline int64_t group_at(int64_t r, int64_t j, int64_t k, int group_bits) {
  const int step_bits = 8 - group_bits;  // log2 of a step's groups (a step is 2^8 values)
  const int64_t tile = r >> 4, row = r & 15;
  const int64_t slot = ((tile * (k >> 8) + (j >> step_bits)) * 8 + (row & 7)) << step_bits;
  return (slot + (j & ((int64_t{1} << step_bits) - 1))) * 2 + (row >> 3);
}

}  // namespace kiln::tile_order
