"""The Python lines of the README's tour, run as written, with the results the README states."""

import os
import threading

import numpy as np
import pytest

import kiln


def test_arrays():
    a = kiln.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])  # copies; Python floats are float32
    r = kiln.arange(0.0, 6.0)                               # float32: 0 1 2 3 4 5
    z = kiln.zeros((2, 3), kiln.int32)
    v = np.asarray(a)                                       # a read-only view of kiln's buffer
    assert a.shape == (2, 3) and a.dtype == kiln.float32 and z.nbytes == 24 and r.size == 6
    assert not v.flags.writeable and v.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_lazy_ops_and_eval():
    a = kiln.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    r = kiln.arange(0.0, 6.0)
    b = kiln.exp(a) * 2 + 1                # builds nodes; computes nothing yet
    c = r.reshape(2, 3) - b
    assert not c.is_evaluated()
    kiln.eval(c)                           # computes, with the GIL released
    first = (b + c)[0, 0].item()           # 0.0
    assert first == 0.0


def test_indexing_and_assignment():
    x = kiln.arange(12).reshape(3, 4)
    assert x[1:3, ::2].tolist() == [[4, 6], [8, 10]]
    assert x[..., None].shape == (3, 4, 1)
    assert x[kiln.array([2, 0])].tolist() == [[8, 9, 10, 11], [0, 1, 2, 3]]
    x[0, :2] = 100                         # slice_update; x now names the new array
    assert x[0].tolist() == [100, 100, 2, 3]


def test_compile():
    @kiln.compile
    def gelu_ish(x, y):
        return x * kiln.sigmoid(1.702 * x) + y

    x1, y1 = kiln.arange(0.0, 8.0), kiln.ones(8)
    kiln.reset_stats()
    o1 = gelu_ish(x1, y1)                  # traces, fuses, compiles
    o2 = gelu_ish(y1, x1)                  # same signature: replays
    kiln.eval(o1, o2)
    assert kiln.stats()["traces"] == 1 and kiln.stats()["cache_hits"] == 1


def test_threads():
    f = kiln.compile(lambda x: kiln.exp(x) * 2)
    x = kiln.arange(0.0, 1000.0) / 1000
    results = [None] * 4

    def work(k):
        results[k] = f(x) * k
        results[k].eval()                  # the GIL is released: threads run at once

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(np.asarray(results[3]), np.exp(np.arange(1000) / 1000) * 6, rtol=1e-5)


@pytest.mark.skipif(not os.path.exists(kiln.llm.default_model_path()), reason="the default model is absent (scripts/setup fetches it)")
def test_language_model():
    import kiln.llm

    model = kiln.llm.Model.load()          # the default model, mapped; shared by every session and thread
    chat = kiln.llm.Chat(model)            # one conversation through the model's chat template
    pieces = []
    reply = chat.send("What is a kiln?", max_tokens=16, temperature=0,
                      callback=lambda token, text: pieces.append(text))  # print(text, end="") streams it
    assert "".join(pieces) == reply.text and "kiln" in reply.text.lower()
