#include "backend/cuda/codegen.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "backend/cuda/tuning.h"
#include "compile/codegen_util.h"

namespace kiln::cuda {

using compiler::compute_type;
using compiler::cpp_type;
using compiler::functor;
using compiler::wide_type;

const char* support_header() {
  return R"(#pragma once
#include <cstdint>
#include "kiln/half.h"
#include "backend/common/math.h"
#include "backend/common/order_key.h"
#include "backend/common/threefry.h"

template <int N> struct KilnMeta { long v[N]; };
// V elements of T read or written as one aligned access (16 bytes at most).
template <class T, int V> struct alignas(sizeof(T) * V) kiln_vec { T v[V]; };

// Programmatic dependent launch (sm_90+, a no-op before): in a CUDA graph, kiln_wait_for_inputs()
// returns once every earlier kernel has finished, then lets the next kernel start, whose launch
// and reads before its own wait then overlap this kernel's work (one kernel ahead, no further).
__device__ inline void kiln_wait_for_inputs() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ inline long kiln_gid() { return static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline long kiln_gstride() { return static_cast<long>(gridDim.x) * blockDim.x; }
__device__ inline double kiln_f64(long bits) { return __longlong_as_double(bits); }
template <class T> __device__ inline bool kiln_isnan(T x) {
  if constexpr (kiln::math::is_float_v<T>) return x != x; else return false;
}
// Offset of element i of a shape of nd axes (v[shape + d]) with strides v[strides + d].
template <int N> __device__ inline long kiln_offset(const KilnMeta<N>& m, long i, int nd, int shape, int strides) {
  long off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const long s = m.v[shape + d];
    const long q = i / s;
    off += (i - q * s) * m.v[strides + d];
    i = q;
  }
  return off;
}

// 16 bytes from global to shared memory without passing through a register: an asynchronous
// copy on sm_80 and later, so a thread can have its whole share of a row in flight at once.
// kiln_stage_wait() waits for the thread's copies (then a barrier makes them the block's).
__device__ inline void kiln_stage16(void* to, const void* from) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(to))),
               "l"(from) : "memory");
#else
  *static_cast<kiln_vec<unsigned, 4>*>(to) = *static_cast<const kiln_vec<unsigned, 4>*>(from);
