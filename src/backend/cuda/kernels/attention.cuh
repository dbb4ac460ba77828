// Device kernels of scaled_dot_product_attention: attention::split (any dtype and head dims up
// to 256, CUDA cores), attention::mma (16-bit heads of 64 or 128 dims, tensor cores) and
// attention::combine, which merges the splits of the keys either wrote. Each reads args::Attention;
// backend/cuda/llm_ops.cpp instantiates and launches them.
#pragma once

#include "backend/cuda/kernels/llm.cuh"

namespace kiln::cuda::attention {

using namespace kiln::cuda::args;
using llm::block_fold;
using llm::mma_16816;
using llm::mma_pair;
using llm::nan_max;
using llm::neg_inf;

/* Vec values at p (Vec of them 16 bytes, or 1), zeros where `in` is false. */
template <class T, int Vec>
__device__ inline kiln_vec<T, Vec> load_vec(const T* p, bool in) {
  kiln_vec<T, Vec> v;
  if (in) return *reinterpret_cast<const kiln_vec<T, Vec>*>(p);
#pragma unroll
  for (int e = 0; e < Vec; ++e) v.v[e] = static_cast<T>(0.0f);
  return v;
}

/* Online-softmax state of one row: running max, total of exp(score - max) and the weighted
   sums of the value dims a lane holds. */
template <int Dims>
struct SoftmaxState {
  float top, total, acc[Dims];
};
/* Folds `other` (the same row over other keys) into s. */
template <int Dims>
__device__ inline void merge_state(SoftmaxState<Dims>& s, float top, float total, const float* acc) {
  const float next = nan_max(s.top, top);
  if (next == neg_inf()) return;  // neither has seen a key
  const float cs = s.top == neg_inf() ? 0.0f : expf(s.top - next), co = top == neg_inf() ? 0.0f : expf(top - next);
  s.total = s.total * cs + total * co;
#pragma unroll
  for (int e = 0; e < Dims; ++e) s.acc[e] = s.acc[e] * cs + acc[e] * co;
  s.top = next;
}

/* Where batch row b's keys (or values) start: its own cache where the host gave one per row,
   else row b of the one array. */
template <class T>
__device__ inline const T* batch_row(const void* whole, const void* const* rows, long stride, long b) {
  return rows[0] ? static_cast<const T*>(rows[b]) : static_cast<const T*>(whole) + b * stride;
}

/* Keys batch row b has: its key length clamped into [0, lk], or lk. */
__device__ inline long key_count(const Attention& a, long b) {
  const int32_t* lengths = static_cast<const int32_t*>(a.key_lengths);
  const long valid = lengths ? lengths[b] + a.key_length_add : a.lk;
  return valid < 0 ? 0 : (valid > a.lk ? a.lk : valid);
}
/* Keys a causal query at position `query` sees of `valid`: the queries end where the keys do. */
__device__ inline long causal_limit(const Attention& a, long valid, long query) {
  const long l = query + valid - a.lq + 1;
  return l < 0 ? 0 : (l > valid ? valid : l);
}

/* Rows query rows that share a key/value head (the grouped-query heads of neighbouring query
   positions) against one split of keys, flash-decoding style, so each key is read once for
   all of them. A key's row is read by Lanes lanes, Chunks loads of Vec values (16 bytes) a
   lane; a warp takes 32 / Lanes keys at once. Each lane group keeps an online softmax per
   row; the groups of a warp merge by shuffles, the warps in shared memory, into the split's
   partial sums, max and total (`partial`), or into the result when there is one split. */
template <class T, class MaskT, int Vec, int Lanes, int Chunks, int Rows>
__device__ void split(const Attention& a) {
  constexpr int kDims = Chunks * Vec, kGroups = 32 / Lanes;  // value dims a lane holds; lane groups a warp
  kiln_wait_for_inputs();
  extern __shared__ float warp_sums[];  // [warps][Rows][dv + 2]: sums, max, total
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int sub = lane % Lanes, groups = warps * kGroups;
  const long group = a.hq / a.hkv, row_count = group * a.lq, chunks = (row_count + Rows - 1) / Rows;
  const long split = blockIdx.x % a.splits;
  long rest = blockIdx.x / a.splits;
  const long chunk = rest % chunks;
  rest /= chunks;
  const long hk = rest % a.hkv, b = rest / a.hkv;
  const long valid = key_count(a, b);
  // Row r is query position row / group of head hk * group + row % group: rows in order
  // (position, head), so a causal block's rows see nearly the same keys.
  int limit[Rows];  // keys row r sees (the host keeps key counts below 2^31)
  float qr[Rows][kDims];
  long seen = 0;  // keys any row may see
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    const long row = chunk * Rows + r, query = row / group, head = hk * group + row % group;
    const long l = row >= row_count ? 0 : a.causal ? causal_limit(a, valid, query) : valid;
    limit[r] = static_cast<int>(l);
    seen = l > seen ? l : seen;
    const T* q = static_cast<const T*>(a.q) + b * a.q_strides[0] + head * a.q_strides[1] +
                 (row < row_count ? query : 0) * a.q_strides[2];
#pragma unroll
    for (int c = 0; c < Chunks; ++c) {
      const long e = static_cast<long>(c * Lanes + sub) * Vec;
      const kiln_vec<T, Vec> x = load_vec<T, Vec>(q + e, row < row_count && e < a.d);
#pragma unroll
      for (int u = 0; u < Vec; ++u) qr[r][c * Vec + u] = static_cast<float>(x.v[u]) * static_cast<float>(a.scale);
    }
  }
  const long j0 = split * a.split_len, j1 = j0 + a.split_len < seen ? j0 + a.split_len : seen;
  const T* k = batch_row<T>(a.k, a.k_rows, a.k_strides[0], b) + hk * a.k_strides[1];
  const T* v = batch_row<T>(a.v, a.v_rows, a.v_strides[0], b) + hk * a.v_strides[1];
  SoftmaxState<kDims> st[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    st[r].top = neg_inf(), st[r].total = 0.0f;
#pragma unroll
    for (int e = 0; e < kDims; ++e) st[r].acc[e] = 0.0f;
  }
  // A warp's lanes step together (their shuffles need every lane): the warp's first key, then
  // its lane group's.
  for (long jw = j0 + static_cast<long>(warp) * kGroups * kAttentionKeys; jw < j1;
       jw += static_cast<long>(groups) * kAttentionKeys) {
    const long jb = jw + static_cast<long>(lane / Lanes) * kAttentionKeys;
    kiln_vec<T, Vec> kr[kAttentionKeys][Chunks], vr[kAttentionKeys][Chunks];  // as loaded: half the registers
#pragma unroll
    for (int u = 0; u < kAttentionKeys; ++u) {  // every key's and value's loads in flight together
      const bool in = jb + u < j1;
#pragma unroll
      for (int c = 0; c < Chunks; ++c) {
        const long e = static_cast<long>(c * Lanes + sub) * Vec;
        kr[u][c] = load_vec<T, Vec>(k + (jb + u) * a.k_strides[2] + e, in && e < a.d);
        vr[u][c] = load_vec<T, Vec>(v + (jb + u) * a.v_strides[2] + e, in && e < a.dv);
      }
    }
    // Every score first, so no shuffle sits behind a branch that lanes may take apart.
    float scores[Rows][kAttentionKeys];
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
#pragma unroll
      for (int u = 0; u < kAttentionKeys; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < kDims; ++e) dot = __fmaf_rn(qr[r][e], static_cast<float>(kr[u][e / Vec].v[e % Vec]), dot);
#pragma unroll
        for (int m = Lanes / 2; m > 0; m >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, m);
        scores[r][u] = dot;
      }
    }
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      float* score = scores[r];
      float top = neg_inf();
