// Package kiln is a Go binding of kiln's C API: lazy arrays, ops, and compiled
// functions that trace once and replay from any number of goroutines.
//
// Build with CGO_CFLAGS=-I<kiln>/include and CGO_LDFLAGS=-L<build dir> (the
// directory holding libkiln.a); test.sh sets both.
package kiln

/*
#cgo LDFLAGS: -lkiln -lopenblas -lpcre2-8 -lstdc++ -lm -ldl -lpthread
#include <stdlib.h>
#include "kiln/c/kiln.h"
*/
import "C"

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unsafe"
)

// Error is a failure reported by kiln; Message starts with the op's tag, as in
// "[matmul] inner dimensions differ: (2,3) @ (2,3)".
type Error struct {
	Message string
}

func (e *Error) Error() string { return e.Message }

// call runs one C call and turns a non-zero status into an *Error. The thread
// is pinned so that the thread-local message is read where it was written.
func call(f func() C.int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if f() != 0 {
		return &Error{Message: C.GoString(C.kiln_last_error())}
	}
	return nil
}

// Dtype is an element type.
type Dtype int

const (
	Bool     Dtype = C.KILN_BOOL
	Uint8    Dtype = C.KILN_UINT8
	Uint16   Dtype = C.KILN_UINT16
	Uint32   Dtype = C.KILN_UINT32
	Uint64   Dtype = C.KILN_UINT64
	Int8     Dtype = C.KILN_INT8
	Int16    Dtype = C.KILN_INT16
	Int32    Dtype = C.KILN_INT32
	Int64    Dtype = C.KILN_INT64
	Float16  Dtype = C.KILN_FLOAT16
	BFloat16 Dtype = C.KILN_BFLOAT16
	Float32  Dtype = C.KILN_FLOAT32
	Float64  Dtype = C.KILN_FLOAT64
)

// String is the dtype's name ("float32", "bool", ...).
func (d Dtype) String() string {
	var name *C.char
	if err := call(func() C.int { return C.kiln_dtype_name(&name, C.kiln_dtype(d)) }); err != nil {
		return fmt.Sprintf("Dtype(%d)", int(d))
	}
	return C.GoString(name)
}

// Size is the number of bytes of one element.
func (d Dtype) Size() int {
	var n C.size_t
	if call(func() C.int { return C.kiln_dtype_size(&n, C.kiln_dtype(d)) }) != nil {
		return 0
	}
	return int(n)
}

// Element is a Go type that holds one element of some dtype.
type Element interface {
	~bool | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

func dtypeOf[T Element]() Dtype {
	var zero T
	switch reflect.TypeOf(zero).Kind() {
	case reflect.Bool:
		return Bool
	case reflect.Uint8:
		return Uint8
	case reflect.Uint16:
		return Uint16
	case reflect.Uint32:
		return Uint32
	case reflect.Uint64:
		return Uint64
	case reflect.Int8:
		return Int8
	case reflect.Int16:
		return Int16
	case reflect.Int32:
		return Int32
	case reflect.Int64:
		return Int64
	case reflect.Float32:
		return Float32
	default:
		return Float64
	}
}

// Array is a handle to an immutable, lazily computed array. It is released by
// Free or, failing that, by the garbage collector. Arrays may be shared between
// goroutines; Free must not race with other uses of the same *Array.
type Array struct {
	h C.kiln_array
}

func wrap(h C.kiln_array) *Array {
	a := &Array{h: h}
	runtime.SetFinalizer(a, (*Array).Free)
	return a
}

// handle is the C handle, or NULL for a nil or freed array (which kiln reports).
func (a *Array) handle() C.kiln_array {
	if a == nil {
		return nil
	}
	return a.h
}

// Free releases the array now; later uses report an error. Safe to call twice.
func (a *Array) Free() {
	if a == nil || a.h == nil {
		return
	}
	C.kiln_array_free(a.h)
	a.h = nil
	runtime.SetFinalizer(a, nil)
}

// newArray runs a C call producing one array into a fresh handle.
func newArray(f func(out *C.kiln_array) C.int) (*Array, error) {
	var h C.kiln_array
	if err := call(func() C.int { return f(&h) }); err != nil {
		return nil, err
	}
	return wrap(h), nil
}

func shapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = fmt.Sprint(d)
	}
	return "(" + strings.Join(parts, ",") + ")"
}

func cShape(shape []int) []C.int64_t {
	out := make([]C.int64_t, len(shape))
	for i, d := range shape {
		out[i] = C.int64_t(d)
	}
	return out
}

func ptr64(s []C.int64_t) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func cInts(v []int) []C.int {
	out := make([]C.int, len(v))
	for i, x := range v {
		out[i] = C.int(x)
	}
	return out
}

