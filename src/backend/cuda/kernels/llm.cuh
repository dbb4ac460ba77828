// Device kernels of the language-model ops: affine dequantization and the decode product,
// rms_norm and layer_norm, rope and the in-place cache update (attention: attention.cuh). Each reads one
// argument struct (args.h); backend/cuda/llm_ops.cpp instantiates and launches them.
// Generated source includes kernels/support.cuh (kiln_vec, kiln_gid, kiln_wait_for_inputs) first.
#pragma once

#include "backend/common/math.h"
#include "backend/common/tile_order.h"
#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::llm {

using namespace kiln::cuda::args;

__device__ inline float neg_inf() { return __int_as_float(0xff800000u); }

/* max that propagates NaN (the CPU kernels' rule, so a NaN score poisons its softmax). */
__device__ inline float nan_max(float a, float b) { return a != a || b != b ? a + b : (a > b ? a : b); }

template <class T>
__device__ inline T warp_sum(T v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
/* The block's sum (or NaN-propagating max) in every thread; `red` holds 32 values. */
template <bool Max, class T>
__device__ inline T block_fold(T v, T* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if constexpr (Max)
    v = warp_max(v);
  else
    v = warp_sum(v);
  __syncthreads();  // red may still be read from the previous fold
  if (lane == 0) red[warp] = v;
  __syncthreads();
  T r = red[0];
  for (int w = 1; w < warps; ++w) {
    if constexpr (Max)
      r = nan_max(r, red[w]);
    else
      r += red[w];
  }
  return r;
}

// ---- tensor-core operands (mma.sync m16n8k16, float sums) ----------------------------
/* Two floats as the 16-bit pair of an mma operand (the first in the low half). */
template <class T>
__device__ inline unsigned mma_pair(float lo, float hi) {
  unsigned r;
  if constexpr (std::is_same_v<T, kiln::bfloat16_t>)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
/* c += a (16 x 16, row-major fragment) * b (16 x 8, column-major fragment). */
template <class T>
__device__ inline void mma_16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  if constexpr (std::is_same_v<T, kiln::bfloat16_t>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* The words of Vals values of `Bits` bits (Vals * Bits a multiple of 32), read as wide as their
   alignment allows (the host checks the base). */
template <int Bits, int Vals>
__device__ inline void load_words(const uint32_t* w, uint32_t* words) {
  constexpr int kWords = Vals * Bits / 32;
  if constexpr (kWords % 4 == 0) {
#pragma unroll
    for (int i = 0; i < kWords / 4; ++i) {
      const auto v = reinterpret_cast<const kiln_vec<uint32_t, 4>*>(w)[i];
      for (int j = 0; j < 4; ++j) words[4 * i + j] = v.v[j];
    }
  } else if constexpr (kWords % 2 == 0) {
#pragma unroll
    for (int i = 0; i < kWords / 2; ++i) {
      const auto v = reinterpret_cast<const kiln_vec<uint32_t, 2>*>(w)[i];
      words[2 * i] = v.v[0];
      words[2 * i + 1] = v.v[1];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kWords; ++i) words[i] = w[i];
  }
}

/* Field i of `words` (Bits bits each, a field may cross into the next word). */
template <int Bits>
__device__ inline uint32_t packed_field(const uint32_t* words, int i) {
  const int bit = i * Bits, at = bit >> 5, shift = bit & 31;
  uint32_t v = words[at] >> shift;
  if (shift + Bits > 32) v |= words[at + 1] << (32 - shift);
  return v & ((1u << Bits) - 1u);
}

// ---- quantization ---------------------------------------------------------------------
constexpr int kDequantizeRun = 8;  // values a dequantizing thread writes: one 16-byte store of 16-bit O

/* A run of 8 fields of Bits bits (from bit 0 of `fields` up) as O: scale times q rounded to O,
   plus the bias rounded to O (no fused multiply-add), as the CPU kernel and MLX compute. */
template <class O, int Bits>
__device__ inline kiln_vec<O, kDequantizeRun> expanded_run(uint64_t fields, float s, float b) {
  kiln_vec<O, kDequantizeRun> run;
#pragma unroll
  for (int i = 0; i < kDequantizeRun; ++i) {
    const float q = static_cast<float>(static_cast<uint32_t>(fields >> (i * Bits)) & ((1u << Bits) - 1u));
    run.v[i] = static_cast<O>(__fadd_rn(static_cast<float>(static_cast<O>(__fmul_rn(s, q))), b));
  }
  return run;
}

/* 4-bit weights in tile order, two steps of a tile (16 rows x 256 values, 2048 bytes stored in
   a run) a block at a time: a thread expands one stored 16-byte word into shared memory in row
   order, then the block stores each row's 256 values as one run. Both sides stay contiguous. */
template <class S, class O>
__device__ void dequantize_tiled(const Dequantize& a) {
  __shared__ kiln_vec<O, kDequantizeRun> staged[2][16][256 / kDequantizeRun + 1];  // + 1: rows off the same banks
  const long steps = a.k / 256, units = a.rows / 16 * steps;
  const int group_bits = tile_order::group_bits_of(a.group_size), mine = threadIdx.x >> 7, at = threadIdx.x & 127;
  int row, word;  // of the tile, of the step
  tile_order::in_step(at, row, word);
  const auto* packed = static_cast<const kiln_vec<uint32_t, 4>*>(a.packed);
  for (long u0 = 2L * blockIdx.x; u0 < units; u0 += 2L * gridDim.x) {
    const long unit = u0 + mine;
    if (unit < units) {
      const long tile = unit / steps, step = unit - tile * steps, r = tile * 16 + row;
      const long g = tile_order::group_at(r, (step * 256 + word * 32) >> group_bits, a.k, group_bits);
      const float s = static_cast<float>(static_cast<const S*>(a.scales)[g]);
      const float b = static_cast<float>(static_cast<const S*>(a.biases)[g]);
      const kiln_vec<uint32_t, 4> w = packed[tile_order::word_at(tile * 16, step * 8, a.k) + at];
#pragma unroll
      for (int u = 0; u < 4; ++u) staged[mine][row][word * 4 + u] = expanded_run<O, 4>(w.v[u], s, b);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * 16 * (256 / kDequantizeRun); i += blockDim.x) {
      const int which = i / (16 * 32), rr = i / 32 % 16, piece = i % 32;
      const long unit2 = u0 + which;
      if (unit2 >= units) continue;
      const long tile = unit2 / steps, step = unit2 - tile * steps;
      reinterpret_cast<kiln_vec<O, kDequantizeRun>*>(static_cast<O*>(a.out) + (tile * 16 + rr) * a.k +
                                                     step * 256)[piece] = staged[which][rr][piece];
    }
    __syncthreads();
  }
}

/* A thread per run of 8 values, so a warp's loads and stores are contiguous (tile order: above). */
template <class S, class O, int Bits>
__device__ void dequantize(const Dequantize& a) {
  kiln_wait_for_inputs();
  if constexpr (Bits == 4) {
    if (a.tiled) return dequantize_tiled<S, O>(a);
  }
  const long per_row = a.k / kDequantizeRun, total = a.rows * per_row, groups = a.k / a.group_size;
  const uint32_t* packed = static_cast<const uint32_t*>(a.packed);
  const S* scales = static_cast<const S*>(a.scales);
  const S* biases = static_cast<const S*>(a.biases);
  for (long c = kiln_gid(); c < total; c += kiln_gstride()) {
    const long r = c / per_row, j = c - r * per_row, g = r * groups + j * kDequantizeRun / a.group_size;
    // The run's Bits bytes, at most two words from where it starts (a row is whole words).
    const long bit = j * kDequantizeRun * Bits;
    const uint32_t* w = packed + r * (a.k * Bits / 32) + (bit >> 5);
    const int shift = static_cast<int>(bit & 31);
    uint64_t fields = w[0];
    if (shift + kDequantizeRun * Bits > 32) fields |= static_cast<uint64_t>(w[1]) << 32;
    fields >>= shift;
    reinterpret_cast<kiln_vec<O, kDequantizeRun>*>(static_cast<O*>(a.out) + r * a.k)[j] =
        expanded_run<O, Bits>(fields, static_cast<float>(scales[g]), static_cast<float>(biases[g]));
  }
}

/* Weights in tile order put back in row order: a thread per 16-byte word, then per group. */
template <class S>
__device__ void untile(const Untile& a) {
  kiln_wait_for_inputs();
  const long words = a.n * (a.k / 32), row_words = a.k / 32, groups = a.k / a.group_size;
  const auto* packed = static_cast<const kiln_vec<unsigned, 4>*>(a.packed);
  auto* packed_out = static_cast<kiln_vec<unsigned, 4>*>(a.packed_out);
  for (long i = kiln_gid(); i < words; i += kiln_gstride())
    packed_out[i] = packed[tile_order::word_at(i / row_words, i % row_words, a.k)];
  for (long i = kiln_gid(); i < a.n * groups; i += kiln_gstride()) {
    const long at = tile_order::group_at(i / groups, i % groups, a.k, tile_order::group_bits_of(a.group_size));
    static_cast<S*>(a.scales_out)[i] = static_cast<const S*>(a.scales)[at];
    static_cast<S*>(a.biases_out)[i] = static_cast<const S*>(a.biases)[at];
  }
}

// ---- the decode product ----------------------------------------------------------------
/* A lane takes whole chunks of 32 values of a weight row. A chunk lies in one quantization group
   (groups are 32, 64 or 128 values) and fills Bits words. */
constexpr int kChunk = 32;

/* What a lane reads of its R weight rows for one chunk. Scales and biases stay in S until used. */
template <class S, int Bits, int R>
struct GemvLoads {
  uint32_t words[R][Bits];
  S scale[R], bias[R];
};

/* A lane's 32 values of a row of activations (or of the norm's weight) for one chunk, loaded at
   once in 16-byte pieces so that their latency is paid once a chunk, beside the weights'. */
template <class T>
struct ChunkValues {
  static constexpr int per = 16 / sizeof(T);
  kiln_vec<T, per> v[kChunk / per];
  __device__ void load(const T* p) {
#pragma unroll
    for (int i = 0; i < kChunk / per; ++i) v[i] = reinterpret_cast<const kiln_vec<T, per>*>(p)[i];
  }
  __device__ float at(int i) const { return static_cast<float>(v[i / per].v[i % per]); }
};

template <class S, int Bits, int R>
__device__ inline void gemv_load_words(const QuantizedGemv& a, const long (&row)[R], long c, GemvLoads<S, Bits, R>& l) {
#pragma unroll
  for (int r = 0; r < R; ++r)
    load_words<Bits, kChunk>(static_cast<const uint32_t*>(a.packed) + row[r] * (a.k * Bits / 32) + c * Bits,
                             l.words[r]);
}

template <class S, int Bits, int R>
__device__ inline void gemv_load_scales(const QuantizedGemv& a, const long (&row)[R], long c,
                                        GemvLoads<S, Bits, R>& l) {
  const int group_bits = __ffs(static_cast<int>(a.group_size)) - 1;  // a power of two: no 64-bit division
  const long groups = a.k >> group_bits, g = (c * kChunk) >> group_bits;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    l.scale[r] = static_cast<const S*>(a.scales)[row[r] * groups + g];
    l.bias[r] = static_cast<const S*>(a.biases)[row[r] * groups + g];
  }
}

/* Where field i of a chunk lies in the word chunk_field reads (after a 12-bit shift for a field
   that reaches bit 23): its bit there. */
template <int Bits>
__device__ constexpr int field_place(int i) {
  const int shift = (i * Bits) & 31;
  return shift + Bits > 23 ? shift - 12 : shift;
}

/* The bits of 2^(23 - p) for each place p a 2-, 4- or 8-bit field takes, in registers (lop3 takes
   one immediate; the field's mask is the other). */
template <int Bits>
struct FieldMagic {
  uint32_t bits[24];
  __device__ FieldMagic() {
#pragma unroll
    for (int p = 0; p < 24; ++p) {
      if (!used(p)) continue;
      bits[p] = (150u - static_cast<uint32_t>(p)) << 23;
      asm volatile("" : "+r"(bits[p]));  // a register ptxas cannot fold back into an immediate
    }
  }
  static constexpr bool used(int p) {
    for (int i = 0; i < kChunk; ++i)
      if (field_place<Bits>(i) == p) return true;
    return false;
  }
};

/* Field i of a chunk as a float, exactly. A 2-, 4- or 8-bit field needs no conversion
   instruction (those run at a fraction of the multiply-add rate): or-ed (one lop3) into the bits
   of 2^(23 - p) where it lies at bit p, it makes 2^(23 - p) + q, and one subtraction leaves q.
   3-, 5- and 6-bit fields cross words and are converted. */
template <int Bits>
__device__ inline float chunk_field(const uint32_t* words, int i, const FieldMagic<32 % Bits == 0 ? Bits : 4>& magic) {
  if constexpr (32 % Bits == 0) {
    const int bit = i * Bits, at = bit >> 5, shift = bit & 31, p = field_place<Bits>(i);
    const uint32_t mask = ((1u << Bits) - 1u) << p;
    uint32_t bits;  // (word & mask) | magic: ptxas splits the C++ form into two instructions
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;"
        : "=r"(bits)
        : "r"(shift + Bits > 23 ? words[at] >> 12 : words[at]), "r"(mask), "r"(magic.bits[p]));
    return __uint_as_float(bits) - __uint_as_float((150u - static_cast<uint32_t>(p)) << 23);
  } else {
    return static_cast<float>(packed_field<Bits>(words, i));
  }
}

/* Chunk c of the R rows against the M activation rows. The chunk's product is s * sum(q * x) + b * sum(x), as the CPU's
   decode product computes it: three instructions a weight (the field, its value, a multiply-add;
   the kernels build with --fmad=false, so multiply-adds are explicit). With a norm the products
   take the weighted activations and the sums of squares build beside. */
template <class T, class S, int Bits, int M, class W, int R>
__device__ inline void gemv_chunk(const QuantizedGemv& a, const GemvLoads<S, Bits, R>& l, long c, float (&acc)[R][M],
                                  float (&squares)[M]) {
  ChunkValues<W> nwc;
  const FieldMagic<32 % Bits == 0 ? Bits : 4> magic;
  const bool norm = a.norm_weight != nullptr;
  if constexpr (M > 2) {
    // Many activation rows: the weights made floats once, then one row of x at a time (every
    // row's chunk held at once took 250 registers a thread).
    if (norm) nwc.load(static_cast<const W*>(a.norm_weight) + c * kChunk);
    float q[R][kChunk];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) q[r][i] = chunk_field<Bits>(l.words[r], i, magic);
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      ChunkValues<T> xm;
      xm.load(static_cast<const T*>(a.x) + m * a.k + c * kChunk);
      float dot[R], sum = 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) dot[r] = 0.0f;
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        float xv = xm.at(i);
        if (norm) {
          squares[m] = __fmaf_rn(xv, xv, squares[m]);
          xv *= nwc.at(i);
        }
        sum += xv;
#pragma unroll
        for (int r = 0; r < R; ++r) dot[r] = __fmaf_rn(q[r][i], xv, dot[r]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
        acc[r][m] =
            __fmaf_rn(static_cast<float>(l.scale[r]), dot[r], __fmaf_rn(static_cast<float>(l.bias[r]), sum, acc[r][m]));
    }
    return;
  }
  ChunkValues<T> xc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) xc[m].load(static_cast<const T*>(a.x) + m * a.k + c * kChunk);
  if (norm) nwc.load(static_cast<const W*>(a.norm_weight) + c * kChunk);
  float dots[R][M], sums[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    sums[m] = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) dots[r][m] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kChunk; j += 8) {
    float xs[M][8];  // the activations, weighted with a norm
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        float xv = xc[m].at(j + i);
        if (norm) {
          squares[m] = __fmaf_rn(xv, xv, squares[m]);
          xv *= nwc.at(j + i);
        }
        sums[m] += xv;
        xs[m][i] = xv;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float q = chunk_field<Bits>(l.words[r], j + i, magic);
#pragma unroll
        for (int m = 0; m < M; ++m) dots[r][m] = __fmaf_rn(q, xs[m][i], dots[r][m]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = static_cast<float>(l.scale[r]), b = static_cast<float>(l.bias[r]);
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = __fmaf_rn(s, dots[r][m], __fmaf_rn(b, sums[m], acc[r][m]));
  }
}