#endif
}
__device__ inline void kiln_stage_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// bfloat16 add, subtract and multiply of floats that hold bfloat16 values, as one bf16 fma on
// their bits. This equals rounding the float result (double rounding through float is
// harmless: 24 >= 2 * 8 + 2 bits) without the f32->bf16 cvt, which issues at 16 a clock per SM.
__device__ inline unsigned short kiln_bf16_bits(float x) { return static_cast<unsigned short>(__float_as_uint(x) >> 16); }
__device__ inline float kiln_bf16_fma(unsigned short a, unsigned short b, unsigned short c) {
#if __CUDA_ARCH__ >= 800
  unsigned short r;
  asm("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(r) : "h"(a), "h"(b), "h"(c));
  return __uint_as_float(static_cast<unsigned>(r) << 16);
#else  // no bf16 arithmetic: the exact float product (8 x 8 bits) plus c, rounded once
  const float f = __uint_as_float(static_cast<unsigned>(a) << 16) * __uint_as_float(static_cast<unsigned>(b) << 16);
  return static_cast<float>(static_cast<kiln::bfloat16_t>(f + __uint_as_float(static_cast<unsigned>(c) << 16)));
#endif
}
__device__ inline float kiln_bf16_add(float a, float b) {
  return kiln_bf16_fma(kiln_bf16_bits(a), 0x3F80 /* 1 */, kiln_bf16_bits(b));
}
__device__ inline float kiln_bf16_sub(float a, float b) {
  return kiln_bf16_fma(kiln_bf16_bits(b), 0xBF80 /* -1 */, kiln_bf16_bits(a));
}
__device__ inline float kiln_bf16_mul(float a, float b) {
  return kiln_bf16_fma(kiln_bf16_bits(a), kiln_bf16_bits(b), 0x8000 /* -0: keeps a zero product's sign */);
}

// x (a value of T held in its compute type) as T; a bfloat16 is its float's top half, no cvt.
template <class T, class C> __device__ inline T kiln_narrow(C x) {
  if constexpr (std::is_same_v<T, kiln::bfloat16_t> && std::is_same_v<C, float>) {
    return kiln::bfloat16_t::from_bits(kiln_bf16_bits(x));
  } else {
    return static_cast<T>(x);
  }
}

// a / b for the many a of a row and its one b. y = 1/b is rounded once per row; then
// q = a y, r = a - q b (exact in an fma) and q + r y is the correctly rounded quotient
// (Markstein), as the division instruction sequence computes it, when no step can under- or
// overflow: |a| and |b| within [2^-60, 2^61). Elsewhere (zeros, NaN, ...) the plain division.
struct KilnDivisor { float b, y; bool fast; };
__device__ inline bool kiln_div_range(float x) { return fabsf(x) >= 0x1p-60f && fabsf(x) < 0x1p61f; }
__device__ inline KilnDivisor kiln_divisor(float b) { return {b, 1.0f / b, kiln_div_range(b)}; }
__device__ inline float kiln_div_markstein(float a, const KilnDivisor& d) {
  const float q = a * d.y;
  return fmaf(fmaf(-q, d.b, a), d.y, q);
}
__device__ inline float kiln_div_by(float a, const KilnDivisor& d) {
  return d.fast && kiln_div_range(a) ? kiln_div_markstein(a, d) : a / d.b;
}
// The same without the fallback for a divisor in range (d.fast): `slow` is set where the
// fallback would be taken, and the row kernel then recomputes those elements with kiln_div_by.
__device__ inline float kiln_div_by_fast(float a, const KilnDivisor& d, bool& slow) {
  slow |= !kiln_div_range(a);
  return kiln_div_markstein(a, d);
}

// gelu_tanh for a 16-bit float result, in float alone: x sigmoid(2u) with e^-|2u| <= 1, so the
// denominator stays in [1, 2] and the fast division is safe. Its few-ulp float error vanishes
// in the rounding to 8 or 11 bits (a float32 result needs the double form).
__device__ inline float kiln_gelu_tanh_narrow(float x) {
  x = x < -14.0f ? -14.0f : x;  // the result is -0 there; never -inf * 0
  const float v = -1.5957691216057308f * (x + 0.044715f * (x * x * x));  // -2u
  const float e = expf(v > 0.0f ? -v : v);
  return __fdividef(v > 0.0f ? x * e : x, 1.0f + e);
}

// sin and cos for a 16-bit float result: a short reduction and polynomials good to a few float
// ulps, no float<->int conversions, accurate sinf/cosf only past |x| = 2^20 (math.h).
__device__ inline float kiln_sin_narrow(float x) { return kiln::math::sincos_narrow_f32(x, 0u); }
__device__ inline float kiln_cos_narrow(float x) { return kiln::math::sincos_narrow_f32(x, 1u); }
// The same without the fallback: `slow` is set where it would be taken, and the caller then
// recomputes with the forms above. Flat kernels check once per vector, which keeps a branch
// (and its reconvergence) out of every op, and lets the elements of a vector interleave.
__device__ inline float kiln_sin_fast(float x, bool& slow) {
  slow |= !(fabsf(x) <= 0x1p20f);
  return kiln::math::sincos_narrow_core_f32(x, 0u);
}
__device__ inline float kiln_cos_fast(float x, bool& slow) {
  slow |= !(fabsf(x) <= 0x1p20f);
  return kiln::math::sincos_narrow_core_f32(x, 1u);
}
// float32 sin and cos the same way: kiln::math::Sin and Cos without their fallback.
__device__ inline float kiln_sinf_fast(float x, bool& slow) {
  slow |= !(fabsf(x) < 105615.0f);
  return kiln::math::sincos_fma_core_f32(x, 0u);
}
__device__ inline float kiln_cosf_fast(float x, bool& slow) {
  slow |= !(fabsf(x) < 105615.0f);
  return kiln::math::sincos_fma_core_f32(x, 1u);
}

// A value exchanged with lane (lane ^ mask) of the warp, for any type of 1 to 8 bytes.
template <class W> __device__ inline W kiln_shfl_xor(W v, int mask) {
  if constexpr (sizeof(W) == 8) {
    long long b;
    memcpy(&b, &v, 8);
    b = __shfl_xor_sync(0xffffffffu, b, mask);
    memcpy(&v, &b, 8);
  } else {
    int b = 0;
    memcpy(&b, &v, sizeof(W));
    b = __shfl_xor_sync(0xffffffffu, b, mask);
    memcpy(&v, &b, sizeof(W));
  }
  return v;
}
// m.v[0] bytes from m.v[1] to m.v[2], 16 a thread where both ends are 16-byte aligned.
template <int N> __device__ void kiln_copy_bytes(const KilnMeta<N>& m) {
  const long n = m.v[0];
  const unsigned char* s = reinterpret_cast<const unsigned char*>(m.v[1]);
  unsigned char* d = reinterpret_cast<unsigned char*>(m.v[2]);
  const long n16 = (m.v[1] | m.v[2]) % 16 == 0 ? n / 16 : 0;
  for (long i = kiln_gid(); i < n16; i += kiln_gstride()) reinterpret_cast<uint4*>(d)[i] = reinterpret_cast<const uint4*>(s)[i];
  for (long i = n16 * 16 + kiln_gid(); i < n; i += kiln_gstride()) d[i] = s[i];
}
// Transposing copies: dst element (b, r, c) at b * db + r * dr + c from src element
// b * sb + r + c * sc (the source runs down the destination's columns). Square tiles pass
// through shared memory, so the reads (along r) and the writes (along c) are both
// coalesced; blocks are 32 x 8 threads and tile coordinates are 32-bit (fewer than 2^31
// tiles). v: batch, R, C, sb, sc, db, dr, src, dst, words (every word aligned).
struct KilnTiles {
  long R, C, sb, sc, db, dr;
  unsigned tiles_r, tiles_c, tiles;
  template <int N> __device__ KilnTiles(const KilnMeta<N>& m, int side)
      : R(m.v[1]), C(m.v[2]), sb(m.v[3]), sc(m.v[4]), db(m.v[5]), dr(m.v[6]),
        tiles_r(static_cast<unsigned>((R + side - 1) / side)), tiles_c(static_cast<unsigned>((C + side - 1) / side)),
        tiles(static_cast<unsigned>(m.v[0]) * tiles_r * tiles_c) {}
  // Tile t's batch and its first row and column.
  __device__ void at(unsigned t, int side, long& b, long& r0, long& c0) const {
    b = t / (tiles_r * tiles_c);
    r0 = static_cast<long>(t / tiles_c % tiles_r) * side;
    c0 = static_cast<long>(t % tiles_c) * side;
  }
};

// Elements of 4 or 8 bytes: W elements a load or store where `words` allows (8 bytes of
// 4-byte elements; tiles of 32 W on a side, 16 KiB).
template <class T, int N> __device__ void kiln_transpose_tiles(const KilnMeta<N>& m) {
  constexpr int W = sizeof(T) == 4 ? 2 : 1, S = 32 * W;
  const KilnTiles g(m, S);
  const T* src = reinterpret_cast<const T*>(m.v[7]);
  T* dst = reinterpret_cast<T*>(m.v[8]);
  const bool words = m.v[9] != 0;
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
template <int P> __device__ inline void kiln_transpose_in_words(uint32_t (&w)[P]) {
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
template <class T, int N> __device__ void kiln_transpose_packed(const KilnMeta<N>& m) {
  constexpr int P = 4 / sizeof(T), S = 32 * P;
  const KilnTiles g(m, S);
  const T* src = reinterpret_cast<const T*>(m.v[7]);
  T* dst = reinterpret_cast<T*>(m.v[8]);
  const bool words = m.v[9] != 0;
  __shared__ uint32_t tile[S][33];
  T (*elems)[33 * P] = reinterpret_cast<T (*)[33 * P]>(tile);
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
        for (int j = 0; j < P; ++j) w[j] = *reinterpret_cast<const uint32_t*>(from + r0 + tx * P + (c0 + (ty + k) * P + j) * g.sc);
        kiln_transpose_in_words<P>(w);
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

// F folded over v of every thread of the block (a multiple of 32 threads); sh holds 32.
// Every thread gets the result; the caller syncs before sh is written again.
template <class F, class W> __device__ inline W kiln_block_reduce(W v, W init, W* sh) {
  for (int m = 16; m > 0; m >>= 1) v = F{}(v, kiln_shfl_xor(v, m));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? sh[lane] : init;
    for (int m = 16; m > 0; m >>= 1) v = F{}(v, kiln_shfl_xor(v, m));
    if (lane == 0) sh[0] = v;
  }
  __syncthreads();
  return sh[0];
}

#if __CUDA_ARCH__ >= 900
// Thread-block clusters (sm_90): a barrier of every thread of the cluster, which also makes
// each block's shared-memory writes before it visible to the others' reads after it.
__device__ inline void kiln_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The value of W (at most 8 bytes) that block `rank` of the cluster holds at `slot` in its
// shared memory (8 bytes, 8-aligned): a read of distributed shared memory.
template <class W> __device__ inline W kiln_cluster_read(const unsigned long long* slot, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(slot))), "r"(rank));
  union {
    unsigned long long bits;
    W value;
  } u;
  asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(u.bits) : "r"(remote) : "memory");
  return u.value;
}
// F folded over the values of every block of the cluster, in rank order; each block's own
// value must be in its slot. Every thread gets the result; the slots may be written again after.
template <class F, class W> __device__ inline W kiln_cluster_reduce(const unsigned long long* slot, W init, unsigned blocks) {
  kiln_cluster_sync();
  W v = init;
  for (unsigned q = 0; q < blocks; ++q) v = F{}(v, kiln_cluster_read<W>(slot, q));
  kiln_cluster_sync();
  return v;
}
#endif

