// quantized_matmul with int8 activations on the CPU (QmmActivations::int8, kiln/nn.h): each row
// of x is rounded per block of 32 to int8 codes and a float scale, as llama.cpp rounds its
// activations (Q8_1, Q8_0), and the blocks are multiplied by the packed codes in integers. With
// AVX2 (checked at run time) 4- and 8-bit weights take maddubs/madd, 32 multiply-adds an
// instruction, reading the packed weights and their float16 scales in place; other bit widths
// and CPUs take plain loops over the same integers. int16 activations (QmmActivations::int16)
// round each block to codes up to 16256 = 127 * 128: in decode as two int8 digits, code =
// 128 * high + low, that meet each weight block in one pass; in prefill as whole int16 codes
// against weights unpacked to int16 (madd); without AVX2 each digit is a row of x, and the two
// rows' products are added.
#include "backend/cpu/quantized_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/nn_util.h"
#include "core/thread_pool.h"

namespace kiln::detail {
namespace {

constexpr int kQ8Block = 32;  // values of x that share one int8 scale
constexpr int64_t kPanel = 16;  // weight rows converted and multiplied together (a few KB: L1)
constexpr int64_t kGemmRows = 4;  // from this many rows of x, 4-bit codes are unpacked once a panel

bool cpu_has_avx2() {
  static const bool yes =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return yes;
}

/* How a row's codes are ordered for the kernel that reads them. The 4-bit kernels unpack a
   block's 16 packed bytes as low nibbles (its even values), then high nibbles (its odd values);
   the decode kernel unpacks two blocks' 32 bytes at once, so each pair of blocks is stored as
   the evens of both, then the odds of both (a last unpaired block as evens, odds). */
enum class Order { natural, evens_odds, pairs };

/* x's rows as integer blocks: codes q [M, K] in the kernel's order (int8, or int16 in `wide`), per
   block the scale d [M, K/32], and per weight group the sum over its blocks of d * sum(q)
   [M, K/group] (what the group's bias multiplies). */
struct Int8Rows {
  std::vector<int8_t> q;
  std::vector<int16_t> wide;  // int16 codes whole, for many rows of x (each block's evens, then odds)
  std::vector<float> d, dsum;
};

/* How x's rows are coded: int8; int16 as two int8 rows (digits); int16 codes whole. */
enum class Codes { int8, digits, wide };

/* One block in natural order: its scale; the sum of its codes in `sum`. */
float quantize_block(const float* x, int8_t* q, int& sum) {
  float amax = 0;
  bool finite = true;
  for (int i = 0; i < kQ8Block; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    finite = finite && std::isfinite(x[i]);
  }
  sum = 0;
  if (!finite) {
    std::memset(q, 0, kQ8Block);
    return std::numeric_limits<float>::quiet_NaN();
  }
  const float id = amax > 0 ? 127.0f / amax : 0.0f;
  for (int i = 0; i < kQ8Block; ++i) {
    q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
    sum += q[i];
  }
  return amax / 127.0f;
}

/* int16 activations: codes c = 128 * high + low, high in [-127, 127] (maddubs' signed side, whose
   sign trick for 8-bit weights cannot negate -128), low in [0, 127]. */
constexpr float kQ16Max = 127.0f * 128.0f;

/* One block as int16 codes split into digits, in natural order: the low digit's scale (the high
   digit's is 128 times it); the digits' sums in sum_hi and sum_lo. */
float quantize_block16(const float* x, int8_t* hi, int8_t* lo, int& sum_hi, int& sum_lo) {
  float amax = 0;
  bool finite = true;
  for (int i = 0; i < kQ8Block; ++i) {
    amax = std::max(amax, std::fabs(x[i]));
    finite = finite && std::isfinite(x[i]);
  }
  sum_hi = sum_lo = 0;
  if (!finite) {
    std::memset(hi, 0, kQ8Block);
    std::memset(lo, 0, kQ8Block);
    return std::numeric_limits<float>::quiet_NaN();
  }
  const float id = amax > 0 ? kQ16Max / amax : 0.0f;
  for (int i = 0; i < kQ8Block; ++i) {
    const int c = std::clamp(static_cast<int>(std::nearbyint(x[i] * id)), -16256, 16256);
    hi[i] = static_cast<int8_t>(c >> 7);
    lo[i] = static_cast<int8_t>(c & 127);
    sum_hi += hi[i];
    sum_lo += lo[i];
  }
  return amax / kQ16Max;
}

/* 32 codes in int32 lanes (each in [-128, 127]) stored as int8 in the kernel's order; their sum. */
__attribute__((target("avx2"))) int store_codes(const __m256i i32[4], int8_t* q, bool even_odd) {
  __m256i s = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
  // Packing interleaves the lanes; the permutation puts the 32 codes back in order.
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i32[0], i32[1]), _mm256_packs_epi32(i32[2], i32[3]));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  if (even_odd) {  // per 16 values: evens then odds; then the evens of both halves first
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                           14, 1, 3, 5, 7, 9, 11, 13, 15);
    p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(p, split), 0xD8);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p);
  return _mm_cvtsi128_si32(s4);
}

