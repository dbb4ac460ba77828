// topk on the device for up to 1024 picks a row. Generated source includes
// "backend/cuda/kernels/support.cuh" before this file.
#pragma once

#include "backend/common/order_key.h"
#include "backend/cuda/kernels/args.h"

namespace kiln::cuda::topk {

// The k (<= 1024) largest of each contiguous row, largest first, equal values by position,
// a block a row: a radix select finds the kth largest order key (backend/common/order_key.h)
// a byte at a time (a histogram of the keys that share the bytes found so far, per pass),
// then one pass in position order
// picks every larger key and the first equal ones, and each pick's rank among the picks is
// its place.
template <class T>
__device__ void largest(const args::TopK& a) {
  using K = kiln::order::key_t<T>;
  constexpr int kBits = sizeof(K) * 8;
  const long rows = a.rows, n = a.n;
  const int k = static_cast<int>(a.k);
  const T* in = static_cast<const T*>(a.in);
  T* values = static_cast<T*>(a.values);
  int32_t* positions = static_cast<int32_t*>(a.positions);
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

}  // namespace kiln::cuda::topk
