#!/usr/bin/env python3
"""PyTorch's side of the language-model benchmark (bench/run_llm_peers.sh; docs/benchmarks.md,
"Language models"): transformers' LlamaForCausalLM built from a GGUF file's metadata, its
weights dequantized from the file, a static KV cache, and on CUDA the forward under
torch.compile(mode="reduce-overhead") (CUDA graphs); timed as llama-bench and `kiln bench-llm`
time theirs.

    bench/llm_peer_torch.py MODEL.gguf [--device cuda|cpu] [--dtype bfloat16|float16|float32]
                            [--pp 512] [--tg 128] [-r 3] [--no-compile] [--json]
    bench/llm_peer_torch.py MODEL.gguf --generate N --prompt-ids 1,2,3
    bench/llm_peer_torch.py llama3-8b-shape [--layers 32] ...

llama3-8b-shape is the model of `bench_distributed decode` (Llama-3-8B's shapes, random weights
drawn by torch in dtype on the device), for runs where no GGUF of it is at hand.

The file is read with gguf-py. Q4_0, Q4_1 and Q8_0 blocks are dequantized with torch on the
target device (gguf-py's numpy dequantize takes about 15 ns a weight, two minutes for an 8B
model); other quantized types go through gguf-py's. GGUF's llama q and k rows are permuted for
RoPE on adjacent pairs: they are put back in Hugging Face's order (halves), as transformers'
own GGUF loader does. On the CPU the default is float32 without torch.compile.

Timing (the median of -r repetitions after warm-ups that also compile):
  prefill   the cache reset, --pp random tokens in one forward (logits of the last only), the
            first token's id read on the host: pp tokens/s = pp / that time, the time to first token;
  decode    the cache reset holding one token, then --tg greedy steps, each fed the previous
            step's token on the device (no host read until the last): tg tokens/s, ms a token.
"""
import argparse
import inspect
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

HF_NAMES = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
            "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
            "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
            "ffn_down": "mlp.down_proj"}


def field(reader, key, default=None):
    f = reader.get_field(key)
    if f is None:
        if default is None:
            sys.exit(f"llm_peer_torch: the file has no '{key}'")
        return default
    return f.contents()


def hf_name(gguf_name):
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    if gguf_name == "output.weight":
        return "lm_head.weight"
    _, layer, kind, _ = gguf_name.split(".")
    return f"model.layers.{layer}.{HF_NAMES[kind]}.weight"


def dequantize(t, device, dtype):
    """GGUF tensor t as a (rows, cols) tensor of dtype on device."""
    shape = [int(n) for n in reversed(t.shape)]  # GGUF lists the fastest dimension first
    with warnings.catch_warnings():  # the memory map is read-only; torch copies it to the device
        warnings.simplefilter("ignore")
        raw = torch.from_numpy(np.asarray(t.data).reshape(-1).view(np.uint8)).to(device)
    import gguf
    Q = gguf.GGMLQuantizationType
    kind = t.tensor_type
    if kind in (Q.F32, Q.F16, Q.BF16):
        as_type = {Q.F32: torch.float32, Q.F16: torch.float16, Q.BF16: torch.bfloat16}[kind]
        return raw.view(as_type).reshape(shape).to(dtype)
    if kind in (Q.Q4_0, Q.Q4_1, Q.Q8_0):
        block = {Q.Q4_0: 18, Q.Q4_1: 20, Q.Q8_0: 34}[kind]
        b = raw.reshape(-1, block)
        d = b[:, :2].contiguous().view(torch.float16).float()
        if kind == Q.Q8_0:
            v = b[:, 2:].contiguous().view(torch.int8).float() * d
        else:
            qs = b[:, block - 16:]
            q = torch.cat([qs & 15, qs >> 4], dim=1).float()  # low nibbles: values 0-15, high: 16-31
            v = (q - 8) * d if kind == Q.Q4_0 else q * d + b[:, 2:4].contiguous().view(torch.float16).float()
        return v.reshape(shape).to(dtype)
    v = gguf.quants.dequantize(t.data, kind)
    return torch.from_numpy(np.ascontiguousarray(v)).reshape(shape).to(device=device, dtype=dtype)


