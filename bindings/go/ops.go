package kiln

// #include "kiln/c/kiln.h"
import "C"

import "runtime"

// Must returns a and panics on err; inside a compiled function the panic
// becomes the error that Call returns, so chained math can skip error checks.
func Must(a *Array, err error) *Array {
	if err != nil {
		panic(err)
	}
	return a
}

// unary and binary call one C function of the op registry's generated lists; the
// functions that use them are generated into ops_elementwise.go (scripts/gen_bindings).
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

// ---- creation ------------------------------------------------------------------

// Zeros, Ones and Full are arrays of the given shape filled with one value.
func Zeros(dtype Dtype, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return newArray(func(o *C.kiln_array) C.int {
		return C.kiln_zeros(o, ptr64(cs), C.int(len(cs)), C.kiln_dtype(dtype))
	})
}

func Ones(dtype Dtype, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return newArray(func(o *C.kiln_array) C.int {
		return C.kiln_ones(o, ptr64(cs), C.int(len(cs)), C.kiln_dtype(dtype))
	})
}

func Full(value float64, dtype Dtype, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return newArray(func(o *C.kiln_array) C.int {
		return C.kiln_full(o, ptr64(cs), C.int(len(cs)), C.double(value), C.kiln_dtype(dtype))
	})
}

// Arange is [start, stop) in steps of step, like numpy.arange.
func Arange(start, stop, step float64, dtype Dtype) (*Array, error) {
	return newArray(func(o *C.kiln_array) C.int {
		return C.kiln_arange(o, C.double(start), C.double(stop), C.double(step), C.kiln_dtype(dtype))
	})
}

// Linspace is num evenly spaced values from start to stop inclusive.
func Linspace(start, stop float64, num int, dtype Dtype) (*Array, error) {
	return newArray(func(o *C.kiln_array) C.int {
		return C.kiln_linspace(o, C.double(start), C.double(stop), C.int64_t(num), C.kiln_dtype(dtype))
	})
}

// ---- elementwise with extra arguments -------------------------------------------

// AsType converts the element type.
func AsType(a *Array, dtype Dtype) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_astype(o, x, C.kiln_dtype(dtype)) })
}

// Where is cond ? a : b, broadcasting all three.
func Where(cond, a, b *Array) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int { return C.kiln_where(o, cond.handle(), a.handle(), b.handle()) })
	runtime.KeepAlive(cond)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return r, err
}

// Clip is min(max(a, lo), hi); lo or hi may be nil.
func Clip(a, lo, hi *Array) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int { return C.kiln_clip(o, a.handle(), lo.handle(), hi.handle()) })
	runtime.KeepAlive(a)
	runtime.KeepAlive(lo)
	runtime.KeepAlive(hi)
	return r, err
}

// ---- reductions ----------------------------------------------------------------

// ReduceOp names a reduction for Reduce.
type ReduceOp int

const (
	SumOp ReduceOp = iota
	ProdOp
	MeanOp
	MaxOp
	MinOp
	AllOp
	AnyOp
	LogsumexpOp
)

// Reduce applies op over axes (every axis when none are given).
func Reduce(op ReduceOp, a *Array, axes []int, keepdims bool) (*Array, error) {
	if op < SumOp || op > LogsumexpOp {
		return nil, &Error{Message: "[Reduce] unknown reduction"}
	}
	ca := cInts(axes)
	p, n, k := ptrInt(ca), C.size_t(len(ca)), C.bool(keepdims)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		switch op {
		case SumOp:
			return C.kiln_sum(o, x, p, n, k)
		case ProdOp:
			return C.kiln_prod(o, x, p, n, k)
		case MeanOp:
			return C.kiln_mean(o, x, p, n, k)
		case MaxOp:
			return C.kiln_max(o, x, p, n, k)
		case MinOp:
			return C.kiln_min(o, x, p, n, k)
		case AllOp:
			return C.kiln_all(o, x, p, n, k)
		case AnyOp:
			return C.kiln_any(o, x, p, n, k)
		default:
			return C.kiln_logsumexp(o, x, p, n, k)
		}
	})
}

