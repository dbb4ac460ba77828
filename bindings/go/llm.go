package kiln

/*
#include <stdlib.h>
#include "kiln/c/kiln_llm.h"
*/
import "C"

import (
	"runtime"
	"strings"
	"unsafe"
)

// Language models (include/kiln/c/kiln_llm.h): a Model is loaded once and shared
// read-only by any number of goroutines; a Session is one conversation and its KV
// cache, used by one goroutine at a time (llm_session.go).

// DeviceType is the kind of a Device.
type DeviceType int

const (
	CPU  DeviceType = C.KILN_DEVICE_CPU
	CUDA DeviceType = C.KILN_DEVICE_CUDA
)

// Device is a device type and its ordinal; the zero value is the CPU.
type Device struct {
	Type  DeviceType
	Index int
}

// DefaultModelPath is where scripts/setup puts the default model (SmolLM2-135M-Instruct,
// Q4_1 GGUF): in $KILN_MODELS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models.
// The file may not exist.
func DefaultModelPath() (string, error) {
	var p *C.char
	if err := call(func() C.int { return C.kiln_llm_default_model_path(&p) }); err != nil {
		return "", err
	}
	defer C.kiln_string_free(p)
	return C.GoString(p), nil
}

// cString is s for C, or an error naming fn when s holds a NUL byte (C would cut it
// there). The caller frees the result.
func cString(fn, what, s string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, &Error{Message: "[" + fn + "] the " + what + " contains a NUL byte"}
	}
	return C.CString(s), nil
}

// Model is a loaded language model (GGUF or safetensors). Its methods may be
// called from any number of goroutines at once; Free must not race with them.
type Model struct {
	h C.kiln_llm_model
}

// Activations is what a model's quantized products multiply the weights by (docs/llm.md).
type Activations int

const (
	// ActivationsDefault is the KILN_LLM_ACTIVATIONS knob: by default int16 on the CPU, exact elsewhere.
	ActivationsDefault Activations = C.KILN_LLM_ACTIVATIONS_DEFAULT
	// ActivationsExact multiplies the activations as they are, in float32.
	ActivationsExact Activations = C.KILN_LLM_ACTIVATIONS_EXACT
	// ActivationsInt8 rounds them to int8 blocks of 32, as llama.cpp does (fastest on the CPU).
	ActivationsInt8 Activations = C.KILN_LLM_ACTIVATIONS_INT8
	// ActivationsInt16 rounds them to int16 blocks of 32: integer products that answer as exact ones.
	ActivationsInt16 Activations = C.KILN_LLM_ACTIVATIONS_INT16
)

// LoadOption adjusts LoadModel.
type LoadOption func(*C.kiln_llm_load_options)

// OnDevice places the weights, activations and KV caches on d (the CPU by default).
func OnDevice(d Device) LoadOption {
	return func(o *C.kiln_llm_load_options) { o.device = cDevice(d) }
}

// ComputeDtype sets the activations' and KV caches' type: Float32, Float16 or BFloat16
// (by default Float32 on the CPU, BFloat16 on a GPU). Weights keep their stored type.
func ComputeDtype(d Dtype) LoadOption {
	return func(o *C.kiln_llm_load_options) { o.dtype = C.kiln_dtype(d) }
}

// WithActivations sets what the quantized products multiply (ActivationsDefault by default).
func WithActivations(a Activations) LoadOption {
	return func(o *C.kiln_llm_load_options) { o.activations = C.kiln_llm_activations(a) }
}

// TensorParallel splits the model over n ranks (docs/distributed.md): on the CPU, n threads;
// on CUDA, rank r on GPU Index+r of OnDevice's. The model's head count, key/value head
// count and feed-forward size must divide by n; its steps then run one at a time.
func TensorParallel(n int) LoadOption {
	return func(o *C.kiln_llm_load_options) { o.tensor_parallel = C.int(n) }
}

// LoadModel reads a model file; errors name the file.
func LoadModel(path string, opts ...LoadOption) (*Model, error) {
	var cfg C.kiln_llm_load_options
	C.kiln_llm_load_options_default(&cfg)
	for _, o := range opts {
		o(&cfg)
	}
	cpath, err := cString("kiln_llm_model_load_with", "path", path)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cpath))
	var h C.kiln_llm_model
	if err := call(func() C.int { return C.kiln_llm_model_load_with(&h, cpath, &cfg) }); err != nil {
		return nil, err
	}
	m := &Model{h: h}
	runtime.SetFinalizer(m, (*Model).Free)
	return m, nil
}