/* Row r of the R rows of w of row group `group` (by default the block's): with `glu`, R / 2 gate
   rows and their up rows, n / 2 apart; else R consecutive rows. */
template <int R>
__device__ inline long gemv_row(const QuantizedGemv& a, int r, long group = blockIdx.x) {
  constexpr int kGates = R > 1 ? R / 2 : 1;
  const long outs = a.glu ? a.n / 2 : a.n;  // the groups cover the output columns exactly
  return a.glu ? group * kGates + r % kGates + (r / kGates) * outs : group * R + r;
}
template <int R>
__device__ inline void gemv_rows(const QuantizedGemv& a, long (&row)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) row[r] = gemv_row<R>(a, r);
}

/* 1/rms of an activation row from its sum of squares (1 without a norm). */
__device__ inline float product_rms(const QuantizedGemv& a, float squares) {
  return a.norm_weight ? 1.0f / sqrtf(squares / static_cast<float>(a.k) + static_cast<float>(a.eps)) : 1.0f;
}
/* Output `row` of activation row m, plus the addend when there is one (rounded after the product
   and after the sum, as the separate ops round). */
template <class T>
__device__ inline void store_product(const QuantizedGemv& a, long m, long row, float y) {
  if (a.addend)
    y = static_cast<float>(static_cast<T>(y)) + static_cast<float>(static_cast<const T*>(a.addend)[m * a.n + row]);
  static_cast<T*>(a.out)[m * a.n + row] = static_cast<T>(y);
}
/* With glu: silu(gate) * up for the gate row `row` of activation row m. */
template <class T>
__device__ inline void store_gated(const QuantizedGemv& a, long m, long row, float gate, float up) {
  static_cast<T*>(a.out)[m * (a.n / 2) + row] = kiln::math::silu_times(static_cast<T>(gate), static_cast<T>(up));
}