def unpermute(w, n_heads):
    """Hugging Face's q/k row order (RoPE on halves) from GGUF's (adjacent pairs)."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def built(config, device, dtype):
    """LlamaForCausalLM of config, made in dtype on the device: an 8B model never exists in float32."""
    from transformers import LlamaForCausalLM
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(before)


def synthetic(layers, device, dtype):
    """bench_distributed's Llama-3-8B-shaped model with random weights."""
    from transformers import LlamaConfig
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-5,
                         rope_theta=500000.0, max_position_embeddings=8192, tie_word_embeddings=False,
                         attention_bias=False, mlp_bias=False)
    return built(config, device, dtype), config


def load(path, device, dtype):
    import gguf
    from transformers import LlamaConfig
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    if arch != "llama":
        sys.exit(f"llm_peer_torch: {path}: architecture '{arch}' (only llama)")
    k = lambda name, default=None: field(r, f"llama.{name}", default)
    tensors = {t.name: t for t in r.tensors}
    d_model, n_heads = int(k("embedding_length")), int(k("attention.head_count"))
    n_kv = int(k("attention.head_count_kv", n_heads))
    tied = "output.weight" not in tensors
    config = LlamaConfig(
        vocab_size=int(tensors["token_embd.weight"].shape[1]), hidden_size=d_model,
        intermediate_size=int(k("feed_forward_length")), num_hidden_layers=int(k("block_count")),
        num_attention_heads=n_heads, num_key_value_heads=n_kv,
        head_dim=int(k("attention.key_length", d_model // n_heads)),
        rms_norm_eps=float(k("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(k("rope.freq_base", 10000.0)), max_position_embeddings=int(k("context_length", 4096)),
        tie_word_embeddings=tied, attention_bias=False, mlp_bias=False)
    model = built(config, device, dtype)
    params = dict(model.named_parameters())
    for name, t in tensors.items():
        if name == "rope_freqs.weight":
            sys.exit("llm_peer_torch: llama3 rope scaling (rope_freqs.weight) is not supported")
        w = dequantize(t, device, dtype)
        if name.endswith("attn_q.weight"):
            w = unpermute(w, n_heads)
        elif name.endswith("attn_k.weight"):
            w = unpermute(w, n_kv)
        with torch.no_grad():
            params[hf_name(name)].copy_(w.reshape(params[hf_name(name)].shape))
    if tied:
        model.tie_weights()
    return model, config


class Runner:
    """A static cache and the (compiled) forward that writes into it."""

    def __init__(self, model, config, length, device, dtype, compile_):
        from transformers import StaticCache
        self.model, self.device = model, device
        self.cache = StaticCache(config=config, max_cache_len=length, max_batch_size=1, device=device, dtype=dtype)
        self.positions = torch.arange(length, device=device)
        self.compiled = compile_
        # transformers renamed past_key_values to cache (5.x); older releases know only the first.
        self.cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True, dynamic=False) \
            if compile_ else model.forward
        # One eager step first: the cache allocates its tensors on its first update, and inside a
        # CUDA graph they would belong to the graph, overwritten by its next replay.
        with torch.no_grad():
            model.forward(input_ids=torch.zeros(1, 1, dtype=torch.long, device=device), position_ids=self.positions[None, :1],
                          cache_position=self.positions[:1], use_cache=True, logits_to_keep=1,
                          **{self.cache_arg: self.cache})
        # Its tensors (the lengths too, which each update advances in place) keep their addresses
        # across replays, so the CUDA graphs may mutate them.
        for layer in getattr(self.cache, "layers", []):
            for v in vars(layer).values():
                if isinstance(v, torch.Tensor):
                    torch._dynamo.mark_static_address(v)
        self.cache.reset()

    @torch.no_grad()
    def step(self, ids, start):
        """Logits (vocab,) of the last of ids (1, T) at positions start.. of the cache."""
        pos = self.positions[start:start + ids.shape[1]]
        if self.compiled:
            torch.compiler.cudagraph_mark_step_begin()
        out = self.forward(input_ids=ids, position_ids=pos[None], cache_position=pos, use_cache=True,
                           logits_to_keep=1, **{self.cache_arg: self.cache})
        return out.logits[0, -1]

    def greedy(self, prompt, n, start=0):
        """Greedy ids after prompt (1, T) on the device, each step fed the last token there."""
        tok = self.step(prompt, start).argmax().reshape(1, 1)
        out, pos = [tok], start + prompt.shape[1]
        for _ in range(n - 1):
            tok = self.step(tok, pos).argmax().reshape(1, 1)
            out.append(tok)
            pos += 1
        return torch.cat(out).reshape(-1).tolist()  # the host reads the tokens once, at the end


def median(v):
    return sorted(v)[len(v) // 2]


def bench(run, vocab, pp, tg, reps, warmups):
    gen = torch.Generator().manual_seed(1)
    rand = lambda n: torch.randint(0, vocab, (1, n), generator=gen).to(run.device)
    sync = (lambda: torch.cuda.synchronize()) if run.device.startswith("cuda") else (lambda: None)

    def prefill():
        ids = rand(pp)
        sync()
        run.cache.reset()
        t0 = time.perf_counter()
        run.step(ids, 0).argmax().item()
        return time.perf_counter() - t0

    def decode():
        first, ids = rand(1), rand(1)
        run.cache.reset()
        run.step(first, 0).argmax().item()
        t0 = time.perf_counter()
        run.greedy(ids, tg, start=1)
        return time.perf_counter() - t0

    for _ in range(warmups):  # compiles each shape and records its CUDA graph
        if pp > 0:
            prefill()
        if tg > 0:
            decode()
    pps = [prefill() for _ in range(reps)] if pp > 0 else []
    tgs = [decode() for _ in range(reps)] if tg > 0 else []
    return (median(pps) if pps else None), (median(tgs) if tgs else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"])
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="eager (the default on the CPU)")
    ap.add_argument("--threads", type=int, help="torch.set_num_threads (CPU)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--generate", type=int, default=0, help="print N greedy ids after --prompt-ids")
    ap.add_argument("--prompt-ids")
    ap.add_argument("--layers", type=int, default=32, help="layers of llama3-8b-shape")
    a = ap.parse_args()
    cpu = a.device == "cpu"
    dtype = getattr(torch, a.dtype or ("float32" if cpu else "bfloat16"))
    compile_ = not (cpu or a.no_compile)
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    model, config = synthetic(a.layers, a.device, dtype) if a.model == "llama3-8b-shape" else \
        load(a.model, a.device, dtype)
    load_s = time.perf_counter() - t0
    name = os.path.basename(a.model)

    if a.generate:
        if not a.prompt_ids:
            sys.exit("llm_peer_torch: --generate needs --prompt-ids")
        ids = [int(t) for t in a.prompt_ids.split(",")]
        run = Runner(model, config, len(ids) + a.generate + 1, a.device, dtype, compile_)
        print(json.dumps({"prompt_ids": ids, "ids": run.greedy(torch.tensor([ids], device=a.device), a.generate)}))
        return

    run = Runner(model, config, max(a.pp, 1) + a.tg + 1, a.device, dtype, compile_)
    t0 = time.perf_counter()
    pp_s, tg_s = bench(run, config.vocab_size, a.pp, a.tg, a.repetitions, warmups=3 if compile_ else 1)
    import transformers
    r = {"engine": "pytorch", "version": torch.__version__, "transformers": transformers.__version__,
         "model": name, "device": "cpu" if cpu else "cuda", "dtype": a.dtype or str(dtype).split(".")[1],
         "compile": "reduce-overhead" if compile_ else "eager", "threads": torch.get_num_threads() if cpu else None,
         "pp": a.pp, "pp_tokens_per_s": a.pp / pp_s if pp_s else None, "ttft_ms": pp_s * 1e3 if pp_s else None,
         "tg": a.tg, "tg_tokens_per_s": a.tg / tg_s if tg_s else None,
         "decode_ms_per_token": tg_s * 1e3 / a.tg if tg_s else None, "repetitions": a.repetitions,
         "load_s": load_s, "bench_s": time.perf_counter() - t0}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"| {name} | pytorch {r['device']} {r['dtype']} {r['compile']} | pp{a.pp} "
              f"{r['pp_tokens_per_s'] or 0:.1f} tokens/s, first token {r['ttft_ms'] or 0:.1f} ms | "
              f"tg{a.tg} {r['tg_tokens_per_s'] or 0:.1f} tokens/s |")


if __name__ == "__main__":
    main()