// Free releases the model now (sessions keep what they need of it). Safe to call twice.
func (m *Model) Free() {
	if m == nil || m.h == nil {
		return
	}
	C.kiln_llm_model_free(m.h)
	m.h = nil
	runtime.SetFinalizer(m, nil)
}

func (m *Model) handle() C.kiln_llm_model {
	if m == nil {
		return nil
	}
	return m.h
}

// ModelInfo is a model's configuration and special tokens.
type ModelInfo struct {
	VocabSize     int
	Layers        int
	DModel        int
	Heads         int
	KVHeads       int
	HeadDim       int
	FFNDim        int // the feed-forward's hidden size
	ContextLength int
	WeightBytes   int // read by one decode step

	RopeDims        int // features of each head that RoPE rotates
	RopeBase        float32
	RopeScale       float32 // position multiplier (linear rope scaling: 1 / factor)
	RopeTraditional bool    // rotate adjacent pairs (GGUF llama), else halves (NeoX, Qwen)
	NormEps         float32 // RMSNorm's epsilon
	QKVBias         bool    // biases on q, k and v (Qwen2)
	QKNorm          bool    // RMSNorm over each head of q and k (Qwen3)
	TiedEmbeddings  bool    // the token embedding is also the output projection
	SlidingWindow   int     // each query attends to the last this many keys (Mistral); 0: all

	// EOT: end of turn ("<|im_end|>"); -1 when the vocabulary has none (or the file has no tokenizer)
	BOS, EOS, EOT int32

	TensorParallel int         // ranks the model is split over (1: not split)
	Activations    Activations // what the quantized products multiply, resolved (never ActivationsDefault)
}

// Info is the model's configuration.
func (m *Model) Info() (ModelInfo, error) {
	var i C.kiln_llm_model_info
	err := call(func() C.int { return C.kiln_llm_model_get_info(&i, m.handle()) })
	runtime.KeepAlive(m)
	if err != nil {
		return ModelInfo{}, err
	}
	return ModelInfo{
		VocabSize:       int(i.vocab_size),
		Layers:          int(i.n_layers),
		DModel:          int(i.d_model),
		Heads:           int(i.n_heads),
		KVHeads:         int(i.n_kv_heads),
		HeadDim:         int(i.head_dim),
		FFNDim:          int(i.ffn_dim),
		ContextLength:   int(i.context_length),
		WeightBytes:     int(i.weight_bytes),
		RopeDims:        int(i.rope_dims),
		RopeBase:        float32(i.rope_base),
		RopeScale:       float32(i.rope_scale),
		RopeTraditional: bool(i.rope_traditional),
		NormEps:         float32(i.norm_eps),
		QKVBias:         bool(i.qkv_bias),
		QKNorm:          bool(i.qk_norm),
		TiedEmbeddings:  bool(i.tied_embeddings),
		SlidingWindow:   int(i.sliding_window),
		BOS:             int32(i.bos_token),
		EOS:             int32(i.eos_token),
		EOT:             int32(i.eot_token),
		TensorParallel:  int(i.tensor_parallel),
		Activations:     Activations(i.activations),
	}, nil
}

// Tensor is one tensor of a model file as the file holds it. Dense: W holds the values.
// Quantized in kiln's affine format: W is the packed uint32 codes and
// QuantizedMatmul(x, W, Scales, Biases, true, GroupSize, Bits) is x times the tensor transposed.
type Tensor struct {
	W               *Array
	Scales, Biases  *Array // nil when dense
	GroupSize, Bits int    // 0 when dense
}

// Quantized reports whether the tensor is packed codes with scales and biases.
func (t *Tensor) Quantized() bool { return t.Bits != 0 }

