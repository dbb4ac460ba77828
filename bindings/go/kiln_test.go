package kiln_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"kiln.dev/kiln"
)

// must unwraps a (value, error) pair, panicking (and so failing the test) on an error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func close32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-5*(1+math.Abs(float64(b[i]))) {
			return false
		}
	}
	return true
}

func wantError(t *testing.T, err error, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error containing %q, got none", text)
	}
	var ke *kiln.Error
	if !errors.As(err, &ke) {
		t.Fatalf("expected a *kiln.Error, got %T: %v", err, err)
	}
	if !strings.Contains(err.Error(), text) {
		t.Fatalf("error %q does not contain %q", err.Error(), text)
	}
}

func TestArraysRoundTrip(t *testing.T) {
	a := must(kiln.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	defer a.Free()
	if got := a.Shape(); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("shape %v", got)
	}
	if a.Dtype() != kiln.Float32 || a.Size() != 6 || a.Ndim() != 2 || a.Dtype().String() != "float32" {
		t.Fatalf("dtype %v size %d", a.Dtype(), a.Size())
	}
	if v := must(a.Float32s()); !close32(v, []float32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("values %v", v)
	}
	if v := must(a.Int64s()); v[5] != 6 {
		t.Fatalf("int64 values %v", v)
	}

	// Every Go element type maps to its dtype and back.
	checkRoundTrip(t, []bool{true, false, true}, kiln.Bool)
	checkRoundTrip(t, []uint8{1, 2, 255}, kiln.Uint8)
	checkRoundTrip(t, []uint16{1, 2, 65535}, kiln.Uint16)
	checkRoundTrip(t, []uint32{1, 2, 1 << 31}, kiln.Uint32)
	checkRoundTrip(t, []uint64{1, 2, 1 << 63}, kiln.Uint64)
	checkRoundTrip(t, []int8{-1, 2, 127}, kiln.Int8)
	checkRoundTrip(t, []int16{-1, 2, 32767}, kiln.Int16)
	checkRoundTrip(t, []int32{-1, 2, 1 << 30}, kiln.Int32)
	checkRoundTrip(t, []int64{-1, 2, 1 << 62}, kiln.Int64)
	checkRoundTrip(t, []float64{-1.5, 2, 1e300}, kiln.Float64)

	// 16-bit floats travel as bit patterns.
	h := must(kiln.FromBits([]uint16{0x3c00, 0x4000, 0xc200}, kiln.Float16))
	if v := must(h.Float32s()); !close32(v, []float32{1, 2, -3}) {
		t.Fatalf("float16 values %v", v)
	}
	_, err := kiln.FromBits([]uint16{1}, kiln.Float32)
	wantError(t, err, "FromBits needs float16 or bfloat16")

	s := must(kiln.Scalar(2.5, kiln.Float64))
	if v := must(s.Float()); v != 2.5 {
		t.Fatalf("scalar %v", v)
	}
	i := must(kiln.ScalarInt(-7, kiln.Int16))
	if v := must(i.Int()); v != -7 || i.Dtype() != kiln.Int16 {
		t.Fatalf("int scalar %v", v)
	}
	if str := i.String(); str != "array(-7, shape=(), dtype=int16)" {
		t.Fatalf("String() = %q", str)
	}
	_, err = a.Float()
	wantError(t, err, "[item] item() needs an array of size 1, got shape (2,3)")

	// Shape mismatches are caught before any copy.
	_, err = kiln.FromSlice([]float32{1, 2, 3}, 2, 2)
	wantError(t, err, "[array] got 3 elements for shape (2,2) which holds 4")
	_, err = kiln.FromSlice([]float32{}, -1)
	wantError(t, err, "negative dimension")

	// A freed array reports an error instead of crashing.
	s.Free()
	s.Free()
	_, err = s.Float32s()
	wantError(t, err, "null array handle")
	if s.Valid() || s.Shape() != nil {
		t.Fatalf("freed array still looks valid")
	}
	var nilArray *kiln.Array
	_, err = kiln.Exp(nilArray)
	wantError(t, err, "[kiln_exp] null array handle")
}

