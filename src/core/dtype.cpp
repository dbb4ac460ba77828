#include <algorithm>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

int size_of(Dtype d) {
  switch (d) {
    case bool_:
    case uint8:
    case int8: return 1;
    case uint16:
    case int16:
    case float16:
    case bfloat16: return 2;
    case uint32:
    case int32:
    case float32: return 4;
    case uint64:
    case int64:
    case float64: return 8;
  }
  fail("dtype", "unknown dtype ", static_cast<int>(d));
}

const char* dtype_name(Dtype d) {
  static const char* names[kNumDtypes] = {"bool",  "uint8", "uint16",  "uint32",   "uint64",  "int8",   "int16",
                                          "int32", "int64", "float16", "bfloat16", "float32", "float64"};
  auto i = static_cast<int>(d);
  if (i < 0 || i >= kNumDtypes) fail("dtype", "unknown dtype ", i);
  return names[i];
}

Dtype dtype_from_name(const std::string& name) {
  for (int i = 0; i < kNumDtypes; ++i) {
    if (name == dtype_name(static_cast<Dtype>(i))) return static_cast<Dtype>(i);
  }
  fail("dtype", "unknown dtype name '", name, "'");
}

bool is_floating(Dtype d) { return d == float16 || d == bfloat16 || d == float32 || d == float64; }
bool is_unsigned(Dtype d) { return d == uint8 || d == uint16 || d == uint32 || d == uint64; }
bool is_signed_integer(Dtype d) { return d == int8 || d == int16 || d == int32 || d == int64; }
bool is_integral(Dtype d) { return is_unsigned(d) || is_signed_integer(d); }

namespace {
Dtype signed_of_size(int bytes) {
  switch (bytes) {
    case 1: return int8;
    case 2: return int16;
    case 4: return int32;
    default: return int64;
  }
}
}  // namespace

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  if (a == bool_) return b;
  if (b == bool_) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if ((a == float16 && b == bfloat16) || (a == bfloat16 && b == float16)) return float32;
    return size_of(a) >= size_of(b) ? a : b;
  }
  if (fa) return a;  // integer with float: the float
  if (fb) return b;
  if (is_unsigned(a) == is_unsigned(b)) return size_of(a) >= size_of(b) ? a : b;
  // Mixed signedness: a signed type wide enough for both, capped at int64.
  Dtype u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
  if (size_of(s) > size_of(u)) return s;
  return signed_of_size(std::min(8, size_of(u) * 2));
}

Dtype promote_with_scalar(Dtype array_dtype, ScalarKind scalar) {
  switch (scalar) {
    case ScalarKind::boolean: return array_dtype;
    case ScalarKind::integer: return array_dtype == bool_ ? int32 : array_dtype;
    case ScalarKind::floating: return is_floating(array_dtype) ? array_dtype : float32;
  }
  return array_dtype;
}

Dtype to_floating(Dtype d) { return is_floating(d) ? d : float32; }

}  // namespace kiln
