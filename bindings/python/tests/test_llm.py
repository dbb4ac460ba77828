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