/* A block's 32 values in v and max |x| (NaN when a value is NaN or infinite). */
__attribute__((target("avx2,fma"))) float load_block_avx2(const float* x, __m256 v[4]) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 mx = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    mx = _mm256_max_ps(mx, _mm256_and_ps(v[i], abs_mask));
    bad = _mm256_add_ps(bad, _mm256_sub_ps(v[i], v[i]));  // NaN where any value is NaN or infinite
  }
  if (_mm256_movemask_ps(_mm256_cmp_ps(bad, bad, _CMP_UNORD_Q))) return std::numeric_limits<float>::quiet_NaN();
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

/* The same with AVX2: the same codes (multiply by the same id, round half to even). */
__attribute__((target("avx2,fma"))) float quantize_block_avx2(const float* x, int8_t* q, int& sum, bool even_odd) {
  __m256 v[4];
  const float amax = load_block_avx2(x, v);
  sum = 0;
  if (std::isnan(amax)) {
    std::memset(q, 0, kQ8Block);
    return amax;
  }
  const __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
  __m256i i32[4];
  for (int i = 0; i < 4; ++i)
    i32[i] =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  sum = store_codes(i32, q, even_odd);
  return amax / 127.0f;
}

/* The same with AVX2 (the same codes), each digit in the kernel's order. */
__attribute__((target("avx2,fma"))) float quantize_block16_avx2(const float* x, int8_t* hi, int8_t* lo, int& sum_hi,
                                                                int& sum_lo, bool even_odd) {
  __m256 v[4];
  const float amax = load_block_avx2(x, v);
  sum_hi = sum_lo = 0;
  if (std::isnan(amax)) {
    std::memset(hi, 0, kQ8Block);
    std::memset(lo, 0, kQ8Block);
    return amax;
  }
  const __m256 id = _mm256_set1_ps(amax > 0 ? kQ16Max / amax : 0.0f);
  const __m256i top = _mm256_set1_epi32(16256), bottom = _mm256_set1_epi32(-16256), low7 = _mm256_set1_epi32(127);
  __m256i h[4], l[4];
  for (int i = 0; i < 4; ++i) {
    __m256i c =
        _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    c = _mm256_min_epi32(_mm256_max_epi32(c, bottom), top);
    h[i] = _mm256_srai_epi32(c, 7);
    l[i] = _mm256_and_si256(c, low7);
  }
  sum_hi = store_codes(h, hi, even_odd);
  sum_lo = store_codes(l, lo, even_odd);
  return amax / kQ16Max;
}

/* Blocks j and j + 1 of a row from (evens, odds) each to (evens of both, odds of both). */
__attribute__((target("avx2"))) void pair_blocks(int8_t* q) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + kQ8Block));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permute2x128_si256(a, b, 0x20));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + kQ8Block), _mm256_permute2x128_si256(a, b, 0x31));
}

/* x's m rows coded as the kernels read them: int8 rows; for int16, two rows of digits each (high,
   then low) or one row of whole codes. */
