"""kiln.Executable: a .kgraph program in each mode against NumPy."""

import numpy as np
import pytest

import kiln
from conftest import random_array

MLP = """kgraph 1
graph mlp {
  input x : float32[N<=32, 8]
  param w1 : float32[8, 16]
  param b1 : float32[16]
  param w2 : float32[16, 4]
  const zero : float32[] = 0
  h0 = matmul(x, w1)
  h1 = add(h0, b1)
  h = maximum(h1, zero)
  logits = matmul(h, w2)
  probs = softmax(logits) {axes=[-1]}
  best = argmax(logits) {axis=-1}
  output probs, best
}
"""


@pytest.mark.parametrize("mode", ["eager", "lazy", "compiled"])
def test_mlp_in_every_mode(mode, rng):
    e = kiln.Executable.parse(MLP, mode)
    assert e.mode == mode and e.input_names == ["x"] and e.output_names == ["probs", "best"]
    w1, b1, w2 = random_array(rng, (8, 16)), random_array(rng, (16,)), random_array(rng, (16, 4))
    for name, v in (("w1", w1), ("b1", b1), ("w2", w2)):
        e.set_param(name, v)
    x = random_array(rng, (5, 8))
    probs, best = e.run({"x": x})
    logits = np.maximum(x @ w1 + b1, 0) @ w2
    p = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(probs), p / p.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(best), logits.argmax(-1).astype(np.int32))
    short, _ = e.run({"x": x}, active_extent=3)
    assert short.shape == (3, 4)
    assert "graph mlp" in e.text


def test_errors_name_the_program():
    with pytest.raises(kiln.Error):
        kiln.Executable.parse("kgraph 1\ngraph g {\n  output nothing\n}\n")
