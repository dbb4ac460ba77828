#!/usr/bin/env python3
"""MLX's side of the language-model benchmark (bench/run_llm_peers.sh; docs/benchmarks.md,
"Language models"): the Llama forward written with mx.fast ops on a GGUF file loaded by
mx.load, timed as llama-bench and `kiln bench-llm` time theirs.

    bench/llm_peer_mlx.py MODEL.gguf [--device cpu|gpu] [--dtype float32|float16|bfloat16]
                          [--pp 512] [--tg 128] [-r 3] [--json]
    bench/llm_peer_mlx.py MODEL.gguf --generate N (--prompt TEXT | --prompt-ids 1,2,3)

Weights stay as mx.load gives them: it maps GGUF's Q4_0, Q4_1 and Q8_0 blocks to MLX's affine
format (group 32, 4 or 8 bits, float16 scales and biases), which mx.quantized_matmul reads in
place, and dequantizes any other quantized type to float16 itself; float tensors come as they
are. Scales, biases, norms and float weights are cast to --dtype.

Timing (the median of -r repetitions after a warm-up):
  prefill   a fresh cache, --pp random tokens in one forward, the first token's id read on the
            host: pp tokens/s = pp / that time, and that time is the time to first token;
  decode    a fresh cache holding one token, then --tg greedy steps pipelined as mlx-lm does
            (each step's graph is built on the previous step's lazy token and started with
            async_eval before the previous token is read): tg tokens/s, ms a token.
--generate N prints the greedy ids and text of N tokens after the prompt (the raw prompt's ids,
without a chat template; --prompt needs transformers, which reads the GGUF's tokenizer).
"""
import argparse
import json
import os
import sys
import time

import mlx.core as mx

GROUP = 32  # GGUF's Q4_0, Q4_1 and Q8_0 blocks


def scalar(meta, key, default=None):
    v = meta.get(key)
    if v is None:
        if default is None:
            sys.exit(f"llm_peer_mlx: the file has no '{key}'")
        return default
    return v.item() if isinstance(v, mx.array) else v


