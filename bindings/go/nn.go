package kiln

// #include "kiln/c/kiln.h"
import "C"

import "runtime"

// The language-model ops of kiln/nn.h. Optional operands (a norm's weight or bias,
// rope's freqs, an attention mask or key lengths) may be nil.

// keepAlive keeps arrays reachable until the C call that reads their handles is done.
func keepAlive(arrays ...*Array) {
	for _, a := range arrays {
		runtime.KeepAlive(a)
	}
}

// Quantize is MLX's affine quantization along the last axis: packed uint32 words,
// scales and biases per group of groupSize (32, 64, 128) at bits 2, 3, 4, 5, 6 or 8.
func Quantize(w *Array, groupSize, bits int) (packed, scales, biases *Array, err error) {
	var p, s, b C.kiln_array
	err = call(func() C.int { return C.kiln_quantize(&p, &s, &b, w.handle(), C.int(groupSize), C.int(bits)) })
	keepAlive(w)
	if err != nil {
		return nil, nil, nil, err
	}
	return wrap(p), wrap(s), wrap(b), nil
}

// Dequantize is scale * q + bias for every packed value.
func Dequantize(w, scales, biases *Array, groupSize, bits int) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_dequantize(o, w.handle(), scales.handle(), biases.handle(), C.int(groupSize), C.int(bits))
	})
	keepAlive(w, scales, biases)
	return r, err
}

// QuantizedMatmul is x @ dequantize(w)^T when transpose (w [N, K]), else x @ dequantize(w).
func QuantizedMatmul(x, w, scales, biases *Array, transpose bool, groupSize, bits int) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_quantized_matmul(o, x.handle(), w.handle(), scales.handle(), biases.handle(), C.bool(transpose),
			C.int(groupSize), C.int(bits))
	})
	keepAlive(x, w, scales, biases)
	return r, err
}

// RmsNorm normalizes the last axis by its root mean square; weight may be nil.
func RmsNorm(x, weight *Array, eps float32) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int { return C.kiln_rms_norm(o, x.handle(), weight.handle(), C.float(eps)) })
	keepAlive(x, weight)
	return r, err
}

// LayerNorm normalizes the last axis to zero mean and unit variance; weight and bias may be nil.
func LayerNorm(x, weight, bias *Array, eps float32) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_layer_norm(o, x.handle(), weight.handle(), bias.handle(), C.float(eps))
	})
	keepAlive(x, weight, bias)
	return r, err
}

// Rope rotates the first dims features of x [..., L, D] by position offset + row (offset an
// int32 array, [] or [B]); frequencies base^(-2i/dims), or 1/freqs when freqs is not nil.
func Rope(x *Array, dims int, traditional bool, base, scale float32, offset, freqs *Array) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_rope(o, x.handle(), C.int(dims), C.bool(traditional), C.float(base), C.float(scale), offset.handle(),
			freqs.handle())
	})
	keepAlive(x, offset, freqs)
	return r, err
}

// ScaledDotProductAttention is softmax(q k^T scale + mask) v with grouped-query heads;
// mask (boolean or additive) and keyLengths (int32 [B]) may be nil.
func ScaledDotProductAttention(q, k, v *Array, scale float32, mask *Array, causal bool, keyLengths *Array) (*Array, error) {
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_scaled_dot_product_attention(o, q.handle(), k.handle(), v.handle(), C.float(scale), mask.handle(),
			C.bool(causal), keyLengths.handle())
	})
	keepAlive(q, k, v, mask, keyLengths)
	return r, err
}

// SliceUpdateAt writes update into a at start (an int32 array, one entry per axis in axes);
// in place when nothing else holds a's buffer.
func SliceUpdateAt(a, update, start *Array, axes ...int) (*Array, error) {
	ca := cInts(axes)
	r, err := newArray(func(o *C.kiln_array) C.int {
		return C.kiln_slice_update_at(o, a.handle(), update.handle(), start.handle(), ptrInt(ca), C.size_t(len(ca)))
	})
	keepAlive(a, update, start)
	return r, err
}
