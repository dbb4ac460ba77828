// quantized_matmul with int8 activations on the CPU (QmmActivations::int8, kiln/nn.h): each row
// of x is rounded per block of 32 to int8 codes and a float scale, as llama.cpp rounds its
// activations (Q8_1, Q8_0), and the blocks are multiplied by the packed codes in integers. With
// AVX2 (checked at run time) 4- and 8-bit weights take maddubs/madd, 32 multiply-adds an
// instruction, reading the packed weights and their float16 scales in place, and with VNNI
// vpdpbusd/vpdpwssd, which also add (quantized_int8_kernels.inc: the same kernels, the same
// bits); other bit widths and CPUs take plain loops over the same integers. int16 activations (QmmActivations::int16)
// round each block to codes up to 16256 = 127 * 128: in decode as two int8 digits, code =
// 128 * high + low, that meet each weight block in one pass; in prefill as whole int16 codes
// against weights unpacked to int16 (madd); without AVX2 each digit is a row of x, and the two
// rows' products are added.
#include "backend/cpu/quantized_int8.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/nn_util.h"
#include "core/config.h"
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

/* KILN_CPU_VNNI, read at the first product; use_cpu_vnni changes it. */
std::atomic<bool>& vnni_setting() {
  static std::atomic<bool> on{config::flag(config::Knob::cpu_vnni)};
  return on;
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
  int64_t stride = 0;  // dsum's rows: the groups rounded up to 8, zeros after them (read 8 at a time)
  const float* dsum_row(int64_t row) const { return dsum.data() + row * stride; }
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
  r.stride = (groups + 7) / 8 * 8;
  r.dsum.assign(static_cast<size_t>(rows * r.stride), 0.0f);
  auto code = [&](int64_t row, int64_t j) { return r.q.data() + row * k + j * kQ8Block; };
  auto record = [&](int64_t row, int64_t j, float d, int sum) {
    r.d[static_cast<size_t>(row * blocks + j)] = d;
    r.dsum[static_cast<size_t>(row * r.stride + j / per_group)] += d * static_cast<float>(sum);
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

/* Elements [i0, i0 + count) of a row-major tensor fetched into cache: a panel's scales and biases
   ahead of their conversion, which otherwise waited on them (perf: 10% of decode). */
void prefetch(const Tensor& t, int64_t i0, int64_t count) {
  const auto size = static_cast<int64_t>(t.itemsize());
  const char* at = static_cast<const char*>(t.raw()) + i0 * size;
  for (int64_t e = 0; e < count * size; e += 64) _mm_prefetch(at + e, _MM_HINT_T0);
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

/* Lane c: the sum of a[c]'s lanes as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), in every width. */
__attribute__((target("avx2"))) inline __m128 hsum4(const __m256* a) {
  const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

__attribute__((target("avx2"))) inline __m256 hsum8(const __m256* a) { return _mm256_set_m128(hsum4(a + 4), hsum4(a)); }

__attribute__((target("avx2"))) inline float hsum(__m256 v) {
  const __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(v, v), _mm256_setzero_ps());
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
}

/* The biases' share of output (i, n): sum over groups of bias * d * sum(q). */
inline float bias_term(const float* b, const float* dsum, int64_t groups) {
  float s = 0;
  for (int64_t g = 0; g < groups; ++g) s += b[g] * dsum[g];
  return s;
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
      p.y[r * p.n + n0 + c] = acc + bias_term(bw + c * p.groups, p.x->dsum_row(r), p.groups);
    }
  }
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

/* The kernels of quantized_int8_kernels.inc, for many rows of x (gemm: prefill) or one (decode). */
enum class Kernel { decode4, decode8, digits4, digits8, gemm4, gemm4_wide };

/* A thread's buffers for the prefill kernels: a panel's codes unpacked, its scales by block. */
struct Scratch {
  std::vector<uint8_t> wu;
  std::vector<int16_t> wu16;
  std::vector<float> st;
};

namespace avx2 {
#pragma GCC push_options
#pragma GCC target("avx2,fma")
/* AVX2's integer products: maddubs (byte pairs to int16), then madd against ones (to int32). */
struct Dot {
  /* acc + per int32 lane the 4 products of unsigned bytes w and signed bytes x. */
  __attribute__((always_inline)) static __m256i bytes(__m256i acc, __m256i w, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
  }
  /* bytes of lo against xe plus hi against xo; 4-bit lo and hi keep the int16 sums exact. */
  __attribute__((always_inline)) static __m256i nibbles(__m256i acc, __m256i lo, __m256i hi, __m256i xe, __m256i xo) {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  /* 8-bit codes c taken as c - 128: maddubs needs one side unsigned, so the signed code's
     magnitude meets x with the code's sign. */
  struct Codes8 {
    __m256i sign, magnitude;
  };
  __attribute__((always_inline)) static Codes8 codes8(__m256i c) {
    const __m256i s = _mm256_xor_si256(c, _mm256_set1_epi8(static_cast<char>(0x80)));
    return {s, _mm256_sign_epi8(s, s)};
  }
  /* acc + per lane the 4 products (c - 128) * x, for a chain begun at offset8. */
  __attribute__((always_inline)) static __m256i signed8(__m256i acc, Codes8 w, __m256i x) {
    const __m256i pairs = _mm256_maddubs_epi16(w.magnitude, _mm256_sign_epi8(x, w.sign));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  /* Where signed8 over x's high digit, shifted by 7, then its low digit begins: at 0. */
  __attribute__((always_inline)) static __m256i offset8(__m256i, __m256i) { return _mm256_setzero_si256(); }
  /* acc + per lane the 2 products of int16 w and x. */
  __attribute__((always_inline)) static __m256i words(__m256i acc, __m256i w, __m256i x) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
  }
};
#include "backend/cpu/quantized_int8_kernels.inc"
#pragma GCC pop_options
}  // namespace avx2

namespace vnni {
#pragma GCC push_options
#pragma GCC target("avx2,fma,avxvnni")
/* AVX-VNNI's: vpdpbusd and vpdpwssd multiply, sum each lane's products and add them in one step. */
struct Dot {
  __attribute__((always_inline)) static __m256i bytes(__m256i acc, __m256i w, __m256i x) {
    return _mm256_dpbusd_avx_epi32(acc, w, x);
  }
  __attribute__((always_inline)) static __m256i nibbles(__m256i acc, __m256i lo, __m256i hi, __m256i xe, __m256i xo) {
    return _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(acc, lo, xe), hi, xo);
  }
  /* 8-bit codes as they are (unsigned): signed8 sums c * x, and offset8 takes 128 * x off. */
  struct Codes8 {
    __m256i c;
  };
  __attribute__((always_inline)) static Codes8 codes8(__m256i c) { return {c}; }
  __attribute__((always_inline)) static __m256i signed8(__m256i acc, Codes8 w, __m256i x) {
    return _mm256_dpbusd_avx_epi32(acc, w.c, x);
  }
  /* -128 * sum(hi) - sum(lo) per lane: shifted by 7 with the high digit's products, then the low
     digit's added, the chain sums (c - 128) * (128 * hi + lo). */
  __attribute__((always_inline)) static __m256i offset8(__m256i hi, __m256i lo) {
    const __m256i s = _mm256_dpbusd_avx_epi32(
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(static_cast<char>(0x80)), hi),
        _mm256_set1_epi8(1), lo);
    return _mm256_sub_epi32(_mm256_setzero_si256(), s);
  }
  __attribute__((always_inline)) static __m256i words(__m256i acc, __m256i w, __m256i x) {
    return _mm256_dpwssd_avx_epi32(acc, w, x);
  }
};
#include "backend/cpu/quantized_int8_kernels.inc"
#pragma GCC pop_options
}  // namespace vnni
}  // namespace

