package kiln_test

import (
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"kiln.dev/kiln"
)

// The language-model API on the default model (SmolLM2-135M-Instruct, Q4_1), which
// scripts/setup fetches; every test here skips, saying so, when it is absent.

// From tests/llm/golden/SmolLM2-135M-Instruct.Q4_1.json: llama.cpp's ids for the prompt
// and its greedy continuation up to its first near tie, which test_llm_model checks
// kiln's C++ model against.
var (
	francePrompt = []int32{504, 3575, 282, 4649, 314} // "The capital of France is"
	franceGreedy = []int32{7042, 30, 198, 198, 504}
)

var (
	modelOnce sync.Once
	model     *kiln.Model
	modelErr  error
	modelPath string
)

// defaultModel is the default model, loaded once and shared by every test.
func defaultModel(t *testing.T) *kiln.Model {
	t.Helper()
	modelOnce.Do(func() {
		modelPath, modelErr = kiln.DefaultModelPath()
		if modelErr != nil {
			return
		}
		if _, err := os.Stat(modelPath); err != nil {
			return
		}
		model, modelErr = kiln.LoadModel(modelPath)
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	if model == nil {
		t.Skipf("the default model is not at %s (scripts/setup fetches it)", modelPath)
	}
	return model
}

func greedyOptions(n int) kiln.GenerateOptions {
	o := kiln.DefaultGenerateOptions()
	o.MaxTokens = n
	o.Sampling.Temperature = 0
	return o
}

// argmaxRows is the largest entry's index of each row of [rows, vocab] (or [vocab]) logits.
func argmaxRows(t *testing.T, logits *kiln.Array) []int32 {
	t.Helper()
	return must(must(kiln.Argmax(logits, -1)).Int32s())
}

// decodeGreedy appends the prompt, then n greedy tokens one step at a time.
func decodeGreedy(t *testing.T, m *kiln.Model, prompt []int32, n int) []int32 {
	t.Helper()
	s := must(m.NewSession())
	defer s.Free()
	logits := must(s.Append(prompt))
	var out []int32
	for len(out) < n {
		next := argmaxRows(t, logits)[0]
		out = append(out, next)
		logits = must(s.Append([]int32{next}))
	}
	return out
}

// A tiny Mistral checkpoint without a tokenizer (tests/llm/golden/tiny, make_tiny_models.py):
// its sliding window comes through, steps take token ids, and tokenizing fails saying why.
func TestTinyModelWithoutTokenizer(t *testing.T) {
	m := must(kiln.LoadModel("../../tests/llm/golden/tiny/mistral-f16"))
	defer m.Free()
	info := must(m.Info())
	if info.SlidingWindow != 5 || info.Layers != 2 || info.VocabSize != 128 || info.BOS != -1 {
		t.Fatalf("info %+v", info)
	}
	s := must(m.NewSession())
	defer s.Free()
	if shape := must(s.Append([]int32{16, 32, 97, 56, 52, 14, 82})).Shape(); !reflect.DeepEqual(shape, []int{128}) {
		t.Fatalf("logits of shape %v", shape)
	}
	if _, err := m.Tokenize("hi", false, false); err == nil || !strings.Contains(err.Error(), "has no tokenizer") {
		t.Fatalf("Tokenize without a tokenizer: %v", err)
	}
}

const tinyDir = "../../tests/llm/golden/tiny/"

// tinyLogits is every position's logits of 16 tokens through a fresh session of m.
func tinyLogits(t *testing.T, m *kiln.Model) []float32 {
	t.Helper()
	s := must(m.NewSession())
	defer s.Free()
	return must(must(s.AppendAll([]int32{16, 32, 97, 56, 52, 14, 82, 77, 33, 100, 27, 111, 4, 43, 100, 16})).Float32s())
}

// worstRelative is the largest |a - b| over rows of vocab, each relative to its row's largest |b|.
func worstRelative(a, b []float32, vocab int) float64 {
	worst := 0.0
	for row := 0; row+vocab <= len(b); row += vocab {
		top := 0.0
		for _, v := range b[row : row+vocab] {
			top = math.Max(top, math.Abs(float64(v)))
		}
		for i := row; i < row+vocab; i++ {
			worst = math.Max(worst, math.Abs(float64(a[i])-float64(b[i]))/top)
		}
	}
	return worst
}

// Tensor parallelism on the CPU's threads (docs/distributed.md): tiny checkpoints split over 2
// ranks give every position's logits within 1e-4 of the row's largest of one rank's (the bound
// of tests/llm/test_tensor_parallel.cpp: the row-parallel sums add in another order).
func TestTensorParallelEqualsOneRank(t *testing.T) {
	for _, name := range []string{"llama-bf16", "qwen3-bf16", "mistral-f16"} {
		one := must(kiln.LoadModel(tinyDir + name))
		two := must(kiln.LoadModel(tinyDir+name, kiln.TensorParallel(2)))
		if info := must(two.Info()); info.TensorParallel != 2 || info.Heads != 4 {
			t.Fatalf("%s on 2 ranks: info %+v", name, info)
		}
		if n := must(one.Info()).TensorParallel; n != 1 {
			t.Fatalf("%s: %d ranks by default", name, n)
		}
		want, got := tinyLogits(t, one), tinyLogits(t, two)
		if len(got) != 16*128 || len(want) != len(got) {
			t.Fatalf("%s: %d and %d logits", name, len(want), len(got))
		}
		worst := worstRelative(got, want, 128)
		if worst > 1e-4 {
			t.Errorf("%s on 2 ranks: largest difference %.2e of the row's largest logit", name, worst)
		}
		t.Logf("%s on 2 ranks: largest difference %.2e of the row's largest logit", name, worst)
		one.Free()
		two.Free()
	}
}

// The activations reach the model, and bad load options fail saying what is wrong.
func TestLoadOptions(t *testing.T) {
	exact := must(kiln.LoadModel(tinyDir+"llama-mlx-4bit", kiln.WithActivations(kiln.ActivationsExact)))
	defer exact.Free()
	q8 := must(kiln.LoadModel(tinyDir+"llama-mlx-4bit", kiln.WithActivations(kiln.ActivationsInt8)))
	defer q8.Free()
	if a, b := must(exact.Info()).Activations, must(q8.Info()).Activations; a != kiln.ActivationsExact || b != kiln.ActivationsInt8 {
		t.Fatalf("activations %v and %v", a, b)
	}
	// int8 codes move a quantized model's logits off the exact ones, a little.
	if moved := worstRelative(tinyLogits(t, q8), tinyLogits(t, exact), 128); moved == 0 || moved > 0.1 {
		t.Fatalf("int8 against exact: %.2e", moved)
	}
	_, err := kiln.LoadModel(tinyDir+"llama-bf16", kiln.TensorParallel(0))
	wantError(t, err, "[llm] tensor parallelism needs 1 rank or more, not 0")
	_, err = kiln.LoadModel(tinyDir+"llama-bf16", kiln.TensorParallel(3))
	wantError(t, err, "llama-bf16: tensor parallelism over 3 ranks: n_heads (llama.attention.head_count) = 4 does not divide over 3 ranks")
	_, err = kiln.LoadModel(tinyDir+"llama-bf16", kiln.WithActivations(7))
	wantError(t, err, "[kiln_llm_model_load_with] invalid activations 7")
	// 64 ranks from cuda:0: more than any machine here has.
	_, err = kiln.LoadModel(tinyDir+"llama-bf16", kiln.OnDevice(kiln.Device{Type: kiln.CUDA}), kiln.TensorParallel(64))
	wantError(t, err, "[llm] tensor parallelism over 64 ranks from cuda:0 needs CUDA devices cuda:0 to cuda:63; ")
}

func TestModelInfoAndTokens(t *testing.T) {
	m := defaultModel(t)
	info := must(m.Info())
	// SmolLM2-135M's config.json: 30 layers of 576, 9 heads of 64, 3 kv heads, 1536 hidden,
	// rope_theta 100000, rms_norm_eps 1e-5, tied embeddings.
	want := kiln.ModelInfo{VocabSize: 49152, Layers: 30, DModel: 576, Heads: 9, KVHeads: 3, HeadDim: 64, FFNDim: 1536,
		ContextLength: info.ContextLength, WeightBytes: info.WeightBytes, RopeDims: 64, RopeBase: 100000,
		RopeScale: 1, RopeTraditional: true, NormEps: 1e-5, TiedEmbeddings: true, BOS: 1, EOS: 2, EOT: 2,
		TensorParallel: 1, Activations: info.Activations}
	if info != want || info.ContextLength != 8192 || info.WeightBytes <= 0 || info.Activations == kiln.ActivationsDefault {
		t.Fatalf("info %+v", info)
	}

	ids := must(m.Tokenize("The capital of France is", false, false))
	if !reflect.DeepEqual(ids, francePrompt) {
		t.Fatalf("tokens %v, llama.cpp's %v", ids, francePrompt)
	}
	if text := must(m.Detokenize(ids)); text != "The capital of France is" {
		t.Fatalf("detokenized %q", text)
	}
	prompt := must(m.ChatPrompt([]kiln.ChatMessage{{Role: "user", Content: "What is a kiln?"}}))
	if !strings.Contains(prompt, "<|im_start|>user\nWhat is a kiln?<|im_end|>\n<|im_start|>assistant\n") {
		t.Fatalf("chat prompt %q", prompt)
	}
	end := must(m.Tokenize("<|im_end|>", false, true))
	if len(end) != 1 || end[0] != info.EOT || !m.IsEndOfGeneration(end[0]) || m.IsEndOfGeneration(ids[0]) {
		t.Fatalf("<|im_end|> is %v", end)
	}
	if plain := must(m.Tokenize("<|im_end|>", false, false)); len(plain) < 2 {
		t.Fatalf("without parseSpecial, <|im_end|> is text: %v", plain)
	}
	_, err := m.Tokenize("a\x00b", false, false)
	wantError(t, err, "[kiln_llm_tokenize] the text contains a NUL byte")
	_, err = m.Detokenize([]int32{49152})
	wantError(t, err, "49152")
}

func TestModelTensors(t *testing.T) {
	m := defaultModel(t)
	q := must(m.Tensor("blk.0.attn_q.weight"))
	if !q.Quantized() || q.GroupSize != 32 || q.Bits != 4 || q.W.Dtype() != kiln.Uint32 ||
		!reflect.DeepEqual(q.W.Shape(), []int{576, 576 * 4 / 32}) || !reflect.DeepEqual(q.Scales.Shape(), []int{576, 18}) {
		t.Fatalf("attn_q: %+v, w %v", q, q.W.Shape())
	}
	norm := must(m.Tensor("output_norm.weight"))
	if norm.Quantized() || norm.Scales != nil || norm.W.Dtype() != kiln.Float32 || !reflect.DeepEqual(norm.W.Shape(), []int{576}) {
		t.Fatalf("output_norm: %+v", norm)
	}
	if !m.HasTensor("token_embd.weight") || m.HasTensor("output.weight") {
		t.Fatal("SmolLM2 has a token embedding and no separate output projection")
	}
	_, err := m.Tensor("blk.99.attn_q.weight")
	wantError(t, err, "blk.99.attn_q.weight")
}

// Greedy generation gives llama.cpp's tokens, and three ways of decoding through the C API
// agree: generate, one session stepped token by token, and batched steps of sessions at
// different positions.
func TestGreedyGeneration(t *testing.T) {
	m := defaultModel(t)
	s := must(m.NewSession())
	defer s.Free()
	var streamed strings.Builder
	r := must(s.Generate(francePrompt, greedyOptions(8), func(token int32, text string) bool {
		streamed.WriteString(text)
		return true
	}))
	if !reflect.DeepEqual(r.Tokens[:len(franceGreedy)], franceGreedy) {
		t.Fatalf("greedy tokens %v, llama.cpp's %v", r.Tokens, franceGreedy)
	}
	if r.StopReason != kiln.StopMaxTokens || r.PromptTokens != len(francePrompt) || len(r.Tokens) != 8 {
		t.Fatalf("result %+v", r)
	}
	if streamed.String() != r.Text || r.Text != must(m.Detokenize(r.Tokens)) {
		t.Fatalf("streamed %q, result %q", streamed.String(), r.Text)
	}
	if s.Position() != len(francePrompt)+7 {
		t.Fatalf("the session holds %d tokens", s.Position())
	}
	if stepped := decodeGreedy(t, m, francePrompt, 8); !reflect.DeepEqual(stepped, r.Tokens) {
		t.Fatalf("token by token %v, generate %v", stepped, r.Tokens)
	}

	// Session i starts i tokens further into the sequence; each batched step feeds every
	// session its next token and must predict the one after.
	seq := append(append([]int32{}, francePrompt...), r.Tokens...)
	sessions := make([]*kiln.Session, 3)
	for i := range sessions {
		sessions[i] = must(m.NewSession())
		defer sessions[i].Free()
		must(sessions[i].Append(seq[:len(francePrompt)+i]))
	}
	for step := 0; step < 4; step++ {
		tokens := make([]int32, len(sessions))
		for i := range sessions {
			tokens[i] = seq[len(francePrompt)+i+step]
		}
		got := argmaxRows(t, must(kiln.Step(sessions, tokens)))
		for i := range sessions {
			if want := seq[len(francePrompt)+i+step+1]; got[i] != want {
				t.Fatalf("step %d, session %d: %d, want %d", step, i, got[i], want)
			}
		}
	}

	// One step over the whole sequence: each position's top token is the next one.
	all := must(must(m.NewSession()).AppendAll(seq))
	if shape := all.Shape(); !reflect.DeepEqual(shape, []int{len(seq), 49152}) {
		t.Fatalf("AppendAll shape %v", shape)
	}
	if top := argmaxRows(t, all); !reflect.DeepEqual(top[len(francePrompt)-1:len(seq)-1], r.Tokens) {
		t.Fatalf("every position's top tokens %v, generated %v", top, r.Tokens)
	}
}

// Several goroutines generate at once on one model, each with its own session, and get
// what one goroutine gets alone.
func TestConcurrentGeneration(t *testing.T) {
	m := defaultModel(t)
	prompt := must(m.Tokenize(must(m.ChatPrompt([]kiln.ChatMessage{{Role: "user", Content: "Name a color."}})), false, true))
	alone := decodeGreedy(t, m, prompt, 6)
	const workers = 4
	results := make([][]int32, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s, err := m.NewSession()
			if err != nil {
				errs[w] = err
				return
			}
			defer s.Free()
			r, err := s.Generate(prompt, greedyOptions(6), nil)
			if err != nil {
				errs[w] = err
				return
			}
			results[w] = r.Tokens
		}(w)
	}
	wg.Wait()
	for w := 0; w < workers; w++ {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		// A stop token may end a generation early; up to there the tokens agree.
		if len(results[w]) == 0 || !reflect.DeepEqual(results[w], alone[:len(results[w])]) {
			t.Fatalf("goroutine %d: %v, alone %v", w, results[w], alone)
		}
	}
}

func TestGenerateStops(t *testing.T) {
	m := defaultModel(t)
	s := must(m.NewSession())
	defer s.Free()
	o := greedyOptions(8)
	o.StopTokens = []int32{franceGreedy[2]} // the first "\n"
	r := must(s.Generate(francePrompt, o, nil))
	if r.StopReason != kiln.StopToken || !reflect.DeepEqual(r.Tokens, franceGreedy[:2]) {
		t.Fatalf("stopped by %v after %v", r.StopReason, r.Tokens)
	}
	if s.Position() != len(francePrompt)+2 {
		t.Fatalf("the session holds %d tokens", s.Position())
	}

	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if s.Position() != 0 {
		t.Fatalf("cleared, the session holds %d tokens", s.Position())
	}
	calls := 0
	r = must(s.Generate(francePrompt, greedyOptions(8), func(int32, string) bool {
		calls++
		return calls < 3
	}))
	if r.StopReason != kiln.StopCallback || calls != 3 || !reflect.DeepEqual(r.Tokens, franceGreedy[:3]) {
		t.Fatalf("stopped by %v after %d calls: %v", r.StopReason, calls, r.Tokens)
	}

	// A panic in the callback stops generation and comes out of Generate.
	if err := s.Truncate(0); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if p := recover(); p != "from the callback" {
				t.Fatalf("recovered %v", p)
			}
		}()
		s.Generate(francePrompt, greedyOptions(8), func(int32, string) bool { panic("from the callback") })
		t.Fatal("Generate returned after its callback panicked")
	}()
	if s.Position() != len(francePrompt) {
		t.Fatalf("the session holds %d tokens after a panic at the first token", s.Position())
	}
}