#pragma unroll
      for (int u = 0; u < kAttentionKeys; ++u) {
        float dot = score[u];
        const long j = jb + u;
        const bool visible = j < j1 && j < limit[r];
        if (!visible) dot = neg_inf();
        if (a.mask_kind != 0 && visible) {
          const long row = chunk * Rows + r;
          const MaskT m =
              static_cast<const MaskT*>(a.mask)[b * a.mask_strides[0] + (hk * group + row % group) * a.mask_strides[1] +
                                                row / group * a.mask_strides[2] + j * a.mask_strides[3]];
          if (a.mask_kind == 1)
            dot = static_cast<bool>(m) ? dot : neg_inf();
          else
            dot += static_cast<float>(m);
        }
        score[u] = dot;
        if (dot != neg_inf()) top = nan_max(top, dot);  // a masked key adds nothing; NaN poisons the row
      }
      if (top == neg_inf()) continue;  // no visible key this step
      // The running sums rescaled to the new max, then this step's keys added.
      SoftmaxState<kDims>& s = st[r];
      const float next = nan_max(s.top, top), c = s.top == neg_inf() ? 0.0f : expf(s.top - next);
      s.total *= c;
#pragma unroll
      for (int e = 0; e < kDims; ++e) s.acc[e] *= c;
#pragma unroll
      for (int u = 0; u < kAttentionKeys; ++u) {
        const float p = score[u] == neg_inf() ? 0.0f : expf(score[u] - next);
        s.total += p;
#pragma unroll
        for (int e = 0; e < kDims; ++e)
          s.acc[e] = __fmaf_rn(p, static_cast<float>(vr[u][e / Vec].v[e % Vec]), s.acc[e]);
      }
      s.top = next;
    }
  }
  // The lane groups of a warp (same dims, other keys), then the warps.