func ptrInt(s []C.int) *C.int {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// fromRaw copies n elements of dtype from p; shape must hold exactly n.
func fromRaw(p unsafe.Pointer, n int, dtype Dtype, shape []int) (*Array, error) {
	if shape == nil {
		shape = []int{n}
	}
	total := 1
	for _, d := range shape {
		if d < 0 {
			return nil, &Error{Message: "[array] negative dimension in shape " + shapeString(shape)}
		}
		total *= d
	}
	if total != n {
		return nil, &Error{Message: fmt.Sprintf("[array] got %d elements for shape %s which holds %d", n,
			shapeString(shape), total)}
	}
	cs := cShape(shape)
	return newArray(func(out *C.kiln_array) C.int {
		return C.kiln_array_new_data(out, p, ptr64(cs), C.int(len(cs)), C.kiln_dtype(dtype))
	})
}

// FromSlice copies data into a new array of the given shape (1-D when no shape
// is given); the dtype follows T.
func FromSlice[T Element](data []T, shape ...int) (*Array, error) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	a, err := fromRaw(p, len(data), dtypeOf[T](), shape)
	runtime.KeepAlive(data)
	return a, err
}

// FromBits copies 16-bit patterns into a float16 or bfloat16 array.
func FromBits(bits []uint16, dtype Dtype, shape ...int) (*Array, error) {
	if dtype != Float16 && dtype != BFloat16 {
		return nil, &Error{Message: "[array] FromBits needs float16 or bfloat16, got " + dtype.String()}
	}
	var p unsafe.Pointer
	if len(bits) > 0 {
		p = unsafe.Pointer(&bits[0])
	}
	a, err := fromRaw(p, len(bits), dtype, shape)
	runtime.KeepAlive(bits)
	return a, err
}

// Scalar is a 0-d array of dtype holding v.
func Scalar(v float64, dtype Dtype) (*Array, error) {
	return newArray(func(out *C.kiln_array) C.int { return C.kiln_array_new_float(out, C.double(v), C.kiln_dtype(dtype)) })
}

// ScalarInt is a 0-d integer (or any dtype) array holding v.
func ScalarInt(v int64, dtype Dtype) (*Array, error) {
	return newArray(func(out *C.kiln_array) C.int { return C.kiln_array_new_int(out, C.int64_t(v), C.kiln_dtype(dtype)) })
}

// ScalarLike is a 0-d array holding v in the dtype that arithmetic between like
// and a float constant gives (like's own dtype when it is floating).
func ScalarLike(v float64, like *Array) (*Array, error) {
	a, err := newArray(func(out *C.kiln_array) C.int {
		return C.kiln_array_new_float_like(out, C.double(v), like.handle())
	})
	runtime.KeepAlive(like)
	return a, err
}

// Valid reports whether the handle holds an array (false after Free).
func (a *Array) Valid() bool {
	var v C.bool
	call(func() C.int { return C.kiln_array_valid(&v, a.handle()) })
	runtime.KeepAlive(a)
	return bool(v)
}

// Shape is the size of each axis (nil for a freed array).
func (a *Array) Shape() []int {
	var nd C.int
	var p *C.int64_t
	var shape []int
	call(func() C.int {
		if rc := C.kiln_array_ndim(&nd, a.handle()); rc != 0 {
			return rc
		}
		if rc := C.kiln_array_shape(&p, a.handle()); rc != 0 {
			return rc
		}
		shape = make([]int, int(nd))
		if nd > 0 {
			dims := unsafe.Slice(p, int(nd))
			for i := range shape {
				shape[i] = int(dims[i])
			}
		}
		return 0
	})
	runtime.KeepAlive(a)
	return shape
}

// Ndim is the number of axes.
func (a *Array) Ndim() int { return len(a.Shape()) }

// Size is the number of elements (0 for a freed array).
func (a *Array) Size() int {
	var n C.size_t
	call(func() C.int { return C.kiln_array_size(&n, a.handle()) })
	runtime.KeepAlive(a)
	return int(n)
}

// Dtype is the element type.
func (a *Array) Dtype() Dtype {
	var d C.kiln_dtype
	call(func() C.int { return C.kiln_array_dtype(&d, a.handle()) })
	runtime.KeepAlive(a)
	return Dtype(d)
}

// Eval computes the array if not yet done.
func (a *Array) Eval() error {
	err := call(func() C.int { return C.kiln_array_eval(a.handle()) })
	runtime.KeepAlive(a)
	return err
}

// String shows the values, shape and dtype (evaluating the array).
func (a *Array) String() string {
	var s *C.char
	if err := call(func() C.int { return C.kiln_array_tostring(&s, a.handle()) }); err != nil {
		return "array(<" + err.Error() + ">)"
	}
	runtime.KeepAlive(a)
	defer C.kiln_string_free(s)
	return C.GoString(s)
}

// copyOut writes the elements, converted to dtype, to p (n elements).
func (a *Array) copyOut(p unsafe.Pointer, nbytes int, dtype Dtype) error {
	err := call(func() C.int { return C.kiln_array_copy_to(p, C.size_t(nbytes), a.handle(), C.kiln_dtype(dtype)) })
	runtime.KeepAlive(a)
	return err
}