/* The end of a decode product: the warps' sums (and, with a norm, sums of squares) folded in
   shared memory, then a thread an activation row scales by 1/rms, gates or adds, and writes. */
template <class T, int M, int R>
__device__ void gemv_finish(const QuantizedGemv& a, const long (&row)[R], float (&acc)[R][M], float (&squares)[M]) {
  constexpr int kGates = R > 1 ? R / 2 : 1;
  __shared__ float partial[kGemvWarps][(R + 1) * M];  // each warp's row sums, then its squares
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][m] = warp_sum(acc[r][m]);
    squares[m] = warp_sum(squares[m]);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) partial[warp][r * M + m] = acc[r][m];
      partial[warp][R * M + m] = squares[m];
    }
  }
  __syncthreads();
  if (threadIdx.x >= M) return;
  const int m = threadIdx.x;  // a thread an activation row
  float v[R], sq = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r) v[r] = 0.0f;
  for (int w = 0; w < warps; ++w) {
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] += partial[w][r * M + m];
    sq += partial[w][R * M + m];
  }
  const float rms = product_rms(a, sq);
  if (a.glu) {
#pragma unroll
    for (int r = 0; r < kGates; ++r) store_gated<T>(a, m, row[r], v[r] * rms, v[r + kGates] * rms);
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) store_product<T>(a, m, row[r], v[r] * rms);
}

/* A decode product's blocks: each takes R weight rows against the M activation rows; its warps
   split the rows' chunks, `chunk`(loads, c, acc, squares) adding each chunk's products to the
   sums, then fold their sums (gemv_finish). Many small warps, each a chunk a step, keep the
   weights' reads in flight (one warp a row group with long serial steps left the SMs mostly
   idle). */
template <class T, class S, int Bits, int M, int R, class Chunk>
__device__ void gemv_blocks(const QuantizedGemv& a, Chunk chunk) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  long row[R];
  gemv_rows(a, row);
  const long chunks = a.k / kChunk, first = warp * 32L + lane;
  GemvLoads<S, Bits, R> l;
  // Weights that no earlier kernel of the graph writes are read before waiting for x.
  const bool early = a.weights_ready && first < chunks;
  if (early) gemv_load_words(a, row, first, l);
  kiln_wait_for_inputs();
  float acc[R][M], squares[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    squares[m] = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r][m] = 0.0f;
  }
  for (long c = first; c < chunks; c += 32L * warps) {
    if (c != first || !early) gemv_load_words(a, row, c, l);
    gemv_load_scales(a, row, c, l);
    chunk(l, c, acc, squares);
  }
  gemv_finish<T, M, R>(a, row, acc, squares);
}

/* The decode product of x as it is. With a norm, each row's 1/rms scales the result at the end. */
template <class T, class S, int Bits, int M, class W = T, int R = 1>
__device__ void quantized_gemv(const QuantizedGemv& a) {
  gemv_blocks<T, S, Bits, M, R>(a, [&](const GemvLoads<S, Bits, R>& l, long c, float(&acc)[R][M], float(&squares)[M]) {
    gemv_chunk<T, S, Bits, M, W, R>(a, l, c, acc, squares);
  });
}

// ---- the decode product on the tensor cores ------------------------------------------------
/* 4-bit weights against 2 to 32 activation rows (KILN_CUDA_MMA_PRODUCT_ROWS) on the tensor cores:
   the weights are the 16-row A tiles of mma.sync m16n8k16 and each 8 rows of x a B tile, so a
   weight is read once and meets every row in one instruction. A block takes kMmaRows rows of w
   (with glu, 16 gate rows and their up rows) as two tiles; its warps split the rows' chunks of
   kMmaChunk values, each with the next chunk's words in flight. A lane reads 16 bytes (32 values) of
   each of its four rows a chunk and makes them the A operands in registers; so that no value moves
   between lanes, the chunk's values fill the mma's k slots in an order of their own (mma_x_pairs
   puts x's values in that order). */

/* Two 4-bit fields (bits 0-3 and 16-19 of w) as the pair (s * q + b) of T: or-ed into the bits
   of 2^7 (bfloat16) or 2^10 (float16) they make 2^p + q exactly; a multiply-add takes 2^p off and
   another scales and shifts, each rounded once. */
template <class T>
__device__ inline unsigned dequantized_pair(unsigned w, unsigned magic, unsigned s2, unsigned b2) {
  unsigned v, q, y;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(w), "r"(0x000F000Fu), "r"(magic));
  if constexpr (std::is_same_v<T, kiln::bfloat16_t>) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(q) : "r"(v), "r"(0x3F803F80u), "r"(0xC300C300u));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(q), "r"(s2), "r"(b2));
  } else {
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(q) : "r"(v), "r"(0x3C003C00u), "r"(0xE400E400u));
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(y) : "r"(q), "r"(s2), "r"(b2));
  }
  return y;
}

/* The B operands of a lane's 8 k-steps from its 32 values of a row of x (16 pairs, in memory
   order): step 2i + h takes word i's fields 2h and 2h + 4 (first register) and 2h + 1 and
   2h + 5 (second), as dequantized_pair reads them from the shifted words. */
__device__ inline void mma_x_pairs(const unsigned (&x)[16], unsigned (&b)[8][2]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned lo = x[4 * i + h], hi = x[4 * i + h + 2];
      asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(b[2 * i + h][0]) : "r"(lo), "r"(hi));
      asm("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(b[2 * i + h][1]) : "r"(lo), "r"(hi));
    }
  }
}

/* 32 values of x at p as 16 pairs of T; with a norm, weighted by the norm's 32 values nw, their
   squares added to `squares`. */
template <class T, class W>
__device__ inline void x_pairs(const T* p, bool norm, const ChunkValues<W>& nw, unsigned (&x)[16], float& squares) {
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const kiln_vec<unsigned, 4> w = reinterpret_cast<const kiln_vec<unsigned, 4>*>(p)[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) x[4 * v + j] = w.v[j];
  }
  if (!norm) return;
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const float lo = static_cast<float>(T::from_bits(static_cast<uint16_t>(x[u])));
    const float hi = static_cast<float>(T::from_bits(static_cast<uint16_t>(x[u] >> 16)));
    squares = __fmaf_rn(lo, lo, __fmaf_rn(hi, hi, squares));
    x[u] = mma_pair<T>(lo * nw.at(2 * u), hi * nw.at(2 * u + 1));
  }
}

/* A lane's 32 values of activation row n for the chunk at `at` as 16 pairs of T (zeros past the
   last row); with a norm, weighted by the norm's weights, their squares added to `squares`. */
template <class T, class W>
__device__ inline void mma_x_row(const QuantizedGemv& a, long n, long at, const ChunkValues<W>& nw, unsigned (&x)[16],
                                 float& squares) {
  if (n >= a.m) {
#pragma unroll
    for (int u = 0; u < 16; ++u) x[u] = 0;
    return;
  }
  x_pairs<T, W>(static_cast<const T*>(a.x) + n * a.k + at, a.norm_weight != nullptr, nw, x, squares);
}

