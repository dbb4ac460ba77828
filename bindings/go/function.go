package kiln

/*
#include <stdint.h>
#include <stdlib.h>
#include "kiln/c/kiln.h"

// Defined in Go below (//export); only declarations may live here.
extern int kilnGoCall(kiln_vector_array* out, kiln_vector_array in, void* payload);
extern void kilnGoRelease(void* payload);
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"unsafe"
)

// Func is a function of arrays that kiln can trace.
type Func func(inputs []*Array) ([]*Array, error)

// Function is a closure kiln can call: a plain Go function (NewFunction) or a
// compiled one (Compile). It may be called from any number of goroutines at
// once, and compiled functions may call each other (an inner compiled call made
// while tracing is inlined into the outer one).
type Function struct {
	c    C.kiln_closure
	name string
}

func wrapFunction(c C.kiln_closure, name string) *Function {
	f := &Function{c: c, name: name}
	runtime.SetFinalizer(f, (*Function).Free)
	return f
}

// Free releases the function now; the Go callback it holds is released once
// kiln drops its last reference (compiled functions and caches hold some).
func (f *Function) Free() {
	if f == nil || f.c == nil {
		return
	}
	C.kiln_closure_free(f.c)
	f.c = nil
	runtime.SetFinalizer(f, nil)
}

func (f *Function) handle() C.kiln_closure {
	if f == nil {
		return nil
	}
	return f.c
}

// Name is the name given to Compile ("" for NewFunction).
func (f *Function) Name() string { return f.name }

// NewFunction wraps fn as a kiln closure without compiling it. A panic in fn
// is recovered and returned as the error of Call.
func NewFunction(fn Func) (*Function, error) {
	if fn == nil {
		return nil, &Error{Message: "[NewFunction] nil function"}
	}
	// The payload is C memory holding a cgo.Handle, so no Go pointer goes to C.
	payload := (*C.uintptr_t)(C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	if payload == nil {
		return nil, &Error{Message: "[NewFunction] out of memory"}
	}
	*payload = C.uintptr_t(cgo.NewHandle(fn))
	var c C.kiln_closure
	// On failure kiln runs kilnGoRelease itself, which frees the payload.
	err := call(func() C.int {
		return C.kiln_closure_new_func_payload(&c, C.kiln_closure_fn(C.kilnGoCall), unsafe.Pointer(payload),
			(*[0]byte)(C.kilnGoRelease))
	})
	if err != nil {
		return nil, err
	}
	return wrapFunction(c, ""), nil
}

// CompileOption adjusts Compile.
type CompileOption func(*compileConfig)

type compileConfig struct {
	shapeless bool
}

// Shapeless traces once per input rank and dtype instead of once per shape.
func Shapeless() CompileOption { return func(c *compileConfig) { c.shapeless = true } }

// Compile returns a function that traces fn once per input signature and
// replays the optimized result on later calls. name shows in kiln's warnings.
func Compile(name string, fn Func, opts ...CompileOption) (*Function, error) {
	inner, err := NewFunction(fn)
	if err != nil {
		return nil, err
	}
	defer inner.Free() // the compiled closure keeps its own reference
	return inner.Compile(name, opts...)
}

// Compile compiles an existing function (plain or already compiled).
func (f *Function) Compile(name string, opts ...CompileOption) (*Function, error) {
	var cfg compileConfig
	for _, o := range opts {
		o(&cfg)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var c C.kiln_closure
	err := call(func() C.int { return C.kiln_compile_named(&c, f.handle(), cname, C.bool(cfg.shapeless)) })
	runtime.KeepAlive(f)
	if err != nil {
		return nil, err
	}
	return wrapFunction(c, name), nil
}

// FusedKernels is how compiled calls get the generated kernels of their fused CPU
// regions (docs/codegen.md, "Tiers"); the default comes from KILN_FUSED_KERNELS.
type FusedKernels int

const (
	// FusedBackground runs a region whose kernel is not ready through the interpreter
	// while a small pool compiles it; later calls use the kernel.
	FusedBackground FusedKernels = C.KILN_FUSED_KERNELS_BACKGROUND
	// FusedWait makes a call compile (or wait for) its kernels first.
	FusedWait FusedKernels = C.KILN_FUSED_KERNELS_WAIT
	// FusedOff never generates kernels: the interpreter runs every fused region.
	FusedOff FusedKernels = C.KILN_FUSED_KERNELS_OFF
)

// String is the policy's name, as KILN_FUSED_KERNELS spells it.
func (p FusedKernels) String() string {
	switch p {
	case FusedBackground:
		return "background"
	case FusedWait:
		return "wait"
	case FusedOff:
		return "off"
	}
	return fmt.Sprintf("FusedKernels(%d)", int(p))
}

// SetFusedKernels sets the policy for the whole process, from the next compiled call on.
func SetFusedKernels(p FusedKernels) error {
	return call(func() C.int { return C.kiln_set_fused_kernels(C.kiln_fused_kernels(p)) })
}

// GetFusedKernels reads the policy.
func GetFusedKernels() FusedKernels {
	var p C.kiln_fused_kernels
	call(func() C.int { return C.kiln_get_fused_kernels(&p) })
	return FusedKernels(p)
}

// Call applies the function; the outputs are lazy arrays.
func (f *Function) Call(inputs ...*Array) ([]*Array, error) {
	in, err := vector(inputs)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(in)
	var out C.kiln_vector_array
	err = call(func() C.int { return C.kiln_closure_apply(&out, f.handle(), in) })
	runtime.KeepAlive(f)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(out)
	return unpack(out)
}

// CallEval applies the function and evaluates its outputs before returning them: a
// compiled call and its result in one step.
func (f *Function) CallEval(inputs ...*Array) ([]*Array, error) {
	outs, err := f.Call(inputs...)
	if err != nil {
		return nil, err
	}
	if err := Eval(outs...); err != nil {
		return nil, err
	}
	return outs, nil
}

// Function1, Function2 and Function3 are compiled functions of one, two or
// three arrays returning one array.
type Function1 struct{ *Function }
type Function2 struct{ *Function }
type Function3 struct{ *Function }

func one(outs []*Array, err error) (*Array, error) {
	if err != nil {
		return nil, err
	}
	if len(outs) != 1 {
		return nil, &Error{Message: fmt.Sprintf("[Call] expected 1 output, got %d", len(outs))}
	}
	return outs[0], nil
}

func (f Function1) Call(a *Array) (*Array, error)       { return one(f.Function.Call(a)) }
func (f Function2) Call(a, b *Array) (*Array, error)    { return one(f.Function.Call(a, b)) }
func (f Function3) Call(a, b, c *Array) (*Array, error) { return one(f.Function.Call(a, b, c)) }

func arity(name string, n int, inputs []*Array) error {
	if len(inputs) != n {
		return &Error{Message: fmt.Sprintf("[%s] expected %d inputs, got %d", name, n, len(inputs))}
	}
	return nil
}

func single(a *Array, err error) ([]*Array, error) {
	if err != nil {
		return nil, err
	}
	return []*Array{a}, nil
}

// Compile1, Compile2 and Compile3 compile functions of one, two or three arrays.
func Compile1(name string, fn func(a *Array) (*Array, error), opts ...CompileOption) (Function1, error) {
	f, err := Compile(name, func(in []*Array) ([]*Array, error) {
		if err := arity(name, 1, in); err != nil {
			return nil, err
		}
		return single(fn(in[0]))
	}, opts...)
	return Function1{f}, err
}

func Compile2(name string, fn func(a, b *Array) (*Array, error), opts ...CompileOption) (Function2, error) {
	f, err := Compile(name, func(in []*Array) ([]*Array, error) {
		if err := arity(name, 2, in); err != nil {
			return nil, err
		}
		return single(fn(in[0], in[1]))
	}, opts...)
	return Function2{f}, err
}

func Compile3(name string, fn func(a, b, c *Array) (*Array, error), opts ...CompileOption) (Function3, error) {
	f, err := Compile(name, func(in []*Array) ([]*Array, error) {
		if err := arity(name, 3, in); err != nil {
			return nil, err
		}
		return single(fn(in[0], in[1], in[2]))
	}, opts...)
	return Function3{f}, err
}

// runSafely calls fn, turning a panic into an error.
func runSafely(fn Func, inputs []*Array) (outs []*Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("kiln: panic in traced function: %w", e)
			} else {
				err = fmt.Errorf("kiln: panic in traced function: %v", r)
			}
		}
	}()
	return fn(inputs)
}

func setError(msg string) {
	cmsg := C.CString(msg)
	C.kiln_set_error(cmsg)
	C.free(unsafe.Pointer(cmsg))
}

// kilnGoCall runs a Go Func for kiln, on the thread of the apply that called it,
// so the error set here is the one that apply reports.
//
//export kilnGoCall
func kilnGoCall(out *C.kiln_vector_array, in C.kiln_vector_array, payload unsafe.Pointer) C.int {
	fn := cgo.Handle(*(*C.uintptr_t)(payload)).Value().(Func)
	inputs, err := unpack(in)
	if err == nil {
		var outputs []*Array
		outputs, err = runSafely(fn, inputs)
		for i := 0; err == nil && i < len(outputs); i++ {
			if outputs[i] == nil {
				err = &Error{Message: fmt.Sprintf("[closure] output %d is nil", i)}
			} else if C.kiln_vector_array_append(*out, outputs[i].handle()) != 0 {
				err = &Error{Message: C.GoString(C.kiln_last_error())}
			}
		}
		runtime.KeepAlive(outputs)
	}
	if err != nil {
		setError(err.Error())
		return 1
	}
	return 0
}

// kilnGoRelease frees a payload once kiln drops the last reference to it.
//
//export kilnGoRelease
func kilnGoRelease(payload unsafe.Pointer) {
	cgo.Handle(*(*C.uintptr_t)(payload)).Delete()
	C.free(payload)
}
