// kiln's affine quantized format (MLX's): codes packed into uint32 words and per-group
// scales and biases, value = scale*code + bias.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/array.h"

namespace kiln::llm {

/* Packs n codes of `bits` bits (n*bits a multiple of 32) into n*bits/32 words: code j at bit
   offset j*bits counted from the low bit of the first word, spanning two words where it must. */
void pack_codes(const uint8_t* codes, int64_t n, int bits, uint32_t* words);

/* Scales and biases as arrays of `shape`: float16 when every value of both is exactly a
   float16, else float32, so that the values stay exact. */
std::pair<Array, Array> group_params(const std::vector<float>& scales, const std::vector<float>& biases,
                                     const Shape& shape);

}  // namespace kiln::llm
