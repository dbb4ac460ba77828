"""kiln.llm on the default model (SmolLM2-135M-Instruct, Q4_1): tokens, greedy generation with a
streaming callback, chat, batched steps, threads. Skipped, saying so, when the model is absent
(scripts/setup fetches it). First, the config of a tiny checkpoint in the tree."""

import os
import threading

import numpy as np
import pytest

import kiln
import kiln.llm

MODEL = kiln.llm.default_model_path()
TINY = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "llm", "golden", "tiny")


def test_tiny_model_config():
    # make_tiny_models.py's Mistral: a sliding window of 5; its Qwen3 has none.
    c = kiln.llm.Model.load(os.path.join(TINY, "mistral-f16")).config
    assert (c.arch, c.sliding_window, c.n_layers, c.vocab_size, c.tied_embeddings) == ("llama", 5, 2, 128, False)
    assert kiln.llm.Model.load(os.path.join(TINY, "qwen3-bf16")).config.sliding_window == 0


def test_compute_dtype_default_and_choice():
    # Unset: float32 on the CPU (bfloat16 on a GPU); given: as given.
    path = os.path.join(TINY, "llama-bf16")
    assert kiln.llm.Model.load(path).dtype == kiln.float32
    assert kiln.llm.Model.load(path, dtype=kiln.bfloat16).dtype == kiln.bfloat16


TOKENS = [16, 32, 97, 56, 52, 14, 82, 77, 33, 100, 27, 111, 4, 43, 100, 16]


def tiny_logits(m):
    """Every position's logits of TOKENS through a fresh session of m, [16, vocab]."""
    return np.asarray(m.step([kiln.llm.Session(m)], [TOKENS], all_positions=True))