#pragma unroll
  for (int m = Lanes; m < 32; m <<= 1) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      float other[kDims];
#pragma unroll
      for (int e = 0; e < kDims; ++e) other[e] = __shfl_xor_sync(0xffffffffu, st[r].acc[e], m);
      const float top = __shfl_xor_sync(0xffffffffu, st[r].top, m),
                  total = __shfl_xor_sync(0xffffffffu, st[r].total, m);
      merge_state(st[r], top, total, other);
    }
  }
  const long stride = a.dv + 2;
  if (lane < Lanes) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      float* w = warp_sums + (static_cast<long>(warp) * Rows + r) * stride;
#pragma unroll
      for (int c = 0; c < Chunks; ++c) {
#pragma unroll
        for (int e = 0; e < Vec; ++e) {
          const long d = static_cast<long>(c * Lanes + sub) * Vec + e;
          if (d < a.dv) w[d] = st[r].acc[c * Vec + e];
        }
      }
      if (sub == 0) w[a.dv] = st[r].top, w[a.dv + 1] = st[r].total;
    }
  }
  __syncthreads();
  for (long idx = threadIdx.x; idx < Rows * stride; idx += blockDim.x) {
    const int r = static_cast<int>(idx / stride);
    const long e = idx - r * stride, row = chunk * Rows + r;
    if (row >= row_count) continue;
    const long out_row = (b * a.hq + hk * group + row % group) * a.lq + row / group;
    float top = neg_inf();
    for (int w = 0; w < warps; ++w) top = nan_max(top, warp_sums[(w * Rows + r) * stride + a.dv]);
    float sum = 0.0f, total = 0.0f;
    if (top != neg_inf()) {
      for (int w = 0; w < warps; ++w) {
        const float* ws = warp_sums + (w * Rows + r) * stride;
        if (ws[a.dv] == neg_inf()) continue;
        const float c = expf(ws[a.dv] - top);
        total += ws[a.dv + 1] * c;
        if (e < a.dv) sum += ws[e] * c;
      }
    }
    if (a.splits == 1) {
      if (e < a.dv)
        static_cast<T*>(a.out)[out_row * a.dv + e] = static_cast<T>(sum * (total > 0.0f ? 1.0f / total : 0.0f));
    } else {
      float* part = a.partial + (out_row * a.splits + split) * stride;
      part[e] = e < a.dv ? sum : e == a.dv ? top : total;
    }
  }
}

/* A block an output row: the splits' sums rescaled to their largest max, over their total (a
   query that saw no key gives zeros, as on the CPU). The splits' weights go to shared memory
   (`splits` floats), then a thread sums a dim over the splits, several loads in flight. */
template <class T>
__device__ void combine(const Attention& a) {
  kiln_wait_for_inputs();
  __shared__ float red[32];
  extern __shared__ float weight[];  // [splits]
  const long stride = a.dv + 2, row = blockIdx.x;
  const float* part = a.partial + row * a.splits * stride;
  float top = neg_inf();
  for (long s = threadIdx.x; s < a.splits; s += blockDim.x) top = nan_max(top, part[s * stride + a.dv]);
  top = block_fold<true>(top, red);
  float total = 0.0f;
  for (long s = threadIdx.x; s < a.splits; s += blockDim.x) {
    const float m = part[s * stride + a.dv];
    weight[s] = m == neg_inf() ? 0.0f : expf(m - top);  // 0 for a split that saw no key
    total += part[s * stride + a.dv + 1] * weight[s];
  }
  total = block_fold<false>(total, red);  // its barriers also publish the weights
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  for (long e = threadIdx.x; e < a.dv; e += blockDim.x) {
    constexpr int kAtOnce = kCombineRun;  // loads in flight
    float acc[kAtOnce] = {};
    long s = 0;
    for (; s + kAtOnce <= a.splits; s += kAtOnce) {
#pragma unroll
      for (int u = 0; u < kAtOnce; ++u) acc[u] += part[(s + u) * stride + e] * weight[s + u];
    }
    for (; s < a.splits; ++s) acc[0] += part[s * stride + e] * weight[s];
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kAtOnce; ++u) sum += acc[u];
    static_cast<T*>(a.out)[row * a.dv + e] = static_cast<T>(sum * inv);
  }
}