// Whether (v, i) comes before (best, bi) as the first extreme: NaN first, then the larger
// (IsMax) or smaller value, then the lower index. A total order, so any order of picks agrees.
template <class CT, bool IsMax> __device__ inline bool kiln_arg_better(CT v, long i, CT best, long bi) {
  const bool vn = kiln_isnan(v), bn = kiln_isnan(best);
  if (vn || bn) return vn && (!bn || i < bi);
  if (v == best) return i < bi;
  return IsMax ? v > best : v < best;
}

// One step of a scan whose positions only grow: a later equal value never wins, so (v, i)
// is taken when it is better or the first NaN. No branch: a few instructions an element.
template <class CT, bool IsMax, class I> __device__ inline void kiln_arg_scan(CT v, I i, CT& best, I& bi) {
  const bool take = !kiln_isnan(best) && (IsMax ? !(v <= best) : !(v >= best));
  best = take ? v : best;
  bi = take ? i : bi;
}

// (v, i) into the pick (best, bi) when it comes first (kiln_arg_better).
template <class CT, bool IsMax> __device__ inline void kiln_arg_fold(CT v, long i, CT& best, long& bi) {
  if (kiln_arg_better<CT, IsMax>(v, i, best, bi)) {
    best = v;
    bi = i;
  }
}

