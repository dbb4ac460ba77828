#!/usr/bin/env python3
"""Makes tests/llm/golden/tokenizer.json, the data test_tokenizer_golden checks kiln's tokenizer with.

It holds test strings (English, code, emoji, CJK, accents, other scripts, runs of whitespace and
digits, special-token text, random mixes), two small vocabularies trained here (a byte-level BPE
and a SentencePiece BPE with byte fallback), and for each tokenizer configuration the ids that
llama.cpp gives, which kiln must reproduce. Each configuration is also run through Hugging Face
`tokenizers` (built as the model family's tokenizer.json builds it) and, for the default model and
the SentencePiece vocabulary, through transformers' GGUF loader and sentencepiece itself; where a
reference disagrees with llama.cpp the strings are listed under "disagreements".

Configurations: the default model SmolLM2-135M-Instruct (smollm; ids only, the file is not
committed), and the small BPE vocabulary under each pre-tokenizer name kiln knows, and the
SentencePiece vocabulary. The small vocabularies go in the data, so CI needs no model file.

Needs (not in CI): pip install gguf tokenizers transformers sentencepiece protobuf jinja2 llama-cpp-python
Run:   python tests/llm/golden/make_tokenizer_golden.py [--model PATH] [--out PATH]
"""

import argparse
import json
import os
import random
import sys
import tempfile
from importlib.metadata import version

import gguf
import llama_cpp
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODEL = os.path.expanduser("~/.cache/kiln-models/SmolLM2-135M-Instruct.Q4_1.gguf")

CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
USER_DEFINED = ["<tool_call>"]

# Pre-tokenizer names kiln knows, one per family (llama.cpp gives each family one set of expressions).
# The first four on every fourth string, the others (fewer ids to commit) on every twelfth.
PRE_NAMES = ["gpt-2", "llama-bpe", "qwen2", "smollm", "default", "falcon", "deepseek-coder", "deepseek-v3", "dbrx"]

# How each model family's tokenizer.json pre-tokenizes (Hugging Face side).
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def hf_pre_tokenizer(pre):
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)
    if pre == "gpt-2":
        return None, pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre == "smollm":
        return None, pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                              pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if pre == "llama-bpe":
        return None, pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_REGEX), "isolated"), byte_level])
    if pre == "qwen2":
        return normalizers.NFC(), pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_REGEX), "isolated"),
                                                           byte_level])
    return None, None


# ---------------------------------------------------------------------------------------------
# Test strings