Int8Rows quantize_rows(const float* x, int64_t m, int64_t k, int group_size, Codes codes, bool simd, Order order) {
  const bool even_odd = order != Order::natural;
  const int64_t blocks = k / kQ8Block, groups = k / group_size, per_group = group_size / kQ8Block;
  const int digits = codes == Codes::digits ? 2 : 1;
  const int64_t rows = m * digits;
  Int8Rows r;
  if (codes == Codes::wide)
    r.wide.resize(static_cast<size_t>(rows * k));
  else
    r.q.resize(static_cast<size_t>(rows * k));
  r.d.resize(static_cast<size_t>(rows * blocks));
  r.dsum.assign(static_cast<size_t>(rows * groups), 0.0f);
  auto code = [&](int64_t row, int64_t j) { return r.q.data() + row * k + j * kQ8Block; };
  auto record = [&](int64_t row, int64_t j, float d, int sum) {
    r.d[static_cast<size_t>(row * blocks + j)] = d;
    r.dsum[static_cast<size_t>(row * groups + j / per_group)] += d * static_cast<float>(sum);
  };
  detail::parallel_for(m, std::max<int64_t>(1, (1 << 16) / k), [&](int64_t m0, int64_t m1) {
    for (int64_t i = m0; i < m1; ++i) {
      const int64_t row = i * digits;
      for (int64_t j = 0; j < blocks; ++j) {
        const float* xb = x + i * k + j * kQ8Block;
        int sum = 0, sum_lo = 0;
        if (codes == Codes::wide) {
          alignas(32) int8_t hi[kQ8Block], lo[kQ8Block];
          const float d =
              simd ? quantize_block16_avx2(xb, hi, lo, sum, sum_lo, false) : quantize_block16(xb, hi, lo, sum, sum_lo);
          int16_t* c = r.wide.data() + i * k + j * kQ8Block;
          for (int e = 0; e < kQ8Block; ++e)  // evens, then odds: as unpack_panel16 lays the weights
            c[(e & 1) * 16 + e / 2] = static_cast<int16_t>(128 * hi[e] + lo[e]);
          record(row, j, d, 128 * sum + sum_lo);
        } else if (digits == 1) {
          const float d =
              simd ? quantize_block_avx2(xb, code(row, j), sum, even_odd) : quantize_block(xb, code(row, j), sum);
          record(row, j, d, sum);
        } else {
          const float d = simd ? quantize_block16_avx2(xb, code(row, j), code(row + 1, j), sum, sum_lo, even_odd)
                               : quantize_block16(xb, code(row, j), code(row + 1, j), sum, sum_lo);
          record(row, j, 128.0f * d, sum);
          record(row + 1, j, d, sum_lo);
        }
      }
      if (order == Order::pairs)
        for (int64_t t = row; t < row + digits; ++t)
          for (int64_t j = 0; j + 1 < blocks; j += 2) pair_blocks(code(t, j));
    }
  });
  return r;
}

/* The problem as the kernels see it. */
struct Problem {
  const Int8Rows* x;
  int64_t m, n, k, blocks, groups;
  int group_shift;  // log2(group_size / 32): block j is in group j >> group_shift
  int bits;
  const uint8_t* w;  // packed rows, row_bytes apart
  int64_t row_bytes;
  float* y;
};

/* Elements [i0, i0 + count) of a row-major float tensor as float32. */
__attribute__((target("avx2,fma,f16c"))) void floats_f16c(const uint16_t* src, int64_t count, float* out) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < count; ++i) out[i] = _cvtsh_ss(src[i]);
}

void floats_of(const Tensor& t, int64_t i0, int64_t count, float* out) {
  switch (t.dtype) {
    case Dtype::float32: std::memcpy(out, t.data<float>() + i0, static_cast<size_t>(count) * sizeof(float)); return;
    case Dtype::float16:
      if (cpu_has_avx2()) return floats_f16c(reinterpret_cast<const uint16_t*>(t.data<float16_t>() + i0), count, out);
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(t.data<float16_t>()[i0 + i]);
      return;
    case Dtype::bfloat16:
      for (int64_t i = 0; i < count; ++i) out[i] = static_cast<float>(t.data<bfloat16_t>()[i0 + i]);
      return;
    default:
      fail("quantized_matmul", "scales and biases must be float32, float16 or bfloat16, got ", dtype_name(t.dtype));
  }
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The biases' share of output (i, n): sum over groups of bias * d * sum(q). */
inline float bias_term(const float* b, const float* dsum, int64_t groups) {
  float s = 0;
  for (int64_t g = 0; g < groups; ++g) s += b[g] * dsum[g];
  return s;
}

/* Row i of x against weight rows [n0, n0 + NR), whose scales and biases (float32, [NR][groups])
   are sw and bw. 4 bits: two blocks a step, their 32 packed bytes unpacking to the evens of both
   (low nibbles) and the odds of both (high nibbles), x stored in that order (Order::pairs); the
   dot's lanes 0-3 sum the first block and 4-7 the second; a last unpaired block unpacks alone.
   8 bits: codes are offset by 128 and maddubs needs one side unsigned, so the signed code's
   magnitude meets x with the code's sign; the 128 offset moved into bw. Each block's integer dot
   is scaled by the weight's and the block's scales. One row of x at a time (decode); many rows of
   4-bit weights take panel_gemm4, which unpacks the codes once. */
template <int B, int NR>
__attribute__((target("avx2,fma"))) void tile_avx2(const Problem& p, const float* sw, const float* bw, int64_t i,
                                                   int64_t n0) {
  constexpr int kBytes = kQ8Block * B / 8;  // packed bytes of one block
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0F), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const uint8_t* wr = p.w + n0 * p.row_bytes;
  const int8_t* xq = p.x->q.data() + i * p.k;
  const float* xd = p.x->d.data() + i * p.blocks;
  __m256 acc[NR];
#pragma GCC unroll 8
  for (int c = 0; c < NR; ++c) acc[c] = _mm256_setzero_ps();
  int64_t j = 0;
  if constexpr (B == 4) {  // two blocks a step: 32 packed bytes, x as (evens of both, odds of both)
    for (; j + 1 < p.blocks; j += 2) {
      const __m256i xe = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * kQ8Block));
      const __m256i xo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (j + 1) * kQ8Block));
      const __m256 dx = _mm256_set_m128(_mm_broadcast_ss(xd + j + 1), _mm_broadcast_ss(xd + j));
      // Pointers stepped a row at a time: 8 rows' addresses computed apart ran out of registers.
      const uint8_t* src = wr + j * kBytes;
      const float* s0 = sw + (j >> p.group_shift);
      const float* s1 = sw + ((j + 1) >> p.group_shift);
