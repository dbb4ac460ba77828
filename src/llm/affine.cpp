#include "llm/affine.h"

#include <cmath>
#include <cstring>

namespace kiln::llm {

void pack_codes(const uint8_t* codes, int64_t n, int bits, uint32_t* words) {
  std::memset(words, 0, static_cast<size_t>(n * bits / 32) * sizeof(uint32_t));
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t j = 0; j < n; ++j) {
    const uint64_t bit = static_cast<uint64_t>(j) * static_cast<uint64_t>(bits);
    const uint32_t code = codes[j] & mask;
    const unsigned shift = bit % 32;
    words[bit / 32] |= code << shift;
    if (shift + static_cast<unsigned>(bits) > 32) words[bit / 32 + 1] |= code >> (32 - shift);
  }
}

namespace {
bool exact_in_half(float v) { return std::isnan(v) || static_cast<float>(float16_t(v)) == v; }
}  // namespace

std::pair<Array, Array> group_params(const std::vector<float>& scales, const std::vector<float>& biases,
                                     const Shape& shape) {
  bool half = true;
  for (float v : scales) half = half && exact_in_half(v);
  for (float v : biases) half = half && exact_in_half(v);
  if (!half) return {array(scales, shape), array(biases, shape)};
  std::vector<float16_t> hs(scales.begin(), scales.end()), hb(biases.begin(), biases.end());
  return {array(hs, shape), array(hb, shape)};
}

}  // namespace kiln::llm