template <class T, class S, int NT, class W = T>
__device__ void quantized_mma(const QuantizedGemv& a) {
#if __CUDA_ARCH__ >= 800
  constexpr int kCols = NT * 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, g = lane >> 2, t = lane & 3;
  const long chunks = a.k / kMmaChunk, row_chunks = a.k / 32;
  const int group_bits = __ffs(static_cast<int>(a.group_size)) - 1;
  const long groups = a.k >> group_bits;
  long row[2][2];  // the lane's rows: tile m, rows g and g + 8 of it
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) row[m][h] = gemv_row<kMmaRows>(a, m * 16 + g + 8 * h);
  }
  const auto* packed = static_cast<const kiln_vec<unsigned, 4>*>(a.packed);  // 32 values each
  auto load = [&](long c, kiln_vec<unsigned, 4>(&w)[2][2]) {
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        w[m][h] = packed[a.tiled ? tile_order::word_at(row[m][h], c * 4 + t, a.k) : row[m][h] * row_chunks + c * 4 + t];
    }
  };
  kiln_vec<unsigned, 4> cur[2][2], next[2][2];  // this chunk's words, and the next chunk's in flight
  long c = warp;
  // Weights that no earlier kernel of the graph writes are read before waiting for x.
  const bool early = a.weights_ready && c < chunks;
  if (early) load(c, cur);
  kiln_wait_for_inputs();
  if (!early && c < chunks) load(c, cur);
  unsigned magic = std::is_same_v<T, kiln::bfloat16_t> ? 0x43004300u : 0x64006400u;
  asm volatile("" : "+r"(magic));  // a register: lop3 takes the mask as its one immediate
  float acc[2][NT][4], squares[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    squares[n] = 0.0f;
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[m][n][j] = 0.0f;
    }
  }
  for (; c < chunks; c += warps) {
    if (c + warps < chunks) load(c + warps, next);
    const long at = c * kMmaChunk + 32 * t, group = at >> group_bits;
    unsigned s2[2][2], b2[2][2];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const long at = a.tiled ? tile_order::group_at(row[m][h], group, a.k, group_bits) : row[m][h] * groups + group;
        const float s = static_cast<float>(static_cast<const S*>(a.scales)[at]);
        const float b = static_cast<float>(static_cast<const S*>(a.biases)[at]);
        s2[m][h] = mma_pair<T>(s, s);
        b2[m][h] = mma_pair<T>(b, b);
      }
    }
    ChunkValues<W> nw;
    if (a.norm_weight) nw.load(static_cast<const W*>(a.norm_weight) + at);
    unsigned b[NT][8][2];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      unsigned x[16];
      mma_x_row<T, W>(a, n * 8 + g, at, nw, x, squares[n]);
      mma_x_pairs(x, b[n]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const unsigned lo = cur[m][0].v[i], hi = cur[m][1].v[i];  // rows g and g + 8
          const unsigned af[4] = {dequantized_pair<T>(lo >> (8 * h), magic, s2[m][0], b2[m][0]),
                                  dequantized_pair<T>(hi >> (8 * h), magic, s2[m][1], b2[m][1]),
                                  dequantized_pair<T>(lo >> (8 * h + 4), magic, s2[m][0], b2[m][0]),
                                  dequantized_pair<T>(hi >> (8 * h + 4), magic, s2[m][1], b2[m][1])};
#pragma unroll
          for (int n = 0; n < NT; ++n) mma_16816<T>(acc[m][n], af, b[n][2 * i + h][0], b[n][2 * i + h][1]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < 2; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) cur[m][h] = next[m][h];
    }
  }
  // The warps' sums meet in shared memory: [warps][kMmaRows][kCols], then [warps][kCols] squares.
  extern __shared__ float mma_partial[];
  float* sums = mma_partial + warp * kMmaRows * kCols;
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int r = m * 16 + g, col = n * 8 + 2 * t;
      sums[r * kCols + col] = acc[m][n][0];
      sums[r * kCols + col + 1] = acc[m][n][1];
      sums[(r + 8) * kCols + col] = acc[m][n][2];
      sums[(r + 8) * kCols + col + 1] = acc[m][n][3];
    }
  }
  float* square_sums = mma_partial + warps * kMmaRows * kCols;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    float v = squares[n];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (t == 0) square_sums[warp * kCols + n * 8 + g] = v;
  }
  __syncthreads();
  const int per = a.glu ? kMmaRows / 2 : kMmaRows;  // outputs of an activation row
  for (int o = threadIdx.x; o < per * a.m; o += blockDim.x) {
    const int m = o / per, i = o - m * per;
    float v = 0.0f, up = 0.0f, sq = 0.0f;
    for (int w = 0; w < warps; ++w) {
      const float* p = mma_partial + w * kMmaRows * kCols;
      v += p[i * kCols + m];
      if (a.glu) up += p[(i + 16) * kCols + m];
      sq += square_sums[w * kCols + m];
    }
    const float rms = product_rms(a, sq);
    if (a.glu)
      store_gated<T>(a, m, gemv_row<kMmaRows>(a, i), v * rms, up * rms);
    else
      store_product<T>(a, m, gemv_row<kMmaRows>(a, i), v * rms);
  }
#endif
}

// ---- the one-row decode product on the tensor cores ----------------------------------------
/* 4-bit weights against one row of 16-bit x (decoding one sequence). A warp takes a tile of 16
   weight rows (with glu, 8 gate rows and their up rows) as the A operand of mma.sync m16n8k16, a
   chunk of kMvChunk values a step: lane (g, t) holds segments t and 4 + t (32 values, 16 bytes
   each) of rows g and g + 8. The B operand's 8 columns are the chunk's 8 segments of x: column j
   holds segment j in that segment's k slots and zeros elsewhere, so the C fragment keeps each
   segment's sum apart and its scale and bias apply after the mma, in float. A weight then costs
   a lop3 and part of a shift (the CUDA-core product spends three instructions): bfloat16
   weights enter as 2^7 + q, the 2^7 taken off with the segment's sum of x. x is staged once a
   block in shared memory, already in B order, with its segments' sums (and the norm applied).
   Each warp keeps kMvStages chunks of weights, scales and biases in flight. */
constexpr int kMvStages = 3;

/* Two 4-bit fields (bits 0-3 and 16-19 of w) as an A pair: 2^7 + q for bfloat16; for float16,
   2^10 + q less 2^10, exactly (2^10 would cost float16 sums ten bits). */
template <class T>
__device__ inline unsigned mv_weight_pair(unsigned w, unsigned magic) {
  unsigned v;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(w), "r"(0x000F000Fu), "r"(magic));
  if constexpr (!std::is_same_v<T, kiln::bfloat16_t>)
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(v) : "r"(v), "r"(0x3C003C00u), "r"(0xE400E400u));
  return v;
}

/* A lane's scales (or biases) of one weight row for two segments (values at0 and at1 of p), as
   read: 16-bit ones as one word (two groups of 32, or one group's value twice), floats as two. */
template <class S>
__device__ inline void mv_load_pair(const S* p, long at0, long at1, unsigned (&raw)[2]) {
  if constexpr (sizeof(S) == 2) {
    const auto* bits = reinterpret_cast<const uint16_t*>(p);
    raw[0] = at1 == at0 + 1 ? *reinterpret_cast<const unsigned*>(bits + at0) : bits[at0] * 0x10001u;
  } else {
    raw[0] = __float_as_uint(p[at0]);
    raw[1] = __float_as_uint(p[at1]);
  }
}
template <class S>
__device__ inline float2 mv_pair(const unsigned (&raw)[2]) {
  if constexpr (sizeof(S) == 2)
    return {static_cast<float>(S::from_bits(static_cast<uint16_t>(raw[0]))),
            static_cast<float>(S::from_bits(static_cast<uint16_t>(raw[0] >> 16)))};
  else
    return {__uint_as_float(raw[0]), __uint_as_float(raw[1])};
}

/* What a lane reads of one chunk: [half][row g, row g + 8] words, and scales and biases of its
   two rows for segments 2t and 2t + 1. */
struct MvStage {
  kiln_vec<unsigned, 4> w[2][2];
  unsigned s[2][2], b[2][2];
};

/* x's segments in B order in shared memory: segment j's 16 words as mma_x_pairs orders them
   (weighted by the norm, with one), its sum in sums[j]; returns the norm's 1/rms (1 without). */
