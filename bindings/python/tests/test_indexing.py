"""Indexing and indexed assignment against NumPy, on random index expressions."""

import copy

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kiln
from conftest import assert_matches, random_array


@st.composite
def index_for(draw, shape):
    """A basic index (ints, slices, ..., None) of NumPy's grammar for an array of shape."""
    items = []
    axis = 0
    ellipsis = False
    while axis < len(shape) and draw(st.booleans()):
        kind = draw(st.sampled_from(["int", "slice", "slice", "none", "ellipsis"]))
        n = shape[axis]
        if kind == "int" and n > 0:
            items.append(draw(st.integers(-n, n - 1)))
            axis += 1
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0)))
            items.append(slice(draw(bound), draw(bound), step))
            axis += 1
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis" and not ellipsis:
            items.append(Ellipsis)
            ellipsis = True
            axis = len(shape)  # the rest is taken whole
    return tuple(items) if draw(st.booleans()) or len(items) != 1 else items[0]


@given(data=st.data(), shape=st.lists(st.integers(0, 5), min_size=1, max_size=4).map(tuple))
def test_getitem_matches_numpy(data, shape):
    a = random_array(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), shape)
    key = data.draw(index_for(shape))
    assert_matches(kiln.array(a)[key], a[key])


@given(data=st.data(), shape=st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple))
def test_setitem_matches_numpy(data, shape):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a = random_array(rng, shape)
    key = data.draw(index_for(shape))
    region = a[key].shape
    value = random_array(rng, region[data.draw(st.integers(0, len(region))):])  # broadcasts
    x = kiln.array(a)
    old = copy.copy(x)  # another handle to the same array
    x[key] = kiln.array(value)
    want = a.copy()
    want[key] = value
    assert_matches(x, want)
    assert_matches(old, a)  # other handles keep the old array


def test_examples_from_the_issue(rng):
    a = random_array(rng, (5, 6, 4))
    x = kiln.array(a)
    assert_matches(x[1:3, ::2], a[1:3, ::2])
    assert_matches(x[..., None], a[..., None])
    idx = np.array([4, 0, 2, 2], dtype=np.int32)
    assert_matches(x[idx], a[idx])
    assert_matches(x[kiln.array(idx)], a[idx])
    assert_matches(x[[1, 3]], a[[1, 3]])
    assert_matches(x[:, idx[:2, None]], a[:, idx[:2, None]])
    assert_matches(x[1, idx], a[1, idx])          # integers next to the array: in place
    assert_matches(x[idx, :, 0], a[idx, :, 0])    # apart: the array's dimensions first
    assert_matches(x[:, idx[:3], 2], a[:, idx[:3], 2])
    assert_matches(x[np.int64(2)], a[2])
    assert_matches(x[-1, -2:, ::-1], a[-1, -2:, ::-1])


def test_assignment_examples(rng):
    a = random_array(rng, (4, 5))
    x = kiln.array(a)
    x[1:3, ::2] = 7.0
    x[0] = kiln.arange(5).astype(kiln.float32)
    x[-1, ::-1] = kiln.array(np.arange(5, dtype=np.float32))
    want = a.copy()
    want[1:3, ::2] = 7
    want[0] = np.arange(5)
    want[-1, ::-1] = np.arange(5)
    assert_matches(x, want)
    i = kiln.array(np.arange(6, dtype=np.int32))
    i[2:4] = 2.9  # cast to the array's dtype, as NumPy does
    assert_matches(i, np.array([0, 1, 2, 2, 4, 5], np.int32))


def test_index_errors():
    x = kiln.zeros((3, 4))
    with pytest.raises(IndexError):
        x[3]
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(kiln.Error, match="boolean mask"):
        x[x > 0]
    with pytest.raises(kiln.Error, match="scatter"):
        x[kiln.array([0, 1])] = 1.0
    with pytest.raises(IndexError):
        x["a"]