func checkRoundTrip[T kiln.Element](t *testing.T, data []T, dtype kiln.Dtype) {
	t.Helper()
	a := must(kiln.FromSlice(data))
	defer a.Free()
	if a.Dtype() != dtype {
		t.Fatalf("dtype %v, want %v", a.Dtype(), dtype)
	}
	back := must(kiln.ToSlice[T](a))
	for i := range data {
		if back[i] != data[i] {
			t.Fatalf("%v: element %d is %v, want %v", dtype, i, back[i], data[i])
		}
	}
}

func TestOps(t *testing.T) {
	a := must(kiln.FromSlice([]float32{0, 1, 2, 3, 4, 5}, 2, 3))
	b := must(kiln.FromSlice([]float32{1, 0, 0, 1, 1, 1}, 3, 2))
	c := must(kiln.Matmul(a, b))
	if v := must(c.Float32s()); !close32(v, []float32{2, 3, 8, 9}) {
		t.Fatalf("matmul %v", v)
	}
	_, err := kiln.Matmul(a, a)
	wantError(t, err, "[matmul] inner dimensions differ")

	sum := must(kiln.Sum(a, 1))
	if v := must(sum.Float32s()); !close32(v, []float32{3, 12}) {
		t.Fatalf("sum %v", v)
	}
	all := must(kiln.Sum(a))
	if v := must(all.Float()); v != 15 {
		t.Fatalf("sum all %v", v)
	}
	keep := must(kiln.Reduce(kiln.MaxOp, a, []int{0}, true))
	if s := keep.Shape(); len(s) != 2 || s[0] != 1 || s[1] != 3 {
		t.Fatalf("keepdims shape %v", s)
	}
	mean := must(kiln.Mean(a))
	if v := must(mean.Float()); v != 2.5 {
		t.Fatalf("mean %v", v)
	}

	e := must(kiln.Exp(a))
	d := must(kiln.Add(e, a))
	want := make([]float32, 6)
	for i := range want {
		want[i] = float32(math.Exp(float64(i))) + float32(i)
	}
	if v := must(d.Float32s()); !close32(v, want) {
		t.Fatalf("exp+add %v", v)
	}
	lt := must(kiln.Less(a, must(kiln.ScalarLike(2.5, a))))
	if v := must(lt.Bools()); fmt.Sprint(v) != "[true true true false false false]" {
		t.Fatalf("less %v", v)
	}

	r := must(kiln.Reshape(a, 3, -1))
	tr := must(kiln.Transpose(r))
	if s := tr.Shape(); s[0] != 2 || s[1] != 3 {
		t.Fatalf("transpose shape %v", s)
	}
	if v := must(tr.Float32s()); !close32(v, []float32{0, 2, 4, 1, 3, 5}) {
		t.Fatalf("transpose %v", v)
	}
	_, err = kiln.Reshape(a, 4, 2)
	wantError(t, err, "[reshape] cannot reshape array of size 6 into shape (4,2)")

	cat := must(kiln.Concatenate([]*kiln.Array{a, a}, 0))
	if s := cat.Shape(); s[0] != 4 {
		t.Fatalf("concatenate shape %v", s)
	}
	parts := must(kiln.Split(a, 3, 1))
	if len(parts) != 3 {
		t.Fatalf("split gave %d parts", len(parts))
	}
	if v := must(parts[2].Float32s()); !close32(v, []float32{2, 5}) {
		t.Fatalf("split part %v", v)
	}
	sl := must(kiln.Slice(a, []int{1, -2}, []int{2, 3}))
	if v := must(sl.Float32s()); !close32(v, []float32{4, 5}) {
		t.Fatalf("slice %v", v)
	}
	sm := must(kiln.Softmax(a))
	rows := must(kiln.Sum(sm, -1))
	if v := must(rows.Float32s()); !close32(v, []float32{1, 1}) {
		t.Fatalf("softmax rows sum to %v", v)
	}
	am := must(kiln.Argmax(a, 1))
	if v := must(am.Int32s()); v[0] != 2 || v[1] != 2 {
		t.Fatalf("argmax %v", v)
	}
	z := must(kiln.Zeros(kiln.Int32, 2, 2))
	o := must(kiln.Ones(kiln.Int32, 2, 2))
	w := must(kiln.Where(must(kiln.Greater(o, z)), o, z))
	if v := must(w.Int32s()); fmt.Sprint(v) != "[1 1 1 1]" {
		t.Fatalf("where %v", v)
	}
	ar := must(kiln.Arange(0, 4, 1, kiln.Float32))
	cl := must(kiln.Clip(ar, must(kiln.Scalar(1, kiln.Float32)), nil))
	if v := must(cl.Float32s()); !close32(v, []float32{1, 1, 2, 3}) {
		t.Fatalf("clip %v", v)
	}
	if err := kiln.Eval(d, c); err != nil {
		t.Fatal(err)
	}
	if err := kiln.AsyncEval(sum); err != nil {
		t.Fatal(err)
	}
	if v := must(sum.Float32s()); !close32(v, []float32{3, 12}) {
		t.Fatalf("async sum %v", v)
	}
}

