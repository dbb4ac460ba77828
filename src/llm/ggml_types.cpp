#include "llm/ggml_types.h"

#include <cstring>

#include "kiln/half.h"

namespace kiln::llm {

namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return float16_t::to_float(bits);
}

// K-quant super-blocks pack eight 6-bit scales and eight 6-bit mins into 12 bytes: the low
// six bits of bytes 0-3 and 4-7 for sub-blocks 0-3, nibbles of bytes 8-11 plus the top two
// bits of bytes 0-3 (scales) and 4-7 (mins) for sub-blocks 4-7.
void k_scale_min(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 4-bit low part of element i (0..255) of a Q4_K/Q5_K block: each 32-byte chunk of qs
// holds sub-block 2c in its low nibbles and sub-block 2c+1 in its high nibbles.
int k_low_nibble(const uint8_t* qs, int i) {
  int sub = i / 32, l = i % 32;
  return (qs[(sub / 2) * 32 + l] >> (4 * (sub % 2))) & 0x0F;
}

void q4_0_block(const uint8_t* b, uint8_t* codes, float* scale, float* bias) {
  const float d = half_at(b);  // value = d * (q - 8)
  for (int j = 0; j < 16; ++j) {
    codes[j] = b[2 + j] & 0x0F;
    codes[j + 16] = b[2 + j] >> 4;
  }
  *scale = d;
  *bias = -8.0f * d;
}

void q4_1_block(const uint8_t* b, uint8_t* codes, float* scale, float* bias) {
  for (int j = 0; j < 16; ++j) {  // value = d * q + m
    codes[j] = b[4 + j] & 0x0F;
    codes[j + 16] = b[4 + j] >> 4;
  }
  *scale = half_at(b);
  *bias = half_at(b + 2);
}

void q8_0_block(const uint8_t* b, uint8_t* codes, float* scale, float* bias) {
  const float d = half_at(b);  // value = d * int8; the code shifts it to unsigned
  for (int j = 0; j < 32; ++j) codes[j] = static_cast<uint8_t>(static_cast<int8_t>(b[2 + j]) + 128);
  *scale = d;
  *bias = -128.0f * d;
}

// Q4_K: d, dmin (f16), 12 bytes of scales and mins, 128 bytes of nibbles; eight sub-blocks
// of 32 with value = d*scale*q - dmin*min. d*scale and dmin*min are exact in float32
// (11-bit by 6-bit products), so each sub-block is one exact affine group.
void q4_k_block(const uint8_t* b, uint8_t* codes, float* scales, float* biases) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* sm = b + 4;
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k_scale_min(sm, j, &sc, &m);
    scales[j] = d * static_cast<float>(sc);
    biases[j] = -(dmin * static_cast<float>(m));
  }
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(k_low_nibble(qs, i));
}

// Q5_K: as Q4_K with a fifth bit per element: bit `sub` of qh[l] for element l of sub-block sub.
void q5_k_block(const uint8_t* b, float* out) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* sm = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k_scale_min(sm, j, &sc, &m);
    const float scale = d * static_cast<float>(sc), bias = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      int q = k_low_nibble(qs, j * 32 + l) | (((qh[l] >> j) & 1) << 4);
      out[j * 32 + l] = scale * static_cast<float>(q) - bias;
    }
  }
}

// Q6_K: ql (128 bytes of low nibbles), qh (64 bytes of 2-bit high parts), 16 int8 scales (one
// per 16 elements), d (f16); value = d*scale*(q - 32). Each half of 128 elements uses 64 ql
// bytes (elements 0-63 low nibbles, 64-127 high) and 32 qh bytes (four 2-bit fields).
void q6_k_block(const uint8_t* b, float* out) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int i = 0; i < 256; ++i) {
    int half = i / 128, e = i % 128;
    int low = (ql[half * 64 + e % 64] >> (4 * (e / 64))) & 0x0F;
    int high = (qh[half * 32 + e % 32] >> (2 * (e / 32))) & 0x03;
    out[i] = (d * static_cast<float>(sc[i / 16])) * static_cast<float>((low | (high << 4)) - 32);
  }
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

int affine_bits(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q4_K: return 4;
    case GgmlType::Q8_0: return 8;
    default: return 0;
  }
}

void affine_row(GgmlType t, const uint8_t* src, int64_t cols, uint8_t* codes, float* scales, float* biases) {
  const GgmlTypeInfo& info = *ggml_type_info(static_cast<uint32_t>(t));
  for (int64_t blk = 0; blk < cols / info.block; ++blk) {
    const uint8_t* b = src + blk * info.block_bytes;
    uint8_t* c = codes + blk * info.block;
    const int64_t g = blk * (info.block / 32);
    switch (t) {
      case GgmlType::Q4_0: q4_0_block(b, c, scales + g, biases + g); break;
      case GgmlType::Q4_1: q4_1_block(b, c, scales + g, biases + g); break;
      case GgmlType::Q8_0: q8_0_block(b, c, scales + g, biases + g); break;
      case GgmlType::Q4_K: q4_k_block(b, c, scales + g, biases + g); break;
      default: break;  // callers check affine_bits first
    }
  }
}

bool dequantized_type(GgmlType t) { return t == GgmlType::Q5_K || t == GgmlType::Q6_K; }

void dequantize_row(GgmlType t, const uint8_t* src, int64_t cols, float* out) {
  const GgmlTypeInfo& info = *ggml_type_info(static_cast<uint32_t>(t));
  for (int64_t blk = 0; blk < cols / info.block; ++blk) {
    const uint8_t* b = src + blk * info.block_bytes;
    if (t == GgmlType::Q5_K)
      q5_k_block(b, out + blk * info.block);
    else if (t == GgmlType::Q6_K)
      q6_k_block(b, out + blk * info.block);
  }
}

}  // namespace kiln::llm