class Llama:
    def __init__(self, path, dtype):
        self.w, meta = mx.load(path, return_metadata=True)
        arch = scalar(meta, "general.architecture")
        if arch != "llama":
            sys.exit(f"llm_peer_mlx: {path}: architecture '{arch}' (only llama)")
        k = lambda name, default=None: scalar(meta, f"llama.{name}", default)
        self.n_layers, self.d_model = k("block_count"), k("embedding_length")
        self.n_heads = k("attention.head_count")
        self.n_kv_heads = k("attention.head_count_kv", self.n_heads)
        self.head_dim = k("attention.key_length", self.d_model // self.n_heads)
        self.rope_dims = k("rope.dimension_count", self.head_dim)
        self.rope_base = float(k("rope.freq_base", 10000.0))
        self.eps = float(k("attention.layer_norm_rms_epsilon", 1e-5))
        self.dtype = dtype
        self.tied = "output.weight" not in self.w
        self.vocab = self.w["token_embd.weight"].shape[0]
        for name in list(self.w):  # scales, biases, norms and float weights in the compute dtype
            if not (name.endswith(".weight") and self.quantized(name[:-len(".weight")])):
                self.w[name] = self.w[name].astype(dtype)
        mx.eval(self.w)

    def quantized(self, base):
        return base + ".scales" in self.w

    def bits(self, base):
        w, s = self.w[base + ".weight"], self.w[base + ".scales"]
        return w.shape[-1] * 32 // (s.shape[-1] * GROUP)

    def linear(self, x, base):
        w = self.w[base + ".weight"]
        if not self.quantized(base):
            return x @ w.T
        return mx.quantized_matmul(x, w, self.w[base + ".scales"], self.w[base + ".biases"], transpose=True,
                                   group_size=GROUP, bits=self.bits(base))

    def embed(self, ids):
        base = "token_embd"
        w = self.w[base + ".weight"]
        if not self.quantized(base):
            return w[ids]
        return mx.dequantize(w[ids], self.w[base + ".scales"][ids], self.w[base + ".biases"][ids],
                             group_size=GROUP, bits=self.bits(base)).astype(self.dtype)

    def new_cache(self, length):
        shape = (1, self.n_kv_heads, length, self.head_dim)
        return {"k": [mx.zeros(shape, self.dtype) for _ in range(self.n_layers)],
                "v": [mx.zeros(shape, self.dtype) for _ in range(self.n_layers)], "offset": 0}

    def __call__(self, ids, cache):
        """Logits of the last of ids (1, T), appending their keys and values to cache."""
        T, off = ids.shape[1], cache["offset"]
        H, KVH, D = self.n_heads, self.n_kv_heads, self.head_dim
        x = self.embed(ids)
        for i in range(self.n_layers):
            b = f"blk.{i}."
            h = mx.fast.rms_norm(x, self.w[b + "attn_norm.weight"], self.eps)
            q = self.linear(h, b + "attn_q").reshape(1, T, H, D).transpose(0, 2, 1, 3)
            k = self.linear(h, b + "attn_k").reshape(1, T, KVH, D).transpose(0, 2, 1, 3)
            v = self.linear(h, b + "attn_v").reshape(1, T, KVH, D).transpose(0, 2, 1, 3)
            # GGUF's llama q and k rows are permuted for RoPE on adjacent pairs (traditional).
            q = mx.fast.rope(q, self.rope_dims, traditional=True, base=self.rope_base, scale=1.0, offset=off)
            k = mx.fast.rope(k, self.rope_dims, traditional=True, base=self.rope_base, scale=1.0, offset=off)
            cache["k"][i][:, :, off:off + T, :] = k
            cache["v"][i][:, :, off:off + T, :] = v
            keys, values = cache["k"][i][:, :, :off + T, :], cache["v"][i][:, :, :off + T, :]
            o = mx.fast.scaled_dot_product_attention(q, keys, values, scale=D ** -0.5,
                                                     mask="causal" if T > 1 else None)
            x = x + self.linear(o.transpose(0, 2, 1, 3).reshape(1, T, H * D), b + "attn_output")
            h = mx.fast.rms_norm(x, self.w[b + "ffn_norm.weight"], self.eps)
            g = self.linear(h, b + "ffn_gate")
            x = x + self.linear(g * mx.sigmoid(g) * self.linear(h, b + "ffn_up"), b + "ffn_down")
        cache["offset"] = off + T
        x = mx.fast.rms_norm(x[:, -1:, :], self.w["output_norm.weight"], self.eps)
        return self.linear(x, "token_embd" if self.tied else "output")[0, -1]


def greedy(model, cache, prompt, n):
    """Greedy ids after prompt, pipelined as mlx-lm's generate_step: the next step is built on the
    lazy token and started before the token is read on the host."""
    y = mx.argmax(model(mx.array([prompt]), cache))
    mx.async_eval(y)
    out = []
    for _ in range(n):
        nxt = mx.argmax(model(y.reshape(1, 1), cache)) if len(out) + 1 < n else None
        if nxt is not None:
            mx.async_eval(nxt)
        out.append(y.item())
        y = nxt
    return out


def median(v):
    return sorted(v)[len(v) // 2]


def bench(model, pp, tg, reps, gpu):
    rng = lambda n, seed: mx.random.randint(0, model.vocab, (n,), key=mx.random.key(seed)).tolist()
    cache = model.new_cache(max(pp, 1) + tg + 1)

    def prefill(seed, n=pp):
        ids = mx.array([rng(n, seed)])
        mx.eval(ids)
        cache["offset"] = 0
        t0 = time.perf_counter()
        mx.argmax(model(ids, cache)).item()
        return time.perf_counter() - t0

    def decode(seed, n=tg):
        first, start = rng(2, seed)
        cache["offset"] = 0
        mx.eval(model(mx.array([[first]]), cache))
        t0 = time.perf_counter()
        greedy(model, cache, [start], n)  # n one-token steps
        return time.perf_counter() - t0

    # Warm-up: the GPU compiles its kernels for each shape, so it runs the timed sizes; the CPU's
    # kernels are built in, and a short warm-up spares a minute of float32 prefill there.
    if pp > 0:
        prefill(0, pp if gpu else min(pp, 16))
    if tg > 0:
        decode(0, tg if gpu else min(tg, 4))
    pps, tgs = [], []
    for r in range(reps):
        if pp > 0:
            pps.append(prefill(100 + r))
        if tg > 0:
            tgs.append(decode(200 + r))
    return (median(pps) if pps else None), (median(tgs) if tgs else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("-r", "--repetitions", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--generate", type=int, default=0, help="print N greedy tokens after the prompt")
    ap.add_argument("--prompt")
    ap.add_argument("--prompt-ids")
    a = ap.parse_args()
    mx.set_default_device(mx.cpu if a.device == "cpu" else mx.gpu)
    t0 = time.perf_counter()
    model = Llama(a.model, getattr(mx, a.dtype))
    load_s = time.perf_counter() - t0
    name = os.path.basename(a.model)

    if a.generate:
        if a.prompt_ids:
            ids = [int(t) for t in a.prompt_ids.split(",")]
        elif a.prompt is not None:
            from transformers import AutoTokenizer
            tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(a.model)), gguf_file=name)
            ids = tok.encode(a.prompt, add_special_tokens=False)
        else:
            sys.exit("llm_peer_mlx: --generate needs --prompt or --prompt-ids")
        out = greedy(model, model.new_cache(len(ids) + a.generate + 1), ids, a.generate)
        print(json.dumps({"prompt_ids": ids, "ids": out}))
        if a.prompt is not None:
            print(tok.decode(out))
        return

    pp_s, tg_s = bench(model, a.pp, a.tg, a.repetitions, a.device == "gpu")
    r = {"engine": "mlx", "version": mx.__version__, "model": name, "device": a.device, "dtype": a.dtype,
         "pp": a.pp, "pp_tokens_per_s": a.pp / pp_s if pp_s else None, "ttft_ms": pp_s * 1e3 if pp_s else None,
         "tg": a.tg, "tg_tokens_per_s": a.tg / tg_s if tg_s else None,
         "decode_ms_per_token": tg_s * 1e3 / a.tg if tg_s else None, "repetitions": a.repetitions,
         "load_s": load_s}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"| {name} | mlx {a.device} {a.dtype} | pp{a.pp} {r['pp_tokens_per_s'] or 0:.1f} tokens/s, "
              f"first token {r['ttft_ms'] or 0:.1f} ms | tg{a.tg} {r['tg_tokens_per_s'] or 0:.1f} tokens/s |")


if __name__ == "__main__":
    main()
