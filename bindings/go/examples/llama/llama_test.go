package main

import (
	"math"
	"os"
	"reflect"
	"sync"
	"testing"

	"kiln.dev/kiln"
)

// The Go forward pass against kiln's own model (C++, through the C API) on the default
// model; every test skips, saying so, when it is absent (scripts/setup fetches it).

var (
	loadOnce sync.Once
	loaded   *Llama
	loadErr  error
	skipWhy  string
)

func defaultLlama(t *testing.T) *Llama {
	t.Helper()
	loadOnce.Do(func() {
		path, err := kiln.DefaultModelPath()
		if err != nil {
			loadErr = err
			return
		}
		if _, err := os.Stat(path); err != nil {
			skipWhy = "the default model is not at " + path + " (scripts/setup fetches it)"
			return
		}
		// The Go pass multiplies the activations as they are; so does the model it is held to
		// (the CPU's default rounds them to int16 blocks).
		os.Setenv("KILN_LLM_ACTIVATIONS", "exact")
		file, err := kiln.LoadModel(path)
		if err != nil {
			loadErr = err
			return
		}
		loaded, loadErr = Load(file)
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if loaded == nil {
		t.Skip(skipWhy)
	}
	return loaded
}

func chatPrompt(t *testing.T, m *Llama, text string) []int32 {
	t.Helper()
	prompt, err := m.file.ChatPrompt([]kiln.ChatMessage{{Role: "user", Content: text}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.file.Tokenize(prompt, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func rows(t *testing.T, logits *kiln.Array) [][]float32 {
	t.Helper()
	v, err := logits.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	shape := logits.Shape()
	out := make([][]float32, shape[0])
	for i := range out {
		out[i] = v[i*shape[1] : (i+1)*shape[1]]
	}
	return out
}

// worstGap is the largest |got - want| over a row, relative to the row's largest logit.
func worstGap(got, want []float32) float64 {
	var gap, scale float64
	for i := range want {
		gap = math.Max(gap, math.Abs(float64(got[i]-want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	return gap / scale
}

// The Go pass's logits equal kiln's model's at every position: a prompt in one chunk,
// then a chunk of two and single tokens through the cache.
func TestLogitsMatchKilnModel(t *testing.T) {
	m := defaultLlama(t)
	seq := chatPrompt(t, m, "What is a kiln?")
	seq = append(seq, 504, 3575, 282, 4649) // and a few tokens of an answer
	session, err := m.file.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer session.Free()
	all, err := session.AppendAll(seq)
	if err != nil {
		t.Fatal(err)
	}
	want := rows(t, all)

	c, err := m.NewCache(len(seq))
	if err != nil {
		t.Fatal(err)
	}
	split := len(seq) - 4
	chunks := [][]int32{seq[:split], seq[split : split+2], seq[split+2 : split+3], seq[split+3:]}
	var got [][]float32
	for _, chunk := range chunks {
		logits, err := m.Forward(chunk, c)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows(t, logits)...)
	}
	if len(got) != len(want) || c.Position() != len(seq) {
		t.Fatalf("%d rows for %d positions; the cache holds %d", len(got), len(want), c.Position())
	}
	worst := 0.0
	for i := range want {
		worst = math.Max(worst, worstGap(got[i], want[i]))
	}
	if worst > 1e-4 {
		t.Fatalf("the Go pass's logits differ from kiln's by %.3g of the largest logit", worst)
	}
	t.Logf("%d positions, largest difference %.3g of the row's largest logit", len(want), worst)

	_, err = m.Forward([]int32{1}, c)
	if err == nil {
		t.Fatal("a full cache took another token")
	}
}

// Several goroutines generate greedily at once, each with its own cache, and each gets
// what kiln's model generates for the same prompt.
func TestGreedyFromGoroutines(t *testing.T) {
	m := defaultLlama(t)
	prompt := chatPrompt(t, m, "Name a color.")
	session, err := m.file.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer session.Free()
	opts := kiln.DefaultGenerateOptions()
	opts.MaxTokens = 8
	opts.Sampling.Temperature = 0
	want, err := session.Generate(prompt, opts, nil)
	if err != nil {
		t.Fatal(err)
	}

	const workers = 4
	got := make([][]int32, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			got[w], errs[w] = m.Greedy(prompt, 8, nil)
		}(w)
	}
	wg.Wait()
	for w := 0; w < workers; w++ {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		if !reflect.DeepEqual(got[w], want.Tokens) {
			t.Fatalf("goroutine %d: %v, kiln's model %v", w, got[w], want.Tokens)
		}
	}
}

// A dense matrix gives what its quantized form gives (the path for unquantized files).
func TestDenseLinear(t *testing.T) {
	m := defaultLlama(t)
	q := m.layers[0].q
	must := kiln.Must
	dense := linear{w: must(kiln.Dequantize(q.w, q.scales, q.biases, q.groupSize, q.bits))}
	x := must(kiln.RandomNormal(must(kiln.RandomKey(7)), kiln.Float32, 0, 1, 2, m.info.DModel))
	a, err := must(q.apply(x)).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	b, err := must(dense.apply(x)).Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if gap := worstGap(a, b); gap > 1e-5 {
		t.Fatalf("quantized and dense products differ by %.3g", gap)
	}
}
