"""kiln.random (Threefry keys) and sorting and selection against NumPy."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kiln
from conftest import assert_matches, random_array


def test_keys_are_deterministic_and_split():
    k = kiln.random.key(42)
    assert k.dtype == kiln.uint32 and k.shape == (2,)
    assert np.asarray(k).tolist() == [0, 42]
    a, b = kiln.random.split(k)
    assert np.asarray(kiln.random.bits((4,), a)).tolist() == np.asarray(kiln.random.bits((4,), a)).tolist()
    assert np.asarray(kiln.random.bits((4,), a)).tolist() != np.asarray(kiln.random.bits((4,), b)).tolist()
    assert kiln.random.split(k, 5).shape == (5, 2)


def test_distributions_have_their_moments():
    k = kiln.random.key(7)
    u = np.asarray(kiln.random.uniform((100000,), k, low=-2.0, high=4.0))
    assert u.min() >= -2 and u.max() < 4 and abs(u.mean() - 1) < 0.03
    n = np.asarray(kiln.random.normal((100000,), k, loc=3.0, scale=2.0))
    assert abs(n.mean() - 3) < 0.03 and abs(n.std() - 2) < 0.03
    p = np.asarray(kiln.random.bernoulli(kiln.full((100000,), 0.3), k))
    assert p.dtype == np.bool_ and abs(p.mean() - 0.3) < 0.01
    logits = np.log(np.array([0.1, 0.2, 0.7], np.float32))
    c = np.asarray(kiln.random.categorical(kiln.broadcast_to(kiln.array(logits), (30000, 3)), k))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / 30000, [0.1, 0.2, 0.7], atol=0.015)
    assert kiln.random.uniform((3,), k, dtype=kiln.float16).dtype == kiln.float16


@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8), data=st.data())
def test_sort_argsort_partition_topk(shape, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = random_array(rng, shape, np.float32, -5, 5)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = kiln.array(a)
    assert_matches(kiln.sort(x, axis), np.sort(a, axis))
    assert_matches(kiln.argsort(x, axis), np.argsort(a, axis, kind="stable").astype(np.int32))
    n = shape[axis]
    kth = data.draw(st.integers(-n, n - 1))
    part = np.asarray(kiln.partition(x, kth, axis))
    np.testing.assert_array_equal(np.take(part, kth, axis), np.take(np.sort(a, axis), kth, axis))
    ap = np.asarray(kiln.argpartition(x, kth, axis))
    np.testing.assert_array_equal(np.take_along_axis(a, ap.astype(np.int64), axis), part)
    k = data.draw(st.integers(0, n))
    values, indices = kiln.topk(x, k, axis)
    want = np.flip(np.sort(a, axis), axis)
    np.testing.assert_array_equal(np.asarray(values), np.take(want, np.arange(k), axis))
    np.testing.assert_array_equal(np.take_along_axis(a, np.asarray(indices).astype(np.int64), axis), np.asarray(values))


def test_nan_sorts_last():
    a = np.array([3.0, np.nan, -1.0, 2.0], np.float32)
    assert_matches(kiln.sort(kiln.array(a)), np.sort(a))