// Long rows of an arg-reduction in parts: block w finds the first extreme of part w % parts
// (positions k0 ... of the axis) of row w / parts, and writes its value and index. v: as
// kiln_argreduce, then value partials (8 bytes each), index partials, parts, part length.
template <class T, bool IsMax, int N> __device__ void kiln_argreduce_parts(const KilnMeta<N>& m) {
  using CT = kiln::math::compute_t<T>;
  using Init = std::conditional_t<IsMax, kiln::math::Max, kiln::math::Min>;
  constexpr long kNone = 0x7fffffffffffffffL;  // an empty slot: its value ties or loses, its index loses
  constexpr int V = sizeof(T) < 16 ? 16 / sizeof(T) : 1, U = 4;  // elements a load, loads in flight
  const long rows = m.v[0], len = m.v[18], as = m.v[19], parts = m.v[24], part_len = m.v[25];
  const int nd = static_cast<int>(m.v[1]);
  const T* in = reinterpret_cast<const T*>(m.v[20]);
  CT* pv = reinterpret_cast<CT*>(m.v[22]);
  long* pi = reinterpret_cast<long*>(m.v[23]);
  __shared__ CT shv[32];
  __shared__ long shi[32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, stride = blockDim.x;
  for (long w = blockIdx.x; w < rows * parts; w += gridDim.x) {
    const long r = w / parts, k0 = (w % parts) * part_len;
    const int n = static_cast<int>(min(len, k0 + part_len) - k0);  // positions in the part
    const long base = kiln_offset(m, r, nd, 2, 10) + k0 * as;
    // Each scan starts from the type's extreme at its first position, so a run of that value
    // keeps its first position. No early exit at a NaN: a bound that depends on loaded
    // values keeps each load waiting for the one before.
    const bool aligned = V > 1 && as == 1 && reinterpret_cast<unsigned long long>(in + base) % 16 == 0;
    const int nv = aligned ? n / V : 0;  // 16-byte loads, then single positions for the tail
    CT best = Init::template init<CT>();
    long pick = kNone;
    if (tid < nv) {  // a scan for each element of a vector: V chains of compares, not one
      CT vb[V];
      int vi[V];
#pragma unroll
      for (int e = 0; e < V; ++e) {
        vb[e] = Init::template init<CT>();
        vi[e] = tid * V + e;
      }
      const kiln_vec<T, V>* vin = reinterpret_cast<const kiln_vec<T, V>*>(in + base);
      int j = tid;
      for (; j + (U - 1) * stride < nv; j += U * stride) {  // U loads issued before any compare
        kiln_vec<T, V> x[U];
#pragma unroll
        for (int u = 0; u < U; ++u) x[u] = vin[j + u * stride];
#pragma unroll
        for (int u = 0; u < U; ++u) {
#pragma unroll
          for (int e = 0; e < V; ++e) kiln_arg_scan<CT, IsMax>(static_cast<CT>(x[u].v[e]), (j + u * stride) * V + e, vb[e], vi[e]);
        }
      }
      for (; j < nv; j += stride) {
        const kiln_vec<T, V> x = vin[j];
#pragma unroll
        for (int e = 0; e < V; ++e) kiln_arg_scan<CT, IsMax>(static_cast<CT>(x.v[e]), j * V + e, vb[e], vi[e]);
      }
#pragma unroll
      for (int e = 0; e < V; ++e) kiln_arg_fold<CT, IsMax>(vb[e], k0 + vi[e], best, pick);
    }
    CT tb = Init::template init<CT>();
    int ti = nv * V + tid;
    if (ti < n) {
#pragma unroll 8
      for (int k = ti; k < n; k += stride) kiln_arg_scan<CT, IsMax>(static_cast<CT>(in[base + k * as]), k, tb, ti);
      kiln_arg_fold<CT, IsMax>(tb, k0 + ti, best, pick);
    }
    for (int level = 0; level < 2; ++level) {  // the warp's pick, then the block's
      for (int d = 16; d > 0; d >>= 1) kiln_arg_fold<CT, IsMax>(kiln_shfl_xor(best, d), kiln_shfl_xor(pick, d), best, pick);
      if (level == 1) break;
      if (lane == 0) {
        shv[warp] = best;
        shi[warp] = pick;
      }
      __syncthreads();
      const bool mine = lane < static_cast<int>(blockDim.x >> 5);
      best = mine ? shv[lane] : Init::template init<CT>();
      pick = mine ? shi[lane] : kNone;
    }
    if (tid == 0) {
      pv[w] = best;
      pi[w] = pick;
    }
    __syncthreads();  // shv and shi are written again for the next part
  }
}

// The parts' picks of each row folded, a warp a row (its lanes load every pick at once; the
// order is total, so any fold agrees): the row's index.
template <class T, bool IsMax, int N> __device__ void kiln_argreduce_fold(const KilnMeta<N>& m) {
  using CT = kiln::math::compute_t<T>;
  using Init = std::conditional_t<IsMax, kiln::math::Max, kiln::math::Min>;
  const long rows = m.v[0], parts = m.v[24];
  const CT* pv = reinterpret_cast<const CT*>(m.v[22]);
  const long* pi = reinterpret_cast<const long*>(m.v[23]);
  int32_t* out = reinterpret_cast<int32_t*>(m.v[21]);
  const int lane = threadIdx.x & 31;
  for (long r = kiln_gid() >> 5; r < rows; r += kiln_gstride() >> 5) {
    CT best = Init::template init<CT>();
    long bi = 0x7fffffffffffffffL;  // every part has a pick: this empty one loses
    for (long s = lane; s < parts; s += 32) kiln_arg_fold<CT, IsMax>(pv[r * parts + s], pi[r * parts + s], best, bi);
    for (int d = 16; d > 0; d >>= 1) kiln_arg_fold<CT, IsMax>(kiln_shfl_xor(best, d), kiln_shfl_xor(bi, d), best, bi);
    if (lane == 0) out[r] = static_cast<int32_t>(bi);
  }
}

// Index of the first extreme along an axis (NaN is the extreme). v: rows, nd, shape[8],
// strides[8], length, axis stride, in, out.
template <class T, bool IsMax, int N> __device__ void kiln_argreduce(const KilnMeta<N>& m) {
  using CT = kiln::math::compute_t<T>;
  const long rows = m.v[0], len = m.v[18], as = m.v[19];
  const int nd = static_cast<int>(m.v[1]);
  const T* in = reinterpret_cast<const T*>(m.v[20]);
  int32_t* out = reinterpret_cast<int32_t*>(m.v[21]);
  for (long r = kiln_gid(); r < rows; r += kiln_gstride()) {
    const long base = kiln_offset(m, r, nd, 2, 10);
    CT best = static_cast<CT>(in[base]);
    int32_t bi = 0;
    for (int32_t k = 1; k < len; ++k) kiln_arg_scan<CT, IsMax>(static_cast<CT>(in[base + k * as]), k, best, bi);
    out[r] = bi;
  }
}

// Random words, a thread a Threefry pair. v: words, key, key stride, out.
template <int N> __device__ void kiln_random_bits(const KilnMeta<N>& m) {
  const unsigned long n = static_cast<unsigned long>(m.v[0]);
  const uint32_t* key = reinterpret_cast<const uint32_t*>(m.v[1]);
  const uint32_t k0 = key[0], k1 = key[m.v[2]];
  uint32_t* out = reinterpret_cast<uint32_t*>(m.v[3]);
  for (long j = kiln_gid(); j < static_cast<long>((n + 1) / 2); j += kiln_gstride()) {
    kiln::threefry::pair(k0, k1, n, static_cast<unsigned long>(j), out);
  }
}

// The k (<= 1024) largest of each contiguous row, largest first, equal values by position,
// a block a row: a radix select finds the kth largest order key (backend/common/order_key.h) a byte at a time (a histogram of
// the keys that share the bytes found so far, per pass), then one pass in position order
// picks every larger key and the first equal ones, and each pick's rank among the picks is
// its place. v: rows, n, k, in, values out, positions out.
template <class T, int N> __device__ void kiln_topk(const KilnMeta<N>& m) {
  using K = kiln::order::key_t<T>;
  constexpr int kBits = sizeof(K) * 8;
  const long rows = m.v[0], n = m.v[1];
  const int k = static_cast<int>(m.v[2]);
  const T* in = reinterpret_cast<const T*>(m.v[3]);
  T* values = reinterpret_cast<T*>(m.v[4]);
  int32_t* positions = reinterpret_cast<int32_t*>(m.v[5]);
  __shared__ int hist[256];
  __shared__ K pick_key[1024];
  __shared__ int pick_at[1024];
  __shared__ int warp_count[32];
  __shared__ K prefix_s;
  __shared__ int need_s, larger_s;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  for (long r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = in + r * n;
    K prefix = 0, mask = 0;
    int need = k;  // of the keys matching the prefix, how many of the largest to take
    for (int shift = kBits - 8; shift >= 0; shift -= 8) {
      for (int d = tid; d < 256; d += blockDim.x) hist[d] = 0;
      __syncthreads();
      for (long base = 0; base < n; base += blockDim.x) {  // every lane in every step: the warp matches
        const long i = base + tid;
        const K key = i < n ? kiln::order::key(row[i]) : K(0);
        const int digit = i < n && (key & mask) == prefix ? static_cast<int>((key >> shift) & 255) : 256;
#if __CUDA_ARCH__ >= 700
        // One add per distinct byte in the warp: logits crowd a few bins, whose adds serialize.
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        if (digit < 256 && lane == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
#else
        if (digit < 256) atomicAdd(&hist[digit], 1);
#endif
      }
      __syncthreads();
      if (tid == 0) {  // the byte holding the kth largest, from the top
        int d = 255, above = 0;
        while (above + hist[d] < need) above += hist[d--];
        prefix_s = prefix | (static_cast<K>(d) << shift);
        need_s = need - above;
      }
      __syncthreads();
      prefix = prefix_s;
      need = need_s;
      mask |= static_cast<K>(255) << shift;
      __syncthreads();  // prefix_s and need_s are written again next pass
    }
    // prefix is the kth largest key: every larger key is picked, and the first `need` equal ones.
    if (tid == 0) larger_s = 0;
    __syncthreads();
    int equal_before = 0;  // equal keys at earlier positions (the same in every thread)
    for (long base = 0; base < n; base += blockDim.x) {
      const long i = base + tid;
      const K key = i < n ? kiln::order::key(row[i]) : K(0);
      const bool equal = i < n && key == prefix;
      const unsigned ballot = __ballot_sync(0xffffffffu, equal);
      if (lane == 0) warp_count[warp] = __popc(ballot);
      __syncthreads();
      int before = equal_before + __popc(ballot & ((1u << lane) - 1)), total = 0;
      for (int w = 0; w < warps; ++w) {
        before += w < warp ? warp_count[w] : 0;
        total += warp_count[w];
      }
      if (i < n && key > prefix) {
        const int at = atomicAdd(&larger_s, 1);
        pick_key[at] = key;
        pick_at[at] = static_cast<int>(i);
      } else if (equal && before < need) {
        pick_key[k - need + before] = key;
        pick_at[k - need + before] = static_cast<int>(i);
      }
      equal_before += total;
      __syncthreads();  // warp_count is written again
    }
    __syncthreads();
    for (int s = tid; s < k; s += blockDim.x) {
      const K key = pick_key[s];
      const int at = pick_at[s];
      int rank = 0;
      for (int t = 0; t < k; ++t) rank += pick_key[t] > key || (pick_key[t] == key && pick_at[t] < at);
      values[r * k + rank] = row[at];
      positions[r * k + rank] = at;
    }
    __syncthreads();  // the picks are written again for the next row
  }
}

// Cumulative sum along an axis, one thread per line. v: lines, nd, shape[8], in strides[8],
// out strides[8], length, in axis stride, out axis stride, reverse, inclusive, in, out.
template <class T, int N> __device__ void kiln_cumsum(const KilnMeta<N>& m) {
  using A = kiln::math::compute_t<T>;
  const long lines = m.v[0], len = m.v[26], ias = m.v[27], oas = m.v[28];
  const bool reverse = m.v[29] != 0, inclusive = m.v[30] != 0;
  const int nd = static_cast<int>(m.v[1]);
  const T* in = reinterpret_cast<const T*>(m.v[31]);
  T* out = reinterpret_cast<T*>(m.v[32]);
  for (long r = kiln_gid(); r < lines; r += kiln_gstride()) {
    const long ib = kiln_offset(m, r, nd, 2, 10), ob = kiln_offset(m, r, nd, 2, 18);
    A acc = A(0);
    for (long s = 0; s < len; ++s) {
      const long k = reverse ? len - 1 - s : s;
      const A v = static_cast<A>(in[ib + k * ias]);
      if (inclusive) acc = kiln::math::Add{}(acc, v);
      out[ob + k * oas] = static_cast<T>(acc);
      if (!inclusive) acc = kiln::math::Add{}(acc, v);
    }
  }
}

// start + i * step in float64, converted; the last element exactly `last` when given.
// v: n, start bits, step bits, has last, last bits, out.
template <class T, int N> __device__ void kiln_arange(const KilnMeta<N>& m) {
  const long n = m.v[0];
  const double start = kiln_f64(m.v[1]), step = kiln_f64(m.v[2]);
  T* out = reinterpret_cast<T*>(m.v[5]);
  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {
    if (m.v[3] && i == n - 1) out[i] = kiln::math::convert<T>(kiln_f64(m.v[4]));
    else out[i] = kiln::math::convert<T>(start + static_cast<double>(i) * step);
  }
}

// y[i] = a[a_off(i) + idx[idx_off(i)] * axis_stride] for elements of width sizeof(E).
// v: n, nd, shape[8], y strides[8], a strides[8], idx strides[8], axis stride, y, a, idx.
template <class E, int N> __device__ void kiln_gather(const KilnMeta<N>& m) {
  const long n = m.v[0], as = m.v[34];
  const int nd = static_cast<int>(m.v[1]);
  E* y = reinterpret_cast<E*>(m.v[35]);
  const E* a = reinterpret_cast<const E*>(m.v[36]);
  const long* idx = reinterpret_cast<const long*>(m.v[37]);
  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {
    const long k = idx[kiln_offset(m, i, nd, 2, 26)];
    y[kiln_offset(m, i, nd, 2, 10)] = a[kiln_offset(m, i, nd, 2, 18) + k * as];
  }
}

// Batched matrix product for the types cuBLASLt does not take, one thread per output.
// v: total, M, N, K, nb, batch shape[8], a batch strides[8], b batch strides[8],
// a row stride, a col stride, b row stride, b col stride, a, b, y.
template <class T, int N> __device__ void kiln_matmul(const KilnMeta<N>& m) {
  using CT = kiln::math::compute_t<T>;
  const long total = m.v[0], M = m.v[1], Nn = m.v[2], K = m.v[3];
  const int nb = static_cast<int>(m.v[4]);
  const T* a = reinterpret_cast<const T*>(m.v[33]);
  const T* b = reinterpret_cast<const T*>(m.v[34]);
  T* y = reinterpret_cast<T*>(m.v[35]);
  for (long i = kiln_gid(); i < total; i += kiln_gstride()) {
    const long col = i % Nn, row = (i / Nn) % M, batch = i / (Nn * M);
    const T* pa = a + kiln_offset(m, batch, nb, 5, 13) + row * m.v[29];
    const T* pb = b + kiln_offset(m, batch, nb, 5, 21) + col * m.v[32];
    CT acc = CT(0);
    for (long k = 0; k < K; ++k)
      acc = kiln::math::Add{}(acc, kiln::math::Multiply{}(static_cast<CT>(pa[k * m.v[30]]), static_cast<CT>(pb[k * m.v[31]])));
    y[i] = static_cast<T>(acc);
  }
}
)";
}