template <class T, class W>
__device__ inline float mv_stage_x(const QuantizedGemv& a, unsigned* image, float* sums, float* red) {
  const long segments = a.k / 32;
  float squares = 0.0f;
  for (long j = threadIdx.x; j < segments; j += blockDim.x) {
    unsigned x[16];
    const T* xj = static_cast<const T*>(a.x) + j * 32;
    if (a.norm_weight) {
      ChunkValues<W> nw;
      nw.load(static_cast<const W*>(a.norm_weight) + j * 32);
      x_pairs<T, W>(xj, true, nw, x, squares);
    } else {
      x_pairs<T, W>(xj, false, ChunkValues<W>{}, x, squares);
    }
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < 16; ++u)
      sum += static_cast<float>(T::from_bits(static_cast<uint16_t>(x[u]))) +
             static_cast<float>(T::from_bits(static_cast<uint16_t>(x[u] >> 16)));
    unsigned b[8][2];
    mma_x_pairs(x, b);
    auto* out = reinterpret_cast<kiln_vec<unsigned, 4>*>(image + j * 16);
#pragma unroll
    for (int v = 0; v < 4; ++v) out[v] = {b[2 * v][0], b[2 * v][1], b[2 * v + 1][0], b[2 * v + 1][1]};
    sums[j] = sum;
  }
  return a.norm_weight ? product_rms(a, block_fold<false>(squares, red)) : 1.0f;
}

/* Tile order's scales (or biases) of one step as a lane reads them: those of rows g and g + 8
   for segments 2t and 2t + 1, at group j0 of the step and, with groups of 32, at j1 = j0 + 1
   (backend/common/tile_order.h): four or two values from `first` on. */
template <class S>
struct MvTiledScales {
  static constexpr int kSlot = 4 * sizeof(S);  // bytes of a lane's slot
  int first;  // the lane's first value, counted from row g's groups of the step
  bool two;  // two groups (of 32)
  __device__ MvTiledScales(int t, int group_bits)
      : first(2 * ((64 * t) >> group_bits)), two(((64 * t) >> group_bits) != ((64 * t + 32) >> group_bits)) {}
  /* Starts copying the values from `step` (row g's groups of the step) into `slot`. */
  __device__ void copy(void* slot, const S* step) const {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(slot));
    const int bytes = (two ? 4 : 2) * static_cast<int>(sizeof(S));
    if (bytes == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(step + first) : "memory");
    else if (bytes == 8)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(to), "l"(step + first) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(to), "l"(step + first) : "memory");
  }
  /* Each row's pair from the slot ([g, j0], [g + 8, j0], then [g, j1], [g + 8, j1] with two
     groups), as mv_load_pair gives it. */
  __device__ void unpack(const void* slot, unsigned (&raw)[2][2]) const {
    if constexpr (sizeof(S) == 2) {
      const auto v = *static_cast<const kiln_vec<unsigned, 2>*>(slot);
      raw[0][0] = two ? __byte_perm(v.v[0], v.v[1], 0x5410) : __byte_perm(v.v[0], v.v[0], 0x1010);
      raw[1][0] = two ? __byte_perm(v.v[0], v.v[1], 0x7632) : __byte_perm(v.v[0], v.v[0], 0x3232);
    } else {
      const auto v = *static_cast<const kiln_vec<unsigned, 4>*>(slot);
      raw[0][0] = v.v[0];
      raw[1][0] = v.v[1];
      raw[0][1] = two ? v.v[2] : v.v[0];
      raw[1][1] = two ? v.v[3] : v.v[1];
    }
  }
};

/* Tiled: packed, scales and biases in tile order (backend/common/tile_order.h), so that a
   warp's step reads contiguous runs. With glu a block takes kTiles / 2 tiles of gate rows and
   the tiles of their up rows. */
