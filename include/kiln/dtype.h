// Element types and the rules that combine them.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/half.h"

namespace kiln {

enum class Dtype : uint8_t {
  bool_,
  uint8,
  uint16,
  uint32,
  uint64,
  int8,
  int16,
  int32,
  int64,
  float16,
  bfloat16,
  float32,
  float64,
};
inline constexpr int kNumDtypes = 13;

inline constexpr Dtype bool_ = Dtype::bool_;
inline constexpr Dtype uint8 = Dtype::uint8;
inline constexpr Dtype uint16 = Dtype::uint16;
inline constexpr Dtype uint32 = Dtype::uint32;
inline constexpr Dtype uint64 = Dtype::uint64;
inline constexpr Dtype int8 = Dtype::int8;
inline constexpr Dtype int16 = Dtype::int16;
inline constexpr Dtype int32 = Dtype::int32;
inline constexpr Dtype int64 = Dtype::int64;
inline constexpr Dtype float16 = Dtype::float16;
inline constexpr Dtype bfloat16 = Dtype::bfloat16;
inline constexpr Dtype float32 = Dtype::float32;
inline constexpr Dtype float64 = Dtype::float64;

/* Bytes per element. */
int size_of(Dtype d);
/* "float32", "bool", ... */
const char* dtype_name(Dtype d);
/* Parses a name printed by dtype_name; throws kiln::Error on an unknown name. */
Dtype dtype_from_name(const std::string& name);

bool is_floating(Dtype d);
bool is_integral(Dtype d);  // integers, not bool
bool is_unsigned(Dtype d);
bool is_signed_integer(Dtype d);

/* The dtype two array operands combine to (docs/dtypes.md has the table):
   bool < integers < floats; within a kind the wider wins; mixed signedness
   takes the next wider signed type (uint64 with a signed type gives int64);
   float16 with bfloat16 gives float32. */
Dtype promote_types(Dtype a, Dtype b);

/* The dtype an operation with a C++ scalar of the given kind yields: the array's
   own dtype unless the scalar is of a higher kind (a float scalar with an integer
   array gives float32, an integer scalar with a bool array gives int32). */
enum class ScalarKind { boolean, integer, floating };
Dtype promote_with_scalar(Dtype array_dtype, ScalarKind scalar);

/* The floating dtype that math on d produces: d itself when floating, else float32. */
Dtype to_floating(Dtype d);

/* The C++ type for a Dtype, and back. */
template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr Dtype value = bool_;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr Dtype value = uint8;
};
template <>
struct dtype_of<uint16_t> {
  static constexpr Dtype value = uint16;
};
template <>
struct dtype_of<uint32_t> {
  static constexpr Dtype value = uint32;
};
template <>
struct dtype_of<uint64_t> {
  static constexpr Dtype value = uint64;
};
template <>
struct dtype_of<int8_t> {
  static constexpr Dtype value = int8;
};
template <>
struct dtype_of<int16_t> {
  static constexpr Dtype value = int16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr Dtype value = int32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr Dtype value = int64;
};
template <>
struct dtype_of<float16_t> {
  static constexpr Dtype value = float16;
};
template <>
struct dtype_of<bfloat16_t> {
  static constexpr Dtype value = bfloat16;
};
template <>
struct dtype_of<float> {
  static constexpr Dtype value = float32;
};
template <>
struct dtype_of<double> {
  static constexpr Dtype value = float64;
};

template <class T>
inline constexpr Dtype dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

template <class T>
inline constexpr ScalarKind scalar_kind_of() {
  if constexpr (std::is_same_v<T, bool>)
    return ScalarKind::boolean;
  else if constexpr (std::is_integral_v<T>)
    return ScalarKind::integer;
  else
    return ScalarKind::floating;
}

}  // namespace kiln
