package kiln_test

import (
	"math"
	"testing"

	"kiln.dev/kiln"
)

func TestLanguageModelOps(t *testing.T) {
	w := make([]float32, 4*64)
	for i := range w {
		w[i] = float32(math.Sin(0.37*float64(i) + 0.1))
	}
	wa := must(kiln.FromSlice(w, 4, 64))
	packed, scales, biases, err := kiln.Quantize(wa, 32, 4)
	if err != nil {
		t.Fatal(err)
	}
	deq := must(kiln.Dequantize(packed, scales, biases, 32, 4))
	x := must(kiln.FromSlice(w[:64], 1, 64))
	y := must(kiln.QuantizedMatmul(x, packed, scales, biases, true, 32, 4))
	ref := must(kiln.Matmul(x, must(kiln.Transpose(deq))))
	if got, want := must(y.Float32s()), must(ref.Float32s()); !close32(got, want) {
		t.Fatalf("quantized_matmul %v, dequantized matmul %v", got, want)
	}
	_, _, _, err = kiln.Quantize(wa, 48, 4)
	wantError(t, err, "[quantize] group_size must be 32, 64 or 128")

	rows := must(kiln.FromSlice([]float32{3, 4}, 1, 2))
	n := must(kiln.RmsNorm(rows, nil, 0))
	if v := must(n.Float32s()); !close32(v, []float32{3 / float32(math.Sqrt(12.5)), 4 / float32(math.Sqrt(12.5))}) {
		t.Fatalf("rms_norm %v", v)
	}
	ln := must(kiln.LayerNorm(rows, nil, nil, 0))
	if v := must(ln.Float32s()); !close32(v, []float32{-1, 1}) {
		t.Fatalf("layer_norm %v", v)
	}

	one := must(kiln.FromSlice([]float32{1, 0}, 1, 1, 1, 2))
	pos := must(kiln.Scalar(3, kiln.Int32))
	rot := must(kiln.Rope(one, 2, false, 1, 1, pos, nil))
	if v := must(rot.Float32s()); !close32(v, []float32{float32(math.Cos(3)), float32(math.Sin(3))}) {
		t.Fatalf("rope %v", v)
	}

	q := must(kiln.FromSlice([]float32{0.3, -2}, 1, 1, 1, 2))
	k := must(kiln.FromSlice([]float32{1, 5}, 1, 1, 1, 2))
	v := must(kiln.FromSlice([]float32{7, -8}, 1, 1, 1, 2))
	att := must(kiln.ScaledDotProductAttention(q, k, v, 0.5, nil, true, nil))
	if got := must(att.Float32s()); !close32(got, []float32{7, -8}) {
		t.Fatalf("attention %v", got)
	}

	cache := must(kiln.FromSlice([]float32{0, 0, 0, 0, 0, 0}, 3, 2))
	at := must(kiln.FromSlice([]int32{1}, 1))
	upd := must(kiln.SliceUpdateAt(cache, must(kiln.FromSlice([]float32{5, 6}, 1, 2)), at, 0))
	if got := must(upd.Float32s()); !close32(got, []float32{0, 0, 5, 6, 0, 0}) {
		t.Fatalf("slice_update_at %v", got)
	}
}