template <class T, class S, class W, int Split, bool Tiled>
__device__ void quantized_mv(const QuantizedGemv& a) {
#if __CUDA_ARCH__ >= 800
  constexpr int kTiles = kMvWarps / Split;  // tiles a block takes, each split between Split warps
  constexpr int kPairs = kTiles > 1 ? kTiles / 2 : 1;  // with glu: gate tiles, and up tiles, of a block
  constexpr float kOffset = std::is_same_v<T, kiln::bfloat16_t> ? 128.0f : 0.0f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3, split = warp % Split;
  const int local = warp / Split;  // the block's tile this warp takes
  const long tile = !a.glu           ? static_cast<long>(blockIdx.x) * kTiles + local
                    : local < kPairs ? static_cast<long>(blockIdx.x) * kPairs + local
                                     : a.n / 32 + static_cast<long>(blockIdx.x) * kPairs + local - kPairs;
  const long segments = a.k / 32, chunks = a.k / kMvChunk, mine = (chunks - split + Split - 1) / Split;
  const int group_bits = __ffs(static_cast<int>(a.group_size)) - 1;
  const long groups = a.k >> group_bits;
  const long row[2] = {tile * 16 + g, tile * 16 + g + 8};
  const auto* packed = static_cast<const kiln_vec<unsigned, 4>*>(a.packed);  // 32 values each
  auto load = [&](long i, MvStage& st) {  // this warp's chunk i: split + i * Split
    if (i >= mine) return;
    const long c = split + i * Split;
    const long v0 = c * kMvChunk + 64 * t, g0 = v0 >> group_bits, g1 = (v0 + 32) >> group_bits;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int half = 0; half < 2; ++half) st.w[half][h] = packed[row[h] * segments + c * 8 + 4 * half + t];
      mv_load_pair(static_cast<const S*>(a.scales), row[h] * groups + g0, row[h] * groups + g1, st.s[h]);
      mv_load_pair(static_cast<const S*>(a.biases), row[h] * groups + g0, row[h] * groups + g1, st.b[h]);
    }
  };
  // Shared memory: x's image [segments][16], 16 zero words, the segments' sums, the warps' row
  // sums [kMvWarps][16], block_fold's 32 floats, then with tile order the warps' slots.
  extern __shared__ kiln_vec<unsigned, 4> mv_shared[];
  // Tile order: a step is contiguous, so each lane copies its own part of it into one of its
  // warp's slots and reads it back alone; kMvTiledStages - 1 steps stay in flight while one is
  // multiplied, and no registers hold them.
  constexpr long kStepBytes = mv_tiled_slot_bytes(sizeof(S));
  const MvTiledScales<S> tiled_scales(t, group_bits);
  unsigned char* slots =
      reinterpret_cast<unsigned char*>(mv_shared) + mv_slots_at(a.k) + warp * kMvTiledStages * kStepBytes;
  // Where this warp's first step starts (its first word; row g's first group, row g + 8's beside
  // each) and how far its next step is: the layout's own arithmetic once, not in the loop.
  const long step_groups = kMvChunk >> group_bits;
  const long first_word = tile_order::word_at(tile * 16, split * 8, a.k);
  const long word_stride = tile_order::word_at(tile * 16, (split + Split) * 8, a.k) - first_word;
  const long first_group = tile_order::group_at(row[0], split * step_groups, a.k, group_bits);
  const long group_stride = tile_order::group_at(row[0], (split + Split) * step_groups, a.k, group_bits) - first_group;
  auto copy = [&](long i) {  // this warp's chunk i into slot i % kMvTiledStages, then a commit
    if (i < mine) {
      const auto* words = packed + first_word + i * word_stride + lane;
      unsigned char* slot = slots + (i % kMvTiledStages) * kStepBytes;
#pragma unroll
      for (int j = 0; j < 4; ++j) kiln_stage16(slot + (j * 32 + lane) * 16, words + j * 32);
      const long at = first_group + i * group_stride;
      tiled_scales.copy(slot + 2048 + lane * MvTiledScales<S>::kSlot, static_cast<const S*>(a.scales) + at);
      tiled_scales.copy(slot + 2048 + (32 + lane) * MvTiledScales<S>::kSlot, static_cast<const S*>(a.biases) + at);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  auto take = [&](long i, MvStage& st) {  // chunk i from its slot, once it has landed
    asm volatile("cp.async.wait_group %0;" ::"n"(kMvTiledStages - 1) : "memory");
    const unsigned char* slot = slots + (i % kMvTiledStages) * kStepBytes;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        st.w[half][h] = reinterpret_cast<const kiln_vec<unsigned, 4>*>(slot)[(2 * half + h) * 32 + lane];
    }
    tiled_scales.unpack(slot + 2048 + lane * MvTiledScales<S>::kSlot, st.s);
    tiled_scales.unpack(slot + 2048 + (32 + lane) * MvTiledScales<S>::kSlot, st.b);
  };
  MvStage st[Tiled ? 1 : kMvStages];
  // Weights that no earlier kernel of the graph writes are read before waiting for x.
  auto start = [&] {
#pragma unroll
    for (int s = 0; s < (Tiled ? kMvTiledStages - 1 : kMvStages); ++s) {
      if constexpr (Tiled)
        copy(s);
      else
        load(s, st[s]);
    }
  };
  if (a.weights_ready) start();
  kiln_wait_for_inputs();
  if (!a.weights_ready) start();
  unsigned* image = reinterpret_cast<unsigned*>(mv_shared);
  unsigned* zeros = image + segments * 16;
  float* sums = reinterpret_cast<float*>(zeros + 16);
  float* partial = sums + segments;
  float* red = partial + kMvWarps * 16;
  if (threadIdx.x < 16) zeros[threadIdx.x] = 0;
  const float rms = mv_stage_x<T, W>(a, image, sums, red);
  __syncthreads();
  unsigned magic = std::is_same_v<T, kiln::bfloat16_t> ? 0x43004300u : 0x64006400u;
  asm volatile("" : "+r"(magic));  // a register: lop3 takes the mask as its one immediate
  float acc[2] = {0.0f, 0.0f};  // rows g and g + 8, this lane's segments
  auto multiply = [&](long c, const MvStage& st) {  // chunk c of the rows into acc
    float cf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // Column g of B: segment g's values where this lane's k slots hold segment 4 * half + t.
      const auto* src =
          reinterpret_cast<const kiln_vec<unsigned, 4>*>(g == 4 * half + t ? image + (c * 8 + g) * 16 : zeros);
      unsigned bx[16];
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const kiln_vec<unsigned, 4> w = src[v];
#pragma unroll
        for (int u = 0; u < 4; ++u) bx[4 * v + u] = w.v[u];
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const unsigned lo = st.w[half][0].v[q], hi = st.w[half][1].v[q];  // rows g and g + 8
          const unsigned af[4] = {mv_weight_pair<T>(lo >> (8 * h), magic), mv_weight_pair<T>(hi >> (8 * h), magic),
                                  mv_weight_pair<T>(lo >> (8 * h + 4), magic),
                                  mv_weight_pair<T>(hi >> (8 * h + 4), magic)};
          mma_16816<T>(cf, af, bx[2 * (2 * q + h)], bx[2 * (2 * q + h) + 1]);
        }
      }
    }
    // cf: rows g and g + 8 against segments 2t and 2t + 1.
    const float2 xs = *reinterpret_cast<const float2*>(sums + c * 8 + 2 * t);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 sc = mv_pair<S>(st.s[h]), bi = mv_pair<S>(st.b[h]);
      acc[h] = __fmaf_rn(sc.x, __fmaf_rn(-kOffset, xs.x, cf[2 * h]), acc[h]);
      acc[h] = __fmaf_rn(sc.y, __fmaf_rn(-kOffset, xs.y, cf[2 * h + 1]), acc[h]);
      acc[h] = __fmaf_rn(bi.x, xs.x, __fmaf_rn(bi.y, xs.y, acc[h]));
    }
  };
  if constexpr (Tiled) {
    for (long i = 0; i < mine; ++i) {
      copy(i + kMvTiledStages - 1);  // into the slot chunk i - 1 left
      take(i, st[0]);
      multiply(split + i * Split, st[0]);
    }
  } else {
    for (long i0 = 0; i0 < mine; i0 += kMvStages) {
#pragma unroll
      for (int s = 0; s < kMvStages; ++s) {
        const long i = i0 + s;
        if (i >= mine) break;
        multiply(split + i * Split, st[s]);
        load(i + kMvStages, st[s]);
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    acc[h] += __shfl_xor_sync(0xffffffffu, acc[h], 1);
    acc[h] += __shfl_xor_sync(0xffffffffu, acc[h], 2);
  }
  if (t == 0) {
    partial[warp * 16 + g] = acc[0];
    partial[warp * 16 + g + 8] = acc[1];
  }
  __syncthreads();
  // A thread an output: tile tb's row r (with glu, gate tile tb and up tile tb + kPairs).
  if (threadIdx.x >= (a.glu ? kPairs : kTiles) * 16) return;
  const int tb = threadIdx.x / 16, r = threadIdx.x % 16;
  float v = 0.0f, up = 0.0f;
#pragma unroll
  for (int sp = 0; sp < Split; ++sp) {
    v += partial[(tb * Split + sp) * 16 + r];
    if (a.glu) up += partial[((tb + kPairs) * Split + sp) * 16 + r];
  }
  if (a.glu)
    store_gated<T>(a, 0, (static_cast<long>(blockIdx.x) * kPairs + tb) * 16 + r, v * rms, up * rms);
  else
    store_product<T>(a, 0, (static_cast<long>(blockIdx.x) * kTiles + tb) * 16 + r, v * rms);
#endif
}

// ---- the decode product with integer activations ---------------------------------------
/* Wide: int16 codes (QmmActivations::int16, up to 16256 = 127 * 128); else int8 (up to 127). */
template <bool Wide>
__device__ constexpr float max_code() {
  return Wide ? 16256.0f : 127.0f;
}

/* Rows of x (with a norm weight: rms_norm(x, w, eps), rounded to x's dtype as the op rounds)
   rounded to integer blocks of 32 as QmmActivations specifies: per block the scale max|v| / C
   and codes rint(v * C / max|v|) (C the largest code); a block with a NaN or an infinity gets
   codes 0 and a NaN scale. Each thread block takes kQuantizeBlocks blocks of a row, a warp a
   block and a lane a value; with a norm, each first sums the squares of its whole row (16-byte
   reads; one thread block a row left the long rows' rounding to a few SMs). */
template <class T, class W, bool Wide>
__device__ void quantize_rows(const QuantizeRows& a) {
  __shared__ float red[32];
  kiln_wait_for_inputs();
  const long blocks = a.k / kChunk, parts = (blocks + kQuantizeBlocks - 1) / kQuantizeBlocks;
  const long row = blockIdx.x / parts, part = blockIdx.x - row * parts;
  const T* x = static_cast<const T*>(a.x) + row * a.k;
  const W* nw = static_cast<const W*>(a.norm_weight);
  float inv_rms = 1.0f;
  if (nw) {
    constexpr int kPer = 16 / sizeof(T);  // a row of 32-value blocks is whole 16-byte pieces
    float sq = 0.0f;
    for (long i = threadIdx.x; i < a.k / kPer; i += blockDim.x) {
      const auto v = reinterpret_cast<const kiln_vec<T, kPer>*>(x)[i];
#pragma unroll
      for (int j = 0; j < kPer; ++j) sq = __fmaf_rn(static_cast<float>(v.v[j]), static_cast<float>(v.v[j]), sq);
    }
    sq = block_fold<false>(sq, red);
    inv_rms = 1.0f / sqrtf(sq / static_cast<float>(a.k) + static_cast<float>(a.eps));
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long b = part * kQuantizeBlocks + warp;
  if (warp >= kQuantizeBlocks || b >= blocks) return;
  using Code = std::conditional_t<Wide, short, signed char>;
  const long i = b * kChunk + lane;
  float v = static_cast<float>(x[i]);
  if (nw) v = static_cast<float>(static_cast<T>(__fmul_rn(__fmul_rn(v, inv_rms), static_cast<float>(nw[i]))));
  const bool finite = __all_sync(0xffffffffu, isfinite(v));
  float amax = fabsf(v);
  for (int m = 16; m > 0; m >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
  const float id = amax > 0.0f ? __fdiv_rn(max_code<Wide>(), amax) : 0.0f;
  const int c = finite ? static_cast<int>(fminf(fmaxf(rintf(__fmul_rn(v, id)), -16256.0f), 16256.0f)) : 0;
  static_cast<Code*>(a.codes)[row * a.k + i] = static_cast<Code>(c);
  const int total = warp_sum(c);
  if (lane == 0) {
    const float d = finite ? __fdiv_rn(amax, max_code<Wide>()) : __int_as_float(0x7fc00000);
    static_cast<float*>(a.block_scale)[row * blocks + b] = d;
    static_cast<float*>(a.block_sum)[row * blocks + b] = __fmul_rn(d, static_cast<float>(total));
  }
}

/* Integer dot products: the packed weights are unsigned (dp4a's and dp2a's unsigned side), the
   codes signed. dp4a: four 8-bit products a step; dp2a: two 16-bit codes times two of the
   weights' bytes (lo: bytes 0-1, hi: bytes 2-3). */
__device__ inline int dp4a(uint32_t w, uint32_t x, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(w), "r"(x), "r"(c));
  return d;
}
__device__ inline int dp2a_lo(uint32_t x, uint32_t w, int c) {
  int d;
  asm("dp2a.lo.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(w), "r"(c));
  return d;
}
__device__ inline int dp2a_hi(uint32_t x, uint32_t w, int c) {
  int d;
  asm("dp2a.hi.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(x), "r"(w), "r"(c));
  return d;
}

/* A chunk's 32 codes of one activation row, as the dot products of Bits-bit weights read them:
   for 4 bits, the 8 codes of each weight word as int8 evens then odds (the order the nibble
   masks leave the weights in), or as int16 pairs (x0, x2) (x1, x3) (x4, x6) (x5, x7); else in order. */
template <int Bits, bool Wide>
struct ChunkCodes {
  static constexpr int kRegs = Wide ? 16 : 8;
  uint32_t v[kRegs];
  __device__ void load(const void* p) {
#pragma unroll
    for (int i = 0; i < kRegs / 4; ++i) {
      const auto q = static_cast<const kiln_vec<uint32_t, 4>*>(p)[i];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[4 * i + j] = q.v[j];
    }
    if constexpr (Bits == 4) {
#pragma unroll
      for (int i = 0; i < kRegs; i += 2) {  // 8 codes in 2 registers (int8) or per pair of pairs (int16)
        if constexpr (Wide) {  // (x0, x1), (x2, x3) as (x0, x2), (x1, x3)
          const uint32_t a = v[i], b = v[i + 1];
          v[i] = __byte_perm(a, b, 0x5410);
          v[i + 1] = __byte_perm(a, b, 0x7632);
        } else {  // (x0..x3), (x4..x7) as evens, odds
          const uint32_t a = v[i], b = v[i + 1];
          v[i] = __byte_perm(a, b, 0x6420);
          v[i + 1] = __byte_perm(a, b, 0x7531);
        }
      }
    }
  }
  /* Code i of the chunk in natural order (for the widths read field by field). */
  __device__ int at(int i) const {
    if constexpr (Wide)
      return static_cast<short>(v[i >> 1] >> ((i & 1) * 16));
    else
      return static_cast<signed char>(v[i >> 2] >> ((i & 3) * 8));
  }
};

/* The integer dot product of a chunk of a weight row (its Bits words) with a chunk of codes. */
template <int Bits, bool Wide>
__device__ inline int chunk_dot(const uint32_t (&words)[Bits], const ChunkCodes<Bits, Wide>& x) {
  int dot = 0;
  if constexpr (Bits == 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // word j: values 8j..8j+7
      const uint32_t lo = words[j] & 0x0F0F0F0Fu, hi = (words[j] >> 4) & 0x0F0F0F0Fu;  // evens, odds
      if constexpr (Wide) {  // codes (x0, x2) (x1, x3) (x4, x6) (x5, x7)
        dot = dp2a_lo(x.v[4 * j], lo,
                      dp2a_hi(x.v[4 * j + 2], lo, dp2a_lo(x.v[4 * j + 1], hi, dp2a_hi(x.v[4 * j + 3], hi, dot))));
      } else {  // codes: evens, odds
        dot = dp4a(lo, x.v[2 * j], dp4a(hi, x.v[2 * j + 1], dot));
      }
    }
  } else if constexpr (Bits == 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // word j: values 4j..4j+3
      if constexpr (Wide)
        dot = dp2a_lo(x.v[2 * j], words[j], dp2a_hi(x.v[2 * j + 1], words[j], dot));
      else
        dot = dp4a(words[j], x.v[j], dot);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) dot += static_cast<int>(packed_field<Bits>(words, i)) * x.at(i);
  }
  return dot;
}

/* The decode product against integer codes of x (quantize_rows): each chunk's sums in
   integers, scaled by the block's scale; the bias meets the block's scaled sum of codes. The
   norm was applied as x was rounded. */
template <class T, class S, int Bits, int M, bool Wide, int R = 1>
__device__ void quantized_gemv_integer(const QuantizedGemv& a) {
  constexpr long kCodeBytes = Wide ? 2 : 1;
  const long chunks = a.k / kChunk;
  const float* block_scale = static_cast<const float*>(a.block_scale);
  const float* block_sum = static_cast<const float*>(a.block_sum);
  gemv_blocks<T, S, Bits, M, R>(a, [&](const GemvLoads<S, Bits, R>& l, long c, float(&acc)[R][M], float(&)[M]) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      ChunkCodes<Bits, Wide> x;
      x.load(static_cast<const char*>(a.x) + (m * a.k + c * kChunk) * kCodeBytes);
      const float d = block_scale[m * chunks + c], dsum = block_sum[m * chunks + c];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float dot = __fmul_rn(d, static_cast<float>(chunk_dot<Bits, Wide>(l.words[r], x)));
        acc[r][m] =
            __fmaf_rn(static_cast<float>(l.scale[r]), dot, __fmaf_rn(static_cast<float>(l.bias[r]), dsum, acc[r][m]));
      }
    }
  });
}

