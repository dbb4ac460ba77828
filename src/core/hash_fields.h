// One hash of several values, for cache keys that are structs of named fields.
#pragma once

#include <cstddef>
#include <functional>

namespace kiln::detail {

/* Combines std::hash of each value in order (boost's hash_combine step). */
template <class... T>
size_t hash_fields(const T&... values) {
  size_t h = 0;
  ((h ^= std::hash<T>{}(values) + size_t{0x9e3779b97f4a7c15ull} + (h << 6) + (h >> 2)), ...);
  return h;
}

}  // namespace kiln::detail