// ---- attention on the tensor cores ---------------------------------------------------------
// 16-bit q, k and v with head dims D (64 or 128): products on the tensor cores
// (mma.sync m16n8k16, float sums), flash-attention style. A warp holds 16 rows (ordered as in
// split) of q in registers, with their online softmax (in base 2) and sums; the block's
// 4 warps are Wr row tiles x Wk interleaved tiles of keys. The block stages its keys and values
// in shared memory, each 16-byte chunk of a row at (chunk ^ row % 8) so that ldmatrix reads
// them without bank conflicts.
/* Four 8 x 8 matrices of 16-bit values from shared memory, lane i naming row i % 8 of matrix i / 8;
   Trans: each transposed. */
template <bool Trans>
__device__ inline void ldmatrix_x4(unsigned* r, const void* p) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
}
/* 2^x in one instruction (MUFU.EX2; results below 2^-126 flush to 0): the softmax's weights. */
__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/* Where value d of a row goes under rope over its first `dims` values: its partner, their
   pair's angle and whether d is the pair's first (branch-free, so that loads issue together). */
struct RopeSlot {
  int partner, pair;
  bool first, turned;
};
__device__ inline RopeSlot rope_slot(int d, int dims, bool traditional) {
  const int half = dims / 2;
  const bool turned = d < dims, first = traditional ? d % 2 == 0 : d < half;
  const int pair = traditional ? d / 2 : (first ? d : d - half);
  const int partner = traditional ? d ^ 1 : (first ? d + half : d - half);
  return {turned ? partner : d, turned ? pair : 0, first, turned};
}
/* Value x of slot r (its partner's value p) rotated by the angles of cosines cs and sines sn. */
__device__ inline float rope_value(float x, float p, const RopeSlot& r, const float* cs, const float* sn) {
  const float c = cs[r.pair], s = sn[r.pair];
  const float y = r.first ? llm::rope_first(x, p, c, s) : llm::rope_second(p, x, c, s);
  return r.turned ? y : x;
}

/* Block 0 of a cluster merges the Splits blocks' sums of its 16 rows (`part` in each
   block's shared memory: [16][D + 2], the max in base 2, then the total) and writes the rows;
   every thread of every block calls it (two cluster barriers). */
template <class T, int D, int Splits>
__device__ inline void cluster_merge(const Attention& a, float* part, int rb, long hk, long b) {
#if __CUDA_ARCH__ >= 900
  float* weight = part + 16 * (D + 2);  // [16][Splits]: each block's share of a row
  kiln_cluster_sync();
  if (blockIdx.x % Splits == 0) {
    const int group = static_cast<int>(a.hq / a.hkv), row_count = group * static_cast<int>(a.lq);
    if (threadIdx.x < 16) {
      const int r = static_cast<int>(threadIdx.x);
      float tops[Splits], best = neg_inf(), sum = 0.0f;
#pragma unroll
      for (int s = 0; s < Splits; ++s) {
        const float2 tt =
            kiln_cluster_read<float2>(reinterpret_cast<const unsigned long long*>(part + r * (D + 2) + D), s);
        tops[s] = tt.x, weight[r * Splits + s] = tt.y;
        best = nan_max(best, tt.x);
      }
#pragma unroll
      for (int s = 0; s < Splits; ++s) {
        tops[s] = tops[s] == neg_inf() ? 0.0f : exp2f(tops[s] - best);  // 0 for a block that saw no key
        sum += weight[r * Splits + s] * tops[s];
      }
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
      for (int s = 0; s < Splits; ++s) weight[r * Splits + s] = tops[s] * inv;
    }
    __syncthreads();
    for (int at = static_cast<int>(threadIdx.x); at < 16 * D / 2; at += static_cast<int>(blockDim.x)) {
      const int r = at / (D / 2), e = at % (D / 2) * 2, row = rb * 16 + r;
      if (row >= row_count) continue;
      float2 acc = {0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < Splits; ++s) {
        const float w = weight[r * Splits + s];
        const float2 v =
            kiln_cluster_read<float2>(reinterpret_cast<const unsigned long long*>(part + r * (D + 2) + e), s);
        acc.x += v.x * w, acc.y += v.y * w;
      }
      const long head = hk * group + row % group, out_row = (b * a.hq + head) * a.lq + row / group;
      *reinterpret_cast<unsigned*>(static_cast<T*>(a.out) + out_row * D + e) = mma_pair<T>(acc.x, acc.y);
    }
  }
  kiln_cluster_sync();  // the other blocks keep their shared memory until block 0 has read it
#endif
}

/* Cluster > 0: one row tile (Wk = 4, decoding) whose keys the Cluster blocks of a thread-block
   cluster (sm_90) share, in equal whole steps of what the rows see; block 0 merges the blocks'
   sums out of their shared memory, so no partial sums go through global memory to a combine. */
