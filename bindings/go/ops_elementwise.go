package kiln

// Elementwise ops, one Go function per entry of include/kiln/c/kiln_unary_ops.def
// and kiln_binary_ops.def (TestOpListsMatchCAPI keeps them in step).

// #include "kiln/c/kiln.h"
import "C"

import "runtime"

func unary(a *Array, f func(out *C.kiln_array, a C.kiln_array) C.int) (*Array, error) {
	r, err := newArray(func(out *C.kiln_array) C.int { return f(out, a.handle()) })
	runtime.KeepAlive(a)
	return r, err
}

func binary(a, b *Array, f func(out *C.kiln_array, a, b C.kiln_array) C.int) (*Array, error) {
	r, err := newArray(func(out *C.kiln_array) C.int { return f(out, a.handle(), b.handle()) })
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return r, err
}

func Abs(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_abs(o, x) })
}

func Negative(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_negative(o, x) })
}

func Sign(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_sign(o, x) })
}

func Exp(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_exp(o, x) })
}

func Expm1(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_expm1(o, x) })
}

func Log(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_log(o, x) })
}

func Log1p(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_log1p(o, x) })
}

func Log2(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_log2(o, x) })
}

func Sqrt(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_sqrt(o, x) })
}

func Rsqrt(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_rsqrt(o, x) })
}

func Square(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_square(o, x) })
}

func Reciprocal(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_reciprocal(o, x) })
}

func Sin(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_sin(o, x) })
}

func Cos(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_cos(o, x) })
}

func Tan(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_tan(o, x) })
}

func Tanh(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_tanh(o, x) })
}

func Sigmoid(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_sigmoid(o, x) })
}

func Erf(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_erf(o, x) })
}

func Gelu(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_gelu(o, x) })
}

func GeluTanh(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_gelu_tanh(o, x) })
}

func Floor(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_floor(o, x) })
}

func Ceil(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_ceil(o, x) })
}

func Round(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_round(o, x) })
}

func IsNaN(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_isnan(o, x) })
}

func IsInf(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_isinf(o, x) })
}

func IsFinite(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_isfinite(o, x) })
}

func LogicalNot(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_logical_not(o, x) })
}

func BitwiseNot(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_bitwise_not(o, x) })
}

func Add(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_add(o, x, y) })
}

func Subtract(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_subtract(o, x, y) })
}

func Multiply(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_multiply(o, x, y) })
}

func Divide(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_divide(o, x, y) })
}

func FloorDivide(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_floor_divide(o, x, y) })
}

func Remainder(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_remainder(o, x, y) })
}

func Power(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_power(o, x, y) })
}

func Maximum(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_maximum(o, x, y) })
}

func Minimum(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_minimum(o, x, y) })
}

func Arctan2(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_arctan2(o, x, y) })
}

func Equal(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_equal(o, x, y) })
}

func NotEqual(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_not_equal(o, x, y) })
}

func Less(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_less(o, x, y) })
}

func LessEqual(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_less_equal(o, x, y) })
}

func Greater(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_greater(o, x, y) })
}

func GreaterEqual(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_greater_equal(o, x, y) })
}

func LogicalAnd(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_logical_and(o, x, y) })
}

func LogicalOr(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_logical_or(o, x, y) })
}

func BitwiseAnd(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_bitwise_and(o, x, y) })
}

func BitwiseOr(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_bitwise_or(o, x, y) })
}

func BitwiseXor(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_bitwise_xor(o, x, y) })
}

func LeftShift(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_left_shift(o, x, y) })
}

func RightShift(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_right_shift(o, x, y) })
}