func TestRandomAndSelection(t *testing.T) {
	key := must(kiln.RandomKey(42))
	// MLX's split of key(42): the bits are MLX's and JAX's (docs/random.md).
	if v := must(kiln.ToSlice[uint32](must(kiln.RandomSplit(key, 2)))); fmt.Sprint(v) != "[2465931498 3679230171 255383827 267815257]" {
		t.Fatalf("split %v", v)
	}
	if s := must(kiln.RandomBits(key, 3, 5)).Shape(); fmt.Sprint(s) != "[3 5]" {
		t.Fatalf("bits shape %v", s)
	}
	u := must(must(kiln.RandomUniform(key, kiln.Float32, 2, 3, 100)).Float32s())
	for _, x := range u {
		if x < 2 || x >= 3 {
			t.Fatalf("uniform value %v outside [2, 3)", x)
		}
	}
	if d := must(kiln.RandomNormal(key, kiln.Float64, 0, 1, 4)).Dtype(); d != kiln.Float64 {
		t.Fatalf("normal dtype %v", d)
	}
	p := must(kiln.FromSlice([]float32{0, 1, 1}, 3))
	if v := must(must(kiln.RandomBernoulli(p, key)).Bools()); fmt.Sprint(v) != "[false true true]" {
		t.Fatalf("bernoulli %v", v)
	}
	inf := float32(math.Inf(-1))
	logits := must(kiln.FromSlice([]float32{inf, 0, inf, 0, inf, inf}, 2, 3))
	if v := must(must(kiln.RandomCategorical(logits, key, -1)).Int32s()); fmt.Sprint(v) != "[1 0]" {
		t.Fatalf("categorical %v", v)
	}
	a := must(kiln.FromSlice([]float32{3, 1, 2, 1}, 4))
	vals, idx, err := kiln.TopK(a, 2, -1)
	if err != nil {
		t.Fatal(err)
	}
	if v := must(vals.Float32s()); !close32(v, []float32{3, 2}) {
		t.Fatalf("topk values %v", v)
	}
	if v := must(idx.Int32s()); fmt.Sprint(v) != "[0 2]" {
		t.Fatalf("topk indices %v", v)
	}
	if v := must(must(kiln.Sort(a, 0)).Float32s()); !close32(v, []float32{1, 1, 2, 3}) {
		t.Fatalf("sort %v", v)
	}
	if v := must(must(kiln.Argsort(a, 0)).Int32s()); fmt.Sprint(v) != "[1 3 2 0]" {
		t.Fatalf("argsort %v", v)
	}
	if v := must(must(kiln.Argpartition(a, -1, 0)).Int32s()); v[3] != 0 {
		t.Fatalf("argpartition %v", v)
	}
	if v := must(must(kiln.Partition(a, 0, 0)).Float32s()); v[0] != 1 {
		t.Fatalf("partition %v", v)
	}
	if _, _, err := kiln.TopK(a, 5, -1); err == nil || !strings.Contains(err.Error(), "[topk] k 5 is out of range") {
		t.Fatalf("topk error %v", err)
	}
}

