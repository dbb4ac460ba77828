"""The language-model ops against NumPy references: affine quantization, quantized products,
norms, RoPE and attention."""

import numpy as np
import pytest

import kiln
from conftest import assert_matches, random_array


def unpack(packed, bits, n):
    """MLX's packing: element j of a row at bit j*bits of the row, from the low bits up."""
    words = packed.astype(np.uint64)
    j = np.arange(n)
    bit = j * bits
    lo = (words[..., bit // 32] >> (bit % 32).astype(np.uint64))
    hi = np.where(bit % 32 + bits > 32, words[..., np.minimum(bit // 32 + 1, words.shape[-1] - 1)] << (32 - bit % 32).astype(np.uint64), 0)
    return ((lo | hi) & ((1 << bits) - 1)).astype(np.float64)


@pytest.mark.parametrize("bits,group", [(4, 64), (8, 32), (3, 64), (2, 128)])
def test_quantize_dequantize(bits, group, rng):
    w = random_array(rng, (6, 256), np.float32, -1, 1)
    q, s, b = kiln.quantize(kiln.array(w), group_size=group, bits=bits)
    assert q.dtype == kiln.uint32 and q.shape == (6, 256 * bits // 32)
    assert s.shape == b.shape == (6, 256 // group)
    vals = unpack(np.asarray(q), bits, 256).reshape(6, 256 // group, group)
    want = (vals * np.asarray(s)[..., None] + np.asarray(b)[..., None]).reshape(6, 256)
    got = kiln.dequantize(q, s, b, group_size=group, bits=bits)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    step = np.abs(np.repeat(np.asarray(s), group, axis=1))
    assert np.all(np.abs(np.asarray(got) - w) <= step + 1e-6)  # within a step (the grid keeps an end exact)


def test_quantized_matmul(rng):
    w = random_array(rng, (48, 128), np.float32, -1, 1)
    x = random_array(rng, (2, 5, 128), np.float32, -1, 1)
    q, s, b = kiln.quantize(kiln.array(w))
    deq = np.asarray(kiln.dequantize(q, s, b)).astype(np.float64)
    got = kiln.quantized_matmul(kiln.array(x), q, s, b)
    np.testing.assert_allclose(np.asarray(got), x @ deq.T, rtol=1e-4, atol=1e-4)
    w2 = random_array(rng, (128, 64), np.float32, -1, 1)  # [in, out] for transpose=False
    q2, s2, b2 = kiln.quantize(kiln.array(w2))
    deq2 = np.asarray(kiln.dequantize(q2, s2, b2)).astype(np.float64)
    got2 = kiln.quantized_matmul(kiln.array(x[0]), q2, s2, b2, transpose=False)
    np.testing.assert_allclose(np.asarray(got2), x[0] @ deq2, rtol=1e-4, atol=1e-4)

def test_norms(rng):
    x = random_array(rng, (3, 7, 64))
    w, bias = random_array(rng, (64,)), random_array(rng, (64,))
    x64 = x.astype(np.float64)
    rms = x64 / np.sqrt(np.mean(x64**2, axis=-1, keepdims=True) + 1e-5) * w
    assert_matches(kiln.rms_norm(kiln.array(x), kiln.array(w), eps=1e-5), rms.astype(np.float32), rtol=2e-5)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    ln = (x64 - mu) / np.sqrt(var + 1e-5) * w + bias
    assert_matches(kiln.layer_norm(kiln.array(x), kiln.array(w), kiln.array(bias)), ln.astype(np.float32), rtol=2e-5)
    assert_matches(kiln.rms_norm(kiln.array(x)), (x64 / np.sqrt(np.mean(x64**2, -1, keepdims=True) + 1e-5)).astype(np.float32), rtol=2e-5)


@pytest.mark.parametrize("traditional", [False, True])
def test_rope(traditional, rng):
    x = random_array(rng, (2, 3, 5, 16))
    dims, base, offset = 12, 10000.0, 7
    inv = base ** (-np.arange(0, dims, 2) / dims)
    pos = (offset + np.arange(5))[:, None] * inv[None, :]
    cos, sin = np.cos(pos), np.sin(pos)
    x64 = x.astype(np.float64)
    want = x64.copy()
    if traditional:
        a, b = x64[..., 0:dims:2], x64[..., 1:dims:2]
        want[..., 0:dims:2], want[..., 1:dims:2] = a * cos - b * sin, a * sin + b * cos
    else:
        a, b = x64[..., : dims // 2], x64[..., dims // 2 : dims]
        want[..., : dims // 2], want[..., dims // 2 : dims] = a * cos - b * sin, a * sin + b * cos
    got = kiln.rope(kiln.array(x), dims, traditional=traditional, base=base, offset=offset)
    assert_matches(got, want.astype(np.float32), rtol=2e-5)
    got_arr = kiln.rope(kiln.array(x), dims, traditional=traditional, base=base, offset=kiln.array(np.int32(offset)))
    assert_matches(got_arr, want.astype(np.float32), rtol=2e-5)


def attention(q, k, v, scale, causal):
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        lq, lk = q.shape[2], k.shape[2]
        s = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal, rng):
    q = random_array(rng, (2, 4, 3, 16)).astype(np.float64)
    k = random_array(rng, (2, 2, 9, 16)).astype(np.float64)
    v = random_array(rng, (2, 2, 9, 16)).astype(np.float64)
    want = attention(q, k, v, 0.25, causal)
    to = lambda a: kiln.array(a.astype(np.float32))
    got = kiln.scaled_dot_product_attention(to(q), to(k), to(v), 0.25, mask="causal" if causal else None)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    mask = np.tril(np.ones((3, 9), bool), 6)
    got_mask = kiln.scaled_dot_product_attention(to(q), to(k), to(v), 0.25, mask=kiln.array(mask))
    np.testing.assert_allclose(np.asarray(got_mask), attention(q, k, v, 0.25, True), rtol=1e-4, atol=1e-4)