int elementwise_meta_len(int operands) { return 2 + kMaxDims + operands * (kMaxDims + 1); }
int flat_meta_len(int operands) { return 1 + operands; }
int tiled_meta_len(int operands) { return 4 + 3 * operands; }
int rows_meta_len(int operands) { return 3 + kMaxDims + operands * (kMaxDims + 2); }

namespace {

// Pointers to every operand: outputs out<o> from v[ptr0], inputs in<k> after them.
void emit_pointers(std::ostringstream& s, const compiler::FusedProgram& p, int ptr0) {
  const int nout = static_cast<int>(p.outputs.size());
  for (int o = 0; o < nout; ++o) {
    const char* t = cpp_type(p.ops[static_cast<size_t>(p.outputs[static_cast<size_t>(o)])].dtype);
    s << "  " << t << "* __restrict__ out" << o << " = reinterpret_cast<" << t << "*>(m.v[" << ptr0 + o << "]);\n";
  }
  for (auto& op : p.ops) {
    if (op.prim) continue;
    const char* t = cpp_type(op.dtype);
    s << "  const " << t << "* __restrict__ in" << op.input << " = reinterpret_cast<const " << t << "*>(m.v["
      << ptr0 + nout + op.input << "]);\n";
  }
}

// Whether d is bfloat16 or float16 (computed in float, stored in 16 bits).
bool sixteen_bit(Dtype d) { return d == bfloat16 || d == float16; }

// Whether member i is a unary op whose result has its argument's dtype.
template <class Ops>
bool same_type_unary(const Ops& ops, size_t i) {
  return ops[i].args.size() == 1 && ops[static_cast<size_t>(ops[i].args[0])].dtype == ops[i].dtype;
}

// Whether member i is a sin or cos of a float32 or 16-bit float into its own type, whose fast
// form defers its fallback to the caller.
template <class Ops>
bool has_fast_form(const Ops& ops, size_t i) {
  const auto* prim = ops[i].prim.get();
  return prim && (prim->kind() == OpKind::Sin || prim->kind() == OpKind::Cos) && same_type_unary(ops, i) &&
         (sixteen_bit(ops[i].dtype) || ops[i].dtype == float32);
}

// Member i's expression: bfloat16 add, subtract and multiply of bfloat16 values as native
// bf16 math, gelu_tanh, sin and cos with a 16-bit result in cheaper float forms, every other
// op as the shared generators spell it. Eager ops run through here too, so they agree. With
// `fast`, sin and cos take the form that sets `slow` instead of taking their fallback.
template <class Ops>
std::string cuda_member_expr(const Ops& ops, size_t i, bool fast = false) {
  const auto& op = ops[i];
  const OpKind k = op.prim->kind();
  const std::string arg = compiler::numbered("t", op.args.empty() ? 0 : op.args[0]);
  // A float computed for a 16-bit result, rounded to it.
  auto narrowed = [&](const std::string& v) {
    return "static_cast<float>(static_cast<" + std::string(compiler::cpp_type(op.dtype)) + ">(" + v + "))";
  };
  if (fast && has_fast_form(ops, i)) {
    const bool f32 = op.dtype == float32;
    const std::string call = std::string(k == OpKind::Sin ? "kiln_sin" : "kiln_cos") + (f32 ? "f" : "") + "_fast(" +
                             arg + ", slow)";
    return f32 ? call : narrowed(call);
  }
  const char* narrow = k == OpKind::GeluTanh ? "kiln_gelu_tanh_narrow"
                       : k == OpKind::Sin    ? "kiln_sin_narrow"
                       : k == OpKind::Cos    ? "kiln_cos_narrow"
                                             : nullptr;
  if (narrow && sixteen_bit(op.dtype) && same_type_unary(ops, i)) {
    return narrowed(std::string(narrow) + "(" + arg + ")");
  }
  const char* native = k == OpKind::Add ? "kiln_bf16_add" : k == OpKind::Subtract ? "kiln_bf16_sub"
                       : k == OpKind::Multiply ? "kiln_bf16_mul" : nullptr;
  bool bf16 = op.dtype == bfloat16 && op.args.size() == 2;
  for (int a : op.args) bf16 &= ops[static_cast<size_t>(a)].dtype == bfloat16;
  if (!native || !bf16) return compiler::member_expr(ops, i);
  return std::string(native) + "(t" + std::to_string(op.args[0]) + ", t" + std::to_string(op.args[1]) + ")";
}

// Every op of p for one element into t<i> (compute types); load(k) reads input k, and
// store(o, value) writes output o. `fast`: see cuda_member_expr.
void emit_element(std::ostringstream& s, const compiler::FusedProgram& p, const std::string& indent,
                  const std::function<std::string(int)>& load,
                  const std::function<std::string(int, const std::string&)>& store, bool fast = false) {
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const compiler::FusedOp& op = p.ops[i];
    const char* ct = compute_type(op.dtype);
    s << indent << "const " << ct << " t" << i << " = ";
    if (!op.prim) {
      s << "static_cast<" << ct << ">(" << load(op.input) << ");\n";
      continue;
    }
    s << cuda_member_expr(p.ops, i, fast) << ";\n";
  }
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    int v = p.outputs[o];
    std::string value = "kiln_narrow<" + std::string(cpp_type(p.ops[static_cast<size_t>(v)].dtype)) + ">(t" +
                        std::to_string(v) + ")";
    s << indent << store(static_cast<int>(o), value) << ";\n";
  }
}