func TestFunctionAndCompile(t *testing.T) {
	var traces atomic.Int32
	f := must(kiln.Compile1("affine", func(x *kiln.Array) (*kiln.Array, error) {
		traces.Add(1)
		two := must(kiln.ScalarLike(2, x))
		y, err := kiln.Multiply(x, two)
		if err != nil {
			return nil, err
		}
		return kiln.Add(y, must(kiln.ScalarLike(1, x)))
	}))
	defer f.Free()
	if f.Name() != "affine" {
		t.Fatalf("name %q", f.Name())
	}
	x3 := must(kiln.FromSlice([]float32{0, 1, 2}))
	x4 := must(kiln.FromSlice([]float32{0, 1, 2, 3}))
	for i := 0; i < 3; i++ {
		y := must(f.Call(x3))
		if v := must(y.Float32s()); !close32(v, []float32{1, 3, 5}) {
			t.Fatalf("affine %v", v)
		}
	}
	if traces.Load() != 1 {
		t.Fatalf("traced %d times, want 1", traces.Load())
	}
	must(f.Call(x4))
	if traces.Load() != 2 {
		t.Fatalf("a new shape should retrace; traced %d times", traces.Load())
	}

	// Shapeless: one trace for both shapes.
	var straces atomic.Int32
	g := must(kiln.Compile1("neg", func(x *kiln.Array) (*kiln.Array, error) {
		straces.Add(1)
		return kiln.Negative(x)
	}, kiln.Shapeless()))
	must(g.Call(x3))
	y := must(g.Call(x4))
	if v := must(y.Float32s()); !close32(v, []float32{0, -1, -2, -3}) {
		t.Fatalf("neg %v", v)
	}
	if straces.Load() != 1 {
		t.Fatalf("shapeless traced %d times", straces.Load())
	}

	// Two and three inputs; a compiled function calling another one.
	h := must(kiln.Compile2("mad", func(a, b *kiln.Array) (*kiln.Array, error) {
		return kiln.Add(kiln.Must(kiln.Multiply(a, b)), a)
	}))
	k := must(kiln.Compile3("outer", func(a, b, c *kiln.Array) (*kiln.Array, error) {
		ab, err := h.Call(a, b)
		if err != nil {
			return nil, err
		}
		return kiln.Subtract(ab, c)
	}))
	out := must(k.Call(x3, x3, x3))
	if v := must(out.Float32s()); !close32(v, []float32{0, 1, 4}) {
		t.Fatalf("nested %v", v)
	}
	_, err := h.Function.Call(x3)
	wantError(t, err, "[mad] expected 2 inputs, got 1")

	// Many outputs, and a plain (uncompiled) function.
	split := must(kiln.NewFunction(func(in []*kiln.Array) ([]*kiln.Array, error) {
		return []*kiln.Array{in[0], kiln.Must(kiln.Exp(in[0]))}, nil
	}))
	outs := must(split.Call(x3))
	if len(outs) != 2 {
		t.Fatalf("%d outputs", len(outs))
	}
	cs := must(split.Compile("split"))
	outs = must(cs.Call(x4))
	if len(outs) != 2 || outs[1].Size() != 4 {
		t.Fatalf("compiled outputs %v", outs)
	}
}