#pragma GCC unroll 8
      for (int c = 0; c < NR; ++c, src += p.row_bytes, s0 += p.groups, s1 += p.groups) {
        // The next tile's rows, fetched while this one computes: decode tg128 went 97 -> 155 tokens/s.
        _mm_prefetch(reinterpret_cast<const char*>(src + NR * p.row_bytes), _MM_HINT_T0);
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
        const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        const __m256i sums = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
        const __m256i dot = _mm256_madd_epi16(sums, ones);  // lanes 0-3: block j, 4-7: block j + 1
        const __m256 ws = _mm256_set_m128(_mm_broadcast_ss(s1), _mm_broadcast_ss(s0));
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dx, ws), acc[c]);
      }
    }
  }
  for (; j < p.blocks; ++j) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j * kQ8Block));
    const __m256 dx = _mm256_broadcast_ss(xd + j);
    const int64_t g = j >> p.group_shift;
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c) {
      const uint8_t* src = wr + c * p.row_bytes + j * kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(src + NR * p.row_bytes), _MM_HINT_T0);
      __m256i wq, xs = xv;
      if constexpr (B == 4) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low4);
      } else {
        const __m256i ws = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), flip);
        wq = _mm256_sign_epi8(ws, ws);
        xs = _mm256_sign_epi8(xv, ws);
      }
      const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xs), ones);
      const __m256 scale = _mm256_mul_ps(dx, _mm256_broadcast_ss(sw + c * p.groups + g));
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[c]);
    }
  }
  const float* dsum = p.x->dsum.data() + i * p.groups;
#pragma GCC unroll 8
  for (int c = 0; c < NR; ++c) p.y[i * p.n + n0 + c] = hsum(acc[c]) + bias_term(bw + c * p.groups, dsum, p.groups);
}

/* Two blocks of x codes in pairs order (evens of both at x, odds of both at x + 32) against 4-bit
   codes unpacked to lo (evens) and hi (odds): lanes 0-3 sum the first block, 4-7 the second. */
__attribute__((target("avx2"), always_inline)) inline __m256i pair_dot(__m256i lo, __m256i hi, const int8_t* x,
                                                                       __m256i ones) {
  const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i o = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + kQ8Block));
  return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, e), _mm256_maddubs_epi16(hi, o)), ones);
}

/* One block: unsigned codes w against x's 32 codes, in 8 int32 sums. */
__attribute__((target("avx2"), always_inline)) inline __m256i block_dot(__m256i w, const int8_t* x, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))), ones);
}

/* One block of 8-bit codes as magnitudes wq and signs ws against x's 32 codes, in 8 int32 sums. */
__attribute__((target("avx2"), always_inline)) inline __m256i signed_block_dot(__m256i wq, __m256i ws, const int8_t* x,
                                                                               __m256i ones) {
  const __m256i xs = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), ws);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xs), ones);
}

/* int16 activations, one row of x (decode): tile_avx2's steps for both digits of x's row i
   (kernel rows 2i and 2i + 1) at once, so the weights are unpacked once; the high digit's integer
   dot is shifted by 7 (times 128) onto the low one's, whose scale d both then share. 4 bits: two
   blocks a step (x stored in pairs); 8 bits: a block a step, the code's sign moved onto each
   digit (x in natural order). Writes y's row i. */