/* The gate of a gated product (prefill, where the decode product did not take it), a thread an
   output. */
template <class T>
__device__ void gated(const Gated& a) {
  kiln_wait_for_inputs();
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out);
  for (long i = kiln_gid(); i < a.rows * a.f; i += kiln_gstride()) {
    const long r = i / a.f, c = i - r * a.f;
    out[i] = kiln::math::silu_times(in[r * 2 * a.f + c], in[r * 2 * a.f + a.f + c]);
  }
}

/* out += addend, a thread an element (the product's residual outside the decode product). */
template <class T>
__device__ void add_into(const AddInto& a) {
  kiln_wait_for_inputs();
  const T* r = static_cast<const T*>(a.addend);
  T* y = static_cast<T*>(a.out);
  for (long i = kiln_gid(); i < a.n; i += kiln_gstride())
    y[i] = static_cast<T>(static_cast<float>(y[i]) + static_cast<float>(r[i]));
}

// ---- norms --------------------------------------------------------------------------------
/* N values of type S at p as A, in loads of up to 16 bytes (p aligned to them). */
template <class A, int N, class S>
__device__ inline void load_values(const S* p, A* out) {
  constexpr int kPiece = 16 / sizeof(S) < N ? 16 / sizeof(S) : N;
#pragma unroll
  for (int c = 0; c < N / kPiece; ++c) {
    const kiln_vec<S, kPiece> v = *reinterpret_cast<const kiln_vec<S, kPiece>*>(p + c * kPiece);
#pragma unroll
    for (int e = 0; e < kPiece; ++e) out[c * kPiece + e] = static_cast<A>(v.v[e]);
  }
}

/* One row of up to V * stride values held in registers: this thread's V values are runs of Vec
   (16 bytes where Vec > 1: the host checks that rows and pointers allow it), run u at value
   (at + stride * u) * Vec; every load issued at once (a loop would wait on each in turn), then
   the mean (layer_norm), the mean square about it and the writes. fold sums a value over the
   threads sharing the row. */
template <int V, int Vec, class T, class W, bool Layer, class Fold>
__device__ inline void norm_held(const Norm& a, long r, int at, int stride, Fold fold) {
  using A = kiln::math::compute_t<T>;
  constexpr int kRuns = V / Vec;
  const T* x = static_cast<const T*>(a.x) + r * a.n;
  T* y = static_cast<T*>(a.out) + r * a.n;
  const W* w = static_cast<const W*>(a.weight);
  const W* b = static_cast<const W*>(a.bias);
  const A n = static_cast<A>(a.n);
  A v[V];
  A s = 0;
#pragma unroll
  for (int u = 0; u < kRuns; ++u) {
    const long i = (at + static_cast<long>(stride) * u) * Vec;
    if (i < a.n) {
      load_values<A, Vec>(x + i, v + u * Vec);
    } else {
#pragma unroll
      for (int e = 0; e < Vec; ++e) v[u * Vec + e] = A(0);
    }
#pragma unroll
    for (int e = 0; e < Vec; ++e) s += v[u * Vec + e];
  }
  const A mean = Layer ? fold(s) / n : A(0);
  A ss = 0;
#pragma unroll
  for (int u = 0; u < kRuns; ++u) {
    const long i = (at + static_cast<long>(stride) * u) * Vec;
#pragma unroll
    for (int e = 0; e < Vec; ++e) {
      const A d = i < a.n ? v[u * Vec + e] - mean : A(0);
      ss += d * d;
    }
  }
  const A inv = A(1) / sqrt(fold(ss) / n + static_cast<A>(a.eps));
#pragma unroll
  for (int u = 0; u < kRuns; ++u) {
    const long i = (at + static_cast<long>(stride) * u) * Vec;
    if (i >= a.n) continue;
    A wv[Vec], bv[Vec];
    if (w) load_values<A, Vec>(w + i, wv);
    if (b) load_values<A, Vec>(b + i, bv);
    kiln_vec<T, Vec> o;
#pragma unroll
    for (int e = 0; e < Vec; ++e) {
      A z = (v[u * Vec + e] - mean) * inv;
      if (w) z *= wv[e];
      if (b) z += bv[e];
      o.v[e] = static_cast<T>(z);
    }
    *reinterpret_cast<kiln_vec<T, Vec>*>(y + i) = o;
  }
}

