package main

import (
	"fmt"
	"math"

	"kiln.dev/kiln"
)

// Llama is a Llama-family model (SmolLM2, Llama 2) written in Go over kiln's ops. Its
// configuration and weights come from a model file through kiln's C API; the forward
// pass (forward.go) is ours. It is read-only once loaded: any number of goroutines may
// run it at once, each with its own Cache.
type Llama struct {
	file *kiln.Model // the model file: configuration, weights and tokenizer
	info kiln.ModelInfo

	embedding  linear // [vocab, d_model], gathered row by row
	layers     []layer
	outputNorm *kiln.Array
	output     linear // the embedding itself when the file ties them

	// Compiled once for every shape and shared by every goroutine: each call is one
	// fused kernel instead of a handful of separate ones.
	rmsNorm kiln.Function2 // (x, weight)
	swiGLU  kiln.Function2 // (gate, up)
}

type layer struct {
	attnNorm, ffnNorm *kiln.Array
	q, k, v, o        linear
	gate, up, down    linear
}

// linear is a weight matrix [out, in], quantized (kiln's affine format) or dense.
type linear struct {
	w              *kiln.Array
	scales, biases *kiln.Array // nil when dense
	groupSize      int
	bits           int
}

// apply is x @ w^T.
func (l linear) apply(x *kiln.Array) (*kiln.Array, error) {
	if l.scales == nil {
		wt, err := kiln.Transpose(l.w)
		if err != nil {
			return nil, err
		}
		return kiln.Matmul(x, wt)
	}
	return kiln.QuantizedMatmul(x, l.w, l.scales, l.biases, true, l.groupSize, l.bits)
}

// Load builds the model from a file kiln has loaded.
func Load(file *kiln.Model) (*Llama, error) {
	info, err := file.Info()
	if err != nil {
		return nil, err
	}
	// What this example leaves out; kiln's own model (kiln_llm_generate) runs these.
	switch {
	case info.QKVBias:
		return nil, fmt.Errorf("llama example: biases on q, k and v (Qwen2) are not implemented")
	case info.QKNorm:
		return nil, fmt.Errorf("llama example: q and k norms (Qwen3) are not implemented")
	case file.HasTensor("rope_freqs.weight"):
		return nil, fmt.Errorf("llama example: Llama 3 RoPE frequency factors are not implemented")
	}
	m := &Llama{file: file, info: info}
	var toEval []*kiln.Array
	matrix := func(name string) (linear, error) {
		t, err := file.Tensor(name)
		if err != nil {
			return linear{}, err
		}
		l := linear{w: t.W, groupSize: t.GroupSize, bits: t.Bits}
		if t.Quantized() {
			// float32 scales and biases: the products read them as they are, without
			// converting them on every call.
			if l.scales, err = kiln.AsType(t.Scales, kiln.Float32); err != nil {
				return linear{}, err
			}
			if l.biases, err = kiln.AsType(t.Biases, kiln.Float32); err != nil {
				return linear{}, err
			}
			toEval = append(toEval, l.scales, l.biases)
		} else if l.w, err = kiln.AsType(t.W, kiln.Float32); err != nil {
			return linear{}, err
		}
		toEval = append(toEval, l.w)
		return l, nil
	}
	vector := func(name string) (*kiln.Array, error) {
		t, err := file.Tensor(name)
		if err != nil {
			return nil, err
		}
		if t.Quantized() {
			return nil, fmt.Errorf("llama example: %s is quantized; norms are expected dense", name)
		}
		return kiln.AsType(t.W, kiln.Float32)
	}

	if m.embedding, err = matrix("token_embd.weight"); err != nil {
		return nil, err
	}
	m.output = m.embedding
	if !info.TiedEmbeddings {
		if m.output, err = matrix("output.weight"); err != nil {
			return nil, err
		}
	}
	if m.outputNorm, err = vector("output_norm.weight"); err != nil {
		return nil, err
	}
	for i := 0; i < info.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		var l layer
		for _, w := range []struct {
			name string
			dst  *linear
		}{{"attn_q", &l.q}, {"attn_k", &l.k}, {"attn_v", &l.v}, {"attn_output", &l.o},
			{"ffn_gate", &l.gate}, {"ffn_up", &l.up}, {"ffn_down", &l.down}} {
			if *w.dst, err = matrix(p + w.name + ".weight"); err != nil {
				return nil, err
			}
		}
		if l.attnNorm, err = vector(p + "attn_norm.weight"); err != nil {
			return nil, err
		}
		if l.ffnNorm, err = vector(p + "ffn_norm.weight"); err != nil {
			return nil, err
		}
		toEval = append(toEval, l.attnNorm, l.ffnNorm)
		m.layers = append(m.layers, l)
	}
	// Convert every weight now, once, rather than inside the first forward pass.
	if err := kiln.Eval(append(toEval, m.outputNorm)...); err != nil {
		return nil, err
	}

	eps := float64(info.NormEps)
	m.rmsNorm, err = kiln.Compile2("rms_norm", func(x, w *kiln.Array) (*kiln.Array, error) {
		// x / sqrt(mean(x^2) + eps) * w over the last axis.
		ms := kiln.Must(kiln.Reduce(kiln.MeanOp, kiln.Must(kiln.Square(x)), []int{-1}, true))
		inv := kiln.Must(kiln.Rsqrt(kiln.Must(kiln.Add(ms, kiln.Must(kiln.ScalarLike(eps, x))))))
		return kiln.Multiply(kiln.Must(kiln.Multiply(x, inv)), w)
	}, kiln.Shapeless())
	if err != nil {
		return nil, err
	}
	m.swiGLU, err = kiln.Compile2("swiglu", func(gate, up *kiln.Array) (*kiln.Array, error) {
		// silu(gate) * up, silu(g) = g * sigmoid(g).
		return kiln.Multiply(kiln.Must(kiln.Multiply(gate, kiln.Must(kiln.Sigmoid(gate)))), up)
	}, kiln.Shapeless())
	return m, err
}

// attentionScale is 1/sqrt(head_dim).
func (m *Llama) attentionScale() float32 {
	return float32(1 / math.Sqrt(float64(m.info.HeadDim)))
}
