// Arg-reductions (argmax, argmin): the index of the first extreme along an axis, NaN first,
// a thread a row, or for long rows a block a part of a row and a second kernel folding the
// parts' picks. Generated source includes "backend/cuda/kernels/support.cuh" before this file.
#pragma once

#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::argreduce {

template <class T>
__device__ inline bool is_nan(T x) {
  if constexpr (kiln::math::is_float_v<T>)
    return x != x;
  else
    return false;
}

// Whether (v, i) comes before (best, bi) as the first extreme: NaN first, then the larger
// (IsMax) or smaller value, then the lower index. A total order, so any order of picks agrees.
template <class CT, bool IsMax>
__device__ inline bool better(CT v, long i, CT best, long bi) {
  const bool vn = is_nan(v), bn = is_nan(best);
  if (vn || bn) return vn && (!bn || i < bi);
  if (v == best) return i < bi;
  return IsMax ? v > best : v < best;
}

// One step of a scan whose positions only grow: a later equal value never wins, so (v, i)
// is taken when it is better or the first NaN. No branch: a few instructions an element.
template <class CT, bool IsMax, class I>
__device__ inline void scan(CT v, I i, CT& best, I& bi) {
  const bool take = !is_nan(best) && (IsMax ? !(v <= best) : !(v >= best));
  best = take ? v : best;
  bi = take ? i : bi;
}

// (v, i) into the pick (best, bi) when it comes first (better).
template <class CT, bool IsMax>
__device__ inline void fold_pick(CT v, long i, CT& best, long& bi) {
  if (better<CT, IsMax>(v, i, best, bi)) {
    best = v;
    bi = i;
  }
}

// Long rows of an arg-reduction in parts: block w finds the first extreme of part w % parts
// (positions k0 ... of the axis) of row w / parts, and writes its value and index (8 bytes
// each) into a.values[w] and a.indices[w].
template <class T, bool IsMax>
__device__ void reduce_parts(const args::ArgReduceParts& a) {
  using CT = kiln::math::compute_t<T>;
  using Init = std::conditional_t<IsMax, kiln::math::Max, kiln::math::Min>;
  constexpr long kNone = 0x7fffffffffffffffL;  // an empty slot: its value ties or loses, its index loses
  constexpr int V = sizeof(T) < 16 ? 16 / sizeof(T) : 1, U = 4;  // elements a load, loads in flight
  const args::ArgReduce& g = a.arg;
  const long rows = g.rows, len = g.length, as = g.axis_stride, parts = a.parts, part_len = a.part_len;
  const int nd = static_cast<int>(g.nd);
  const T* in = static_cast<const T*>(g.in);
  CT* pv = static_cast<CT*>(a.values);
  long* pi = static_cast<long*>(a.indices);
  __shared__ CT shv[32];
  __shared__ long shi[32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, stride = blockDim.x;
  for (long w = blockIdx.x; w < rows * parts; w += gridDim.x) {
    const long r = w / parts, k0 = (w % parts) * part_len;
    const int n = static_cast<int>(min(len, k0 + part_len) - k0);  // positions in the part
    const long base = kiln_offset(r, nd, g.shape, g.strides) + k0 * as;
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
          for (int e = 0; e < V; ++e)
            scan<CT, IsMax>(static_cast<CT>(x[u].v[e]), (j + u * stride) * V + e, vb[e], vi[e]);
        }
      }
      for (; j < nv; j += stride) {
        const kiln_vec<T, V> x = vin[j];
#pragma unroll
        for (int e = 0; e < V; ++e) scan<CT, IsMax>(static_cast<CT>(x.v[e]), j * V + e, vb[e], vi[e]);
      }
#pragma unroll
      for (int e = 0; e < V; ++e) fold_pick<CT, IsMax>(vb[e], k0 + vi[e], best, pick);
    }
    CT tb = Init::template init<CT>();
    int ti = nv * V + tid;
    if (ti < n) {
#pragma unroll 8
      for (int k = ti; k < n; k += stride) scan<CT, IsMax>(static_cast<CT>(in[base + k * as]), k, tb, ti);
      fold_pick<CT, IsMax>(tb, k0 + ti, best, pick);
    }
    for (int level = 0; level < 2; ++level) {  // the warp's pick, then the block's
      for (int d = 16; d > 0; d >>= 1) fold_pick<CT, IsMax>(kiln_shfl_xor(best, d), kiln_shfl_xor(pick, d), best, pick);
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
template <class T, bool IsMax>
__device__ void fold_parts(const args::ArgReduceParts& a) {
  using CT = kiln::math::compute_t<T>;
  using Init = std::conditional_t<IsMax, kiln::math::Max, kiln::math::Min>;
  const long rows = a.arg.rows, parts = a.parts;
  const CT* pv = static_cast<const CT*>(a.values);
  const long* pi = static_cast<const long*>(a.indices);
  int32_t* out = static_cast<int32_t*>(a.arg.out);
  const int lane = threadIdx.x & 31;
  for (long r = kiln_gid() >> 5; r < rows; r += kiln_gstride() >> 5) {
    CT best = Init::template init<CT>();
    long bi = 0x7fffffffffffffffL;  // every part has a pick: this empty one loses
    for (long s = lane; s < parts; s += 32) fold_pick<CT, IsMax>(pv[r * parts + s], pi[r * parts + s], best, bi);
    for (int d = 16; d > 0; d >>= 1) fold_pick<CT, IsMax>(kiln_shfl_xor(best, d), kiln_shfl_xor(bi, d), best, bi);
    if (lane == 0) out[r] = static_cast<int32_t>(bi);
  }
}

// Index of the first extreme along an axis (NaN is the extreme), a thread a row.
template <class T, bool IsMax>
__device__ void first_extreme(const args::ArgReduce& a) {
  using CT = kiln::math::compute_t<T>;
  const long rows = a.rows, len = a.length, as = a.axis_stride;
  const int nd = static_cast<int>(a.nd);
  const T* in = static_cast<const T*>(a.in);
  int32_t* out = static_cast<int32_t*>(a.out);
  for (long r = kiln_gid(); r < rows; r += kiln_gstride()) {
    const long base = kiln_offset(r, nd, a.shape, a.strides);
    CT best = static_cast<CT>(in[base]);
    int32_t bi = 0;
    for (int32_t k = 1; k < len; ++k) scan<CT, IsMax>(static_cast<CT>(in[base + k * as]), k, best, bi);
    out[r] = bi;
  }
}

}  // namespace kiln::cuda::argreduce