// ToSlice evaluates a and returns its elements, row-major, converted to T.
func ToSlice[T Element](a *Array) ([]T, error) {
	if !a.Valid() {
		return nil, a.Eval() // reports the handle's problem
	}
	out := make([]T, a.Size())
	var zero T
	var p unsafe.Pointer
	if len(out) > 0 {
		p = unsafe.Pointer(&out[0])
	}
	if err := a.copyOut(p, len(out)*int(unsafe.Sizeof(zero)), dtypeOf[T]()); err != nil {
		return nil, err
	}
	return out, nil
}

// Float32s, Float64s, Int32s, Int64s and Bools are ToSlice for common types.
func (a *Array) Float32s() ([]float32, error) { return ToSlice[float32](a) }
func (a *Array) Float64s() ([]float64, error) { return ToSlice[float64](a) }
func (a *Array) Int32s() ([]int32, error)     { return ToSlice[int32](a) }
func (a *Array) Int64s() ([]int64, error)     { return ToSlice[int64](a) }
func (a *Array) Bools() ([]bool, error)       { return ToSlice[bool](a) }

// Item is the single element of a size-1 array, converted to T.
func Item[T Element](a *Array) (T, error) {
	var v T
	if a.Size() != 1 {
		return v, &Error{Message: fmt.Sprintf("[item] item() needs an array of size 1, got shape %s", shapeString(a.Shape()))}
	}
	err := a.copyOut(unsafe.Pointer(&v), int(unsafe.Sizeof(v)), dtypeOf[T]())
	return v, err
}

// Float is the single element as a float64.
func (a *Array) Float() (float64, error) { return Item[float64](a) }

// Int is the single element as an int64.
func (a *Array) Int() (int64, error) { return Item[int64](a) }

// vector builds a C vector of the given arrays; the caller frees it.
func vector(arrays []*Array) (C.kiln_vector_array, error) {
	var v C.kiln_vector_array
	err := call(func() C.int {
		if rc := C.kiln_vector_array_new(&v); rc != 0 {
			return rc
		}
		for _, a := range arrays {
			if rc := C.kiln_vector_array_append(v, a.handle()); rc != 0 {
				return rc
			}
		}
		return 0
	})
	runtime.KeepAlive(arrays)
	if err != nil {
		C.kiln_vector_array_free(v)
		return nil, err
	}
	return v, nil
}

// unpack turns a C vector into Arrays (new handles).
func unpack(v C.kiln_vector_array) ([]*Array, error) {
	var out []*Array
	err := call(func() C.int {
		var n C.size_t
		if rc := C.kiln_vector_array_size(&n, v); rc != 0 {
			return rc
		}
		out = make([]*Array, 0, int(n))
		for i := 0; i < int(n); i++ {
			var h C.kiln_array
			if rc := C.kiln_vector_array_get(&h, v, C.size_t(i)); rc != 0 {
				return rc
			}
			out = append(out, wrap(h))
		}
		return 0
	})
	return out, err
}

// Eval computes the given arrays and what they depend on.
func Eval(arrays ...*Array) error {
	v, err := vector(arrays)
	if err != nil {
		return err
	}
	defer C.kiln_vector_array_free(v)
	return call(func() C.int { return C.kiln_eval(v) })
}

// IsEvaluated reports whether the array has been computed (false for a freed array).
func (a *Array) IsEvaluated() bool {
	var done C.bool
	err := call(func() C.int { return C.kiln_array_is_evaluated(&done, a.handle()) })
	runtime.KeepAlive(a)
	return err == nil && bool(done)
}

// AsyncEval starts computing the arrays and returns at once; reading them (or
// Eval) waits for the result.
func AsyncEval(arrays ...*Array) error {
	v, err := vector(arrays)
	if err != nil {
		return err
	}
	defer C.kiln_vector_array_free(v)
	return call(func() C.int { return C.kiln_async_eval(v) })
}

// Stats are process-wide counters of what kiln ran.
type Stats struct {
	KernelsLaunched, ArraysMaterialized, Traces, CacheHits, CacheMisses uint64
	// Compiled calls that ran a fused region through the interpreter while its kernel
	// compiled, calls that ran only generated kernels, and for the plans that reached the
	// fused tier, how many and the summed nanoseconds from their cache miss until it arrived.
	InterimCalls, FusedCalls, FusedArrivals, FusedArrivalNs uint64
}

// GetStats reads the counters.
func GetStats() Stats {
	var s C.kiln_stats
	call(func() C.int { return C.kiln_get_stats(&s) })
	return Stats{uint64(s.kernels_launched), uint64(s.arrays_materialized), uint64(s.traces),
		uint64(s.cache_hits), uint64(s.cache_misses), uint64(s.interim_calls), uint64(s.fused_calls),
		uint64(s.fused_arrivals), uint64(s.fused_arrival_ns)}
}

// ResetStats zeroes the counters.
func ResetStats() { C.kiln_reset_stats() }