template <int B, int NR>
__attribute__((target("avx2,fma"))) void tile_avx2_digits(const Problem& p, const float* sw, const float* bw, int64_t i,
                                                          int64_t n0, float* y) {
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const uint8_t* wr = p.w + n0 * p.row_bytes;
  const int8_t* xh = p.x->q.data() + 2 * i * p.k;
  const int8_t* xl = xh + p.k;
  const float* xd = p.x->d.data() + (2 * i + 1) * p.blocks;
  __m256 acc[NR];
#pragma GCC unroll 8
  for (int c = 0; c < NR; ++c) acc[c] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; B == 4 && j + 1 < p.blocks; j += 2) {
    const __m256 dx = _mm256_set_m128(_mm_broadcast_ss(xd + j + 1), _mm_broadcast_ss(xd + j));
    const uint8_t* src = wr + j * 16;
    const float* s0 = sw + (j >> p.group_shift);
    const float* s1 = sw + ((j + 1) >> p.group_shift);
    const int64_t at = j * kQ8Block;
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c, src += p.row_bytes, s0 += p.groups, s1 += p.groups) {
      _mm_prefetch(reinterpret_cast<const char*>(src + NR * p.row_bytes), _MM_HINT_T0);
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      const __m256i d =
          _mm256_add_epi32(_mm256_slli_epi32(pair_dot(lo, hi, xh + at, ones), 7), pair_dot(lo, hi, xl + at, ones));
      const __m256 ws = _mm256_set_m128(_mm_broadcast_ss(s1), _mm_broadcast_ss(s0));
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dx, ws), acc[c]);
    }
  }
  for (; j < p.blocks; ++j) {  // 8 bits, or 4 bits' last unpaired block (evens, then odds)
    const __m256 dx = _mm256_broadcast_ss(xd + j);
    const int64_t at = j * kQ8Block;
#pragma GCC unroll 8
    for (int c = 0; c < NR; ++c) {
      const uint8_t* src = wr + c * p.row_bytes + j * kQ8Block * B / 8;
      __m256i d;
      if constexpr (B == 4) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        const __m256i wq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), low4);
        d = _mm256_add_epi32(_mm256_slli_epi32(block_dot(wq, xh + at, ones), 7), block_dot(wq, xl + at, ones));
      } else {  // code - 128 (the offset is in bw), its magnitude against each digit with its sign
        _mm_prefetch(reinterpret_cast<const char*>(src + NR * p.row_bytes), _MM_HINT_T0);
        const __m256i ws = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), flip);
        const __m256i wq = _mm256_sign_epi8(ws, ws);
        d = _mm256_add_epi32(_mm256_slli_epi32(signed_block_dot(wq, ws, xh + at, ones), 7),
                             signed_block_dot(wq, ws, xl + at, ones));
      }
      const __m256 scale = _mm256_mul_ps(dx, _mm256_broadcast_ss(sw + c * p.groups + (j >> p.group_shift)));
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), scale, acc[c]);
    }
  }
  const float* dh = p.x->dsum.data() + 2 * i * p.groups;
  const float* dl = dh + p.groups;
#pragma GCC unroll 8
  for (int c = 0; c < NR; ++c)
    y[i * p.n + n0 + c] =
        hsum(acc[c]) + bias_term(bw + c * p.groups, dh, p.groups) + bias_term(bw + c * p.groups, dl, p.groups);
}

/* Value i of a packed row (any bits; values may straddle words). */
inline int code_at(const uint8_t* row, int64_t i, int bits) {
  const int64_t bit = i * bits;
  uint64_t v = 0;
  std::memcpy(&v, row + (bit >> 3), bits + (bit & 7) > 8 ? 2 : 1);
  return static_cast<int>((v >> (bit & 7)) & ((1u << bits) - 1));
}

/* Any bits, any CPU: one output at a time, codes unpacked one by one (x in natural order). */
void tile_generic(const Problem& p, const float* sw, const float* bw, int64_t m0, int64_t mr, int64_t n0, int64_t nr) {
  for (int64_t r = m0; r < m0 + mr; ++r) {
    for (int64_t c = 0; c < nr; ++c) {
      const uint8_t* row = p.w + (n0 + c) * p.row_bytes;
      float acc = 0;
      for (int64_t j = 0; j < p.blocks; ++j) {
        const int8_t* q = p.x->q.data() + r * p.k + j * kQ8Block;
        int32_t dot = 0;
        for (int i = 0; i < kQ8Block; ++i) dot += code_at(row, j * kQ8Block + i, p.bits) * q[i];
        acc += static_cast<float>(dot) *
               (p.x->d[static_cast<size_t>(r * p.blocks + j)] * sw[c * p.groups + (j >> p.group_shift)]);
      }
      p.y[r * p.n + n0 + c] = acc + bias_term(bw + c * p.groups, p.x->dsum.data() + r * p.groups, p.groups);
    }
  }
}

