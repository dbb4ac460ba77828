package kiln

// #include <stdlib.h>
// #include "kiln/c/kiln.h"
import "C"

import (
	"runtime"
	"unsafe"
)

// Group is one rank of a group of ranks, one per device, each used by its own goroutine;
// every rank calls the same collectives in the same order (docs/distributed.md).
type Group struct {
	h C.kiln_group
}

// LocalGroup makes one rank per device of this process, rank i on devices[i]: CUDA devices
// (distinct) get an NCCL communicator each, CPU devices are goroutines meeting in shared memory.
func LocalGroup(devices ...Device) ([]*Group, error) {
	if len(devices) == 0 {
		return nil, nil
	}
	cd := make([]C.kiln_device, len(devices))
	for i, d := range devices {
		cd[i] = cDevice(d)
	}
	hs := make([]C.kiln_group, len(devices))
	if err := call(func() C.int {
		return C.kiln_group_local(&cd[0], C.size_t(len(cd)), &hs[0])
	}); err != nil {
		return nil, err
	}
	out := make([]*Group, len(hs))
	for i, h := range hs {
		out[i] = &Group{h: h}
		runtime.SetFinalizer(out[i], (*Group).Free)
	}
	return out, nil
}

// Free releases this rank's handle now (the group lives while any rank or op holds it).
func (g *Group) Free() {
	if g == nil || g.h == nil {
		return
	}
	C.kiln_group_free(g.h)
	g.h = nil
	runtime.SetFinalizer(g, nil)
}

func (g *Group) handle() C.kiln_group {
	if g == nil {
		return nil
	}
	return g.h
}

// Rank is this rank's index in its group.
func (g *Group) Rank() (int, error) {
	var r C.int
	err := call(func() C.int { return C.kiln_group_rank(&r, g.handle()) })
	runtime.KeepAlive(g)
	return int(r), err
}

// Size is how many ranks the group has.
func (g *Group) Size() (int, error) {
	var n C.int
	err := call(func() C.int { return C.kiln_group_size(&n, g.handle()) })
	runtime.KeepAlive(g)
	return int(n), err
}

// Abort ends the group for all its ranks, from any goroutine: each rank waiting in a
// collective, and each later collective, fails with why. A rank that fails before a
// collective would otherwise leave the others waiting in it for ever.
func (g *Group) Abort(why string) error {
	cw, err := cString("kiln_group_abort", "reason", why)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cw))
	err = call(func() C.int { return C.kiln_group_abort(g.handle(), cw) })
	runtime.KeepAlive(g)
	return err
}

// AllSum is the sum of every rank's x; g nil is the group of one rank (a copy of x).
func AllSum(x *Array, g *Group) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int { return C.kiln_all_sum(o, x.handle(), g.handle()) })
	keepAlive(x)
	runtime.KeepAlive(g)
	return r, err
}

// AllGather joins every rank's x along axis, in rank order.
func AllGather(x *Array, g *Group, axis int) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int { return C.kiln_all_gather(o, x.handle(), g.handle(), C.int(axis)) })
	keepAlive(x)
	runtime.KeepAlive(g)
	return r, err
}

// ReduceScatter is the sum over the ranks, then this rank's part of axis 0.
func ReduceScatter(x *Array, g *Group) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int { return C.kiln_reduce_scatter(o, x.handle(), g.handle()) })
	keepAlive(x)
	runtime.KeepAlive(g)
	return r, err
}
