// GGML tensor types as GGUF stores them: the table of block sizes, and the block layouts
// kiln reads (learned from ggml's documentation; block sizes checked against the gguf package).
#pragma once

#include <cstdint>

namespace kiln::llm {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  uint32_t block;  // elements per block
  uint32_t block_bytes;  // bytes per block
};

/* The type with this id, or nullptr when GGUF defines no such type. */
const GgmlTypeInfo* ggml_type_info(uint32_t id);

/* Bits per code when the type converts exactly to affine groups of 32 (4 or 8); else 0. */
int affine_bits(GgmlType t);
/* One row of `cols` elements (a multiple of the block size) as affine codes (cols bytes, one
   code each), scales and biases (cols/32 each): value = scale*code + bias, exactly. */
void affine_row(GgmlType t, const uint8_t* src, int64_t cols, uint8_t* codes, float* scales, float* biases);

/* True for the block-quantized types read by dequantizing (Q5_K, Q6_K). */
bool dequantized_type(GgmlType t);
/* One row of `cols` elements of a dequantized type to float32, as ggml computes it. */
void dequantize_row(GgmlType t, const uint8_t* src, int64_t cols, float* out);

}  // namespace kiln::llm