/* One panel's tiles: each row of x against 8 weight rows at a time, then the rest one by one. */
template <int B>
void panel_avx2(const Problem& p, const float* sw, const float* bw, int64_t n0, int64_t rows) {
  constexpr int kCols = 8;
  for (int64_t i = 0; i < p.m; ++i) {
    int64_t c = 0;
    for (; c + kCols <= rows; c += kCols) tile_avx2<B, kCols>(p, sw + c * p.groups, bw + c * p.groups, i, n0 + c);
    for (; c < rows; ++c) tile_avx2<B, 1>(p, sw + c * p.groups, bw + c * p.groups, i, n0 + c);
  }
}

/* The same for int16 activations, writing the sum of both digits to y. */
template <int B>
void panel_avx2_digits(const Problem& p, const float* sw, const float* bw, int64_t n0, int64_t rows, float* y) {
  constexpr int kCols = 8;
  for (int64_t i = 0; i < p.m / 2; ++i) {
    int64_t c = 0;
    for (; c + kCols <= rows; c += kCols)
      tile_avx2_digits<B, kCols>(p, sw + c * p.groups, bw + c * p.groups, i, n0 + c, y);
    for (; c < rows; ++c) tile_avx2_digits<B, 1>(p, sw + c * p.groups, bw + c * p.groups, i, n0 + c, y);
  }
}

/* The codes the prefill tiles multiply, unpacked once a panel: int8 x against weight codes as
   bytes (maddubs, then madd to int32), or whole int16 x against weight codes as int16 (madd: 16
   products into 8 int32 sums, no second step). A block is one register of each, or two. */
struct Int8Codes {
  using W = uint8_t;
  using X = int8_t;
  struct Block {
    __m256i v;
  };
  __attribute__((target("avx2"), always_inline)) static Block load(const void* p) {
    return {_mm256_loadu_si256(static_cast<const __m256i*>(p))};
  }
  __attribute__((target("avx2"), always_inline)) static __m256i sums(Block w, Block x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w.v, x.v), _mm256_set1_epi16(1));
  }
  static const X* rows(const Int8Rows& r) { return r.q.data(); }
};

struct Int16Codes {
  using W = int16_t;
  using X = int16_t;
  struct Block {
    __m256i evens, odds;
  };
  __attribute__((target("avx2"), always_inline)) static Block load(const void* p) {
    const auto* v = static_cast<const __m256i*>(p);
    return {_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1)};
  }
  __attribute__((target("avx2"), always_inline)) static __m256i sums(Block w, Block x) {
    return _mm256_add_epi32(_mm256_madd_epi16(w.evens, x.evens), _mm256_madd_epi16(w.odds, x.odds));
  }
  static const X* rows(const Int8Rows& r) { return r.wide.data(); }
};

/* acc += the block's products * scale. */
template <class C>
__attribute__((target("avx2,fma"), always_inline)) inline void dot_step(__m256& acc, typename C::Block w,
                                                                        typename C::Block x, __m256 scale) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(C::sums(w, x)), scale, acc);
}

/* Many rows of x (prefill), 4 bits: the panel's codes unpacked once into wu ([rows][K], each
   block's evens then odds, as x), then tiles of MR (1 or 2) rows of x against 4 weight rows.
   st holds the 4 rows' scales by block ([blocks][4]), so one multiply makes a block's 8 scale
   products. The eight sums are named variables: as an array GCC kept them on the stack. */
