#!/usr/bin/env python3
"""Makes the golden data that tests/llm/test_model.cpp compares kiln's Llama against.

Two reference implementations that kiln's authors did not write:
  - llama.cpp (through llama-cpp-python, which vendors and builds it): token ids, the top-1 token at
    every position of teacher-forced sequences, and greedy continuations, on the quantized weights.
  - Hugging Face transformers loading the same GGUF (it dequantizes to float32): logits.

Usage: make_model_golden.py MODEL.gguf OUT_DIR [--only-flash-attn]
Needs: llama-cpp-python, transformers, torch, gguf, numpy. CI reads the output and needs none of them.
Writes OUT_DIR/<stem>.json (ids, top-1s, continuations, top-64 logits) and OUT_DIR/<stem>.rows.f32
(full logit rows, little-endian float32, in the order the json lists them).

Each teacher-forced sequence also gets llama.cpp's top-1 with flash attention on ("top1_flash_attn"):
llama.cpp against itself under another of its own settings, the scale for how closely a second
implementation can follow it. --only-flash-attn adds just that field to an existing OUT_DIR/<stem>.json
(llama-cpp-python and numpy only).
"""
import json
import os
import sys

import numpy as np

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "Water boils at a temperature of",
    "Once upon a time, in a small village by the sea,",
]
CHAT = "<|im_start|>user\nWhat is a good name for a cat?<|im_end|>\n<|im_start|>assistant\n"
# Teacher-forced sequences: each prompt continued by sampling from llama.cpp at this temperature,
# so the text follows the model's distribution without being its own greedy path.
FORCED_PROMPTS = [
    "The history of the printing press",
    "In mathematics, a prime number is",
    "import numpy as np\n\n",
    "Dear Sir or Madam,\n\nI am writing to",
    "The recipe calls for two cups of flour,",
    "Photosynthesis is the process by which",
    "She opened the door and saw",
    "SELECT name, price FROM",
    "The quick brown fox",
    "In 1969, the first humans",
    "The best way to learn a new language is",
    "def parse_config(path):\n    \"\"\"",
    "Mount Everest is the highest",
    "<|im_start|>user\nExplain how a refrigerator works.<|im_end|>\n<|im_start|>assistant\n",
]
FORCED_TOKENS = 200
GREEDY_TOKENS = 64
TOP = 64
FULL_ROWS = 2  # full vocabulary rows kept (196 KB each for a 49152-token vocabulary)


def llama_cpp_part(model_path):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model_path, n_ctx=1024, n_batch=512, n_threads=os.cpu_count(), logits_all=True,
                          verbose=False, seed=1234)

    def tokenize(text):
        return llm.tokenize(text.encode(), add_bos=False, special=True)

    def all_argmax(ids):
        llm.reset()
        llm.eval(ids)
        return [int(np.argmax(llm.scores[i])) for i in range(len(ids))]

    greedy = []
    for p in PROMPTS + [CHAT]:
        ids = tokenize(p)
        llm.reset()
        out = []
        for tok in llm.generate(ids, temp=0.0, top_k=1, reset=True):
            out.append(int(tok))
            if len(out) == GREEDY_TOKENS:
                break
        # How far llama.cpp's pick led its runner-up at each step: a near tie is where
        # implementations that round differently may part.
        llm.reset()
        llm.eval(ids + out)
        gaps = []
        for i in range(len(out)):
            row = np.sort(np.asarray(llm.scores[len(ids) + i - 1]))
            gaps.append(float(row[-1] - row[-2]))
        greedy.append({"prompt": p, "ids": ids, "continuation": out, "gaps": gaps})

    forced = []
    for i, p in enumerate(FORCED_PROMPTS):
        ids = tokenize(p)
        sampled = []
        llm.reset()
        llm.set_seed(100 + i)
        for tok in llm.generate(ids, temp=0.9, top_k=0, top_p=1.0, min_p=0.0, reset=True):
            if tok == llm.token_eos():
                break
            sampled.append(int(tok))
            if len(sampled) == FORCED_TOKENS:
                break
        seq = ids + sampled
        forced.append({"ids": seq, "top1": all_argmax(seq)})
    return {"version": llama_cpp.__version__, "greedy": greedy, "forced": forced}


def llama_cpp_flash_attn_top1(model_path, forced_ids):
    """llama.cpp's top-1 at every position with flash attention on (the rest as llama_cpp_part)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model_path, n_ctx=1024, n_batch=512, n_threads=os.cpu_count(), logits_all=True,
                          verbose=False, seed=1234, flash_attn=True)
    top1 = []
    for ids in forced_ids:
        llm.reset()
        llm.eval(ids)
        top1.append([int(np.argmax(llm.scores[i])) for i in range(len(ids))])
    return top1


def transformers_part(model_path, prompts_ids, forced_ids):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    d, name = os.path.split(os.path.abspath(model_path))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=name, torch_dtype=torch.float32)
    model.eval()
    logits = []
    rows = []
    with torch.no_grad():
        for ids in prompts_ids:
            out = model(torch.tensor([ids])).logits[0].numpy().astype(np.float32)
            positions = []
            for pos in range(len(ids)):
                row = out[pos]
                top = np.argsort(-row, kind="stable")[:TOP]
                positions.append({"ids": top.tolist(), "values": row[top].tolist()})
            logits.append({"ids": ids, "positions": positions})
            if len(rows) < FULL_ROWS:
                rows.append(out[-1])
        forced_top1 = [model(torch.tensor([ids])).logits[0].argmax(-1).tolist() for ids in forced_ids]
    versions = {"transformers": transformers.__version__, "torch": torch.__version__}
    return versions, logits, rows, forced_top1


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--only-flash-attn"):
        sys.exit(__doc__)
    model_path, out_dir = sys.argv[1], sys.argv[2]
    stem = os.path.splitext(os.path.basename(model_path))[0]
    if len(sys.argv) == 4:
        path = os.path.join(out_dir, stem + ".json")
        with open(path) as f:
            data = json.load(f)
        for f, t in zip(data["forced"], llama_cpp_flash_attn_top1(model_path, [f["ids"] for f in data["forced"]])):
            f["top1_flash_attn"] = t
        with open(path, "w") as f:
            json.dump(data, f, separators=(",", ":"))
        return
    os.makedirs(out_dir, exist_ok=True)
    cpp = llama_cpp_part(model_path)
    prompt_ids = [g["ids"] for g in cpp["greedy"]]
    forced_ids = [f["ids"] for f in cpp["forced"]]
    versions, logits, rows, forced_top1 = transformers_part(model_path, prompt_ids, forced_ids)
    for f, t in zip(cpp["forced"], forced_top1):
        f["top1_transformers"] = t
    for f, t in zip(cpp["forced"], llama_cpp_flash_attn_top1(model_path, forced_ids)):
        f["top1_flash_attn"] = t
    data = {
        "model": os.path.basename(model_path),
        "made_by": "tests/llm/golden/make_model_golden.py",
        "llama_cpp_python": cpp["version"],
        **versions,
        "greedy": cpp["greedy"],
        "forced": cpp["forced"],
        "logits": logits,
        "rows": "full float32 logits of the last position of the first %d entries of 'logits'" % FULL_ROWS,
    }
    with open(os.path.join(out_dir, stem + ".json"), "w") as f:
        json.dump(data, f, separators=(",", ":"))
    np.stack(rows).astype("<f4").tofile(os.path.join(out_dir, stem + ".rows.f32"))


if __name__ == "__main__":
    main()
