package kiln_test

import (
	"encoding/binary"
	"math"
	"strings"
	"sync"
	"testing"

	"kiln.dev/kiln"
)

// Graphs shared with the C and Rust tests.
const graphs = "../../tests/runtime/graphs/"

var modes = []kiln.ExecMode{kiln.Eager, kiln.Lazy, kiln.Compiled}

func affine(t *testing.T, mode kiln.ExecMode) *kiln.Executable {
	t.Helper()
	e := must(kiln.LoadExecutable(graphs+"affine.kgraph", mode, kiln.Device{}))
	if err := e.SetParam("w", []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	return e
}

// rows is n rows of 3 counting up from start.
func rows(n int, start float32) *kiln.Array {
	v := make([]float32, n*3)
	for i := range v {
		v[i] = start + float32(i)
	}
	return must(kiln.FromSlice(v, n, 3))
}

func total(n int, start float32) float32 {
	var s float32
	for k := 0; k < n*3; k++ {
		s += (start+float32(k))*float32(1+k%3) + 1
	}
	return s
}

func TestExecutableModesRunsAndNames(t *testing.T) {
	for _, m := range modes {
		e := affine(t, m)
		if e.Mode() != m {
			t.Fatalf("mode %v, want %v", e.Mode(), m)
		}
		if got := strings.Join(e.InputNames(), ","); got != "x" {
			t.Fatalf("inputs %q", got)
		}
		if got := strings.Join(e.OutputNames(), ","); got != "y,total" {
			t.Fatalf("outputs %q", got)
		}
		if !e.HasParam("w") {
			t.Fatal("w is not set")
		}
		out := must(e.Run(map[string]*kiln.Array{"x": rows(2, 0)}))
		if got := must(out[1].Float32s()); got[0] != total(2, 0) {
			t.Fatalf("total %v, want %v", got, total(2, 0))
		}
		// The active extent: one live row of two.
		out = must(e.Run(map[string]*kiln.Array{"x": rows(2, 0)}, kiln.ActiveExtent(1)))
		if s := out[0].Shape(); len(s) != 2 || s[0] != 1 {
			t.Fatalf("extent 1: shape %v", s)
		}
		// Float32 in and out converts; the typed run does not.
		x64 := must(kiln.FromSlice([]float64{1, 1, 1}, 1, 3))
		_, err := e.Run(map[string]*kiln.Array{"x": x64})
		wantError(t, err, "[run] input 'x' is float32, given float64")
		out = must(e.RunF32(map[string]*kiln.Array{"x": x64}))
		if got := must(out[0].Float32s()); got[2] != 4 {
			t.Fatalf("RunF32 %v", got)
		}
		if err := e.WarmCompile(nil); err != nil {
			t.Fatal(err)
		}
		if err := e.WarmCompile(map[string][]int{"x": {2, 3}}); err != nil {
			t.Fatal(err)
		}
		wantError(t, e.WarmCompile(map[string][]int{"nope": {2}}), "[warm_compile] the graph has no input 'nope'")
		why := must(e.ExtentBlocker(map[string][]int{"x": {2, 3}}))
		if !strings.Contains(why, "total") {
			t.Fatalf("extent blocker %q", why)
		}
		e.Free()
		e.Free()
	}
}

func TestExecutableSlotsParamsAndErrors(t *testing.T) {
	e := affine(t, kiln.Compiled)
	defer e.Free()
	arena := make([]byte, must(e.ArenaBytes()))
	x := make([]byte, 8*3*4)
	for i := 0; i < 24; i++ {
		binary.LittleEndian.PutUint32(x[4*i:], math.Float32bits(1))
	}
	if err := e.RunSlots([][]byte{x}, arena); err != nil {
		t.Fatal(err)
	}
	off, n, err := e.OutputSlot(1)
	if err != nil || n != 4 {
		t.Fatalf("slot 1: %d %d %v", off, n, err)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(arena[off:])); got != 72 {
		t.Fatalf("total %v, want 72", got)
	}
	wantError(t, e.RunSlots([][]byte{x}, arena[:8]), "fewer bytes")
	wantError(t, e.SetParam("w", []float32{1, 2, 3, 4}), "[set_param] parameter 'w' (3) holds 3 values, given 4")
	wantError(t, e.SetParamBytes("w", make([]byte, 12), kiln.Int32), "is float32, given int32")
	if err := e.SetParamBytes("w", x[:12], kiln.Float32); err != nil {
		t.Fatal(err)
	}
	_, err = e.Run(map[string]*kiln.Array{"y": rows(1, 0)})
	wantError(t, err, "[run] the graph has no input 'y'")
	_, err = e.Run(map[string]*kiln.Array{"x": rows(2, 0)}, kiln.ActiveExtent(3))
	wantError(t, err, "active extent 3 is outside the bucket of 2 rows")
	_, err = kiln.ParseExecutable("kgraph 1\ngraph g {\n  output y\n}\n", "bad.kgraph", kiln.Lazy, kiln.Device{})
	wantError(t, err, "bad.kgraph:3:3: [verify] output 'y' is not defined")
	_, err = kiln.LoadExecutable("/nonexistent/g.kgraph", kiln.Lazy, kiln.Device{})
	wantError(t, err, "/nonexistent/g.kgraph")
	_, err = kiln.LoadExecutable(graphs+"affine.kgraph", kiln.ExecMode(7), kiln.Device{})
	wantError(t, err, "invalid mode 7")
}

func TestExecutableHandlesFeedsAndCommits(t *testing.T) {
	ones := must(kiln.FromSlice([]float32{1, 1, 1}))
	in := map[string]*kiln.Array{"x": ones}
	for _, m := range modes {
		e := must(kiln.LoadExecutable(graphs+"accumulator.kgraph", m, kiln.Device{}))
		host := must(e.NewHostHandle([]int{3}, kiln.Float32))
		if err := e.BindInput("s", host.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.Feed(0, host.ID); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 4; k++ {
			must(e.Run(in))
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(host.Data)); got != 1.875 {
			t.Fatalf("%v: host state %v, want 1.875", m, got)
		}
		// A device handle keeps the state in kiln, also across commits.
		dev := must(e.DeviceHandle(must(kiln.FromSlice([]float32{0, 0, 0}))))
		must(0, e.ClearFeeds())
		must(0, e.BindInput("s", dev))
		must(0, e.Feed(0, dev))
		for k := 0; k < 4; k++ {
			if err := e.Commit(in); err != nil {
				t.Fatal(err)
			}
		}
		runs := must(e.Sync())
		if len(runs) != 4 || must(runs[3][0].Float32s())[0] != 1.875 {
			t.Fatalf("%v: commits %d runs", m, len(runs))
		}
		if got := must(must(e.ReadHandle(dev)).Float32s()); got[0] != 1.875 {
			t.Fatalf("%v: device state %v", m, got)
		}
		must(0, e.WriteHandle(dev, ones))
		piped := must(e.RunPipelined([]map[string]*kiln.Array{in, in, in}))
		if len(piped) != 3 || must(piped[2][0].Float32s())[0] != 1.875 {
			t.Fatalf("%v: pipelined", m)
		}
		// A bad input fails at commit in every mode.
		wantError(t, e.Commit(map[string]*kiln.Array{"x": must(kiln.ScalarInt(1, kiln.Int32))}),
			"[run] input 'x' is float32, given int32")
		must(0, e.UnbindInput("s"))
		_, err := e.Run(in)
		wantError(t, err, "[run] input 's' is missing")
		_, err = e.ReadHandle(9)
		wantError(t, err, "[read_handle] no handle 9")
		e.Free()
	}
}

func TestExecutableSharedByGoroutines(t *testing.T) {
	for _, m := range modes {
		e := affine(t, m)
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					n, start := 1+(g+i)%8, float32(i)
					x := rows(n, start)
					out, err := e.Run(map[string]*kiln.Array{"x": x})
					if err != nil {
						errs <- err.Error()
						return
					}
					if got := must(out[1].Float32s())[0]; got != total(n, start) {
						errs <- "wrong total"
						return
					}
					if err := e.Commit(map[string]*kiln.Array{"x": x}); err != nil {
						errs <- err.Error()
						return
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for msg := range errs {
			t.Fatalf("%v: %s", m, msg)
		}
		if runs := must(e.Sync()); len(runs) != 8*20 {
			t.Fatalf("%v: %d committed runs, want 160", m, len(runs))
		}
		e.Free()
	}
}

func TestCallEval(t *testing.T) {
	f := must(kiln.Compile("double", func(in []*kiln.Array) ([]*kiln.Array, error) {
		y, err := kiln.Add(in[0], in[0])
		return []*kiln.Array{y}, err
	}))
	defer f.Free()
	out := must(f.CallEval(must(kiln.FromSlice([]float32{1, 2}))))
	if !out[0].IsEvaluated() {
		t.Fatal("CallEval returned an unevaluated output")
	}
	if got := must(out[0].Float32s()); got[1] != 4 {
		t.Fatalf("CallEval %v", got)
	}
}
