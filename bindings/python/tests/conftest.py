"""Shared helpers: random inputs of every dtype, and NumPy references to compare against."""

import zlib

import numpy as np
import pytest
from hypothesis import settings

import kiln

settings.register_profile("kiln", max_examples=30, deadline=None, derandomize=True)
settings.load_profile("kiln")

# kiln dtypes with a NumPy twin (bfloat16 has none: its tests convert through float32).
NUMPY_DTYPES = {
    kiln.bool_: np.bool_,
    kiln.uint8: np.uint8,
    kiln.uint16: np.uint16,
    kiln.uint32: np.uint32,
    kiln.uint64: np.uint64,
    kiln.int8: np.int8,
    kiln.int16: np.int16,
    kiln.int32: np.int32,
    kiln.int64: np.int64,
    kiln.float16: np.float16,
    kiln.float32: np.float32,
    kiln.float64: np.float64,
}


def random_array(rng, shape, dtype=np.float32, low=-3.0, high=3.0):
    """Random data of a NumPy dtype: never zeros, never a constant."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo = max(int(low), np.iinfo(dtype).min)
        hi = min(int(high), np.iinfo(dtype).max)
        return rng.integers(lo, hi + 1, size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


def tolerance(dtype):
    dtype = np.dtype(dtype)
    return {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-12}.get(dtype, 0)


def assert_matches(got, want, rtol=None, atol=None):
    """got (a kiln array) equals want (NumPy) in shape, dtype and values."""
    assert isinstance(got, kiln.Array), type(got)
    g = np.asarray(got)
    want = np.asarray(want)
    assert g.shape == want.shape, (g.shape, want.shape)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    if rtol is None:
        rtol = tolerance(want.dtype) * 4
    if atol is None:
        atol = rtol
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(g, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, want)


@pytest.fixture
def rng(request):
    # One stream per test, fixed: a failure reproduces.
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))
