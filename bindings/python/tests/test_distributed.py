"""kiln.distributed.Group and the collectives over it against NumPy: the group of one rank, and
ranks that are threads of this process (the GIL is released while kiln evaluates)."""

import threading
import time

import numpy as np
import pytest

import kiln
from conftest import random_array


def test_group_of_one_rank_copies(rng):
    g = kiln.distributed.Group()
    assert (g.rank, g.size, g.id, g.device) == (0, 1, 0, None)
    a = random_array(rng, (4, 3), np.float32)
    for x in (kiln.all_sum(a), kiln.all_gather(a, axis=1), kiln.reduce_scatter(a, g)):
        np.testing.assert_array_equal(np.asarray(x), a)


def on_ranks(n, fn):
    """fn(rank) on a thread per rank; their results in rank order."""
    out, errors = [None] * n, []

    def run(r):
        try:
            out[r] = fn(r)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


@pytest.mark.parametrize("n", [2, 3])
def test_thread_ranks_against_numpy(n, rng):
    groups = kiln.distributed.Group.local([kiln.cpu] * n)
    assert [g.rank for g in groups] == list(range(n)) and groups[0] == kiln.distributed.Group.find(groups[0].id)
    xs = [random_array(rng, (2 * n, 3), np.float32) for _ in range(n)]
    total = sum(x.astype(np.float64) for x in xs)
    sums = on_ranks(n, lambda r: np.asarray(kiln.all_sum(xs[r], groups[r])))
    gathered = on_ranks(n, lambda r: np.asarray(kiln.all_gather(xs[r], groups[r], axis=1)))
    scattered = on_ranks(n, lambda r: np.asarray(kiln.reduce_scatter(xs[r], groups[r])))
    for r in range(n):
        np.testing.assert_allclose(sums[r], total, rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(gathered[r], np.concatenate(xs, axis=1))
        np.testing.assert_allclose(scattered[r], total[2 * r:2 * r + 2], rtol=1e-6, atol=1e-5)


def test_errors_name_the_op():
    with pytest.raises(kiln.Error, match=r"\[all_sum\] dtype bool is not supported"):
        kiln.all_sum(np.array([True]))
    with pytest.raises(kiln.Error, match=r"\[reduce_scatter\] axis 0 of length 3 does not divide over 2 ranks"):
        kiln.reduce_scatter(np.zeros(3, np.float32), kiln.distributed.Group.local([kiln.cpu, kiln.cpu])[0])


def test_a_failed_rank_aborts_the_group():
    groups = kiln.distributed.Group.local([kiln.cpu, kiln.cpu])

    def rank(r):
        if r == 1:
            time.sleep(0.2)  # rank 0 is waiting in its all_sum by now
            groups[1].abort("rank 1 failed")
            return None
        with pytest.raises(kiln.Error, match=r"\[all_sum\] the group was aborted: rank 1 failed"):
            np.asarray(kiln.all_sum(np.ones(4, np.float32), groups[0]))
        return None

    on_ranks(2, rank)
    assert groups[0].aborted == groups[1].aborted == "rank 1 failed"
    with pytest.raises(kiln.Error, match=r"\[all_gather\] the group was aborted"):
        np.asarray(kiln.all_gather(np.ones(2, np.float32), groups[1]))