def worst_relative(a, b):
    """The largest |a - b| over the rows, each relative to its row's largest |b|."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float((np.abs(a - b) / np.abs(b).max(axis=1, keepdims=True)).max())


@pytest.mark.parametrize("name", ["llama-bf16", "qwen2-bf16", "qwen3-bf16"])
def test_tensor_parallel_equals_one_rank(name):
    # Two ranks on the CPU's threads (docs/distributed.md) give every position's logits within 1e-4
    # of the row's largest of one rank's (tests/llm/test_tensor_parallel.cpp's bound: the
    # row-parallel sums add in another order).
    one = kiln.llm.Model.load(os.path.join(TINY, name))
    two = kiln.llm.Model.load(os.path.join(TINY, name), tensor_parallel=2)
    assert (one.tensor_parallel, two.tensor_parallel, two.config.n_heads) == (1, 2, 4)
    want, got = tiny_logits(one), tiny_logits(two)
    assert got.shape == want.shape == (16, 128)
    assert worst_relative(got, want) <= 1e-4


def test_load_options():
    path = os.path.join(TINY, "llama-mlx-4bit")
    exact = kiln.llm.Model.load(path, activations="exact")
    int8 = kiln.llm.Model.load(path, activations="int8")
    assert (exact.activations, int8.activations) == ("exact", "int8")
    assert kiln.llm.Model.load(path).activations in ("exact", "int8", "int16")  # resolved
    # int8 codes move a quantized model's logits off the exact ones, a little.
    assert 0 < worst_relative(tiny_logits(int8), tiny_logits(exact)) < 0.1

    dense = os.path.join(TINY, "llama-bf16")
    with pytest.raises(kiln.Error, match=r"\[llm\] unknown activations 'int4' \(exact, int8 or int16\)"):
        kiln.llm.Model.load(dense, activations="int4")
    with pytest.raises(kiln.Error, match=r"\[llm\] tensor parallelism needs 1 rank or more, not 0"):
        kiln.llm.Model.load(dense, tensor_parallel=0)
    with pytest.raises(kiln.Error, match=r"llama-bf16: tensor parallelism over 3 ranks: n_heads "
                       r"\(llama.attention.head_count\) = 4 does not divide over 3 ranks"):
        kiln.llm.Model.load(dense, tensor_parallel=3)
    gpus = kiln.cuda_device_count()
    n = max(2, gpus + 1)
    with pytest.raises(kiln.Error, match=rf"\[llm\] tensor parallelism over {n} ranks from cuda:0 needs CUDA "
                       rf"devices cuda:0 to cuda:{n - 1}; {gpus} are present"):
        kiln.llm.Model.load(dense, device=kiln.cuda(0), tensor_parallel=n)


@pytest.fixture(scope="module")
def model():
    if not os.path.exists(MODEL):
        pytest.skip(f"the default model is not at {MODEL} (scripts/setup fetches it)")
    return kiln.llm.Model.load()


@pytest.fixture(scope="module")
def tok(model):
    return kiln.llm.Tokenizer(model)


def test_model_and_tokenizer(model, tok):
    c = model.config
    assert c.arch == "llama" and c.n_layers == 30 and c.vocab_size == 49152 and c.d_model == 576
    assert c.sliding_window == 0
    assert model.path == MODEL and model.device == kiln.cpu
    text = "A kiln is an oven: héllo, 世界!"
    ids = tok.encode(text, add_special=False)
    assert all(isinstance(i, int) for i in ids)
    assert tok.decode(ids) == text
    assert tok.encode("<|im_start|>", add_special=False, parse_special=True) == [tok.find_token("<|im_start|>")]
    assert tok.is_end_of_generation(tok.find_token("<|im_end|>"))


def prompt(tok, text):
    tmpl = kiln.llm.ChatTemplate.recognize(tok.chat_template)
    return tok.encode(tmpl.render([{"role": "user", "content": text}]), True, True)


def test_greedy_generation_streams_its_text(model, tok):
    s = kiln.llm.Session(model)
    pieces = []
    r = kiln.llm.generate(s, tok, prompt(tok, "What is a kiln?"), max_tokens=24, temperature=0,
                          callback=lambda token, text: pieces.append((token, text)))
    assert r.stop_reason in ("max tokens", "stop token")
    assert [t for t, _ in pieces if t >= 0] == r.tokens
    assert "".join(p for _, p in pieces) == r.text
    assert "kiln" in r.text.lower()
    assert r.prompt_tokens + len(r.tokens) - 1 <= s.position <= r.prompt_tokens + len(r.tokens)  # the last sampled token waits for the next step
    # The same greedy tokens again from a fresh session; a callback returning False stops.
    s2 = kiln.llm.Session(model)
    r2 = kiln.llm.generate(s2, tok, prompt(tok, "What is a kiln?"), max_tokens=24, temperature=0,
                           callback=lambda token, text: len(text) < 0)
    assert r2.stop_reason == "callback" and r2.tokens == r.tokens[:1]


def test_errors_in_the_callback_reach_the_caller(model, tok):
    def boom(token, text):
        raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        kiln.llm.generate(kiln.llm.Session(model), tok, prompt(tok, "Hi"), max_tokens=4, temperature=0, callback=boom)


def test_chat_keeps_the_conversation(model):
    chat = kiln.llm.Chat(model, system="You are brief.")
    first = chat.send("Name a color.", max_tokens=12, temperature=0)
    held = chat.session.position
    second = chat.send("Name another one.", max_tokens=12, temperature=0)
    assert [m["role"] for m in chat.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert chat.messages[2]["content"] == first.text and second.text
    assert second.prompt_tokens < held  # only the new turn was prefilled


def test_batched_step_equals_single_sessions(model, tok):
    a, b = prompt(tok, "One"), prompt(tok, "Two")
    n = min(len(a), len(b))
    sa, sb = kiln.llm.Session(model), kiln.llm.Session(model)
    logits = np.asarray(model.step([sa, sb], [a[:n], b[:n]]))
    one = np.asarray(kiln.llm.Session(model).append(a[:n]))
    assert logits.shape == (2, model.config.vocab_size)
    np.testing.assert_allclose(logits[0], one, rtol=1e-3, atol=1e-3)


def test_threads_generate_at_once(model, tok):
    results = {}

    def run(k):
        s = kiln.llm.Session(model)
        results[k] = kiln.llm.generate(s, tok, prompt(tok, "What is a kiln?"), max_tokens=8, temperature=0).tokens

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[0] == results[1] == results[2] and len(results[0]) > 0
