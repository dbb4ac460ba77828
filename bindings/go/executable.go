package kiln

/*
#include <stdlib.h>
#include "kiln/c/kiln_executable.h"
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// ExecMode is how an Executable runs its graph.
type ExecMode int

const (
	Eager    ExecMode = C.KILN_EXEC_EAGER    // evaluate after each node
	Lazy     ExecMode = C.KILN_EXEC_LAZY     // build the whole graph, evaluate once
	Compiled ExecMode = C.KILN_EXEC_COMPILED // trace once per input signature, replay
)

// Executable runs a .kgraph program (docs/executable.md). Any number of goroutines may
// run, commit and read on one Executable at once; Free must not race with them.
type Executable struct {
	h    C.kiln_executable
	mu   sync.Mutex       // guards host
	host []unsafe.Pointer // C memory of host handles, freed with the executable
}

func wrapExecutable(h C.kiln_executable) *Executable {
	e := &Executable{h: h}
	runtime.SetFinalizer(e, (*Executable).Free)
	return e
}

func cDevice(d Device) C.kiln_device {
	return C.kiln_device{_type: C.kiln_device_type(d.Type), index: C.int(d.Index)}
}

// ParseExecutable makes an executable of the graph in text; path (may be "") names it in
// errors and is the folder its params file is read from.
func ParseExecutable(text, path string, mode ExecMode, device Device) (*Executable, error) {
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	var cp *C.char
	if path != "" {
		cp = C.CString(path)
		defer C.free(unsafe.Pointer(cp))
	}
	var h C.kiln_executable
	err := call(func() C.int { return C.kiln_executable_parse(&h, ct, cp, C.kiln_exec_mode(mode), cDevice(device)) })
	if err != nil {
		return nil, err
	}
	return wrapExecutable(h), nil
}

// LoadExecutable makes an executable of the .kgraph file at path.
func LoadExecutable(path string, mode ExecMode, device Device) (*Executable, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var h C.kiln_executable
	if err := call(func() C.int { return C.kiln_executable_load(&h, cp, C.kiln_exec_mode(mode), cDevice(device)) }); err != nil {
		return nil, err
	}
	return wrapExecutable(h), nil
}

// Free waits for committed runs (dropping their errors) and releases the executable and
// its host handles' memory. Safe to call twice.
func (e *Executable) Free() {
	if e == nil || e.h == nil {
		return
	}
	C.kiln_executable_free(e.h)
	e.h = nil
	for _, p := range e.host {
		C.free(p)
	}
	e.host = nil
	runtime.SetFinalizer(e, nil)
}

func (e *Executable) handle() C.kiln_executable {
	if e == nil {
		return nil
	}
	return e.h
}

// Mode is the mode the executable was made with.
func (e *Executable) Mode() ExecMode {
	var m C.kiln_exec_mode
	call(func() C.int { return C.kiln_executable_mode(&m, e.handle()) })
	runtime.KeepAlive(e)
	return ExecMode(m)
}

func (e *Executable) names(count func(*C.size_t) C.int, name func(**C.char, C.size_t) C.int) []string {
	var n C.size_t
	if call(func() C.int { return count(&n) }) != nil {
		return nil
	}
	out := make([]string, int(n))
	for i := range out {
		var s *C.char
		if call(func() C.int { return name(&s, C.size_t(i)) }) == nil {
			out[i] = C.GoString(s)
		}
	}
	runtime.KeepAlive(e)
	return out
}

// InputNames are the graph's inputs in declaration order.
func (e *Executable) InputNames() []string {
	return e.names(func(n *C.size_t) C.int { return C.kiln_executable_num_inputs(n, e.handle()) },
		func(s **C.char, i C.size_t) C.int { return C.kiln_executable_input_name(s, e.handle(), i) })
}

// OutputNames are the graph's outputs in order.
func (e *Executable) OutputNames() []string {
	return e.names(func(n *C.size_t) C.int { return C.kiln_executable_num_outputs(n, e.handle()) },
		func(s **C.char, i C.size_t) C.int { return C.kiln_executable_output_name(s, e.handle(), i) })
}

// SetParam sets a parameter from float32 values, converted to its declared dtype.
func (e *Executable) SetParam(name string, data []float32) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var p *C.float
	if len(data) > 0 {
		p = (*C.float)(unsafe.Pointer(&data[0]))
	}
	err := call(func() C.int { return C.kiln_executable_set_param(e.handle(), cn, p, C.size_t(len(data))) })
	runtime.KeepAlive(data)
	runtime.KeepAlive(e)
	return err
}

// SetParamBytes sets a parameter from bytes already in its declared dtype.
func (e *Executable) SetParamBytes(name string, data []byte, dtype Dtype) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	err := call(func() C.int {
		return C.kiln_executable_set_param_typed(e.handle(), cn, p, C.size_t(len(data)), C.kiln_dtype(dtype))
	})
	runtime.KeepAlive(data)
	runtime.KeepAlive(e)
	return err
}

// LoadParams sets every parameter found in a safetensors-layout file.
func (e *Executable) LoadParams(path string) error {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	err := call(func() C.int { return C.kiln_executable_load_params(e.handle(), cp) })
	runtime.KeepAlive(e)
	return err
}

// HasParam reports whether the parameter has a value.
func (e *Executable) HasParam(name string) bool {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var has C.bool
	err := call(func() C.int { return C.kiln_executable_has_param(&has, e.handle(), cn) })
	runtime.KeepAlive(e)
	return err == nil && bool(has)
}

// RunOption adjusts one run.
type RunOption func(*int64)

// ActiveExtent says that only the first n rows along the leading axis of inputs whose
// first dimension is symbolic are live.
func ActiveExtent(n int) RunOption { return func(x *int64) { *x = int64(n) } }

func extentOf(opts []RunOption) C.int64_t {
	x := int64(C.KILN_NO_EXTENT)
	for _, o := range opts {
		o(&x)
	}
	return C.int64_t(x)
}

// namedInputs is a run's inputs in C: names (C memory) and a vector of arrays.
type namedInputs struct {
	names **C.char
	v     C.kiln_vector_array
	free  func()
}

func cNamed(inputs map[string]*Array, order []string) (namedInputs, error) {
	if order == nil {
		for k := range inputs {
			order = append(order, k)
		}
	}
	arrays := make([]*Array, len(order))
	for i, k := range order {
		arrays[i] = inputs[k]
	}
	v, err := vector(arrays)
	if err != nil {
		return namedInputs{}, err
	}
	names, freeNames := cStrings(order)
	return namedInputs{names, v, func() { freeNames(); C.kiln_vector_array_free(v) }}, nil
}

// cStrings copies strs into a C array of C strings; free releases both.
func cStrings(strs []string) (**C.char, func()) {
	if len(strs) == 0 {
		return nil, func() {}
	}
	arr := (*[1 << 28]*C.char)(C.malloc(C.size_t(len(strs)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))[:len(strs):len(strs)]
	for i, s := range strs {
		arr[i] = C.CString(s)
	}
	return &arr[0], func() {
		for _, p := range arr {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(&arr[0]))
	}
}

func (e *Executable) run(f func(*C.kiln_vector_array, C.kiln_executable, **C.char, C.kiln_vector_array, C.int64_t) C.int,
	inputs map[string]*Array, opts []RunOption) ([]*Array, error) {
	in, err := cNamed(inputs, nil)
	if err != nil {
		return nil, err
	}
	defer in.free()
	var out C.kiln_vector_array
	err = call(func() C.int { return f(&out, e.handle(), in.names, in.v, extentOf(opts)) })
	runtime.KeepAlive(e)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(out)
	return unpack(out)
}

// Run runs once with inputs in their declared dtypes and returns the evaluated outputs.
func (e *Executable) Run(inputs map[string]*Array, opts ...RunOption) ([]*Array, error) {
	return e.run(func(o *C.kiln_vector_array, h C.kiln_executable, n **C.char, v C.kiln_vector_array, x C.int64_t) C.int {
		return C.kiln_executable_run(o, h, n, v, x)
	}, inputs, opts)
}

// RunF32 runs once, converting inputs to their declared dtypes and outputs to float32.
func (e *Executable) RunF32(inputs map[string]*Array, opts ...RunOption) ([]*Array, error) {
	return e.run(func(o *C.kiln_vector_array, h C.kiln_executable, n **C.char, v C.kiln_vector_array, x C.int64_t) C.int {
		return C.kiln_executable_run_f32(o, h, n, v, x)
	}, inputs, opts)
}

// ArenaBytes is the size of the arena RunSlots writes the outputs into.
func (e *Executable) ArenaBytes() (int, error) {
	var n C.size_t
	err := call(func() C.int { return C.kiln_executable_arena_bytes(&n, e.handle()) })
	runtime.KeepAlive(e)
	return int(n), err
}

// OutputSlot is where RunSlots writes output i: its offset in the arena and its capacity.
func (e *Executable) OutputSlot(i int) (offset, nbytes int, err error) {
	var o, n C.size_t
	err = call(func() C.int { return C.kiln_executable_output_slot(&o, &n, e.handle(), C.size_t(i)) })
	runtime.KeepAlive(e)
	return int(o), int(n), err
}

// RunSlots runs on positional inputs (graph order, declared dtypes, symbols at their
// bounds, as raw bytes) and writes output i at its slot's offset in arena.
func (e *Executable) RunSlots(inputs [][]byte, arena []byte) error {
	// C must not hold Go pointers in C memory: the inputs are copied for the call.
	ptrs := (*[1 << 28]unsafe.Pointer)(C.malloc(C.size_t(len(inputs)+1) * C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
	defer C.free(unsafe.Pointer(ptrs))
	for i, b := range inputs {
		ptrs[i] = C.CBytes(b)
		defer C.free(ptrs[i])
	}
	var ap unsafe.Pointer
	if len(arena) > 0 {
		ap = unsafe.Pointer(&arena[0])
	}
	if n, err := e.ArenaBytes(); err != nil {
		return err
	} else if len(arena) < n {
		return &Error{Message: "[run_slots] the arena holds fewer bytes than ArenaBytes"}
	}
	err := call(func() C.int {
		return C.kiln_executable_run_slots(e.handle(), &ptrs[0], C.size_t(len(inputs)), ap, C.KILN_NO_EXTENT)
	})
	runtime.KeepAlive(arena)
	runtime.KeepAlive(e)
	return err
}

// HostHandle is caller memory that runs read on every run (zero copy); Data views it
// and stays valid until the executable is freed.
type HostHandle struct {
	ID   int
	Data []byte
}

// NewHostHandle allocates memory for an array of shape and dtype that runs read in place.
func (e *Executable) NewHostHandle(shape []int, dtype Dtype) (HostHandle, error) {
	n := dtype.Size()
	for _, d := range shape {
		if d < 0 {
			return HostHandle{}, &Error{Message: "[host_handle] negative dimension in shape " + shapeString(shape)}
		}
		n *= d
	}
	p := C.calloc(C.size_t(n)+1, 1)
	cs := cShape(shape)
	var id C.int
	err := call(func() C.int {
		return C.kiln_executable_host_handle(&id, e.handle(), p, ptr64(cs), C.int(len(cs)), C.kiln_dtype(dtype))
	})
	runtime.KeepAlive(e)
	if err != nil {
		C.free(p)
		return HostHandle{}, err
	}
	e.mu.Lock()
	e.host = append(e.host, p)
	e.mu.Unlock()
	return HostHandle{ID: int(id), Data: unsafe.Slice((*byte)(p), n)}, nil
}

// DeviceHandle keeps a copy of value on the executable's device; returns its id.
func (e *Executable) DeviceHandle(value *Array) (int, error) {
	var id C.int
	err := call(func() C.int { return C.kiln_executable_device_handle(&id, e.handle(), value.handle()) })
	runtime.KeepAlive(value)
	runtime.KeepAlive(e)
	return int(id), err
}

// WriteHandle replaces a device handle's value, or copies into a host handle's memory.
func (e *Executable) WriteHandle(id int, value *Array) error {
	err := call(func() C.int { return C.kiln_executable_write_handle(e.handle(), C.int(id), value.handle()) })
	runtime.KeepAlive(value)
	runtime.KeepAlive(e)
	return err
}

// ReadHandle is the handle's current value.
func (e *Executable) ReadHandle(id int) (*Array, error) {
	a, err := newArray(func(out *C.kiln_array) C.int { return C.kiln_executable_read_handle(out, e.handle(), C.int(id)) })
	runtime.KeepAlive(e)
	return a, err
}

// BindInput makes input name read the handle on runs that do not pass it.
func (e *Executable) BindInput(name string, id int) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	err := call(func() C.int { return C.kiln_executable_bind_input(e.handle(), cn, C.int(id)) })
	runtime.KeepAlive(e)
	return err
}

// UnbindInput removes a binding.
func (e *Executable) UnbindInput(name string) error {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	err := call(func() C.int { return C.kiln_executable_unbind_input(e.handle(), cn) })
	runtime.KeepAlive(e)
	return err
}

// Feed makes output become the handle's value after each run (recurrent state).
func (e *Executable) Feed(output, id int) error {
	err := call(func() C.int { return C.kiln_executable_feed(e.handle(), C.size_t(output), C.int(id)) })
	runtime.KeepAlive(e)
	return err
}

// ClearFeeds removes every feed.
func (e *Executable) ClearFeeds() error {
	err := call(func() C.int { return C.kiln_executable_clear_feeds(e.handle()) })
	runtime.KeepAlive(e)
	return err
}

// Commit starts a run and returns at once (its inputs are checked now); Sync collects it.
func (e *Executable) Commit(inputs map[string]*Array, opts ...RunOption) error {
	in, err := cNamed(inputs, nil)
	if err != nil {
		return err
	}
	defer in.free()
	err = call(func() C.int { return C.kiln_executable_commit(e.handle(), in.names, in.v, extentOf(opts)) })
	runtime.KeepAlive(e)
	return err
}

// runs splits a flat vector of runs * outputs arrays.
func (e *Executable) runs(out C.kiln_vector_array, n int) ([][]*Array, error) {
	flat, err := unpack(out)
	if err != nil {
		return nil, err
	}
	res := make([][]*Array, n)
	per := 0
	if n > 0 {
		per = len(flat) / n
	}
	for i := range res {
		res[i] = flat[i*per : (i+1)*per]
	}
	return res, nil
}

// Sync waits for every committed run and returns their outputs in commit order; the
// first error of any run is returned after all have finished.
func (e *Executable) Sync() ([][]*Array, error) {
	var out C.kiln_vector_array
	var n C.size_t
	err := call(func() C.int { return C.kiln_executable_sync(&out, &n, e.handle()) })
	runtime.KeepAlive(e)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(out)
	return e.runs(out, int(n))
}

// RunPipelined runs each input set (all with the same names), overlapping one set's
// preparation with the previous one's evaluation.
func (e *Executable) RunPipelined(sets []map[string]*Array, opts ...RunOption) ([][]*Array, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	var order []string
	for k := range sets[0] {
		order = append(order, k)
	}
	vs := make([]namedInputs, len(sets))
	cv := (*[1 << 28]C.kiln_vector_array)(C.malloc(C.size_t(len(sets)) * C.size_t(unsafe.Sizeof(C.kiln_vector_array(nil)))))
	defer C.free(unsafe.Pointer(cv))
	for i, s := range sets {
		in, err := cNamed(s, order)
		if err != nil {
			return nil, err
		}
		defer in.free()
		vs[i], cv[i] = in, in.v
	}
	var out C.kiln_vector_array
	err := call(func() C.int {
		return C.kiln_executable_run_pipelined(&out, e.handle(), vs[0].names, &cv[0], C.size_t(len(sets)), extentOf(opts))
	})
	runtime.KeepAlive(e)
	if err != nil {
		return nil, err
	}
	defer C.kiln_vector_array_free(out)
	return e.runs(out, len(sets))
}

// shapesIn passes named shapes to C (all C memory); free releases it.
func shapesIn(shapes map[string][]int, f func(names **C.char, shapes **C.int64_t, ndims *C.int, n C.size_t) C.int) error {
	var order []string
	for k := range shapes {
		order = append(order, k)
	}
	names, freeNames := cStrings(order)
	defer freeNames()
	n := len(order)
	ps := (*[1 << 28]*C.int64_t)(C.malloc(C.size_t(n+1) * C.size_t(unsafe.Sizeof((*C.int64_t)(nil)))))
	nd := (*[1 << 28]C.int)(C.malloc(C.size_t(n+1) * C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(ps))
	defer C.free(unsafe.Pointer(nd))
	for i, k := range order {
		s := shapes[k]
		p := (*[1 << 28]C.int64_t)(C.malloc(C.size_t(len(s)+1) * 8))
		defer C.free(unsafe.Pointer(p))
		for j, d := range s {
			p[j] = C.int64_t(d)
		}
		ps[i], nd[i] = &p[0], C.int(len(s))
	}
	return call(func() C.int { return f(names, &ps[0], &nd[0], C.size_t(n)) })
}

// WarmCompile (compiled mode) traces and compiles now what a first run with inputs of
// these shapes would (inputs not named: symbols at their bounds); other modes do nothing.
func (e *Executable) WarmCompile(shapes map[string][]int) error {
	err := shapesIn(shapes, func(names **C.char, s **C.int64_t, nd *C.int, n C.size_t) C.int {
		return C.kiln_executable_warm_compile(e.handle(), names, s, nd, n)
	})
	runtime.KeepAlive(e)
	return err
}

// ExtentBlocker says why an active extent would fall back to the whole bucket for inputs
// of these shapes ("" when it would not).
func (e *Executable) ExtentBlocker(shapes map[string][]int) (string, error) {
	var s *C.char
	err := shapesIn(shapes, func(names **C.char, sh **C.int64_t, nd *C.int, n C.size_t) C.int {
		return C.kiln_executable_extent_blocker(&s, e.handle(), names, sh, nd, n)
	})
	runtime.KeepAlive(e)
	if err != nil {
		return "", err
	}
	defer C.kiln_string_free(s)
	return C.GoString(s), nil
}