func TestLanguageModelErrors(t *testing.T) {
	_, err := kiln.LoadModel("/nonexistent/dir/model.gguf")
	wantError(t, err, "/nonexistent/dir/model.gguf")
	_, err = kiln.LoadModel("a\x00b")
	wantError(t, err, "[kiln_llm_model_load_with] the path contains a NUL byte")

	m := defaultModel(t)
	s := must(m.NewSession())
	_, err = s.Append([]int32{49152})
	wantError(t, err, "token id 49152 is outside the vocabulary (49152 tokens)")
	wantError(t, s.Truncate(5), "cannot truncate a session of 0 tokens to 5")
	_, err = s.Append(nil)
	wantError(t, err, "append needs at least one token")
	_, err = s.Generate(nil, greedyOptions(4), nil)
	wantError(t, err, "the prompt has no tokens")
	_, err = kiln.Step([]*kiln.Session{s, s}, []int32{1, 2})
	wantError(t, err, "session 1 appears twice in one step")
	_, err = kiln.Step([]*kiln.Session{s}, []int32{1, 2})
	wantError(t, err, "[kiln_llm_step] 2 tokens for 1 sessions")
	_, err = kiln.Step(nil, nil)
	wantError(t, err, "a step needs at least one session")
	s.Free()
	s.Free()
	_, err = s.Append([]int32{1})
	wantError(t, err, "null session handle")
	if s.Position() != 0 {
		t.Fatal("a freed session holds no tokens")
	}
}