// Output vectors r<o> of `vec` elements, declared at `indent`.
void declare_output_vectors(std::ostringstream& s, const compiler::FusedProgram& p, int vec, const std::string& indent) {
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    s << indent << "kiln_vec<" << cpp_type(p.ops[static_cast<size_t>(p.outputs[o])].dtype) << ", " << vec << "> r" << o << ";\n";
  }
}

// Every op for elements e = 0 .. vec - 1 into r<o>.v[e], unrolled by the generator: constant
// indices keep the vectors in registers. load(k) reads input k's element e. Where ops have
// fast forms, the vector is computed with them, and again with the full forms only when one
// of them met an argument it does not cover.
void emit_vectors(std::ostringstream& s, const compiler::FusedProgram& p, int vec, const std::string& indent,
                  const std::function<std::string(int)>& load) {
  bool fast = false;
  for (size_t i = 0; i < p.ops.size(); ++i) fast = fast || has_fast_form(p.ops, i);
  auto elements = [&](bool fast_forms, const std::string& in) {
    for (int e = 0; e < vec; ++e) {
      s << in << "{\n" << in << "  constexpr int e = " << e << ";\n";
      emit_element(s, p, in + "  ", load, [](int o, const std::string& val) { return compiler::numbered("r", o) + ".v[e] = " + val; },
                   fast_forms);
      s << in << "}\n";
    }
  };
  if (fast) s << indent << "bool slow = false;\n";
  elements(fast, indent);
  if (fast) {
    s << indent << "if (slow) {\n";
    elements(false, indent + "  ");
    s << indent << "}\n";
  }
}

}  // namespace

std::string elementwise_source(const compiler::FusedProgram& p) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size());
  const int nops = nin + nout, len = elementwise_meta_len(nops);
  const int strides0 = 2 + kMaxDims, ptr0 = strides0 + nops * kMaxDims;
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void kiln_kernel(const KilnMeta<" << len << "> m) {\n";
  s << "  const long n = m.v[0];\n  const int nd = static_cast<int>(m.v[1]);\n";
  emit_pointers(s, p, ptr0);
  s << "  for (long i = kiln_gid(); i < n; i += kiln_gstride()) {\n";
  s << "    long rem = i";
  for (int k = 0; k < nops; ++k) s << ", o" << k << " = 0";
  s << ";\n    for (int d = nd - 1; d >= 0; --d) {\n";
  s << "      const long sz = m.v[2 + d];\n      const long q = rem / sz;\n      const long c = rem - q * sz;\n";
  s << "      rem = q;\n";
  for (int k = 0; k < nops; ++k) s << "      o" << k << " += c * m.v[" << strides0 + k * kMaxDims << " + d];\n";
  s << "    }\n";
  emit_element(
      s, p, "    ", [&](int k) { return compiler::numbered("in", k) + compiler::numbered("[o", nout + k) + "]"; },
      [](int o, const std::string& v) { return compiler::numbered("out", o) + compiler::numbered("[o", o) + "] = " + v; });
  s << "  }\n}\n";
  return s.str();
}