template <int MR, class C>
__attribute__((target("avx2,fma"))) void tile_unpacked(const Problem& p, const typename C::W* wu, const float* st,
                                                       const float* bw, int64_t i0, int64_t n0) {
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
  const typename C::X* x0 = C::rows(*p.x) + i0 * p.k;
  const typename C::X* x1 = x0 + (MR > 1 ? p.k : 0);
  const float* d0 = p.x->d.data() + i0 * p.blocks;
  const float* d1 = d0 + (MR > 1 ? p.blocks : 0);
  const int64_t k = p.k, g = p.groups;
  alignas(32) float sc[8];
  for (int64_t j = 0; j < p.blocks; ++j) {
    const int64_t at = j * kQ8Block;
    const __m256 dv = _mm256_set_m128(_mm_broadcast_ss(d1 + j), _mm_broadcast_ss(d0 + j));
    _mm256_store_ps(sc, _mm256_mul_ps(dv, _mm256_broadcast_ps(reinterpret_cast<const __m128*>(st + 4 * j))));
    const auto w0 = C::load(wu + at), w1 = C::load(wu + k + at), w2 = C::load(wu + 2 * k + at),
               w3 = C::load(wu + 3 * k + at);
    const auto xv0 = C::load(x0 + at);
    dot_step<C>(a00, w0, xv0, _mm256_broadcast_ss(sc + 0));
    dot_step<C>(a01, w1, xv0, _mm256_broadcast_ss(sc + 1));
    dot_step<C>(a02, w2, xv0, _mm256_broadcast_ss(sc + 2));
    dot_step<C>(a03, w3, xv0, _mm256_broadcast_ss(sc + 3));
    if constexpr (MR > 1) {
      const auto xv1 = C::load(x1 + at);
      dot_step<C>(a10, w0, xv1, _mm256_broadcast_ss(sc + 4));
      dot_step<C>(a11, w1, xv1, _mm256_broadcast_ss(sc + 5));
      dot_step<C>(a12, w2, xv1, _mm256_broadcast_ss(sc + 6));
      dot_step<C>(a13, w3, xv1, _mm256_broadcast_ss(sc + 7));
    }
  }
  const __m256 acc[2][4] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}};
  for (int r = 0; r < MR; ++r) {
    const float* dsum = p.x->dsum.data() + (i0 + r) * g;
    for (int c = 0; c < 4; ++c) p.y[(i0 + r) * p.n + n0 + c] = hsum(acc[r][c]) + bias_term(bw + c * g, dsum, g);
  }
}

/* One weight row (a panel's last rows) against row i of x, from the unpacked codes. */
template <class C>
__attribute__((target("avx2,fma"))) void row_unpacked(const Problem& p, const typename C::W* wu, const float* sw,
                                                      const float* bw, int64_t i, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  const typename C::X* x = C::rows(*p.x) + i * p.k;
  const float* d = p.x->d.data() + i * p.blocks;
  for (int64_t j = 0; j < p.blocks; ++j) {
    const __m256 scale = _mm256_mul_ps(_mm256_broadcast_ss(d + j), _mm256_broadcast_ss(sw + (j >> p.group_shift)));
    dot_step<C>(acc, C::load(wu + j * kQ8Block), C::load(x + j * kQ8Block), scale);
  }
  p.y[i * p.n + n] = hsum(acc) + bias_term(bw, p.x->dsum.data() + i * p.groups, p.groups);
}

/* One block's 16 packed bytes as its evens (low nibbles), then its odds: as bytes, or as int16
   for whole int16 x. */
__attribute__((target("avx2"), always_inline)) inline void unpack_block4(__m128i raw, uint8_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0F)));
}

__attribute__((target("avx2"), always_inline)) inline void unpack_block4(__m128i raw, int16_t* out) {
  const __m128i low4 = _mm_set1_epi8(0x0F);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepu8_epi16(_mm_and_si128(raw, low4)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16),
                      _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), low4)));
}

template <class W>
__attribute__((target("avx2"))) void unpack_panel4(const Problem& p, int64_t n0, int64_t rows, W* wu) {
  for (int64_t c = 0; c < rows; ++c) {
    const uint8_t* src = p.w + (n0 + c) * p.row_bytes;
    for (int64_t j = 0; j < p.blocks; ++j)
      unpack_block4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + j * 16)), wu + c * p.k + j * kQ8Block);
  }
}

template <class C>
void panel_gemm4(const Problem& p, const float* sw, const float* bw, int64_t n0, int64_t rows, typename C::W* wu,
                 float* st) {
  unpack_panel4(p, n0, rows, wu);
  int64_t c = 0;
  for (; c + 4 <= rows; c += 4) {
    for (int64_t j = 0; j < p.blocks; ++j)  // the 4 rows' scales by block
      for (int64_t e = 0; e < 4; ++e) st[j * 4 + e] = sw[(c + e) * p.groups + (j >> p.group_shift)];
    int64_t i = 0;
    for (; i + 2 <= p.m; i += 2) tile_unpacked<2, C>(p, wu + c * p.k, st, bw + c * p.groups, i, n0 + c);
    for (; i < p.m; ++i) tile_unpacked<1, C>(p, wu + c * p.k, st, bw + c * p.groups, i, n0 + c);
  }
  for (; c < rows; ++c)
    for (int64_t i = 0; i < p.m; ++i) row_unpacked<C>(p, wu + c * p.k, sw + c * p.groups, bw + c * p.groups, i, n0 + c);
}

}  // namespace