template <class T, class MaskT, int D, int Wk, int Cluster = 0>
__device__ void mma(const Attention& a) {
  static_assert(Cluster == 0 || (Wk == 4 && Cluster <= kMaxClusterSplits), "a cluster shares one row tile's keys");
#if __CUDA_ARCH__ >= 800
  constexpr int Wr = 4 / Wk, Bc = kAttentionMmaKeys / Wk, kChunks = D / 8, kSteps = D / 16, kKeyTiles = Bc / 8;
  constexpr float kLog2e = 1.4426950408889634f;
  // With inputs_ready the key lengths and rope frequencies are no earlier kernel's outputs: the
  // block's arithmetic and rope angles then overlap the kernel ahead (kiln_wait_for_inputs).
  const bool early = a.inputs_ready != 0;
  if (!early) kiln_wait_for_inputs();
  extern __shared__ __align__(16) unsigned char mma_smem[];
  constexpr int kStage = 2 * kAttentionMmaKeys * D;  // a step's keys, then its values ([keys][D] each, swizzled)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int wr = warp / Wk, wk = warp % Wk;
  // 32-bit index arithmetic: the host keeps blocks, rows and keys below 2^31.
  const int group = static_cast<int>(a.hq / a.hkv), row_count = group * static_cast<int>(a.lq);
  const int row_blocks = (row_count + 16 * Wr - 1) / (16 * Wr);
  unsigned rest = blockIdx.x;
  const int split = static_cast<int>(rest % static_cast<unsigned>(a.splits));
  rest /= static_cast<unsigned>(a.splits);
  const int rb =
      row_blocks - 1 - static_cast<int>(rest % row_blocks);  // the last rows first: causal ones see the most keys
  rest /= row_blocks;
  const long hk = rest % static_cast<unsigned>(a.hkv), b = rest / static_cast<unsigned>(a.hkv);
  const long valid = key_count(a, b);
  const T* kg = batch_row<T>(a.k, a.k_rows, a.k_strides[0], b) + hk * a.k_strides[1];
  const T* vg = batch_row<T>(a.v, a.v_rows, a.v_strides[0], b) + hk * a.v_strides[1];
  // The step's own key and value (one query position, fresh_k set): rotated here into shared
  // memory (fresh_row), staged from there at key `fresh_at` and written into the caches by the
  // first block of the head. q is rotated into the second stage's tiles, free until the loop.
  const bool fresh = a.fresh_k != nullptr;
  __shared__ float rope_cos[D / 2], rope_sin[D / 2];
  __shared__ __align__(16) T fresh_row[2][D], fresh_raw[2][D];  // the new key, then the new value
  T* q_turned = reinterpret_cast<T*>(mma_smem) + kStage;
  const long position = fresh ? static_cast<const int32_t*>(a.key_lengths)[b] : 0;
  const int fresh_at = fresh ? static_cast<int>(position < 0 ? 0 : (position >= a.lk ? a.lk - 1 : position)) : -1;
  bool fresh_ready = false;  // fresh_row written
  // This thread's rows: g and g + 8 of its warp's tile.
  int head[2], query[2], limit[2];
  bool alive[2];
  const T* qrow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = (rb * Wr + wr) * 16 + g + 8 * h;
    const bool live = alive[h] = row < row_count;
    query[h] = live ? row / group : 0;
    head[h] = static_cast<int>(hk) * group + (live ? row % group : 0);
    limit[h] = static_cast<int>(!live ? 0 : a.causal ? causal_limit(a, valid, query[h]) : valid);
    qrow[h] =
        fresh ? q_turned + (wr * 16 + g + 8 * h) * D
              : static_cast<const T*>(a.q) + b * a.q_strides[0] + head[h] * a.q_strides[1] + query[h] * a.q_strides[2];
  }
  const int last = ((rb + 1) * Wr * 16 < row_count ? (rb + 1) * Wr * 16 : row_count) - 1;
  const int seen =
      static_cast<int>(a.causal ? causal_limit(a, valid, last / group) : valid);  // keys the block's rows see
  const int split_len =
      Cluster ? (seen + Cluster * kAttentionMmaKeys - 1) / (Cluster * kAttentionMmaKeys) * kAttentionMmaKeys
              : static_cast<int>(a.split_len);
  const int j0 = split * split_len;
  const int j1 = j0 + split_len < seen ? j0 + split_len : seen;
  float o[D / 8][4], top[2] = {neg_inf(), neg_inf()}, total[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const float scale2 = static_cast<float>(a.scale) * kLog2e;
  auto chunk_at = [](int r, int c) { return (r * kChunks + (c ^ (r & 7))) * 8; };  // element offset
  // Two stages: a step's copies are in flight while the step before it computes. A thread
  // copies one 16-byte chunk of every kRowsAPass-th key row (the block has 128 threads).
  constexpr int kRowsAPass = 128 / kChunks;
  const int c0 = threadIdx.x % kChunks, r0 = threadIdx.x / kChunks;
  // Chunk c of the new key and value into key row r of a stage's tiles.
  auto place_fresh = [&](T* ks, int r, int c) {
    *reinterpret_cast<uint4*>(ks + chunk_at(r, c)) = *reinterpret_cast<const uint4*>(fresh_row[0] + c * 8);
    *reinterpret_cast<uint4*>(ks + kAttentionMmaKeys * D + chunk_at(r, c)) =
        *reinterpret_cast<const uint4*>(fresh_row[1] + c * 8);
  };
  auto stage = [&](int jt, int buffer) {
    T* ks = reinterpret_cast<T*>(mma_smem) + buffer * kStage;
    const T* kp = kg + static_cast<long>(jt + r0) * a.k_strides[2] + c0 * 8;
    const T* vp = vg + static_cast<long>(jt + r0) * a.v_strides[2] + c0 * 8;
#pragma unroll
    for (int r = r0; r < kAttentionMmaKeys; r += kRowsAPass) {
      const bool in = jt + r < j1;  // past the end: zeros (a value of 0, never a stale NaN)
      if (in && jt + r == fresh_at) {  // from fresh_row, once written (the first step's: place_fresh)
        if (fresh_ready) place_fresh(ks, r, c0);
      } else {
        kiln_stage16_or_zero(ks + chunk_at(r, c0), in ? kp : kg, in);
        kiln_stage16_or_zero(ks + kAttentionMmaKeys * D + chunk_at(r, c0), in ? vp : vg, in);
      }
      kp += kRowsAPass * a.k_strides[2];
      vp += kRowsAPass * a.v_strides[2];
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  // The rope angles of the step's position: in float64 (the inverse frequency from the host, as
  // the CPU's), taken into [-pi, pi] there, then their sines and cosines in float32.
  auto rope_angles = [&] {
    const float* freqs = static_cast<const float*>(a.rope_freqs);
#pragma unroll 1
    for (int i = threadIdx.x; i < a.rope_dims / 2; i += blockDim.x) {
      const double angle = static_cast<double>(position) * a.rope_scale * (freqs ? 1.0 / freqs[i] : a.rope_inv[i]);
      constexpr double kTwoPi = 6.283185307179586476925286766559, kTurns = 1.0 / kTwoPi;
      sincosf(static_cast<float>(fma(-rint(angle * kTurns), kTwoPi, angle)), &rope_sin[i], &rope_cos[i]);
    }
  };
  if (early) {
    if (fresh) rope_angles();
    kiln_wait_for_inputs();
  }
  if (j0 < j1) stage(j0, 0);  // in flight while the new row and q are rotated
  if (fresh) {
    // The block's live q rows (of 16 Wr) and the new key and value come in as they are with
    // cp.async, in flight together (and with the first step's keys) while the angles are
    // computed, then are rotated out of shared memory. The code is short on purpose: a block
    // runs it once, so every instruction of it is a fetch that misses.
    const int live = min(16 * Wr, row_count - rb * 16 * Wr), live_chunks = live * kChunks;
    T* q_raw = q_turned + kAttentionMmaKeys * D;  // the second stage's value tiles
    const T* fk = static_cast<const T*>(a.fresh_k) + b * a.fresh_k_strides[0] + hk * a.fresh_k_strides[1];
    const T* fv = static_cast<const T*>(a.fresh_v) + b * a.fresh_v_strides[0] + hk * a.fresh_v_strides[1];
#pragma unroll 1
    for (int c = threadIdx.x; c < live_chunks + 2 * kChunks; c += blockDim.x) {
      const int row = rb * 16 * Wr + c / kChunks,
                e = c - live_chunks;  // one query position: row r is head hk * group + r
      const T* from = c < live_chunks ? static_cast<const T*>(a.q) + b * a.q_strides[0] +
                                            (hk * group + row) * a.q_strides[1] + c % kChunks * 8
                                      : (e < kChunks ? fk : fv) + e % kChunks * 8;
      kiln_stage16_or_zero(c < live_chunks ? q_raw + c * 8 : fresh_raw[e / kChunks] + e % kChunks * 8, from, true);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (!early) rope_angles();
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
#pragma unroll 1
    for (int at = threadIdx.x; at < (live + 2) * D; at += blockDim.x) {
      const int r = at / D, d = at % D;  // live rows of q, then the key, then the value (not rotated)
      const T* raw = r < live ? q_raw + r * D : fresh_raw[r - live];
      const RopeSlot slot = rope_slot(d, r == live + 1 ? 0 : static_cast<int>(a.rope_dims), a.rope_traditional);
      const float y =
          rope_value(static_cast<float>(raw[d]), static_cast<float>(raw[slot.partner]), slot, rope_cos, rope_sin);
      (r < live ? q_turned + at : fresh_row[r - live] + d)[0] = static_cast<T>(y);
    }
    __syncthreads();
    if (split == 0 && rb == row_blocks - 1 && threadIdx.x < 2 * kChunks) {  // the caches are this kernel's outputs
      const int kind = threadIdx.x / kChunks, c = threadIdx.x % kChunks;
      T* cache = const_cast<T*>(kind == 0 ? kg : vg) + fresh_at * (kind == 0 ? a.k_strides[2] : a.v_strides[2]);
      *reinterpret_cast<uint4*>(cache + c * 8) = *reinterpret_cast<const uint4*>(fresh_row[kind] + c * 8);
    }
    fresh_ready = true;
    if (j0 <= fresh_at && fresh_at < j0 + kAttentionMmaKeys && fresh_at < j1 && threadIdx.x < kChunks)
      place_fresh(reinterpret_cast<T*>(mma_smem), fresh_at - j0, threadIdx.x);
  }
  // q as A fragments: rows g and g + 8, dims 2t and 2t + 8 (and the next) of each step of 16.
  unsigned qf[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      const long e = 16 * s + 2 * t + 8 * (f >> 1);
      qf[s][f] = alive[f & 1] ? *reinterpret_cast<const unsigned*>(qrow[f & 1] + e) : 0u;  // a dead row sees no key
    }
  }
  if (fresh) __syncthreads();  // every warp has its q before the second step's copies land over q_turned
  int buffer = 0;
  for (int jt = j0; jt < j1; jt += kAttentionMmaKeys, buffer ^= 1) {  // the same steps for every warp (barriers)
    if (jt + kAttentionMmaKeys < j1) {
      stage(jt + kAttentionMmaKeys, buffer ^ 1);
      asm volatile("cp.async.wait_group 1;" ::: "memory");
    } else {
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    __syncthreads();
    const T* ks = reinterpret_cast<const T*>(mma_smem) + buffer * kStage;
    const T* vs = ks + kAttentionMmaKeys * D;
    // Scores of the warp's Bc keys (tile wk of the step): s[n] holds keys n * 8 + 2t (+1).
    float sc[kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
      for (int s = 0; s < kSteps; s += 2) {
        const int r = wk * Bc + n * 8 + (lane & 7);
        unsigned kb[4];
        ldmatrix_x4<false>(kb, ks + chunk_at(r, 2 * s + (lane >> 3)));
        mma_16816<T>(sc[n], qf[s], kb[0], kb[1]);
        mma_16816<T>(sc[n], qf[s + 1], kb[2], kb[3]);
      }
    }
    // Scaled to base 2, masked; each row's max over its four lanes.
    float step_top[2] = {neg_inf(), neg_inf()};
    const int key0 = jt + wk * Bc;  // the warp's first key
    const bool whole = a.mask_kind == 0 && key0 + Bc <= j1 && key0 + Bc <= limit[0] && key0 + Bc <= limit[1];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        float x = sc[n][e] * scale2;
        if (!whole) {  // keys past the end, the causal edge or a mask
          const int j = key0 + n * 8 + 2 * t + (e & 1);
          bool visible = j < j1 && j < limit[h];
          if (a.mask_kind != 0 && visible) {
            const MaskT m = static_cast<const MaskT*>(
                a.mask)[b * a.mask_strides[0] + head[h] * a.mask_strides[1] + query[h] * a.mask_strides[2] +
                        static_cast<long>(j) * a.mask_strides[3]];
            if (a.mask_kind == 1)
              visible = static_cast<bool>(m);
            else
              x += static_cast<float>(m) * kLog2e;
          }
          x = visible ? x : neg_inf();
        }
        sc[n][e] = x;
        step_top[h] = fmaxf(step_top[h], x);  // passes a NaN over: its weight below is NaN and poisons the row
      }
    }
    // Each row's new max (never NaN) and, where it has seen no key, 0 in its place, so that a
    // masked score's weight is exp2(-inf) = 0 without a test a score.
    float scale_old[2], shift[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      step_top[h] = fmaxf(step_top[h], __shfl_xor_sync(0xffffffffu, step_top[h], 1));
      step_top[h] = fmaxf(step_top[h], __shfl_xor_sync(0xffffffffu, step_top[h], 2));
      const float next = fmaxf(top[h], step_top[h]);
      shift[h] = next == neg_inf() ? 0.0f : next;
      scale_old[h] = fast_exp2(top[h] - shift[h]);  // 0 while the row has seen no key (its sums are 0)
      top[h] = next;
      total[h] *= scale_old[h];
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= scale_old[0], o[n][1] *= scale_old[0];
      o[n][2] *= scale_old[1], o[n][3] *= scale_old[1];
    }
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[n][e] = fast_exp2(sc[n][e] - shift[e >> 1]);
        total[e >> 1] += sc[n][e];
      }
    }
    // o += p v: p's accumulator layout is the A fragment of the next product.
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      const unsigned pa[4] = {mma_pair<T>(sc[2 * kk][0], sc[2 * kk][1]), mma_pair<T>(sc[2 * kk][2], sc[2 * kk][3]),
                              mma_pair<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                              mma_pair<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
      const int r = wk * Bc + kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        unsigned vb[4];
        ldmatrix_x4<true>(vb, vs + chunk_at(r, 2 * dn + (lane >> 4)));
        mma_16816<T>(o[2 * dn], pa, vb[0], vb[1]);
        mma_16816<T>(o[2 * dn + 1], pa, vb[2], vb[3]);
      }
    }
    __syncthreads();  // before the step after next copies over these tiles
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    total[h] += __shfl_xor_sync(0xffffffffu, total[h], 1);
    total[h] += __shfl_xor_sync(0xffffffffu, total[h], 2);
  }
  // The Wk warps of a row tile merge in shared memory (the tiles are free now): [warp][16][D + 2].
  float* merged = reinterpret_cast<float*>(mma_smem);
  if constexpr (Wk > 1) {
    float* mine = merged + warp * 16 * (D + 2);
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[(g + 8 * (e >> 1)) * (D + 2) + n * 8 + 2 * t + (e & 1)] = o[n][e];
    }
    if (t == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        mine[(g + 8 * h) * (D + 2) + D] = top[h], mine[(g + 8 * h) * (D + 2) + D + 1] = total[h];
    }
    __syncthreads();
    if (Cluster == 0 && wk != 0) return;  // a cluster's blocks all reach its barriers
