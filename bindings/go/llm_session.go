package kiln

/*
#include <stdint.h>
#include <stdlib.h>
#include "kiln/c/kiln_llm.h"

// Defined in Go below (//export); only declarations may live here.
extern int kilnGoToken(int32_t token, char* text, size_t len, void* payload);
*/
import "C"

import (
	"fmt"
	"runtime"
	"runtime/cgo"
	"strings"
	"unsafe"
)

// Session is one conversation: the tokens it holds and their KV cache. A session is
// used by one goroutine at a time; sessions of one model may run on many goroutines at
// once. It keeps what it needs of its model alive.
type Session struct {
	h C.kiln_llm_session
}

// NewSession starts an empty conversation on the model.
func (m *Model) NewSession() (*Session, error) {
	var h C.kiln_llm_session
	err := call(func() C.int { return C.kiln_llm_session_new(&h, m.handle()) })
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	s := &Session{h: h}
	runtime.SetFinalizer(s, (*Session).Free)
	return s, nil
}

// Free releases the session and its cache now. Safe to call twice.
func (s *Session) Free() {
	if s == nil || s.h == nil {
		return
	}
	C.kiln_llm_session_free(s.h)
	s.h = nil
	runtime.SetFinalizer(s, nil)
}

func (s *Session) handle() C.kiln_llm_session {
	if s == nil {
		return nil
	}
	return s.h
}

// Position is the number of tokens the session holds (0 after Free).
func (s *Session) Position() int {
	var n C.int64_t
	call(func() C.int { return C.kiln_llm_session_position(&n, s.handle()) })
	runtime.KeepAlive(s)
	return int(n)
}

// Truncate keeps the first n tokens (a conversation going on from a shared prefix).
func (s *Session) Truncate(n int) error {
	err := call(func() C.int { return C.kiln_llm_session_truncate(s.handle(), C.int64_t(n)) })
	runtime.KeepAlive(s)
	return err
}

// Clear forgets every token and frees the KV cache.
func (s *Session) Clear() error {
	err := call(func() C.int { return C.kiln_llm_session_clear(s.handle()) })
	runtime.KeepAlive(s)
	return err
}

// Append adds tokens (prefilled in chunks) and returns the logits after the last one:
// [vocab] float32, evaluated.
func (s *Session) Append(ids []int32) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_llm_session_append(o, s.handle(), idsPtr(ids), C.size_t(len(ids)))
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(ids)
	return r, err
}

// AppendAll adds tokens in one step and returns the logits after each of them:
// [len(ids), vocab] float32, evaluated.
func (s *Session) AppendAll(ids []int32) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_llm_session_append_all(o, s.handle(), idsPtr(ids), C.size_t(len(ids)))
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(ids)
	return r, err
}

// Step is one decode step of several sessions of one model together (the batched
// decode): sessions[i] appends tokens[i]. It returns [len(sessions), vocab] float32
// logits. Sessions may join and leave between steps.
func Step(sessions []*Session, tokens []int32) (*Array, error) {
	if len(tokens) != len(sessions) {
		return nil, &Error{Message: fmt.Sprintf("[kiln_llm_step] %d tokens for %d sessions", len(tokens), len(sessions))}
	}
	hs := make([]C.kiln_llm_session, len(sessions)) // C pointers in Go memory
	for i, s := range sessions {
		hs[i] = s.handle()
	}
	var p *C.kiln_llm_session
	if len(hs) > 0 {
		p = &hs[0]
	}
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_llm_step(o, p, idsPtr(tokens), C.size_t(len(sessions)))
	})
	runtime.KeepAlive(sessions)
	runtime.KeepAlive(tokens)
	return r, err
}

// Sampling is how generation picks each token; start from DefaultSampling, since a
// zero TopP or RepetitionPenalty is a real setting, not "off".
type Sampling struct {
	Temperature       float32 // 0 or less: greedy
	TopK              int     // 0: off
	TopP              float32 // 1: off
	MinP              float32 // 0: off
	RepetitionPenalty float32 // 1: off
	RepeatLastN       int
	Seed              uint64
}

// DefaultSampling is kiln's defaults (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05).
func DefaultSampling() Sampling {
	var c C.kiln_llm_sampling
	C.kiln_llm_sampling_default(&c)
	return Sampling{float32(c.temperature), int(c.top_k), float32(c.top_p), float32(c.min_p),
		float32(c.repetition_penalty), int(c.repeat_last_n), uint64(c.seed)}
}

// GenerateOptions bound a generation.
type GenerateOptions struct {
	MaxTokens  int
	Sampling   Sampling
	StopTokens []int32 // ids that also end generation, besides the model's own
}

// DefaultGenerateOptions is 256 tokens at most with DefaultSampling.
func DefaultGenerateOptions() GenerateOptions {
	return GenerateOptions{MaxTokens: 256, Sampling: DefaultSampling()}
}

