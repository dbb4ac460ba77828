"""Every op of the registry against a NumPy reference on random data; the registry itself
(kiln._kiln._registry_ops(), from src/ops/op_table.def) says which ops must have a case here."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kiln
from conftest import assert_matches, random_array

erf = np.vectorize(math.erf, otypes=[np.float64])

# name: (NumPy reference, domain (low, high)) for float inputs.
UNARY = {
    "abs": (np.abs, (-3, 3)),
    "negative": (np.negative, (-3, 3)),
    "sign": (np.sign, (-3, 3)),
    "exp": (np.exp, (-3, 3)),
    "expm1": (np.expm1, (-3, 3)),
    "log": (np.log, (0.1, 5)),
    "log1p": (np.log1p, (-0.5, 5)),
    "log2": (np.log2, (0.1, 5)),
    "sqrt": (np.sqrt, (0.1, 5)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 5)),
    "square": (np.square, (-3, 3)),
    "reciprocal": (np.reciprocal, (0.5, 3)),
    "sin": (np.sin, (-3, 3)),
    "cos": (np.cos, (-3, 3)),
    "tan": (np.tan, (-1.2, 1.2)),
    "tanh": (np.tanh, (-3, 3)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    "erf": (erf, (-3, 3)),
    "gelu": (lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), (-3, 3)),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), (-3, 3)),
    "floor": (np.floor, (-3, 3)),
    "ceil": (np.ceil, (-3, 3)),
    "round": (np.round, (-3, 3)),
    "isnan": (np.isnan, (-3, 3)),
    "isinf": (np.isinf, (-3, 3)),
    "isfinite": (np.isfinite, (-3, 3)),
    "logical_not": (np.logical_not, (-3, 3)),
    "bitwise_not": (np.bitwise_not, None),
    "erfinv": (None, (-0.9, 0.9)),  # checked through erf below
    "softplus": (lambda x: np.logaddexp(0, x), (-5, 5)),
}

BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "power": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "arctan2": np.arctan2,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
    "logaddexp": np.logaddexp,
}
INTEGER_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "bitwise_not"}

REDUCE = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "all": np.all,
    "any": np.any,
    "mean": np.mean,
    "logsumexp": lambda a, axis=None, keepdims=False: np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims)),
}

# Registry ops tested elsewhere, by the file that does.
ELSEWHERE = {
    "slice": "test_indexing.py", "slice_update": "test_indexing.py",
    "quantize": "test_nn.py", "dequantize": "test_nn.py", "quantized_matmul": "test_nn.py", "rms_norm": "test_nn.py",
    "layer_norm": "test_nn.py", "rope": "test_nn.py", "scaled_dot_product_attention": "test_nn.py",
    "random_bits": "test_random_sort.py", "random_split": "test_random_sort.py", "random_uniform": "test_random_sort.py",
    "random_normal": "test_random_sort.py", "random_bernoulli": "test_random_sort.py",
    "random_categorical": "test_random_sort.py", "sort": "test_random_sort.py", "argsort": "test_random_sort.py",
    "partition": "test_random_sort.py", "argpartition": "test_random_sort.py", "topk": "test_random_sort.py",
    "all_sum": "test_distributed.py", "all_gather": "test_distributed.py", "reduce_scatter": "test_distributed.py",
}


def python_function(name):
    if name.startswith("random_"):
        return getattr(kiln.random, name[len("random_"):])
    return getattr(kiln, name)


def test_every_registry_op_is_bound_and_has_a_case():
    cases = set(UNARY) | set(BINARY) | set(REDUCE) | set(ELSEWHERE) | set(LAYOUT_CASES)
    missing_case = [n for n in kiln._kiln._registry_ops() if n not in cases]
    assert not missing_case, f"registry ops without a Python test case: {missing_case}"
    for name in kiln._kiln._registry_ops():
        assert callable(python_function(name)), name


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32])
def test_unary(name, dtype, rng):
    ref, domain = UNARY[name]
    f = getattr(kiln, name)
    if name in INTEGER_ONLY:
        if np.dtype(dtype).kind != "i":
            return
        a = random_array(rng, (5, 7), dtype, -1000, 1000)
        assert_matches(f(kiln.array(a)), ref(a))
        return
    if np.dtype(dtype).kind == "i":
        a = random_array(rng, (5, 7), dtype, max(-3, math.ceil(domain[0])), int(domain[1]))
        if name in ("log", "log2", "sqrt", "rsqrt", "reciprocal"):
            a = np.abs(a) + 1
    else:
        a = random_array(rng, (5, 7), dtype, *domain)
    got = f(kiln.array(a))
    if name == "erfinv":
        assert got.dtype == (kiln.float32 if np.dtype(dtype).kind == "i" else kiln.array(a).dtype)
        np.testing.assert_allclose(erf(np.asarray(got).astype(np.float64)), a, rtol=5e-3 if dtype == np.float16 else 2e-5, atol=1e-5)
        return
    want = ref(a.astype(np.float64))
    out_kind = np.asarray(got).dtype
    if want.dtype == np.bool_:
        assert_matches(got, want)
    else:
        tol = {np.float16: 4e-3, np.float32: 3e-6, np.float64: 1e-12}.get(out_kind.type, 3e-6)
        np.testing.assert_allclose(np.asarray(got).astype(np.float64), want, rtol=tol, atol=tol)
        expect_dtype = dtype if np.dtype(dtype).kind == "f" or name in ("abs", "negative", "sign", "square", "floor", "ceil", "round") else np.float32
        assert out_kind == expect_dtype, (name, out_kind)


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.uint16, np.bool_])
def test_binary(name, dtype, rng):
    ref = BINARY[name]
    k = np.dtype(dtype).kind
    if name in INTEGER_ONLY and k == "f":
        return
    if name in ("arctan2", "logaddexp", "divide") and k != "f":
        return
    if k == "b" and name not in ("equal", "not_equal", "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor", "maximum", "minimum", "add", "multiply"):
        return
    shape_a, shape_b = (4, 1, 6), (3, 1)  # broadcasting
    lo, hi = (-5, 5) if k != "u" else (0, 9)
    a, b = random_array(rng, shape_a, dtype, lo, hi), random_array(rng, shape_b, dtype, lo, hi)
    if name in ("floor_divide", "remainder"):
        b = np.where(b == 0, np.ones_like(b), b)
    if name in ("left_shift", "right_shift"):
        b = random_array(rng, shape_b, dtype, 0, 3)
    if name == "power":
        a = random_array(rng, shape_a, dtype, 1, 3) if k != "f" else np.abs(a) + 0.5
        b = random_array(rng, shape_b, dtype, 0, 3)
    got = getattr(kiln, name)(kiln.array(a), kiln.array(b))
    with np.errstate(all="ignore"):
        want = ref(a, b)
    if k == "b" and name in ("add", "multiply"):
        want = want.astype(np.bool_)
    assert_matches(got, want, rtol=1e-5 if k == "f" else None)


@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5), data=st.data())
def test_reductions_over_random_axes(shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = random_array(rng, shape, np.float32, -2, 2)
    axes = data.draw(st.one_of(st.none(), st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True)))
    keepdims = data.draw(st.booleans())
    for name, ref in REDUCE.items():
        got = getattr(kiln, name)(kiln.array(a), axis=axes, keepdims=keepdims)
        ax = None if axes is None else tuple(axes)
        want = ref(a.astype(np.float64), axis=ax, keepdims=keepdims)
        if name in ("all", "any"):
            want = ref(a > 0, axis=ax, keepdims=keepdims)
            got = getattr(kiln, name)(kiln.array(a > 0), axis=axes, keepdims=keepdims)
            assert_matches(got, want)
            continue
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5, err_msg=name)
        assert np.asarray(got).shape == np.shape(want)


def test_integer_sums_widen_like_jax(rng):
    a = random_array(rng, (100,), np.int8, -100, 100)
    assert_matches(kiln.sum(kiln.array(a)), np.sum(a, dtype=np.int32))


def test_arg_reductions_cumsum_var_softmax_clip_where_matmul_astype(rng):
    a = random_array(rng, (4, 6))
    b = random_array(rng, (6, 3))
    x = kiln.array(a)
    assert_matches(kiln.argmax(x, axis=1), np.argmax(a, axis=1).astype(np.int32))
    assert_matches(kiln.argmin(x), np.int32(np.argmin(a)))
    assert_matches(kiln.cumsum(x, axis=1), np.cumsum(a, axis=1), rtol=1e-5)
    assert_matches(kiln.var(x, axis=0, ddof=1), np.var(a, axis=0, ddof=1), rtol=1e-5)
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    assert_matches(kiln.softmax(x), e / e.sum(axis=-1, keepdims=True), rtol=1e-5)
    assert_matches(kiln.clip(x, -1.0, 0.5), np.clip(a, -1, 0.5))
    assert_matches(kiln.where(x > 0, x, 0.0), np.where(a > 0, a, np.float32(0)))
    assert_matches(kiln.matmul(x, kiln.array(b)), a @ b, rtol=1e-5)
    assert_matches(x @ b, a @ b, rtol=1e-5)
    assert_matches(kiln.astype(x, kiln.int16), a.astype(np.int16))


def layout_cases(rng):
    a = random_array(rng, (2, 3, 4))
    x = kiln.array(a)
    i = np.array([[2, 0], [1, 1]], dtype=np.int32)
    return {
        "reshape": (kiln.reshape(x, (4, 6)), a.reshape(4, 6)),
        "transpose": (kiln.transpose(x, (2, 0, 1)), a.transpose(2, 0, 1)),
        "broadcast_to": (kiln.broadcast_to(x[:, :1], (2, 5, 4)), np.broadcast_to(a[:, :1], (2, 5, 4))),
        "squeeze": (kiln.squeeze(x[:, :1]), a[:, 0]),
        "expand_dims": (kiln.expand_dims(x, 1), a[:, None]),
        "copy": (kiln.copy(x.T), a.T.copy()),
        "concatenate": (kiln.concatenate([x, x * 2.0], axis=1), np.concatenate([a, a * 2], axis=1)),
        "pad": (kiln.pad(x, [(1, 0), (0, 2), (1, 1)], 5.0), np.pad(a, [(1, 0), (0, 2), (1, 1)], constant_values=5)),
        "take": (kiln.take(x, i, axis=2), np.take(a, i, axis=2)),
        "take_along_axis": (kiln.take_along_axis(x, kiln.array(np.argsort(a, axis=1).astype(np.int32)), 1), np.sort(a, axis=1)),
        "flatten": (kiln.flatten(x), a.ravel()),
        "swapaxes": (kiln.swapaxes(x, 0, 2), np.swapaxes(a, 0, 2)),
        "stack": (kiln.stack([x, -x], axis=1), np.stack([a, -a], axis=1)),
        "split": (kiln.split(x, 2, axis=2)[1], np.split(a, 2, axis=2)[1]),
        "full": (kiln.full((2, 3), 2.5), np.full((2, 3), 2.5, np.float32)),
        "arange": (kiln.arange(2, 11, 3), np.arange(2, 11, 3, dtype=np.int32)),
        "zeros": (kiln.zeros((2, 2), kiln.int8), np.zeros((2, 2), np.int8)),
        "ones": (kiln.ones(3), np.ones(3, np.float32)),
        "linspace": (kiln.linspace(0.0, 1.0, 5), np.linspace(0, 1, 5, dtype=np.float32)),
        "eye": (kiln.eye(3, 4, k=1), np.eye(3, 4, k=1, dtype=np.float32)),
        "astype": (kiln.astype(x, kiln.float64), a.astype(np.float64)),
        "where": (kiln.where(x > 0, 1, 2), np.where(a > 0, 1, 2).astype(np.int32)),
        "argmax": (kiln.argmax(x, 2), np.argmax(a, 2).astype(np.int32)),
        "argmin": (kiln.argmin(x, 0), np.argmin(a, 0).astype(np.int32)),
        "cumsum": (kiln.cumsum(x, 0, reverse=True), np.cumsum(a[::-1], 0)[::-1]),
        "matmul": (kiln.matmul(x, x.T.transpose(1, 0, 2) if False else kiln.swapaxes(x, 1, 2)), a @ np.swapaxes(a, 1, 2)),
        "var": (kiln.var(x), np.var(a.astype(np.float64)).astype(np.float32)),
        "softmax": (kiln.softmax(x, axis=None), np.exp(a) / np.exp(a).sum()),
        "clip": (kiln.clip(x, hi=0.0), np.minimum(a, 0)),
    }


LAYOUT_CASES = sorted(layout_cases(np.random.default_rng(0)))


@pytest.mark.parametrize("name", LAYOUT_CASES)
def test_layout_and_creation(name, rng):
    got, want = layout_cases(rng)[name]
    assert_matches(got, want, rtol=1e-5)


def test_split_by_indices_and_edge_shapes(rng):
    a = random_array(rng, (7, 3))
    parts = kiln.split(kiln.array(a), [2, 5])
    for g, w in zip(parts, np.split(a, [2, 5])):
        assert_matches(g, w)
    empty = kiln.array(np.zeros((0, 3), np.float32))
    assert_matches(kiln.sum(empty, axis=0), np.zeros(3, np.float32))
    assert_matches(kiln.exp(empty), np.zeros((0, 3), np.float32))


def test_operators_and_python_scalars(rng):
    a = random_array(rng, (3, 4), np.int8, -10, 10)
    b = random_array(rng, (4,), np.int8, 1, 5)
    x, y = kiln.array(a), kiln.array(b)
    assert (2 * x).dtype == kiln.int8                      # a Python int keeps int8
    assert (x * 0.5).dtype == kiln.float32                 # a float makes it floating
    assert (x > 0).dtype == kiln.bool_
    assert (kiln.array(np.float16(1)) + 1.5).dtype == kiln.float16
    assert_matches(x + y, a + b)
    assert_matches(x - 3, a - np.int8(3))
    assert_matches(3 - x, np.int8(3) - a)
    assert_matches(x * y, a * b)
    assert_matches(x // y, a // b)
    assert_matches(x % y, a % b)
    assert_matches(x ** 2, a ** 2)
    assert_matches(-x, -a)
    assert_matches(abs(x), np.abs(a))
    assert_matches(~x, ~a)
    assert_matches(~(x > 0), ~(a > 0))
    assert_matches(x & y, a & b)
    assert_matches(x | 1, a | np.int8(1))
    assert_matches(x ^ y, a ^ b)
    assert_matches(x << 1, a << np.int8(1))
    assert_matches(x >> 1, a >> np.int8(1))
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        assert_matches(getattr(x, op)(y), getattr(a, op)(b))
    f = random_array(rng, (3, 4))
    assert_matches(kiln.array(f) / 2, f / np.float32(2))
    assert_matches(1 / kiln.array(f), np.float32(1) / f)
    assert_matches(kiln.array(f) @ kiln.array(f.T), f @ f.T, rtol=1e-5)
    assert (x == None) is False  # noqa: E711  (not an operand: Python's identity comparison)
