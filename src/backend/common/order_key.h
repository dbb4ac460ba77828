// Unsigned keys whose order is the order of kiln's sorting and selection ops: a larger
// value has a larger key, NaN the largest, and -0 and +0 one key (equal values, which go
// by position). Written once: the CPU's radix sort and the CUDA topk kernel include it.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "backend/common/math.h"

#ifndef KILN_HD
#define KILN_HD
#endif

namespace kiln::order {

/* The key type of T: 64 bits for 8-byte types, else 32. */
template <class T>
using key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <class T>
KILN_HD inline key_t<T> key(T x) {
  using C = math::compute_t<T>;
  if constexpr (std::is_same_v<C, float>) {
    const float f = static_cast<float>(x);
    if (f != f) return 0xFFFFFFFFu;
    const uint32_t b = std::bit_cast<uint32_t>(f == 0.0f ? 0.0f : f);  // -0 as +0
    return b >> 31 ? ~b : b | 0x80000000u;  // negatives reversed below the positives
  } else if constexpr (std::is_same_v<C, double>) {
    if (x != x) return 0xFFFFFFFFFFFFFFFFull;
    const uint64_t b = std::bit_cast<uint64_t>(x == 0.0 ? 0.0 : x);
    return b >> 63 ? ~b : b | 0x8000000000000000ull;
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<key_t<T>>(x) ^ (key_t<T>(1) << (sizeof(key_t<T>) * 8 - 1));  // the sign bit flipped
  } else {
    return static_cast<key_t<T>>(x);
  }
}

}  // namespace kiln::order