// StopReason says why Generate stopped.
type StopReason int

const (
	StopToken       StopReason = C.KILN_LLM_STOP_TOKEN // an end-of-generation or stop token (not kept)
	StopMaxTokens   StopReason = C.KILN_LLM_STOP_MAX_TOKENS
	StopContextFull StopReason = C.KILN_LLM_STOP_CONTEXT_FULL
	StopCallback    StopReason = C.KILN_LLM_STOP_CALLBACK // the callback returned false
)

func (r StopReason) String() string {
	switch r {
	case StopToken:
		return "stop token"
	case StopMaxTokens:
		return "max tokens"
	case StopContextFull:
		return "context full"
	case StopCallback:
		return "callback"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// GenerateResult is what Generate produced.
type GenerateResult struct {
	Tokens          []int32 // generated, the stop token excluded
	Text            string  // their text
	PromptTokens    int
	PromptSeconds   float64 // prefill, to the first token's logits
	GenerateSeconds float64 // every later step
	StopReason      StopReason
}

// generation is the state one Generate call shares with its token callback.
type generation struct {
	onToken  func(token int32, text string) bool
	tokens   []int32
	text     strings.Builder
	panicked interface{} // a panic of onToken, raised again once kiln has returned
	didPanic bool
}

// Generate appends the prompt, then samples tokens until an end-of-generation or
// stop token, MaxTokens, the context length, or onToken (may be nil) returns false.
// onToken gets each token with the whole UTF-8 characters it completes (maybe ""),
// and, if a character was left unfinished at the end, token -1 with the rest. A
// panic in onToken stops generation and is raised again from Generate.
func (s *Session) Generate(prompt []int32, opts GenerateOptions, onToken func(token int32, text string) bool) (*GenerateResult, error) {
	smp := opts.Sampling
	o := C.kiln_llm_generate_options{
		max_tokens: C.int(opts.MaxTokens),
		sampling: C.kiln_llm_sampling{C.float(smp.Temperature), C.int(smp.TopK), C.float(smp.TopP),
			C.float(smp.MinP), C.float(smp.RepetitionPenalty), C.int(smp.RepeatLastN), C.uint64_t(smp.Seed)},
		n_stop_tokens: C.size_t(len(opts.StopTokens)),
	}
	// The options struct goes to C, so the list it points at must be C memory.
	if n := len(opts.StopTokens); n > 0 {
		stops := (*C.int32_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.int32_t(0)))))
		defer C.free(unsafe.Pointer(stops))
		for i, t := range opts.StopTokens {
			unsafe.Slice(stops, n)[i] = C.int32_t(t)
		}
		o.stop_tokens = stops
	}
	g := &generation{onToken: onToken}
	// The payload is C memory holding a cgo.Handle, so no Go pointer goes to C.
	payload := (*C.uintptr_t)(C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0)))))
	handle := cgo.NewHandle(g)
	*payload = C.uintptr_t(handle)
	defer func() {
		handle.Delete()
		C.free(unsafe.Pointer(payload))
	}()
	var st C.kiln_llm_generate_stats
	err := call(func() C.int {
		return C.kiln_llm_generate(s.handle(), idsPtr(prompt), C.size_t(len(prompt)), &o,
			C.kiln_llm_token_fn(C.kilnGoToken), unsafe.Pointer(payload), &st)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(prompt)
	if g.didPanic {
		panic(g.panicked)
	}
	if err != nil {
		return nil, err
	}
	return &GenerateResult{Tokens: g.tokens, Text: g.text.String(), PromptTokens: int(st.prompt_tokens),
		PromptSeconds: float64(st.prompt_seconds), GenerateSeconds: float64(st.generate_seconds),
		StopReason: StopReason(st.stop_reason)}, nil
}

// deliver hands one token to the user's callback, turning a panic into a stop.
func (g *generation) deliver(token int32, text string) (goOn bool) {
	if g.didPanic {
		return false
	}
	if g.onToken == nil {
		return true
	}
	defer func() {
		if r := recover(); r != nil {
			g.panicked, g.didPanic, goOn = r, true, false
		}
	}()
	return g.onToken(token, text)
}

// kilnGoToken receives each generated token from kiln_llm_generate, on the thread of
// the Generate call.
//
//export kilnGoToken
func kilnGoToken(token C.int32_t, text *C.char, n C.size_t, payload unsafe.Pointer) C.int {
	g := cgo.Handle(*(*C.uintptr_t)(payload)).Value().(*generation)
	piece := C.GoStringN(text, C.int(n))
	if token >= 0 {
		g.tokens = append(g.tokens, int32(token))
	}
	g.text.WriteString(piece)
	if g.deliver(int32(token), piece) {
		return 0
	}
	return 1
}