std::string elementwise_flat_source(const compiler::FusedProgram& p, uint64_t scalar_inputs, int vec) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size());
  auto scalar = [&](int k) { return ((scalar_inputs >> k) & 1) != 0; };
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(256) kiln_kernel(const KilnMeta<" << flat_meta_len(nin + nout)
    << "> m) {\n  const long n = m.v[0];\n";
  emit_pointers(s, p, 1);
  for (auto& op : p.ops) {  // broadcast scalars are read once
    if (op.prim || !scalar(op.input)) continue;
    s << "  const " << cpp_type(op.dtype) << " s" << op.input << " = in" << op.input << "[0];\n";
  }
  auto load = [&](const std::string& at) {
    return [&, at](int k) { return scalar(k) ? compiler::numbered("s", k) : compiler::numbered("in", k) + at; };
  };
  std::string v = std::to_string(vec);
  s << "  const long nv = n / " << v << ";\n";
  s << "  for (long b = kiln_gid(); b < nv; b += kiln_gstride()) {\n";
  for (auto& op : p.ops) {
    if (op.prim || scalar(op.input)) continue;
    std::string k = std::to_string(op.input), t = cpp_type(op.dtype);
    s << "    const kiln_vec<" << t << ", " << v << "> a" << k << " = reinterpret_cast<const kiln_vec<" << t << ", "
      << v << ">*>(in" << k << ")[b];\n";
  }
  declare_output_vectors(s, p, vec, "    ");
  emit_vectors(s, p, vec, "    ", [&](int k) { return scalar(k) ? compiler::numbered("s", k) : compiler::numbered("a", k) + ".v[e]"; });
  for (int o = 0; o < nout; ++o) {
    s << "    reinterpret_cast<decltype(r" << o << ")*>(out" << o << ")[b] = r" << o << ";\n";
  }
  s << "  }\n";
  s << "  for (long i = nv * " << v << " + kiln_gid(); i < n; i += kiln_gstride()) {\n";
  emit_element(s, p, "    ", load("[i]"),
               [](int o, const std::string& val) { return compiler::numbered("out", o) + "[i] = " + val; });
  s << "  }\n}\n";
  return s.str();
}

int row_meta_len(int inputs, int outputs, int split_reductions) {
  return 2 + 3 * inputs + outputs + (split_reductions > 0 ? split_reductions + 2 : 0);
}

std::string row_member_expr(const std::vector<compiler::RowOp>& ops, size_t i) { return cuda_member_expr(ops, i); }

std::string instantiate(const std::string& call, int meta_len) {
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void kiln_kernel(const KilnMeta<" << meta_len << "> m) { " << call << "(m); }\n";
  return s.str();
}

std::string elementwise_rows_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t strided, int vec,
                                   bool narrow) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size()), nops = nin + nout;
  auto per_row = [&](int k) { return ((row_inputs >> k) & 1) != 0; };
  auto stepped = [&](int operand) { return ((strided >> operand) & 1) != 0; };
  const std::string v = std::to_string(vec), index = narrow ? "unsigned" : "long";
  const int strides0 = 3 + kMaxDims, steps0 = strides0 + nops * kMaxDims;
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(256) kiln_kernel(const KilnMeta<" << rows_meta_len(nops) << "> m) {\n";
  s << "  const " << index << " rows = static_cast<" << index << ">(m.v[0]), per_row = static_cast<" << index
    << ">(m.v[1] / " << v << ");\n  const int outer = static_cast<int>(m.v[2]);  // the axes before the last\n";
  emit_pointers(s, p, steps0 + nops);
  for (int k = 0; k < nops; ++k) {
    if (stepped(k)) s << "  const long step" << k << " = m.v[" << steps0 + k << "];  // along the rows\n";
  }
  s << "  for (" << index << " w = static_cast<" << index << ">(blockIdx.x) * blockDim.x + threadIdx.x; w < rows * per_row; "
    << "w += static_cast<" << index << ">(gridDim.x) * blockDim.x) {\n";
  s << "    const " << index << " r = w / per_row;\n    const long c = static_cast<long>(w - r * per_row) * " << v << ";\n";
  // Each operand's offset of row r (operand o: outputs first, then inputs).
  s << "    long at[" << nops << "] = {};\n";
  s << "    if (outer == 1) {\n";
  s << "#pragma unroll\n      for (int o = 0; o < " << nops << "; ++o) at[o] = static_cast<long>(r) * m.v[" << strides0 << " + o * " << kMaxDims
    << "];\n";
  s << "    } else {\n      " << index << " rem = r;\n      for (int d = outer - 1; d >= 0; --d) {\n";
  s << "        const " << index << " size = static_cast<" << index << ">(m.v[3 + d]), q = rem / size;\n";
  s << "        const long i = static_cast<long>(rem - q * size);\n        rem = q;\n";
  s << "#pragma unroll\n        for (int o = 0; o < " << nops << "; ++o) at[o] += i * m.v[" << strides0 << " + o * " << kMaxDims << " + d];\n";
  s << "      }\n    }\n";
  for (auto& op : p.ops) {
    if (op.prim || stepped(nout + op.input)) continue;
    const std::string k = std::to_string(op.input), t = cpp_type(op.dtype), at = compiler::numbered("at[", nout + op.input) + "]";
    if (per_row(op.input)) {
      s << "    const " << t << " s" << k << " = in" << k << "[" << at << "];\n";
    } else {
      s << "    const kiln_vec<" << t << ", " << v << "> a" << k << " = *reinterpret_cast<const kiln_vec<" << t << ", " << v
        << ">*>(in" << k << " + " << at << " + c);\n";
    }
  }
  declare_output_vectors(s, p, vec, "    ");
  emit_vectors(s, p, vec, "    ", [&](int k) {
    const std::string n = std::to_string(k), o = std::to_string(nout + k);
    if (stepped(nout + k)) return "in" + n + "[at[" + o + "] + (c + e) * step" + o + "]";
    return per_row(k) ? "s" + n : "a" + n + ".v[e]";
  });
  for (int o = 0; o < nout; ++o) {
    if (!stepped(o)) {  // by index into vectors, which NVCC stores at once (through a cast pointer, in 4-byte parts)
      s << "    reinterpret_cast<decltype(r" << o << ")*>(out" << o << " + at[" << o << "])[c / " << v << "] = r" << o << ";\n";
      continue;
    }
    s << "#pragma unroll\n    for (int e = 0; e < " << v << "; ++e) out" << o << "[at[" << o << "] + (c + e) * step" << o << "] = r" << o
      << ".v[e];\n";
  }
  s << "  }\n}\n";
  return s.str();
}

