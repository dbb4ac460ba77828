"""Arrays from and to NumPy: dtypes, copies and views, properties, evaluation, errors."""

import gc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import kiln
from conftest import NUMPY_DTYPES, assert_matches, random_array

numpy_dtypes = st.sampled_from(sorted(NUMPY_DTYPES.values(), key=lambda d: np.dtype(d).num))


@given(dtype=numpy_dtypes, shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5), seed=st.integers(0, 2**32 - 1))
def test_round_trip_every_dtype_and_shape(dtype, shape, seed):
    a = random_array(np.random.default_rng(seed), shape, dtype)
    for x in (kiln.array(a), kiln.asarray(a)):
        assert x.shape == a.shape
        assert x.dtype == next(k for k, v in NUMPY_DTYPES.items() if v == dtype)
        assert x.ndim == a.ndim and x.size == a.size and x.nbytes == a.nbytes
        assert_matches(x, a)


def test_array_copies_and_asarray_shares(rng):
    a = random_array(rng, (4, 5))
    copied, shared = kiln.array(a), kiln.asarray(a)
    before = a.copy()
    a[0, 0] = 100.0
    assert_matches(copied, before)
    assert np.asarray(shared)[0, 0] == 100.0  # read in place


def test_asarray_views_strided_numpy_without_a_copy(rng):
    a = random_array(rng, (6, 8))
    for view in (a[::2, 1::3], a.T, a[::-1, ::-2], np.broadcast_to(a[:1], (3, 8))):
        x = kiln.asarray(view)
        assert_matches(x, view)
        assert_matches(x * 2.0, view * np.float32(2.0))


def test_numpy_view_of_a_kiln_array_is_read_only_and_shares_its_buffer(rng):
    x = kiln.array(random_array(rng, (3, 4)))
    v1, v2 = np.asarray(x), np.asarray(x)
    assert not v1.flags.writeable
    assert np.shares_memory(v1, v2)
    with pytest.raises(ValueError):
        v1[0, 0] = 1
    t = np.asarray(x.T)  # a transposed view keeps its strides
    assert np.shares_memory(t, v1)
    np.testing.assert_array_equal(t, v1.T)


def test_numpy_view_outlives_the_array(rng):
    a = random_array(rng, (1000,))
    v = np.asarray(kiln.array(a) + 1.0)
    gc.collect()
    np.testing.assert_allclose(v, a + np.float32(1), rtol=1e-6)


def test_buffer_protocol(rng):
    a = random_array(rng, (3, 5), np.int16, -100, 100)
    x = kiln.array(a)
    m = memoryview(x)
    assert m.format == "h" and m.shape == (3, 5) and m.readonly
    np.testing.assert_array_equal(np.frombuffer(m.tobytes(), np.int16).reshape(3, 5), a)
    t = memoryview(x.T)  # strided
    assert t.shape == (5, 3)
    np.testing.assert_array_equal(np.array(t), a.T)
    with pytest.raises(BufferError):
        memoryview(kiln.zeros((2,), kiln.bfloat16))


def test_bfloat16_converts_to_float32_or_shows_its_bits(rng):
    a = random_array(rng, (4, 7))
    b = kiln.array(a, dtype=kiln.bfloat16)
    assert b.dtype == kiln.bfloat16 and kiln.bfloat16.itemsize == 2
    f = np.asarray(b)
    assert f.dtype == np.float32
    # bfloat16 keeps float32's top 16 bits, rounded to nearest even.
    bits = a.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(b.numpy(bfloat16_bits=True), rounded)
    np.testing.assert_array_equal(f, (rounded.astype(np.uint32) << 16).view(np.float32))
    raw = b.numpy(bfloat16_bits=True)
    assert raw.dtype == np.uint16 and not raw.flags.writeable


def test_python_scalars_and_lists_take_kiln_defaults():
    assert kiln.array(1.5).dtype == kiln.float32
    assert kiln.array(3).dtype == kiln.int32
    assert kiln.array(2**40).dtype == kiln.int64
    assert kiln.array(True).dtype == kiln.bool_
    assert kiln.array([[1.0, 2.0], [3.0, 4.0]]).dtype == kiln.float32
    assert kiln.array([1, 2, 3]).dtype == kiln.int32
    assert kiln.array([1, 2**40]).dtype == kiln.int64
    assert kiln.array(np.arange(3, dtype=np.float64)).dtype == kiln.float64  # NumPy keeps its dtype
    assert kiln.array([1, 2], dtype=kiln.float16).dtype == kiln.float16
    assert kiln.array([]).shape == (0,)


def test_properties_item_tolist_and_repr(rng):
    a = random_array(rng, (2, 3))
    x = kiln.array(a)
    assert x.device == kiln.cpu and str(x.device) == "cpu"
    assert len(x) == 2 and x.itemsize == 4
    assert x.tolist() == a.tolist()
    assert kiln.array(np.int64(-7)).item() == -7
    assert kiln.array(np.uint64(2**63 + 5)).item() == 2**63 + 5
    assert kiln.array(True).item() is True
    assert float(kiln.array(2.5)) == 2.5 and int(kiln.array(7)) == 7
    r = repr(kiln.array([[1, 2], [3, 4]]))
    assert r.startswith("array([[1, 2],") and r.endswith("dtype=int32)")
    with pytest.raises(kiln.Error, match=r"\[bool\]"):
        bool(x)
    with pytest.raises(TypeError):
        len(kiln.array(1.0))


def test_eval_and_async_eval(rng):
    a, b = random_array(rng, (50,)), random_array(rng, (50,))
    x, y = kiln.array(a), kiln.array(b)
    s, p = kiln.exp(x) + y, x * y
    assert not s.is_evaluated()
    kiln.eval([s, {"p": p}])
    assert s.is_evaluated() and p.is_evaluated()
    q = kiln.sin(x) - y
    kiln.async_eval(q)
    assert_matches(q, np.sin(a) - b)


def test_errors_are_python_exceptions_with_kilns_message():
    x = kiln.array(np.arange(6, dtype=np.float32))
    with pytest.raises(kiln.Error, match=r"\[reshape\] cannot reshape array of size 6 into shape \(4,2\)"):
        kiln.reshape(x, (4, 2))
    assert issubclass(kiln.Error, ValueError)
    with pytest.raises(TypeError):
        kiln.exp("text")


def test_devices():
    assert kiln.default_device() == kiln.cpu
    assert isinstance(kiln.cuda_available(), bool)
    if not kiln.cuda_available():
        with pytest.raises(kiln.Error):
            kiln.eval(kiln.to(kiln.ones((2,)), kiln.cuda(0)))