def make_strings(rng):
    words = ("the quick brown fox jumps over lazy dog time people year way day thing man world life hand part child "
             "eye woman place work week case point government company number group problem fact be have do say get "
             "make go know take see come think look want give use find tell ask seem feel try leave call good new "
             "first last long great little own other old right big high different small large next early young "
             "important few public bad same able").split()
    contractions = ["don't", "it's", "I'M", "we'll", "THEY'RE", "she'd", "you've", "can't", "O'Neil", "rock'n'roll",
                    "'tis", "y'all", "I'D", "We'Ll"]
    fixed = [
        "", " ", "a", "Hello, world!", "Hello world's  123", "The year 2024 had 366 days.",
        "It's 3:45pm; the temperature is -12.5°C (9.5°F).", "Email: someone@example.com, URL: https://example.org/a?b=c&d=e",
        "  leading spaces", "trailing spaces   ", "\ttab\tseparated\tvalues\n", "line one\nline two\r\nline three\r",
        "\n\n\n", "   \n   \n", " \t \n \r\n ", "a  b   c    d     e", "x" * 50, "1" * 40, "12345678901234567890",
        "3.14159 2.71828 1,000,000 1.000.000,00 0x1F 1e-10 -42 +7", "$100 €200 £300 ¥400 ₹500",
        "naïve café résumé Ångström Zürich São Paulo Dvořák Łódź façade", "cafe\u0301 nai\u0308ve A\u030angstro\u0308m",
        "Привет, мир! Как дела?", "Γειά σου κόσμε", "مرحبا بالعالم ١٢٣", "שלום עולם", "नमस्ते दुनिया",
        "สวัสดีชาวโลก", "გამარჯობა", "Բարեւ աշխարհ", "中文测试：你好，世界！", "日本語のテキスト、カタカナとひらがな。",
        "한국어 문장입니다.", "混合mixed文字text123数字", "全角：ＡＢＣ１２３！", "😀😃😄😁", "👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🤖",
        "emoji🙂inside😉words", "①②③ ½ ¾ ² ³ Ⅻ ⅷ", "٠١٢٣٤٥٦٧٨٩ ०१२३", "a\u00a0b\u00a0\u00a0c", "a\u2003b\u3000c",
        "line\u2028sep\u2029para", "next\u0085line", "mongolian\u180evowel", "zero\u200bwidth\u200cjoin\u200d",
        "\x00\x01\x02\x1b[31mred\x1b[0m\x7f", "private\ue000use\U000f0000", "unassigned\u0378\u0379",
        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "a<|im_end|>b",
        "<|im_start|><|im_start|>", "<|im_sta", "< |im_end| >", "<|im_end|><|endoftext|>text",
        "<tool_call>{\"name\": \"f\"}</tool_call>", "x<tool_call>y", "<s> hi </s>", "<unk>", "<0x41>",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
        "def f(x):\n    return x * 2\n", "int main() {\n\treturn 0;\n}\n", "{\"key\": [1, 2, 3], \"b\": null}",
        "for i in range(10):\n        print(i)\n\n\n", "if (a && b || !c) { x += 1; }", "SELECT * FROM t WHERE id=42;",
        "   indented\n\tmixed\n  \t  both", "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "''''", "...", "!!!???",
        "—–-‐ “quotes” ‘single’ «guillemets» „low”", "©®™ ±×÷ ≠≤≥ ∞∑∏ √∫ → ⇒ ♥♦", "ﬁ ﬂ ﬀ Ǆ ǅ ǆ ß ẞ",
    ]
    strings = list(fixed) + contractions

    for _ in range(500):  # English-like sentences
        n = rng.randint(1, 18)
        s = " ".join(rng.choice(words + contractions) for _ in range(n))
        if rng.random() < 0.5:
            s = s.capitalize()
        s += rng.choice([".", "!", "?", ",", "", "...", ":", ";", "\n", " "])
        strings.append(s)

    code_bits = ["def ", "class ", "return ", "if ", "else:", "for ", "while ", "(", ")", "[", "]", "{", "}", ":", ";",
                 " = ", " == ", " += ", "->", "=>", "::", "//", "/*", "*/", "#", "\"", "'", "`", "\\n", "\\t", "0x",
                 "self.", "std::", "i++", "x_1", "camelCase", "snake_case", "CONSTANT", "__init__", "    ", "\t",
                 "\n", "\n    ", "\n\t\t", "  ", "42", "3.0f", "<T>", "&&", "||", "!=", "<=", ">=", "%", "^", "~", "|",
                 "@decorator", "$var", "%d", "{0}", "f\"{x}\""]
    for _ in range(300):
        strings.append("".join(rng.choice(code_bits) for _ in range(rng.randint(2, 30))))

    pools = {
        "emoji": "😀😂🥲🤖👍🏽🏿👨‍👩‍👧🇫🇷🇯🇵❤️✨🔥💯🎉🙏🌍🍕🚀",
        "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么"
               "ひらがなカタカナ漢字テスト한국어문장입니다",
        "accents": "áéíóúàèìòùâêîôûäëïöüÿçñãõåæøœßłđčšžřůőűțșğışÁÉÍÓÚÀÈÌÒÙÂÊÎÔÛÄËÏÖÜÇÑ\u0301\u0300\u0308\u0327",
        "scripts": "абвгдежзийклмнопрстуфхцчшщъыьэюяαβγδεζηθικλμνξοπρστυφχψωابتثجحخدذرسشאבגדהוזחטיאकखगघ"
                   "กขคงจฉชซ",
        "space": " \t\n\r\u00a0\u2003\u3000\u2028\u0085\u180e\u200b\u000b\u000c",
        "digits": "0123456789٠١٢٣०१२३１２３²³½Ⅻ",
        "punct": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»—–…·•°§¶",
        "ascii": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "control": "\x00\x01\x07\x08\x1b\x1f\x7f",
    }
    names = list(pools)
    for _ in range(900):  # random mixes: runs from a few pools
        parts = []
        for _ in range(rng.randint(1, 6)):
            pool = pools[rng.choice(names)]
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
        strings.append("".join(parts))
    for _ in range(150):  # whitespace runs between words
        strings.append("".join(rng.choice(["a", "b", "word", "1", "."]) + rng.choice(pools["space"]) *
                               rng.randint(1, 6) for _ in range(rng.randint(1, 5))))
    for _ in range(150):  # digit runs
        strings.append("".join(rng.choice(["", " ", "x", "-", ".", ","]) + "".join(rng.choice("0123456789") for _ in
                               range(rng.randint(1, 12))) for _ in range(rng.randint(1, 4))))
    for _ in range(60):  # chat-like text with special tokens
        role = rng.choice(["user", "assistant", "system"])
        body = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        strings.append(rng.choice(["", "\n"]) + f"<|im_start|>{role}\n{body}<|im_end|>" + rng.choice(["", "\n", " "]))
    # A few long ones.
    strings.append(" ".join(rng.choice(words) for _ in range(500)))
    strings.append("".join(rng.choice(code_bits) for _ in range(600)))
    strings.append(" " * 1000 + "x" + "\n" * 300)
    strings.append("9" * 1000)
    strings.append("a" * 2000)
    strings.append("".join(rng.choice(pools["cjk"] + pools["emoji"]) for _ in range(800)))

    seen, out = set(), []
    for s in strings:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


# ---------------------------------------------------------------------------------------------
# Small vocabularies


def train_bpe(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=CONTROL, show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab] + USER_DEFINED
    assert [i for _, i in vocab] == list(range(len(vocab)))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [3 if t in CONTROL else 4 if t in USER_DEFINED else 1 for t in tokens]
    return {"model": "gpt2", "tokens": tokens, "token_types": types, "merges": merges,
            "bos_id": tokens.index("<|endoftext|>"), "eos_id": tokens.index("<|endoftext|>")}


def train_spm(corpus, workdir):
    prefix = os.path.join(workdir, "spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus), model_prefix=prefix, vocab_size=900, model_type="bpe", byte_fallback=True,
        character_coverage=0.995, split_digits=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, user_defined_symbols=["<tool_call>"],
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2, num_threads=1)
    proto = sentencepiece_model_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    tokens = [p.piece for p in proto.pieces]
    return prefix + ".model", {"model": "llama", "tokens": tokens, "scores": [p.score for p in proto.pieces],
                               "token_types": [int(p.type) for p in proto.pieces], "bos_id": 1, "eos_id": 2,
                               "unk_id": 0}


def write_gguf(path, vocab, pre=None):
    """A vocabulary-only GGUF that llama.cpp loads (it needs the llama hyperparameters)."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(vocab["model"])
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["token_types"])
    if "scores" in vocab:
        w.add_token_scores(vocab["scores"])
    if "merges" in vocab:
        w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(vocab["bos_id"])
    w.add_eos_token_id(vocab["eos_id"])
    if "unk_id" in vocab:
        w.add_unk_token_id(vocab["unk_id"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_vocab(path):
    """tokens, types and merges of a GGUF file, for building the Hugging Face side."""
    r = gguf.GGUFReader(path)
    get = lambda k: r.fields[k].contents() if k in r.fields else None
    return {"tokens": get("tokenizer.ggml.tokens"), "token_types": get("tokenizer.ggml.token_type"),
            "merges": get("tokenizer.ggml.merges"), "pre": get("tokenizer.ggml.pre")}


def transformers_gguf(path):
    """The tokenizer transformers builds for a GGUF file (AutoTokenizer.from_pretrained(..., gguf_file=...)),
    through its GGUF tokenizer builder; the metadata is read here, as transformers' reader needs torch."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer
    r = gguf.GGUFReader(path)
    fields = {k: f.contents() for k, f in r.fields.items()}
    tokenizer_dict = {name: fields[f"tokenizer.{key}"] for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
                      if f"tokenizer.{key}" in fields}
    backend, _ = convert_gguf_tokenizer(fields["general.architecture"], tokenizer_dict)
    add_bos = fields.get("tokenizer.ggml.add_bos_token", fields["tokenizer.ggml.model"] == "llama")
    return backend, fields.get("tokenizer.ggml.bos_token_id") if add_bos else None


def hf_bpe(vocab, pre):
    normalizer, pre_tok = hf_pre_tokenizer(pre)
    if pre_tok is None:
        return None
    tokens, types = vocab["tokens"], vocab["token_types"]
    merges = [tuple(m.split(" ", 1)) for m in vocab["merges"]]
    ids = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=ids, merges=merges, ignore_merges=(pre == "llama-bpe")))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tok
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])
    return tok


# ---------------------------------------------------------------------------------------------
# Chat templates, rendered by Jinja as transformers' apply_chat_template renders them

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

# Written after Qwen2.5's template, its tool-calling part left out.
QWEN25_STYLE_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
{%- else %}
    {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"},
     {"role": "user", "content": "  Tell me a joke.\n"}],
    [{"role": "user", "content": "多语言 🙂 <b>test</b>\n\n\tend"}],
]


def chat_cases(templates):
    import jinja2
    import jinja2.sandbox
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    cases = []
    for name, source in templates:
        template = env.from_string(source)
        for messages in CONVERSATIONS:
            for generation_prompt in (True, False):
                text = template.render(messages=messages, add_generation_prompt=generation_prompt,
                                       bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
                # kiln leaves BOS to the tokenizer (add_special), as llama.cpp's chat code does.
                text = text.removeprefix("<|begin_of_text|>")
                cases.append({"template": name, "messages": messages, "add_generation_prompt": generation_prompt,
                              "text": text})
    return cases


# ---------------------------------------------------------------------------------------------
# References


class LlamaCpp:
    def __init__(self, path):
        self.llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)

    def __call__(self, text, add_special, parse_special):
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)


def hf_ids(tok, text, add_special, parse_special, bos):
    tok.encode_special_tokens = not parse_special
    ids = tok.encode(text, add_special_tokens=False).ids
    return ([bos] if add_special and bos is not None else []) + ids


def compare(name, strings, expected, other, label, disagreements, limit=6):
    bad = [i for i, s in enumerate(strings) if other(s) != expected[i]]
    print(f"  {label}: {len(strings) - len(bad)}/{len(strings)} agree with llama.cpp", file=sys.stderr)
    if bad:
        short = sorted(bad, key=lambda i: len(strings[i]))[:limit]  # the shortest examples say the most
        disagreements.append({"config": name, "reference": label, "count": len(bad), "of": len(strings),
                              "examples": [{"text": strings[i], "llama.cpp": expected[i], label: other(strings[i])}
                                           for i in short]})
    return len(bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=os.path.join(HERE, "tokenizer.json"))
    args = ap.parse_args()

    rng = random.Random(27)
    strings = make_strings(rng)
    work = tempfile.mkdtemp(prefix="kiln-tok-")
    corpus = strings * 3 + [" ".join(rng.choice(strings[:200]) for _ in range(20)) for _ in range(300)]
    bpe = train_bpe(corpus)
    spm_model, spm_vocab = train_spm(corpus, work)
    print(f"{len(strings)} strings; BPE vocabulary {len(bpe['tokens'])} tokens, SentencePiece {len(spm_vocab['tokens'])}",
          file=sys.stderr)

    # Strings whose special-token handling matters get both modes; all get the plain one.
    markers = CONTROL + USER_DEFINED + ["<s>", "</s>", "<unk>", "<|"]
    special_like = [i for i, s in enumerate(strings) if any(m in s for m in markers)]
    configs, disagreements = [], []

    def run(name, path, vocab_key, pre, hf_tokenizers, subset=None):
        llama = LlamaCpp(path)
        idx = list(range(len(strings))) if subset is None else subset
        texts = [strings[i] for i in idx]
        plain = [llama(s, True, False) for s in texts]
        special = [llama(strings[i], False, True) for i in special_like]
        for label, tok_fn, *plain_only in hf_tokenizers:
            compare(name, texts, plain, lambda s: tok_fn(s, True, False), label, disagreements)
            if not plain_only:
                compare(name + " (parse_special)", [strings[i] for i in special_like], special,
                        lambda s: tok_fn(s, False, True), label, disagreements)
        configs.append({"name": name, "vocab": vocab_key, "pre": pre, "strings": idx, "plain": plain,
                        "special_strings": special_like, "special": special})

    # The default model.
    if os.path.exists(args.model):
        print(f"smollm2 ({args.model})", file=sys.stderr)
        v = gguf_vocab(args.model)
        hf = hf_bpe(v, "smollm")
        refs = [("tokenizers", lambda s, a, p: hf_ids(hf, s, a, p, None))]
        tf, tf_bos = transformers_gguf(args.model)
        refs.append(("transformers-gguf", lambda s, a, p: hf_ids(tf, s, a, p, tf_bos)))
        run("smollm2", args.model, "SmolLM2-135M-Instruct.Q4_1.gguf", None, refs)
    else:
        print(f"no {args.model}: the default model's ids are not made", file=sys.stderr)

    # The small BPE vocabulary under each pre-tokenizer.
    for k, pre in enumerate(PRE_NAMES):
        subset = list(range(0, len(strings), 4 if k < 4 else 12))
        print(f"bpe/{pre}", file=sys.stderr)
        path = os.path.join(work, f"bpe-{pre}.gguf")
        write_gguf(path, bpe, pre)
        hf = hf_bpe(bpe, pre)
        bos = bpe["bos_id"] if pre == "llama-bpe" else None
        refs = [("tokenizers", lambda s, a, p, hf=hf, bos=bos: hf_ids(hf, s, a, p, bos))] if hf else []
        run(f"bpe/{pre}", path, "bpe", pre, refs, subset)

    # The SentencePiece vocabulary: llama.cpp, sentencepiece itself, and transformers' GGUF loader.
    print("spm", file=sys.stderr)
    path = os.path.join(work, "spm.gguf")
    write_gguf(path, spm_vocab)
    sp = spm.SentencePieceProcessor(model_file=spm_model)
    # sentencepiece never parses control tokens out of text: compared without parse_special only.
    refs = [("sentencepiece", lambda s, a, p: ([1] if a else []) + sp.encode(s), "plain only")]
    tf, tf_bos = transformers_gguf(path)
    refs.append(("transformers-gguf", lambda s, a, p: hf_ids(tf, s, a, p, tf_bos)))
    run("spm", path, "spm", None, refs, list(range(0, len(strings), 3)))

    templates = [("llama3", LLAMA3_TEMPLATE), ("qwen2.5-style", QWEN25_STYLE_TEMPLATE)]
    if os.path.exists(args.model):
        templates.insert(0, ("smollm2", gguf.GGUFReader(args.model).fields["tokenizer.chat_template"].contents()))
    chats = chat_cases(templates)

    import jinja2
    import tokenizers
    import transformers
    data = {
        "made_by": "tests/llm/golden/make_tokenizer_golden.py",
        "references": {"llama.cpp": f"as vendored by llama-cpp-python {llama_cpp.__version__}",
                       "tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
                       "sentencepiece": version("sentencepiece"), "gguf": version("gguf"),
                       "jinja2": jinja2.__version__},
        "expected_from": "llama.cpp (llama_tokenize through llama-cpp-python, vocab_only)",
        "vocabularies": {"bpe": bpe, "spm": spm_vocab},
        "strings": strings,
        "configs": configs,
        "disagreements": disagreements,
        "chat_templates": {name: source for name, source in templates},
        "chats": chats,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out) // 1024} KB)", file=sys.stderr)


if __name__ == "__main__":
    main()
