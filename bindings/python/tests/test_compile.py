"""kiln.compile from Python: decorator forms, the cache key (structure and constants, as MLX's
mx.compile), shapeless, nesting, outputs as trees, errors."""

import numpy as np
import pytest

import kiln
from conftest import assert_matches, random_array


def traces():
    return kiln.stats()["traces"]


def test_decorator_forms_and_replay(rng):
    a, b = random_array(rng, (64,)), random_array(rng, (64,))

    @kiln.compile
    def f(x, y):
        return x * kiln.sigmoid(1.702 * x) + y

    assert f.name == "f" and f.__wrapped__.__name__ == "f"
    t0 = traces()
    assert_matches(f(kiln.array(a), kiln.array(b)), a / (1 + np.exp(-1.702 * a)) + b, rtol=1e-5)
    assert_matches(f(kiln.array(b), kiln.array(a)), b / (1 + np.exp(-1.702 * b)) + a, rtol=1e-5)
    assert traces() - t0 == 1  # same signature: replayed

    g = kiln.compile(lambda x: x + 1.0, name="plus_one")
    assert g.name == "plus_one"
    assert_matches(g(kiln.array(a)), a + np.float32(1))


def test_new_shapes_trace_again_unless_shapeless(rng):
    @kiln.compile
    def f(x):
        return kiln.exp(x) - x

    @kiln.compile(shapeless=True)
    def s(x):
        return kiln.exp(x) - x

    t0 = traces()
    for n in (3, 5, 9):
        a = random_array(rng, (n,))
        assert_matches(f(kiln.array(a)), np.exp(a) - a, rtol=1e-5)
    assert traces() - t0 == 3
    t0 = traces()
    for n in (3, 5, 9):
        a = random_array(rng, (n,))
        assert_matches(s(kiln.array(a)), np.exp(a) - a, rtol=1e-5)
    assert traces() - t0 == 1


def test_constants_and_keywords_are_part_of_the_key(rng):
    a = random_array(rng, (8,))
    calls = []

    @kiln.compile
    def f(x, scale, *, mode="add", bias=None):
        calls.append((scale, mode))
        y = x * scale
        return y + bias if mode == "add" and bias is not None else y

    x = kiln.array(a)
    bias = kiln.array(a[::-1].copy())
    assert_matches(f(x, 2.0), a * 2)
    assert_matches(f(x, 2.0), a * 2)
    assert_matches(f(x, 3.0), a * 3)  # another constant: traced again
    assert_matches(f(x, 3, mode="add", bias=bias), a * 3 + a[::-1])
    assert_matches(f(x, 3, bias=bias, mode="add"), a * 3 + a[::-1])  # keyword order does not matter
    assert_matches(f(x, 3, mode="mul", bias=bias), a * 3)
    assert calls == [(2.0, "add"), (3.0, "add"), (3, "add"), (3, "mul")]


def test_trees_in_and_out(rng):
    a, b = random_array(rng, (4, 3)), random_array(rng, (3,))

    @kiln.compile
    def f(params, inputs):
        h = inputs["x"] @ params[0] + params[1]
        return {"h": h, "both": (h, kiln.sum(h))}

    w = random_array(rng, (3, 3))
    out = f([kiln.array(w), kiln.array(b)], {"x": kiln.array(a)})
    want = a @ w + b
    assert set(out) == {"h", "both"}
    assert_matches(out["h"], want, rtol=1e-5)
    assert_matches(out["both"][1], np.float32(want.sum()), rtol=1e-5)
    out2 = f([kiln.array(w), kiln.array(b)], {"x": a})  # a NumPy array is an input too
    assert_matches(out2["h"], want, rtol=1e-5)


def test_nested_compile_is_inlined(rng):
    a = random_array(rng, (16,))
    inner = kiln.compile(lambda x: kiln.tanh(x) * 2.0)

    @kiln.compile
    def outer(x):
        return inner(x) + inner(x * 0.5)

    t0 = traces()
    assert_matches(outer(kiln.array(a)), np.tanh(a) * 2 + np.tanh(a * 0.5) * 2, rtol=1e-5)
    assert traces() - t0 == 1  # only the outer function traced; inner ran inside its trace


def test_captured_arrays_are_constants(rng):
    w = kiln.array(random_array(rng, (5,)))
    f = kiln.compile(lambda x: x * w)
    a = random_array(rng, (5,))
    assert_matches(f(kiln.array(a)), a * np.asarray(w))


def test_errors_carry_the_message_and_poison_nothing(rng):
    calls = [0]

    @kiln.compile
    def f(x):
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("first trace fails")
        return x + 1

    x = kiln.array(random_array(rng, (3,)))
    with pytest.raises(RuntimeError, match="first trace fails"):
        f(x)
    assert_matches(f(x), np.asarray(x) + np.float32(1))  # traced again, works

    g = kiln.compile(lambda x: kiln.reshape(x, (2, 2)))
    with pytest.raises(kiln.Error, match=r"\[reshape\]"):
        g(x)
    with pytest.raises(kiln.Error, match=r"\[compile\]"):
        kiln.compile(lambda x, o: x)(x, object())
    with pytest.raises(kiln.Error, match=r"\[compile\]"):
        kiln.compile(lambda x: 3)(x)


@pytest.mark.parametrize("policy", [kiln.FusedKernels.off, kiln.FusedKernels.wait])
def test_fused_kernels_policy_picks_the_tier(rng, policy):
    # off: every call interprets the fused region; wait: every call runs its generated kernel.
    a = random_array(rng, (16,))
    saved = kiln.fused_kernels()
    kiln.set_fused_kernels(policy)
    try:
        assert kiln.fused_kernels() == policy
        f = kiln.compile(lambda x: kiln.exp(x) * 3.0 + 1.0, name=f"affine_{policy.name}")
        before = kiln.stats()
        for _ in range(3):
            assert_matches(f(kiln.array(a)), np.exp(a) * np.float32(3) + np.float32(1), rtol=1e-5)
        after = kiln.stats()
        got = (after["interim_calls"] - before["interim_calls"], after["fused_calls"] - before["fused_calls"])
        assert got == ((3, 0) if policy == kiln.FusedKernels.off else (0, 3))
    finally:
        kiln.set_fused_kernels(saved)
    assert kiln.fused_kernels() == saved