/* A block a row: rows of up to kNormThreadValues values a thread in registers (a decode step's
   rows), longer ones in passes over memory (the mean, the mean square about it, the writes),
   unrolled so that a thread's loads go out together. Vec: values a load (see norm_held). */
template <class T, class W, bool Layer, int Vec = 1>
__device__ void norm(const Norm& a) {
  kiln_wait_for_inputs();
  using A = kiln::math::compute_t<T>;
  __shared__ A red[32];
  auto fold = [&](A v) { return block_fold<false>(v, red); };
  const T* xs = static_cast<const T*>(a.x);
  const W* w = static_cast<const W*>(a.weight);
  const W* b = static_cast<const W*>(a.bias);
  T* ys = static_cast<T*>(a.out);
  const A n = static_cast<A>(a.n);
  for (long r = blockIdx.x; r < a.rows; r += gridDim.x) {
    if (a.n <= static_cast<long>(blockDim.x) * kNormThreadValues) {
      norm_held<kNormThreadValues, Vec, T, W, Layer>(a, r, threadIdx.x, blockDim.x, fold);
      continue;
    }
    const T* x = xs + r * a.n;
    T* y = ys + r * a.n;
    A mean = 0;
    if constexpr (Layer) {
      A s = 0;
#pragma unroll 8
      for (long i = threadIdx.x; i < a.n; i += blockDim.x) s += static_cast<A>(x[i]);
      mean = fold(s) / n;
    }
    A ss = 0;
#pragma unroll 8
    for (long i = threadIdx.x; i < a.n; i += blockDim.x) {
      const A v = static_cast<A>(x[i]) - mean;
      ss += v * v;
    }
    const A inv = A(1) / sqrt(fold(ss) / n + static_cast<A>(a.eps));
#pragma unroll 8
    for (long i = threadIdx.x; i < a.n; i += blockDim.x) {
      A v = (static_cast<A>(x[i]) - mean) * inv;
      if (w) v *= static_cast<A>(w[i]);
      if (b) v += static_cast<A>(b[i]);
      y[i] = static_cast<T>(v);
    }
  }
}

/* A warp a row of up to 32 * kNormLaneValues values, held in registers between the passes:
   no block barriers, for the short rows of a prompt. */
template <class T, class W, bool Layer, int Vec = 1>
__device__ void norm_warp(const Norm& a) {
  kiln_wait_for_inputs();
  const long r = static_cast<long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= a.rows) return;
  norm_held<kNormLaneValues, Vec, T, W, Layer>(a, r, threadIdx.x & 31, 32, [](auto v) { return warp_sum(v); });
}

// ---- rope ---------------------------------------------------------------------------------
/* The pair (x1, x2) rotated by the angle of cosine c and sine s: its first and its second value,
   each product rounded (no fused multiply-add), so that every kernel that rotates agrees. */
__device__ inline float rope_first(float x1, float x2, float c, float s) {
  return __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
}
__device__ inline float rope_second(float x1, float x2, float c, float s) {
  return __fadd_rn(__fmul_rn(x1, s), __fmul_rn(x2, c));
}
__device__ inline double rope_first(double x1, double x2, double c, double s) {
  return __dsub_rn(__dmul_rn(x1, c), __dmul_rn(x2, s));
}
__device__ inline double rope_second(double x1, double x2, double c, double s) {
  return __dadd_rn(__dmul_rn(x1, s), __dmul_rn(x2, c));
}

/* A thread a rotated pair (angles in float64, as the CPU's table), then the unrotated tail. */
template <class T>
__device__ void rope(const Rope& a) {
  kiln_wait_for_inputs();
  using A = kiln::math::compute_t<T>;
  const T* xs = static_cast<const T*>(a.x);
  T* ys = static_cast<T*>(a.out);
  const int32_t* offsets = static_cast<const int32_t*>(a.offsets);
  const float* freqs = static_cast<const float*>(a.freqs);
  const long pairs = a.rows * a.half, tail = a.d - a.dims;
  for (long p = kiln_gid(); p < pairs; p += kiln_gstride()) {
    const long r = p / a.half, i = p - r * a.half;
    const long b = r / a.rows_per_offset, l = r % a.len;
    const double pos = (static_cast<double>(offsets[b]) + static_cast<double>(l)) * a.scale;
    const double inv = freqs ? 1.0 / static_cast<double>(freqs[i]) : pow(a.base, -2.0 * i / a.dims);
    const double angle = pos * inv;
    const A c = static_cast<A>(cos(angle)), s = static_cast<A>(sin(angle));
    const T* x = xs + r * a.d;
    T* y = ys + r * a.d;
    const A x1 = static_cast<A>(x[i * a.step]), x2 = static_cast<A>(x[i * a.step + a.partner]);
    y[i * a.step] = static_cast<T>(rope_first(x1, x2, c, s));
    y[i * a.step + a.partner] = static_cast<T>(rope_second(x1, x2, c, s));
  }
  for (long e = kiln_gid(); e < a.rows * tail; e += kiln_gstride()) {
    const long r = e / tail, j = a.dims + e % tail;
    ys[r * a.d + j] = xs[r * a.d + j];
  }
}

// ---- cache update -------------------------------------------------------------------------
/* Copies the update into the output at the start read here (clamped into the axis, so no
   start writes outside it); W: a word of the element's size. */
template <class W>
__device__ void slice_update(const SliceUpdate& a) {
  kiln_wait_for_inputs();
  const int32_t* start = static_cast<const int32_t*>(a.start);
  long base = 0;
  for (int t = 0; t < kMaxAxes && a.axes[t] >= 0; ++t) {
    const long ax = a.axes[t], room = a.out_lengths[ax] - a.shape[ax];
    long s = start[t];
    s = s < 0 ? 0 : (s > room ? room : s);
    base += s * a.out_strides[ax];
  }
  const W* u = static_cast<const W*>(a.update);
  W* y = static_cast<W*>(a.out) + base;
  for (long idx = kiln_gid(); idx < a.n; idx += kiln_gstride()) {
    long i = idx, uo = 0, yo = 0;
    for (long d = a.nd - 1; d >= 0; --d) {
      const long q = i / a.shape[d], c = i - q * a.shape[d];
      uo += c * a.update_strides[d];
      yo += c * a.out_strides[d];
      i = q;
    }
    y[yo] = u[uo];
  }
}

/* Copies each batch row of the keys and of the values into its own cache at the row's position
   (clamped into the cache, so no position writes outside it); W: a word of the element's size. */
template <class W>
__device__ void cache_update(const CacheUpdate& a) {
  kiln_wait_for_inputs();
  const int32_t* positions = static_cast<const int32_t*>(a.positions);
  const long keys = a.rows * a.heads * a.len * a.dims[0], n = keys + a.rows * a.heads * a.len * a.dims[1];
  for (long idx = kiln_gid(); idx < n; idx += kiln_gstride()) {
    const int u = idx < keys ? 0 : 1;  // keys, then values
    const long dims = a.dims[u];
    long i = u == 0 ? idx : idx - keys;
    const long e = i % dims;
    i /= dims;
    const long t = i % a.len;
    i /= a.len;
    const long h = i % a.heads, b = i / a.heads;
    const long room = a.capacity - a.len, p = positions[b] < 0 ? 0 : (positions[b] > room ? room : positions[b]);
    const long* s = a.update_strides[u];
    const W* from = static_cast<const W*>(a.update[u]);
    W* to = static_cast<W*>(a.caches[u][b]);
    to[(h * a.capacity + p + t) * dims + e] = from[b * s[0] + h * s[1] + t * s[2] + e * s[3]];
  }
}

}  // namespace kiln::cuda::llm
