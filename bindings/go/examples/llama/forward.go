package main

import (
	"fmt"

	"kiln.dev/kiln"
)

// Cache is one sequence's keys and values: per layer an array [1, kv_heads, capacity,
// head_dim] written in place at the sequence's position. A Cache belongs to one
// goroutine at a time.
type Cache struct {
	keys, values []*kiln.Array
	position     int
	capacity     int
}

// NewCache makes an empty cache for up to capacity tokens.
func (m *Llama) NewCache(capacity int) (*Cache, error) {
	c := &Cache{capacity: capacity}
	for i := 0; i < len(m.layers); i++ {
		for _, dst := range []*[]*kiln.Array{&c.keys, &c.values} {
			z, err := kiln.Zeros(kiln.Float32, 1, m.info.KVHeads, capacity, m.info.HeadDim)
			if err != nil {
				return nil, err
			}
			*dst = append(*dst, z)
		}
	}
	return c, kiln.Eval(append(c.keys, c.values...)...)
}

// Position is the number of tokens the cache holds.
func (c *Cache) Position() int { return c.position }

// Forward appends tokens to the sequence in c and returns the logits after each of them:
// [len(tokens), vocab] float32, evaluated.
func (m *Llama) Forward(tokens []int32, c *Cache) (*kiln.Array, error) {
	L := len(tokens)
	if L == 0 || c.position+L > c.capacity {
		return nil, fmt.Errorf("llama example: %d tokens after %d do not fit a cache of %d", L, c.position, c.capacity)
	}
	logits, err := m.forward(tokens, c)
	if err != nil {
		return nil, err
	}
	// One evaluation runs the whole pass and writes both caches of every layer.
	if err := kiln.Eval(append([]*kiln.Array{logits}, append(c.keys, c.values...)...)...); err != nil {
		return nil, err
	}
	c.position += L
	return logits, nil
}

// forward builds the pass lazily; inside it, kiln.Must turns an error into a panic,
// which forward returns as its error.
func (m *Llama) forward(tokens []int32, c *Cache) (logits *kiln.Array, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	must := kiln.Must
	info := m.info
	L := len(tokens)
	ids := must(kiln.FromSlice(tokens))
	pos := must(kiln.FromSlice([]int32{int32(c.position)}))            // where this chunk starts
	keyLengths := must(kiln.FromSlice([]int32{int32(c.position + L)})) // keys to attend over

	x := must(m.embed(ids))
	x = must(kiln.Reshape(x, 1, L, info.DModel))
	// [1, L, heads*head_dim] -> [1, heads, L, head_dim]
	heads := func(y *kiln.Array, n int) *kiln.Array {
		return must(kiln.Transpose(must(kiln.Reshape(y, 1, L, n, info.HeadDim)), 0, 2, 1, 3))
	}
	rope := func(y *kiln.Array) *kiln.Array {
		return must(kiln.Rope(y, info.RopeDims, info.RopeTraditional, info.RopeBase, info.RopeScale, pos, nil))
	}
	for i, l := range m.layers {
		h := must(m.rmsNorm.Call(x, l.attnNorm))
		q := rope(heads(must(l.q.apply(h)), info.Heads))
		k := rope(heads(must(l.k.apply(h)), info.KVHeads))
		v := heads(must(l.v.apply(h)), info.KVHeads)

		// Write this chunk's keys and values at its position. Freeing the old handles leaves
		// the update as the cache's only holder, so kiln writes it in place.
		oldK, oldV := c.keys[i], c.values[i]
		c.keys[i] = must(kiln.SliceUpdateAt(oldK, k, pos, 2))
		c.values[i] = must(kiln.SliceUpdateAt(oldV, v, pos, 2))
		oldK.Free()
		oldV.Free()

		// Causal within the chunk; keyLengths keeps the unwritten end of the cache out.
		o := must(kiln.ScaledDotProductAttention(q, c.keys[i], c.values[i], m.attentionScale(), nil, L > 1, keyLengths))
		o = must(kiln.Reshape(must(kiln.Transpose(o, 0, 2, 1, 3)), 1, L, info.Heads*info.HeadDim))
		x = must(kiln.Add(x, must(l.o.apply(o))))

		h = must(m.rmsNorm.Call(x, l.ffnNorm))
		ffn := must(m.swiGLU.Call(must(l.gate.apply(h)), must(l.up.apply(h))))
		x = must(kiln.Add(x, must(l.down.apply(ffn))))
	}
	x = must(m.rmsNorm.Call(x, m.outputNorm))
	out := must(m.output.apply(x))
	return kiln.Reshape(must(kiln.AsType(out, kiln.Float32)), L, info.VocabSize)
}

// embed gathers the tokens' rows of the embedding table; a quantized table is gathered
// quantized and only those rows are expanded.
func (m *Llama) embed(ids *kiln.Array) (*kiln.Array, error) {
	e := m.embedding
	if e.scales == nil {
		return kiln.Take(e.w, ids, 0)
	}
	must := kiln.Must
	return kiln.Dequantize(must(kiln.Take(e.w, ids, 0)), must(kiln.Take(e.scales, ids, 0)),
		must(kiln.Take(e.biases, ids, 0)), e.groupSize, e.bits)
}