bool cpu_has_vnni() {
  static const bool yes = cpu_has_avx2() && __builtin_cpu_supports("avxvnni");
  return yes;
}

bool use_cpu_vnni(bool yes) { return vnni_setting().exchange(yes); }

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
  const Kernel kernel = gemm           ? (int16 ? Kernel::gemm4_wide : Kernel::gemm4)
                        : fused_digits ? (q.bits == 4 ? Kernel::digits4 : Kernel::digits8)
                                       : (q.bits == 4 ? Kernel::decode4 : Kernel::decode8);
  const bool vnni = simd && cpu_has_vnni() && vnni_setting().load(std::memory_order_relaxed);
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
    Scratch scratch;
    scratch.wu.resize(static_cast<size_t>(gemm && !int16 ? kPanel * k : 0));
    scratch.wu16.resize(static_cast<size_t>(gemm && int16 ? kPanel * k : 0));
    scratch.st.resize(static_cast<size_t>(gemm ? 4 * p.blocks : 0));
    for (int64_t panel = a; panel < e; ++panel) {
      const int64_t n0 = panel * kPanel, rows = std::min(kPanel, n - n0);
      if (panel + 1 < e)
        for (const Tensor* t : {&s, &b})
          prefetch(*t, (n0 + kPanel) * p.groups, std::min(kPanel, n - n0 - kPanel) * p.groups);
      floats_of(s, n0 * p.groups, rows * p.groups, sw.data());
      floats_of(b, n0 * p.groups, rows * p.groups, bw.data());
      // 8 bits: the kernels use code - 128, so each group's bias gains 128 scales.
      if (simd && q.bits == 8)
        for (int64_t i = 0; i < rows * p.groups; ++i) bw[static_cast<size_t>(i)] += 128.0f * sw[static_cast<size_t>(i)];
      if (vnni)
        vnni::panel(kernel, p, sw.data(), bw.data(), n0, rows, scratch, y);
      else if (simd)
        avx2::panel(kernel, p, sw.data(), bw.data(), n0, rows, scratch, y);
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
