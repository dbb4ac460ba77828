"""DLPack both ways on the CPU, without copies. (CUDA: kiln.from_dlpack of a GPU array is
written for CUDA builds but cannot be tested on a machine without a GPU.)"""

import numpy as np
import pytest

import kiln
from conftest import assert_matches, random_array


def test_numpy_reads_a_kiln_array_through_dlpack(rng):
    x = kiln.array(random_array(rng, (4, 6)))
    assert x.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(x)
    b = np.from_dlpack(x)
    assert np.shares_memory(a, b)  # both over kiln's buffer
    np.testing.assert_array_equal(a, np.asarray(x))
    t = np.from_dlpack(x.T)  # strided
    np.testing.assert_array_equal(t, np.asarray(x).T)


def test_kiln_reads_numpy_through_dlpack_in_place(rng):
    a = random_array(rng, (5, 3))
    x = kiln.from_dlpack(a)
    assert_matches(x * 2.0, a * np.float32(2))
    a[0, 0] = 50.0  # shared memory: kiln sees the change
    assert np.asarray(x)[0, 0] == 50.0
    assert np.shares_memory(np.asarray(x), a)


def test_dtypes_through_dlpack(rng):
    for dt in (np.int8, np.uint16, np.int64, np.float16, np.float64, np.bool_):
        a = random_array(rng, (3, 2), dt)
        assert_matches(kiln.from_dlpack(a), a)
        np.testing.assert_array_equal(np.from_dlpack(kiln.array(a)), a)


def test_bfloat16_capsule_names_its_type():
    # NumPy has no bfloat16, so it refuses the capsule; the capsule itself says bfloat16.
    x = kiln.ones((2,), kiln.bfloat16)
    with pytest.raises((BufferError, TypeError, ValueError, RuntimeError)):
        np.from_dlpack(x)