// Sum, Mean, Max and Min reduce over the given axes (all when none), dropping them.
func Sum(a *Array, axes ...int) (*Array, error)  { return Reduce(SumOp, a, axes, false) }
func Mean(a *Array, axes ...int) (*Array, error) { return Reduce(MeanOp, a, axes, false) }
func Max(a *Array, axes ...int) (*Array, error)  { return Reduce(MaxOp, a, axes, false) }
func Min(a *Array, axes ...int) (*Array, error)  { return Reduce(MinOp, a, axes, false) }

// Argmax and Argmin are the int32 index of the first extreme element along axis.
func Argmax(a *Array, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_argmax(o, x, C.int(axis), false) })
}

func Argmin(a *Array, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_argmin(o, x, C.int(axis), false) })
}

// Softmax over the given axes (the last axis when none).
func Softmax(a *Array, axes ...int) (*Array, error) {
	ca := cInts(axes)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		return C.kiln_softmax(o, x, ptrInt(ca), C.size_t(len(ca)))
	})
}

// Cumsum is the inclusive cumulative sum along axis.
func Cumsum(a *Array, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_cumsum(o, x, C.int(axis), false, true) })
}

// Matmul has numpy.matmul semantics.
func Matmul(a, b *Array) (*Array, error) {
	return binary(a, b, func(o *C.kiln_array, x, y C.kiln_array) C.int { return C.kiln_matmul(o, x, y) })
}

// ---- layout --------------------------------------------------------------------

// Reshape to shape; one dimension may be -1.
func Reshape(a *Array, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		return C.kiln_reshape(o, x, ptr64(cs), C.int(len(cs)))
	})
}

// Transpose permutes the axes (reverses them when perm is empty).
func Transpose(a *Array, perm ...int) (*Array, error) {
	cp := cInts(perm)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		return C.kiln_transpose(o, x, ptrInt(cp), C.size_t(len(cp)))
	})
}

// BroadcastTo broadcasts a to shape.
func BroadcastTo(a *Array, shape ...int) (*Array, error) {
	cs := cShape(shape)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		return C.kiln_broadcast_to(o, x, ptr64(cs), C.int(len(cs)))
	})
}

// ExpandDims inserts a size-1 axis.
func ExpandDims(a *Array, axis int) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_expand_dims(o, x, C.int(axis)) })
}

// Squeeze removes the given size-1 axes (all of them when none are given).
func Squeeze(a *Array, axes ...int) (*Array, error) {
	ca := cInts(axes)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		return C.kiln_squeeze(o, x, ptrInt(ca), C.size_t(len(ca)))
	})
}

// Flatten is a 1-D view of a.
func Flatten(a *Array) (*Array, error) {
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int { return C.kiln_flatten(o, x) })
}

// Slice takes start:stop along every axis (Python rules: clamped, negative from the end).
func Slice(a *Array, start, stop []int) (*Array, error) {
	if len(start) != len(stop) {
		return nil, &Error{Message: "[slice] start and stop need the same length"}
	}
	b, e := cShape(start), cShape(stop)
	return unary(a, func(o *C.kiln_array, x C.kiln_array) C.int {
		return C.kiln_slice(o, x, ptr64(b), ptr64(e), nil, C.int(len(b)))
	})
}

// Concatenate joins arrays along an existing axis; Stack along a new one.
func Concatenate(arrays []*Array, axis int) (*Array, error) {
	v, err := vector(arrays)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(v)
	return newArray(func(o *C.kiln_array) C.int { return C.kiln_concatenate(o, v, C.int(axis)) })
}

func Stack(arrays []*Array, axis int) (*Array, error) {
	v, err := vector(arrays)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(v)
	return newArray(func(o *C.kiln_array) C.int { return C.kiln_stack(o, v, C.int(axis)) })
}

// Split cuts a into sections equal parts along axis.
func Split(a *Array, sections, axis int) ([]*Array, error) {
	var v C.kiln_vector_array
	err := call(func() C.int { return C.kiln_split(&v, a.handle(), C.int(sections), C.int(axis)) })
	runtime.KeepAlive(a)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(v)
	return unpack(v)
}

// Take selects along axis by integer indices.
func Take(a, indices *Array, axis int) (*Array, error) {
	return binary(a, indices, func(o *C.kiln_array, x, i C.kiln_array) C.int { return C.kiln_take(o, x, i, C.int(axis)) })
}