#pragma unroll
    for (int h = 0; h < 2 && wk == 0; ++h) {
      float best = neg_inf();
      for (int w = 0; w < Wk; ++w) best = nan_max(best, merged[((warp + w) * 16 + g + 8 * h) * (D + 2) + D]);
      float sum = 0.0f, weight[Wk];
#pragma unroll
      for (int w = 0; w < Wk; ++w) {
        const float* other = merged + ((warp + w) * 16 + g + 8 * h) * (D + 2);
        weight[w] = other[D] == neg_inf() ? 0.0f : exp2f(other[D] - best);
        sum += other[D + 1] * weight[w];
      }
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float acc = 0.0f;
#pragma unroll
          for (int w = 0; w < Wk; ++w)
            acc += merged[((warp + w) * 16 + g + 8 * h) * (D + 2) + n * 8 + 2 * t + e] * weight[w];
          o[n][2 * h + e] = acc;
        }
      }
      top[h] = best, total[h] = sum;
    }
  }
  if constexpr (Cluster > 0) {  // this block's sums (max in base 2) into its shared memory, for block 0
    float* part = reinterpret_cast<float*>(mma_smem) + 4 * 16 * (D + 2);
#pragma unroll
    for (int h = 0; h < 2 && wk == 0; ++h) {
      float* row = part + (g + 8 * h) * (D + 2);
#pragma unroll
      for (int n = 0; n < D / 8; ++n) row[n * 8 + 2 * t] = o[n][2 * h], row[n * 8 + 2 * t + 1] = o[n][2 * h + 1];
      if (t == 0) row[D] = top[h], row[D + 1] = total[h];
    }
    cluster_merge<T, D, Cluster>(a, part, rb, hk, b);
    return;
  }
  // The result, or this split's partial sums, max (natural base, as combine reads it) and total.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if ((rb * Wr + wr) * 16 + g + 8 * h >= row_count) continue;
    const long out_row = (b * a.hq + head[h]) * a.lq + query[h];
    if (a.splits == 1) {
      const float inv = total[h] > 0.0f ? 1.0f / total[h] : 0.0f;
      T* out = static_cast<T*>(a.out) + out_row * D;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<unsigned*>(out + n * 8 + 2 * t) = mma_pair<T>(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
    } else {
      float* part = a.partial + (out_row * a.splits + split) * (D + 2);
#pragma unroll
      for (int n = 0; n < D / 8; ++n) part[n * 8 + 2 * t] = o[n][2 * h], part[n * 8 + 2 * t + 1] = o[n][2 * h + 1];
      if (t == 0) part[D] = top[h] == neg_inf() ? neg_inf() : top[h] / kLog2e, part[D + 1] = total[h];
    }
  }
#endif
}

}  // namespace kiln::cuda::attention