void quantized_matmul_integer(const float* x, int64_t m, int64_t k, const uint32_t* w, int64_t n, const Tensor& scales,
                              const Tensor& biases, const QuantParams& q, QmmActivations activations, float* y) {
  const bool int16 = activations == QmmActivations::int16;
  const bool simd = cpu_has_avx2() && (q.bits == 4 || q.bits == 8);
  const bool gemm = simd && q.bits == 4 && m * (int16 ? 2 : 1) >= kGemmRows;
  // int16: whole codes for the prefill tiles (madd takes them as they are); as two int8 digits
  // elsewhere: with AVX2 both meet each weight block in one pass, else each digit is a row and
  // the two rows' products are added.
  const Codes codes = !int16 ? Codes::int8 : gemm ? Codes::wide : Codes::digits;
  const bool fused_digits = codes == Codes::digits && simd;
  const Order order = !(simd && q.bits == 4) ? Order::natural : gemm ? Order::evens_odds : Order::pairs;
  const Int8Rows xq = quantize_rows(x, m, k, q.group_size, codes, cpu_has_avx2(), order);
  const int64_t x_rows = codes == Codes::digits ? 2 * m : m;  // the kernels' rows of x
  const Tensor s = row_major(scales), b = row_major(biases);
  std::vector<float> digit_rows(static_cast<size_t>(codes == Codes::digits && !fused_digits ? x_rows * n : 0));
  Problem p{&xq,
            x_rows,
            n,
            k,
            k / kQ8Block,
            k / q.group_size,
            std::countr_zero(static_cast<unsigned>(q.group_size / kQ8Block)),
            q.bits,
            reinterpret_cast<const uint8_t*>(w),
            k * q.bits / 8,
            digit_rows.empty() ? y : digit_rows.data()};
  const int64_t panels = (n + kPanel - 1) / kPanel;
  // Chunks of at least 32 KB of weights a thread, fewer for many rows of x.
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / (kPanel * p.row_bytes * std::min<int64_t>(x_rows, 8)));
  detail::parallel_for(panels, grain, [&](int64_t a, int64_t e) {
    std::vector<float> sw(static_cast<size_t>(kPanel * p.groups)), bw(sw.size());
    std::vector<uint8_t> wu(static_cast<size_t>(gemm && !int16 ? kPanel * k : 0));
    std::vector<int16_t> wu16(static_cast<size_t>(gemm && int16 ? kPanel * k : 0));
    std::vector<float> st(static_cast<size_t>(gemm ? 4 * p.blocks : 0));
    for (int64_t panel = a; panel < e; ++panel) {
      const int64_t n0 = panel * kPanel, rows = std::min(kPanel, n - n0);
      floats_of(s, n0 * p.groups, rows * p.groups, sw.data());
      floats_of(b, n0 * p.groups, rows * p.groups, bw.data());
      // 8 bits: the kernels use code - 128, so each group's bias gains 128 scales.
      if (simd && q.bits == 8)
        for (int64_t i = 0; i < rows * p.groups; ++i) bw[static_cast<size_t>(i)] += 128.0f * sw[static_cast<size_t>(i)];
      if (fused_digits && q.bits == 4)
        panel_avx2_digits<4>(p, sw.data(), bw.data(), n0, rows, y);
      else if (fused_digits)
        panel_avx2_digits<8>(p, sw.data(), bw.data(), n0, rows, y);
      else if (gemm && int16)
        panel_gemm4<Int16Codes>(p, sw.data(), bw.data(), n0, rows, wu16.data(), st.data());
      else if (gemm)
        panel_gemm4<Int8Codes>(p, sw.data(), bw.data(), n0, rows, wu.data(), st.data());
      else if (simd && q.bits == 4)
        panel_avx2<4>(p, sw.data(), bw.data(), n0, rows);
      else if (simd)
        panel_avx2<8>(p, sw.data(), bw.data(), n0, rows);
      else
        tile_generic(p, sw.data(), bw.data(), 0, p.m, n0, rows);
    }
  });
  if (!digit_rows.empty())  // each row's two digits' products
    detail::parallel_for(m, std::max<int64_t>(1, (1 << 14) / n), [&](int64_t a, int64_t e) {
      for (int64_t i = a; i < e; ++i) {
        const float* hi = digit_rows.data() + 2 * i * n;
        for (int64_t c = 0; c < n; ++c) y[i * n + c] = hi[c] + hi[n + c];
      }
    });
}

}  // namespace kiln::detail