// HasTensor reports whether the file holds a tensor of this name (GGUF naming:
// "blk.0.attn_q.weight", "token_embd.weight"; safetensors names are mapped to these).
func (m *Model) HasTensor(name string) bool {
	cname, err := cString("kiln_llm_model_has_tensor", "name", name)
	if err != nil {
		return false
	}
	defer C.free(unsafe.Pointer(cname))
	var has C.bool
	err = call(func() C.int { return C.kiln_llm_model_has_tensor(&has, m.handle(), cname) })
	runtime.KeepAlive(m)
	return err == nil && bool(has)
}

// Tensor reads one tensor of the model file (on the CPU, viewing the mapped file where
// its layout allows); the error names the file and tensor when there is none.
func (m *Model) Tensor(name string) (*Tensor, error) {
	cname, err := cString("kiln_llm_model_tensor", "name", name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cname))
	var w, s, b C.kiln_array
	var group, bits C.int
	err = call(func() C.int { return C.kiln_llm_model_tensor(&w, &s, &b, &group, &bits, m.handle(), cname) })
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	t := &Tensor{W: wrap(w), GroupSize: int(group), Bits: int(bits)}
	if t.Quantized() {
		t.Scales, t.Biases = wrap(s), wrap(b)
	}
	return t, nil
}

// Tokenize turns text into token ids. addSpecial adds BOS/EOS as the model asks;
// parseSpecial turns control-token text such as "<|im_start|>" into its id.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	ctext, err := cString("kiln_llm_tokenize", "text", text)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(ctext))
	var ids *C.int32_t
	var n C.size_t
	err = call(func() C.int {
		return C.kiln_llm_tokenize(&ids, &n, m.handle(), ctext, C.bool(addSpecial), C.bool(parseSpecial))
	})
	runtime.KeepAlive(m)
	if err != nil {
		return nil, err
	}
	defer C.kiln_llm_tokens_free(ids)
	out := make([]int32, int(n))
	for i, id := range unsafe.Slice(ids, int(n)) {
		out[i] = int32(id)
	}
	return out, nil
}

// idsPtr is the C view of ids (Go memory without pointers, so C may read it during a call).
func idsPtr(ids []int32) *C.int32_t {
	if len(ids) == 0 {
		return nil
	}
	return (*C.int32_t)(unsafe.Pointer(&ids[0]))
}

// Detokenize turns token ids into text (always valid UTF-8).
func (m *Model) Detokenize(ids []int32) (string, error) {
	var s *C.char
	err := call(func() C.int { return C.kiln_llm_detokenize(&s, m.handle(), idsPtr(ids), C.size_t(len(ids))) })
	runtime.KeepAlive(m)
	runtime.KeepAlive(ids)
	if err != nil {
		return "", err
	}
	defer C.kiln_string_free(s)
	return C.GoString(s), nil
}

// ChatMessage is one turn of a conversation ("system", "user", "assistant").
type ChatMessage struct {
	Role, Content string
}

// ChatPrompt renders messages through the model's chat template (ChatML or Llama 3),
// opening the assistant's turn; tokenize it with parseSpecial.
func (m *Model) ChatPrompt(messages []ChatMessage) (string, error) {
	n := len(messages)
	strs := make([]*C.char, 2*n) // roles, then contents: C pointers in Go memory
	defer func() {
		for _, p := range strs {
			C.free(unsafe.Pointer(p))
		}
	}()
	for i, msg := range messages {
		var err error
		if strs[i], err = cString("kiln_llm_chat_prompt", "role", msg.Role); err != nil {
			return "", err
		}
		if strs[n+i], err = cString("kiln_llm_chat_prompt", "content", msg.Content); err != nil {
			return "", err
		}
	}
	var roles, contents **C.char
	if n > 0 {
		roles, contents = &strs[0], &strs[n]
	}
	var s *C.char
	err := call(func() C.int { return C.kiln_llm_chat_prompt(&s, m.handle(), roles, contents, C.size_t(n)) })
	runtime.KeepAlive(m)
	if err != nil {
		return "", err
	}
	defer C.kiln_string_free(s)
	return C.GoString(s), nil
}

// IsEndOfGeneration reports whether generation ends at token (end of sequence or of
// turn); false for a freed model.
func (m *Model) IsEndOfGeneration(token int32) bool {
	var end C.bool
	err := call(func() C.int { return C.kiln_llm_is_end_of_generation(&end, m.handle(), C.int32_t(token)) })
	runtime.KeepAlive(m)
	return err == nil && bool(end)
}