func TestTraceErrorsAndPanics(t *testing.T) {
	var calls atomic.Int32
	var panicNext atomic.Bool
	panicNext.Store(true)
	f := must(kiln.Compile("flaky", func(in []*kiln.Array) ([]*kiln.Array, error) {
		calls.Add(1)
		if panicNext.Load() {
			panic("flaky exploded")
		}
		return []*kiln.Array{kiln.Must(kiln.Sqrt(in[0]))}, nil
	}))
	x := must(kiln.FromSlice([]float32{4, 9}))
	_, err := f.Call(x)
	wantError(t, err, "kiln: panic in traced function: flaky exploded")
	// The failed trace left nothing behind: the next call traces again.
	panicNext.Store(false)
	out := must(f.Call(x))[0]
	if v := must(out.Float32s()); !close32(v, []float32{2, 3}) {
		t.Fatalf("sqrt %v", v)
	}
	must(f.Call(x))
	if calls.Load() != 2 {
		t.Fatalf("callback ran %d times, want 2", calls.Load())
	}

	// Must inside a trace: the op's error surfaces from Call.
	m := must(kiln.Compile2("bad_matmul", func(a, b *kiln.Array) (*kiln.Array, error) {
		return kiln.Must(kiln.Matmul(a, b)), nil
	}))
	a := must(kiln.FromSlice([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	_, err = m.Call(a, a)
	wantError(t, err, "[matmul] inner dimensions differ")
	// A returned error works the same way.
	e := must(kiln.Compile("err", func(in []*kiln.Array) ([]*kiln.Array, error) {
		return nil, errors.New("custom failure")
	}))
	_, err = e.Call(x)
	wantError(t, err, "custom failure")
	n := must(kiln.Compile("nil_output", func(in []*kiln.Array) ([]*kiln.Array, error) {
		return []*kiln.Array{nil}, nil
	}))
	_, err = n.Call(x)
	wantError(t, err, "[closure] output 0 is nil")
	_, err = kiln.NewFunction(nil)
	wantError(t, err, "nil function")
	f.Free()
	_, err = f.Call(x)
	wantError(t, err, "null closure handle")
}

// 16 goroutines compile functions of their own and call a shared one, at once.
func TestConcurrentCompileAndCall(t *testing.T) {
	var sharedTraces atomic.Int32
	shared := must(kiln.Compile1("shared", func(x *kiln.Array) (*kiln.Array, error) {
		sharedTraces.Add(1)
		return kiln.Add(kiln.Must(kiln.Tanh(x)), x)
	}))
	const goroutines = 16
	const iters = 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	start := make(chan struct{})
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			<-start
			scale := float32(g + 1)
			own, err := kiln.Compile1(fmt.Sprintf("own%d", g), func(x *kiln.Array) (*kiln.Array, error) {
				s, err := kiln.ScalarLike(float64(scale), x)
				if err != nil {
					return nil, err
				}
				return kiln.Multiply(x, s)
			}, kiln.Shapeless())
			if err != nil {
				errs <- err
				return
			}
			defer own.Free()
			for i := 0; i < iters; i++ {
				n := 2 + (g+i)%3
				data := make([]float32, n)
				for j := range data {
					data[j] = float32(j) * 0.5
				}
				x, err := kiln.FromSlice(data)
				if err != nil {
					errs <- err
					return
				}
				y, err := shared.Call(x)
				if err != nil {
					errs <- err
					return
				}
				z, err := own.Call(y)
				if err != nil {
					errs <- err
					return
				}
				got, err := z.Float32s()
				if err != nil {
					errs <- err
					return
				}
				for j := range data {
					want := (float32(math.Tanh(float64(data[j]))) + data[j]) * scale
					if math.Abs(float64(got[j]-want)) > 1e-4*(1+math.Abs(float64(want))) {
						errs <- fmt.Errorf("goroutine %d: element %d is %v, want %v", g, j, got[j], want)
						return
					}
				}
				x.Free()
				y.Free()
				z.Free()
			}
		}(g)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := sharedTraces.Load(); n != 3 {
		t.Errorf("shared function traced %d times, want 3 (one per shape)", n)
	}
}

// The fused-kernel policy: off interprets the fused region on every call, wait runs its
// generated kernel from the first call; both give exp(x)*3+1.
func TestFusedKernelsPolicy(t *testing.T) {
	saved := kiln.GetFusedKernels()
	defer kiln.SetFusedKernels(saved)
	x := must(kiln.FromSlice([]float32{0, 1, 2}, 3))
	want := []float32{4, float32(math.Exp(1))*3 + 1, float32(math.Exp(2))*3 + 1}
	for _, p := range []kiln.FusedKernels{kiln.FusedOff, kiln.FusedWait} {
		if err := kiln.SetFusedKernels(p); err != nil {
			t.Fatal(err)
		}
		if got := kiln.GetFusedKernels(); got != p {
			t.Fatalf("GetFusedKernels() = %v after SetFusedKernels(%v)", got, p)
		}
		f := must(kiln.Compile1("affine_"+p.String(), func(x *kiln.Array) (*kiln.Array, error) {
			y := must(kiln.Multiply(must(kiln.Exp(x)), must(kiln.ScalarLike(3, x))))
			return kiln.Add(y, must(kiln.ScalarLike(1, x)))
		}))
		kiln.ResetStats()
		for i := 0; i < 3; i++ {
			if v := must(must(f.Call(x)).Float32s()); !close32(v, want) {
				t.Fatalf("%v: got %v, want %v", p, v, want)
			}
		}
		s := kiln.GetStats()
		if p == kiln.FusedOff && (s.InterimCalls != 3 || s.FusedCalls != 0) {
			t.Fatalf("off: %+v, want 3 interim calls and no fused one", s)
		}
		if p == kiln.FusedWait && (s.InterimCalls != 0 || s.FusedCalls != 3) {
			t.Fatalf("wait: %+v, want 3 fused calls and no interim one", s)
		}
		f.Free()
	}
	err := kiln.SetFusedKernels(kiln.FusedKernels(7))
	if err == nil || !strings.Contains(err.Error(), "[kiln_set_fused_kernels] invalid policy 7") {
		t.Fatalf("SetFusedKernels(7): %v", err)
	}
}

// Arrays and functions left to the garbage collector are released by finalizers.
func TestFinalizers(t *testing.T) {
	for i := 0; i < 200; i++ {
		a, _ := kiln.FromSlice([]float64{float64(i)})
		b, _ := kiln.Exp(a)
		f, _ := kiln.Compile1("tmp", kiln.Exp)
		if _, err := f.Call(b); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	if s := kiln.GetStats(); s.KernelsLaunched == 0 {
		t.Fatalf("no kernels counted: %+v", s)
	}
	kiln.ResetStats()
	if s := kiln.GetStats(); s.KernelsLaunched != 0 {
		t.Fatalf("ResetStats left %+v", s)
	}
}

// Ops added to kiln's registry reach Go with no edit here but the generated file.
func TestRegistryOps(t *testing.T) {
	x := must(kiln.FromSlice([]float32{-0.5, 0, 0.5}, 3))
	y := must(kiln.FromSlice([]float32{0.5, 0, -1}, 3))
	if v := must(must(kiln.Erfinv(x)).Float32s()); !close32(v, []float32{-0.47693628, 0, 0.47693628}) {
		t.Errorf("erfinv %v", v)
	}
	if v := must(must(kiln.Softplus(x)).Float32s()); !close32(v, []float32{0.47407698, 0.69314718, 0.97407698}) {
		t.Errorf("softplus %v", v)
	}
	if v := must(must(kiln.LogAddExp(x, y)).Float32s()); !close32(v, []float32{0.81326169, 0.69314718, 0.70141327}) {
		t.Errorf("logaddexp %v", v)
	}
}
