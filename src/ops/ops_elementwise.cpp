// Front ends of the elementwise ops: dtype rules, broadcasting, validation.
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

template <class F>
Array unary_op(const Array& a, Dtype compute, Dtype out) {
  Array x = cast(a, compute);
  return Array::make(x.shape(), out, std::make_shared<Unary<F>>(), {x});
}

// Math that only makes sense on floats: integers and bool compute in float32.
template <class F>
Array float_unary(const Array& a) {
  check_valid(op_name(op_kind_of<F>::value), a);
  Dtype d = to_floating(a.dtype());
  return unary_op<F>(a, d, d);
}

template <class F>
Array same_unary(const Array& a) {
  check_valid(op_name(op_kind_of<F>::value), a);
  return unary_op<F>(a, a.dtype(), a.dtype());
}

template <class F>
Array predicate_unary(const Array& a) {
  check_valid(op_name(op_kind_of<F>::value), a);
  return unary_op<F>(a, a.dtype(), bool_);
}

enum class Result { promoted, floating, boolean };

template <class F>
Array binary_op(const Array& a, const Array& b, Result result) {
  const char* op = op_name(op_kind_of<F>::value);
  check_valid(op, a);
  check_valid(op, b);
  check_same_device(op, a, b);
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (result == Result::floating) d = to_floating(d);
  Shape shape = broadcast_shapes(op, {a.shape(), b.shape()});
  Array x = cast(a, d), y = cast(b, d);  // the kernel broadcasts
  Dtype out = result == Result::boolean ? bool_ : d;
  return Array::make(shape, out, std::make_shared<Binary<F>>(), {x, y});
}

template <class F>
Array integer_binary(const Array& a, const Array& b) {
  const char* op = op_name(op_kind_of<F>::value);
  check_valid(op, a);
  check_valid(op, b);
  Dtype d = promote_types(a.dtype(), b.dtype());
  if (is_floating(d)) fail(op, "requires integer or bool arrays, got ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  return binary_op<F>(a, b, Result::promoted);
}

}  // namespace

Array abs(const Array& a) { return same_unary<math::Abs>(a); }
Array negative(const Array& a) {
  check_valid("negative", a);
  if (a.dtype() == bool_) fail("negative", "not supported for bool arrays; use logical_not");
  return same_unary<math::Negative>(a);
}
Array sign(const Array& a) { return same_unary<math::Sign>(a); }
Array exp(const Array& a) { return float_unary<math::Exp>(a); }
Array expm1(const Array& a) { return float_unary<math::Expm1>(a); }
Array log(const Array& a) { return float_unary<math::Log>(a); }
Array log1p(const Array& a) { return float_unary<math::Log1p>(a); }
Array log2(const Array& a) { return float_unary<math::Log2>(a); }
Array sqrt(const Array& a) { return float_unary<math::Sqrt>(a); }
Array rsqrt(const Array& a) { return float_unary<math::Rsqrt>(a); }
Array square(const Array& a) { return same_unary<math::Square>(a); }
Array reciprocal(const Array& a) { return float_unary<math::Reciprocal>(a); }
Array sin(const Array& a) { return float_unary<math::Sin>(a); }
Array cos(const Array& a) { return float_unary<math::Cos>(a); }
Array tan(const Array& a) { return float_unary<math::Tan>(a); }
Array tanh(const Array& a) { return float_unary<math::Tanh>(a); }
Array sigmoid(const Array& a) { return float_unary<math::Sigmoid>(a); }
Array erf(const Array& a) { return float_unary<math::Erf>(a); }
Array gelu(const Array& a) { return float_unary<math::Gelu>(a); }
Array gelu_tanh(const Array& a) { return float_unary<math::GeluTanh>(a); }
Array floor(const Array& a) { return same_unary<math::Floor>(a); }
Array ceil(const Array& a) { return same_unary<math::Ceil>(a); }
Array round(const Array& a) { return same_unary<math::Round>(a); }
Array isnan(const Array& a) { return predicate_unary<math::IsNan>(a); }
Array isinf(const Array& a) { return predicate_unary<math::IsInf>(a); }
Array isfinite(const Array& a) { return predicate_unary<math::IsFinite>(a); }
Array logical_not(const Array& a) { return predicate_unary<math::LogicalNot>(a); }
Array bitwise_not(const Array& a) {
  check_valid("bitwise_not", a);
  if (is_floating(a.dtype())) fail("bitwise_not", "requires an integer or bool array, got ", dtype_name(a.dtype()));
  return same_unary<math::BitwiseNot>(a);
}

Array astype(const Array& a, Dtype dtype) {
  check_valid("astype", a);
  if (a.dtype() == dtype) return a;
  return Array::make(a.shape(), dtype, std::make_shared<AsType>(dtype), {a});
}

Array add(const Array& a, const Array& b) { return binary_op<math::Add>(a, b, Result::promoted); }
Array subtract(const Array& a, const Array& b) {
  check_valid("subtract", a);
  check_valid("subtract", b);
  if (a.dtype() == bool_ && b.dtype() == bool_) fail("subtract", "not supported for bool arrays; use bitwise_xor");
  return binary_op<math::Subtract>(a, b, Result::promoted);
}
Array multiply(const Array& a, const Array& b) { return binary_op<math::Multiply>(a, b, Result::promoted); }
Array divide(const Array& a, const Array& b) { return binary_op<math::Divide>(a, b, Result::floating); }
Array floor_divide(const Array& a, const Array& b) { return binary_op<math::FloorDivide>(a, b, Result::promoted); }
Array remainder(const Array& a, const Array& b) { return binary_op<math::Remainder>(a, b, Result::promoted); }
Array power(const Array& a, const Array& b) { return binary_op<math::Power>(a, b, Result::promoted); }
Array maximum(const Array& a, const Array& b) { return binary_op<math::Maximum>(a, b, Result::promoted); }
Array minimum(const Array& a, const Array& b) { return binary_op<math::Minimum>(a, b, Result::promoted); }
Array arctan2(const Array& a, const Array& b) { return binary_op<math::Arctan2>(a, b, Result::floating); }
Array equal(const Array& a, const Array& b) { return binary_op<math::Equal>(a, b, Result::boolean); }
Array not_equal(const Array& a, const Array& b) { return binary_op<math::NotEqual>(a, b, Result::boolean); }
Array less(const Array& a, const Array& b) { return binary_op<math::Less>(a, b, Result::boolean); }
Array less_equal(const Array& a, const Array& b) { return binary_op<math::LessEqual>(a, b, Result::boolean); }
Array greater(const Array& a, const Array& b) { return binary_op<math::Greater>(a, b, Result::boolean); }
Array greater_equal(const Array& a, const Array& b) { return binary_op<math::GreaterEqual>(a, b, Result::boolean); }
Array logical_and(const Array& a, const Array& b) { return binary_op<math::LogicalAnd>(a, b, Result::boolean); }
Array logical_or(const Array& a, const Array& b) { return binary_op<math::LogicalOr>(a, b, Result::boolean); }
Array bitwise_and(const Array& a, const Array& b) { return integer_binary<math::BitwiseAnd>(a, b); }
Array bitwise_or(const Array& a, const Array& b) { return integer_binary<math::BitwiseOr>(a, b); }
Array bitwise_xor(const Array& a, const Array& b) { return integer_binary<math::BitwiseXor>(a, b); }
Array left_shift(const Array& a, const Array& b) { return integer_binary<math::LeftShift>(a, b); }
Array right_shift(const Array& a, const Array& b) { return integer_binary<math::RightShift>(a, b); }

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