std::string elementwise_tiled_source(const compiler::FusedProgram& p, uint64_t row_inputs, uint64_t tiled_inputs) {
  const int nin = p.num_inputs(), nout = static_cast<int>(p.outputs.size()), nops = nin + nout;
  auto per_row = [&](int k) { return ((row_inputs >> k) & 1) != 0; };
  auto tiled = [&](int k) { return ((tiled_inputs >> k) & 1) != 0; };
  auto each_input = [&](auto&& f) {
    for (auto& op : p.ops) {
      if (!op.prim) f(op.input, std::to_string(op.input), std::string(cpp_type(op.dtype)));
    }
  };
  std::ostringstream s;
  s << "#include \"kiln/cuda_support.h\"\n\n";
  s << "extern \"C\" __global__ void __launch_bounds__(256) kiln_kernel(const KilnMeta<" << tiled_meta_len(nops)
    << "> m) {\n  const long R = m.v[1], C = m.v[2];\n  const bool words = m.v[3] != 0;\n";
  emit_pointers(s, p, 4 + 2 * nops);
  for (int o = 0; o < nout; ++o) {
    s << "  const long ob" << o << " = m.v[" << 4 + 2 * o << "], osr" << o << " = m.v[" << 5 + 2 * o << "];\n";
  }
  each_input([&](int in, const std::string& k, const std::string& t) {
    const int at = 4 + 2 * (nout + in);
    s << "  const long sb" << k << " = m.v[" << at << "], " << (tiled(in) ? "sc" : "sr") << k << " = m.v[" << at + 1 << "];\n";
    if (tiled(in)) s << "  __shared__ " << t << " tile" << k << "[64][65];  // [column][row] of the tile\n";
  });
  s << "  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;\n";
  s << "  const unsigned tiles_r = static_cast<unsigned>((R + 63) / 64), tiles_c = static_cast<unsigned>((C + 63) / 64);\n";
  s << "  const unsigned tiles = static_cast<unsigned>(m.v[0]) * tiles_r * tiles_c;\n";
  s << "  for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {\n";
  s << "    const long b = t / (tiles_r * tiles_c), r0 = static_cast<long>(t / tiles_c % tiles_r) * 64, "
       "c0 = static_cast<long>(t % tiles_c) * 64;\n";
  s << "    const bool whole = words && r0 + 64 <= R && c0 + 64 <= C;  // pairs of elements a load or store\n";
  // Offsets are found once a tile, each phase's accesses stepping by constant multiples of the
  // strides; the loops are unrolled with a fixed trip count, every load of a phase issued
  // before its stores. Accesses index the restrict pointers themselves: through pointers
  // derived in the loop NVCC issued each step's loads after the last step's stores.
  s << "    const long rt = r0 + 2 * tx;  // the tiled inputs' rows rt and rt + 1, columns c0 + ty + k\n";
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (tiled(in)) s << "    const long col" << k << " = b * sb" << k << " + rt + (c0 + ty) * sc" << k << ";\n";
  });
  // Whole tiles take loops of their own, so that nothing between the unrolled iterations
  // keeps their loads from being issued first.
  s << "    if (whole) {\n#pragma unroll\n      for (int k = 0; k < 64; k += 8) {\n        const int q = ty + k;\n";
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (!tiled(in)) return;
    s << "        const kiln_vec<" << t << ", 2> x" << k << " = *reinterpret_cast<const kiln_vec<" << t << ", 2>*>(in" << k
      << " + col" << k << " + k * sc" << k << ");\n";
    s << "        tile" << k << "[q][2 * tx] = x" << k << ".v[0];\n        tile" << k << "[q][2 * tx + 1] = x" << k << ".v[1];\n";
  });
  s << "      }\n    } else {\n      for (int k = 0; k < 64 && c0 + ty + k < C; k += 8) {\n        const int q = ty + k;\n";
  s << "        for (int e = 0; e < 2 && rt + e < R; ++e) {\n";
  each_input([&](int in, const std::string& k, const std::string&) {
    if (tiled(in)) s << "          tile" << k << "[q][2 * tx + e] = in" << k << "[col" << k << " + k * sc" << k << " + e];\n";
  });
  s << "        }\n      }\n    }\n    __syncthreads();\n";
  s << "    const long ry = r0 + ty, c = c0 + 2 * tx;  // rows ry + k, columns c and c + 1\n";
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (tiled(in)) return;
    s << "    const long row" << k << " = b * sb" << k << " + ry * sr" << k << (per_row(in) ? "" : " + c") << ";\n";
  });
  // Outputs are stored a pair at a time by index into pairs (where `whole`: every offset even),
  // which NVCC turns into one store; a store through a cast pointer took one an element.
  for (int o = 0; o < nout; ++o) {
    s << "    const long dst" << o << " = b * ob" << o << " + ry * osr" << o << " + c, pair" << o << " = dst" << o
      << " / 2, pair_sr" << o << " = osr" << o << " / 2;\n";
  }
  auto per_row_loads = [&](const std::string& indent) {
    each_input([&](int in, const std::string& k, const std::string& t) {
      if (per_row(in)) s << indent << "const " << t << " s" << k << " = in" << k << "[row" << k << " + k * sr" << k << "];\n";
    });
  };
  s << "    if (whole) {\n#pragma unroll\n      for (int k = 0; k < 64; k += 8) {\n        const int q = ty + k;\n";
  per_row_loads("        ");
  each_input([&](int in, const std::string& k, const std::string& t) {
    if (!per_row(in) && !tiled(in)) {
      s << "        const kiln_vec<" << t << ", 2> in" << k << "_pair = *reinterpret_cast<const kiln_vec<" << t << ", 2>*>(in"
        << k << " + row" << k << " + k * sr" << k << ");\n";
    }
  });
  // Input k's element e of the pair at row q, column 2 tx (a row-major input's from its
  // loaded pair or, at the edges, from memory).
  auto load = [&](bool loaded_pair) {
    return [&, loaded_pair](int k) {
      const std::string n = std::to_string(k);
      if (per_row(k)) return "s" + n;
      if (tiled(k)) return "tile" + n + "[2 * tx + e][q]";
      return loaded_pair ? "in" + n + "_pair.v[e]" : "in" + n + "[row" + n + " + k * sr" + n + " + e]";
    };
  };
  declare_output_vectors(s, p, 2, "        ");
  emit_vectors(s, p, 2, "        ", load(true));
  for (int o = 0; o < nout; ++o) {
    s << "        reinterpret_cast<decltype(r" << o << ")*>(out" << o << ")[pair" << o << " + k * pair_sr" << o << "] = r" << o << ";\n";
  }
  s << "      }\n    } else {\n      for (int k = 0; k < 64 && ry + k < R; k += 8) {\n        const int q = ty + k;\n";
  per_row_loads("        ");
  s << "        for (int e = 0; e < 2 && c + e < C; ++e) {\n";
  emit_element(s, p, "          ", load(false), [](int o, const std::string& v) {
    const std::string n = std::to_string(o);
    return "out" + n + "[dst" + n + " + k * osr" + n + " + e] = " + v;
  });
  s << "        }\n      }\n    }\n    __syncthreads();  // the tiles are written again next\n  }\n}\n";
  return s.str();
}

const char* word_type(size_t itemsize) {
  return itemsize == 1 ? "uint8_t" : itemsize == 2 ? "uint16_t" : itemsize == 4 ? "uint32_t" : "uint64_t";
}

std::string transpose_source(size_t itemsize) {
  const std::string kernel = itemsize < 4 ? "kiln_transpose_packed<" : "kiln_transpose_tiles<";
  return instantiate(kernel + word_type(itemsize) + ">", 10);
}

}  // namespace kiln::cuda
