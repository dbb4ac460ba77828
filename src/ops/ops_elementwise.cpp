// Front ends of the elementwise ops: dtype rules, broadcasting, validation.
#include <algorithm>

#include "kiln/ops.h"
#include "ops/elementwise.h"
#include "ops/views.h"

namespace kiln {

using detail::shape_str;

Shape broadcast_shapes(const char* op, const std::vector<Shape>& shapes) {
  size_t nd = 0;
  for (auto& s : shapes) nd = std::max(nd, s.size());
  Shape out(nd, 1);
  for (auto& s : shapes) {
    size_t lead = nd - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[lead + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
        continue;
      }
      std::string all;
      for (size_t k = 0; k < shapes.size(); ++k) all += (k ? " and " : "") + shape_str(shapes[k]);
      fail(op, "shapes ", all, " cannot be broadcast together");
    }
  }
  return out;
}

namespace {

void check_valid(const char* op, const Array& a) {
  if (!a.valid()) fail(op, "operation on an empty Array handle");
}

void check_same_device(const char* op, const Array& a, const Array& b) {
  // Host arrays combine with device ones (they are copied on use); two GPUs do not.
  if (a.device() != b.device() && a.device().type != Device::Type::cpu && b.device().type != Device::Type::cpu) {
    fail(op, "arrays are on different devices: ", a.device().str(), " and ", b.device().str());
  }
}

Array cast(const Array& a, Dtype d) { return a.dtype() == d ? a : astype(a, d); }

// The bool counterpart of an op that refuses bool arrays (negative: logical_not), else nullptr.
template <class F>
constexpr const char* bool_alternative = nullptr;
template <>
constexpr const char* bool_alternative<math::Negative> = "logical_not";
template <>
constexpr const char* bool_alternative<math::Subtract> = "bitwise_xor";

template <class F>
void check_not_all_bool(const char* op, const std::vector<Dtype>& in) {
  if constexpr (bool_alternative<F> != nullptr) {
    if (std::all_of(in.begin(), in.end(), [](Dtype d) { return d == bool_; }))
      fail(op, "not supported for bool arrays; use ", bool_alternative<F>);
  }
}

// The front end of every unary row of the op registry; `rule` is its dtypes column.
template <class F, DtypeRule rule>
Array unary(const Array& a) {
  const char* op = op_name(op_kind_of<F>::value);
  check_valid(op, a);
  check_not_all_bool<F>(op, {a.dtype()});
  if (rule == DtypeRule::integer && is_floating(a.dtype()))
    fail(op, "requires an integer or bool array, got ", dtype_name(a.dtype()));
  const Dtype compute = rule == DtypeRule::floating ? to_floating(a.dtype()) : a.dtype();
  const Dtype out = rule == DtypeRule::boolean ? bool_ : compute;
  Array x = cast(a, compute);
  return Array::make(x.shape(), out, std::make_shared<Unary<F>>(), {x});
}

// The front end of every binary row of the op registry; `rule` is its dtypes column.
template <class F, DtypeRule rule>
Array binary(const Array& a, const Array& b) {
  const char* op = op_name(op_kind_of<F>::value);
  check_valid(op, a);
  check_valid(op, b);
  check_not_all_bool<F>(op, {a.dtype(), b.dtype()});
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (rule == DtypeRule::integer && is_floating(d))
    fail(op, "requires integer or bool arrays, got ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  check_same_device(op, a, b);
  if (rule == DtypeRule::floating) d = to_floating(d);
  Shape shape = broadcast_shapes(op, {a.shape(), b.shape()});
  Array x = cast(a, d), y = cast(b, d);  // the kernel broadcasts
  const Dtype out = rule == DtypeRule::boolean ? bool_ : d;
  return Array::make(shape, out, std::make_shared<Binary<F>>(), {x, y});
}

}  // namespace

#define KILN_UNARY(F, n, dtypes, ...) \
  Array n(const Array& a) { return unary<math::F, DtypeRule::dtypes>(a); }
#define KILN_BINARY(F, n, dtypes, ...) \
  Array n(const Array& a, const Array& b) { return binary<math::F, DtypeRule::dtypes>(a, b); }
#include "ops/op_table.def"

Array astype(const Array& a, Dtype dtype) {
  check_valid("astype", a);
  if (a.dtype() == dtype) return a;
  return Array::make(a.shape(), dtype, std::make_shared<AsType>(dtype), {a});
}

Array where(const Array& cond, const Array& a, const Array& b) {
  check_valid("where", cond);
  check_valid("where", a);
  check_valid("where", b);
  check_same_device("where", a, b);
  check_same_device("where", cond, a);
  Dtype d = promote_types(a.dtype(), b.dtype());
  Shape shape = broadcast_shapes("where", {cond.shape(), a.shape(), b.shape()});
  return Array::make(shape, d, std::make_shared<Where>(), {cast(cond, bool_), cast(a, d), cast(b, d)});
}

Array clip(const Array& a, const std::optional<Array>& lo, const std::optional<Array>& hi) {
  check_valid("clip", a);
  if (!lo && !hi) fail("clip", "at least one of the bounds must be given");
  // Validate here so errors name clip, not the maximum/minimum it is built from.
  std::vector<Shape> shapes = {a.shape()};
  for (auto* bound : {&lo, &hi}) {
    if (!*bound) continue;
    check_valid("clip", **bound);
    shapes.push_back((*bound)->shape());
  }
  broadcast_shapes("clip", shapes);
  Array out = a;
  if (lo) out = maximum(out, *lo);
  if (hi) out = minimum(out, *hi);
  return out;
}

Array operator-(const Array& a) { return negative(a); }
Array operator~(const Array& a) { return bitwise_not(a); }
Array operator!(const Array& a) { return logical_not(a); }

}  // namespace kiln
