// Device helpers every generated kernel and every kernel of this directory may use: vector
// accesses, grid strides, strided offsets, shared-memory staging, 16-bit float arithmetic,
// row divisions, short sin/cos forms and block and cluster reductions. Generated source
// includes it first (include name "backend/cuda/kernels/support.cuh", embedded at build time).
#pragma once
#include <cstdint>
#include "kiln/half.h"
#include "backend/common/math.h"
#include "backend/cuda/kernels/args.h"

// V elements of T read or written as one aligned access (16 bytes at most).
template <class T, int V>
struct alignas(sizeof(T) * V) kiln_vec {
  T v[V];
};

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
// Offset of element i of a shape of nd axes with the given strides (args::kMaxAxes each).
__device__ inline long kiln_offset(long i, int nd, const long* shape, const long* strides) {
  long off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    const long s = shape[d];
    const long q = i / s;
    off += (i - q * s) * strides[d];
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
               "l"(from)
               : "memory");
#else
  *static_cast<kiln_vec<unsigned, 4>*>(to) = *static_cast<const kiln_vec<unsigned, 4>*>(from);
#endif
}
/* kiln_stage16, or 16 zeros where `in` is false (then nothing is read at `from`). */
__device__ inline void kiln_stage16_or_zero(void* to, const void* from, bool in) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(to))),
      "l"(from), "r"(in ? 16 : 0)
      : "memory");
#else
  *static_cast<kiln_vec<unsigned, 4>*>(to) =
      in ? *static_cast<const kiln_vec<unsigned, 4>*>(from) : kiln_vec<unsigned, 4>{};
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
__device__ inline unsigned short kiln_bf16_bits(float x) {
  return static_cast<unsigned short>(__float_as_uint(x) >> 16);
}
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
template <class T, class C>
__device__ inline T kiln_narrow(C x) {
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
struct KilnDivisor {
  float b, y;
  bool fast;
};
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
template <class W>
__device__ inline W kiln_shfl_xor(W v, int mask) {
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

// F folded over v of every thread of the block (a multiple of 32 threads); sh holds 32.
// Every thread gets the result; the caller syncs before sh is written again.
template <class F, class W>
__device__ inline W kiln_block_reduce(W v, W init, W* sh) {
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
template <class W>
__device__ inline W kiln_cluster_read(const unsigned long long* slot, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(slot))), "r"(rank));
  union {
    unsigned long long bits;
    W value;
  } u;
  asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(u.bits) : "r"(remote) : "memory");
  return u.value;
}
// F folded over the values of every block of the cluster, in rank order; each block's own
// value must be in its slot. Every thread gets the result; the slots may be written again after.
template <class F, class W>
__device__ inline W kiln_cluster_reduce(const unsigned long long* slot, W init, unsigned blocks) {
  kiln_cluster_sync();
  W v = init;
  for (unsigned q = 0; q < blocks; ++q) v = F{}(v, kiln_cluster_read<W>(slot, q));
  kiln_cluster_sync();
  return v;
}
#endif
