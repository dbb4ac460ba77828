#!/usr/bin/env python3
"""Writes a Llama with Llama-3-8B's shapes and random weights as GGUF, for the language-model
benchmark's large model (bench/run_llm_peers.sh; docs/benchmarks.md, "Language models").

    bench/make_llama8b_gguf.py --type q4_0|q4_1|bf16 [--layers N] [--tokenizer FROM.gguf] OUT.gguf

Shapes: d_model 4096, 32 layers, 32 heads, 8 key/value heads, head size 128, ffn 14336,
vocab 128256, rope base 500000, untied output layer. Weights are random but not degenerate:
quantized files get random 4-bit codes with block scales near 0.02 / 4.6 (weights of std
about 0.02) and, for q4_1, minimums near -8 times the scale; bf16 files get random mantissas and
signs with exponents for magnitudes in [2^-8, 2^-4); norms are 1 plus noise. Bits are drawn
directly (no float weights are made and quantized), tensor by tensor, so the 4.5 GB (q4) or
16 GB (bf16) file is written at about disk speed. The tokenizer is the one in --tokenizer
(the default model's, a byte-level BPE of 49152 tokens) padded with unused tokens to the vocab.
"""
import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import gguf

D_MODEL, N_LAYERS, N_HEADS, N_KV_HEADS, HEAD_DIM, FFN, VOCAB = 4096, 32, 32, 8, 128, 14336, 128256
ROPE_BASE, NORM_EPS, CONTEXT = 500000.0, 1e-5, 8192
TYPES = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q4_1": gguf.GGMLQuantizationType.Q4_1,
         "bf16": gguf.GGMLQuantizationType.BF16}
FILE_TYPES = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
              "bf16": gguf.LlamaFileType.MOSTLY_BF16}
DEFAULT_TOKENIZER = os.path.join(os.environ.get("KILN_MODELS_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kiln-models"),
    "SmolLM2-135M-Instruct.Q4_1.gguf")


def weight_shapes(n_layers):
    """(name, rows, cols) of every matrix, in file order; rows are the output features."""
    kv = N_KV_HEADS * HEAD_DIM
    out = [("token_embd.weight", VOCAB, D_MODEL)]
    for i in range(n_layers):
        b = f"blk.{i}."
        out += [(b + "attn_q.weight", N_HEADS * HEAD_DIM, D_MODEL), (b + "attn_k.weight", kv, D_MODEL),
                (b + "attn_v.weight", kv, D_MODEL), (b + "attn_output.weight", D_MODEL, N_HEADS * HEAD_DIM),
                (b + "ffn_gate.weight", FFN, D_MODEL), (b + "ffn_up.weight", FFN, D_MODEL),
                (b + "ffn_down.weight", D_MODEL, FFN)]
    out.append(("output.weight", VOCAB, D_MODEL))
    return out


def random_f16(rng, n, centre, spread):
    """n float16 values uniform in centre * [1 - spread, 1 + spread], as raw little-endian bytes."""
    v = rng.random(n, dtype=np.float32)
    return (centre * (1 - spread + 2 * spread * v)).astype("<f2").view(np.uint8).reshape(n, 2)


def quantized_matrix(seed, rows, cols, qtype):
    """Random Q4_0 (18-byte blocks: f16 scale, 16 bytes of codes) or Q4_1 (20-byte blocks: f16
    scale, f16 minimum, codes) of rows x cols, as a (rows, bytes a row) uint8 array."""
    rng = np.random.default_rng(seed)
    nb = rows * cols // 32
    scale = 0.02 / 4.6  # codes uniform in 0..15 around 8 have a std of about 4.6
    parts = [random_f16(rng, nb, scale, 0.25)]
    if qtype == gguf.GGMLQuantizationType.Q4_1:
        parts.append(random_f16(rng, nb, -8 * scale, 0.05))
    parts.append(np.frombuffer(rng.bytes(nb * 16), np.uint8).reshape(nb, 16))
    return np.concatenate(parts, axis=1).reshape(rows, -1)


def bf16_matrix(seed, rows, cols):
    """Random bfloat16 bits: random sign and 7-bit mantissa, exponents 2^-8 .. 2^-5."""
    rng = np.random.default_rng(seed)
    bits = np.frombuffer(rng.bytes(rows * cols * 2), np.uint16)
    exponent = ((bits >> 7) & 3) + (127 - 8)  # two random bits pick one of four exponents
    return ((bits & 0x807F) | (exponent << 7).astype(np.uint16)).reshape(rows, cols)


def norm_weight(seed):
    rng = np.random.default_rng(seed)
    return (1 + 0.1 * rng.standard_normal(D_MODEL)).astype(np.float32)


def copy_tokenizer(w, src):
    """The tokenizer section of src, its token list padded with unused tokens to VOCAB."""
    r = gguf.GGUFReader(src)
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    if len(tokens) > VOCAB:
        sys.exit(f"make_llama8b_gguf: {src} has {len(tokens)} tokens, more than the vocab of {VOCAB}")
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    pad = VOCAB - len(tokens)
    w.add_tokenizer_model(r.get_field("tokenizer.ggml.model").contents())
    w.add_tokenizer_pre(r.get_field("tokenizer.ggml.pre").contents())
    w.add_token_list(tokens + [f"<|unused_{i}|>" for i in range(pad)])
    w.add_token_types(types + [int(gguf.TokenType.UNUSED)] * pad)
    w.add_token_merges(r.get_field("tokenizer.ggml.merges").contents())
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("unknown_token_id", w.add_unk_token_id), ("padding_token_id", w.add_pad_token_id),
                     ("add_bos_token", w.add_add_bos_token)):
        field = r.get_field("tokenizer.ggml." + key)
        if field is not None:
            add(field.contents())
    if r.get_field("tokenizer.chat_template") is not None:
        w.add_chat_template(r.get_field("tokenizer.chat_template").contents())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--type", choices=sorted(TYPES), required=True)
    ap.add_argument("--layers", type=int, default=N_LAYERS, help="fewer layers for a quick file (32)")
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, help="GGUF whose tokenizer is copied")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="tensors drawn at once (threads; numpy's generator releases the GIL)")
    a = ap.parse_args()
    if not os.path.isfile(a.tokenizer):
        sys.exit(f"make_llama8b_gguf: no tokenizer model at {a.tokenizer} (scripts/setup fetches it)")
    t0 = time.time()
    qtype = TYPES[a.type]
    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(f"llama-3-8b-shaped random {a.type}")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(D_MODEL)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(NORM_EPS)
    w.add_vocab_size(VOCAB)
    w.add_file_type(FILE_TYPES[a.type])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    copy_tokenizer(w, a.tokenizer)

    # Every tensor in file order: (name, maker) with maker(seed) -> array. Norms are float32.
    makers = []
    for name, rows, cols in weight_shapes(a.layers):
        if a.type == "bf16":
            makers.append((name, (lambda s, r=rows, c=cols: bf16_matrix(s, r, c)), (rows, cols)))
        else:
            makers.append((name, (lambda s, r=rows, c=cols: quantized_matrix(s, r, c, qtype)), (rows, cols)))
        if name.endswith("ffn_down.weight"):
            blk = name.rsplit(".", 2)[0]
            makers += [(blk + ".attn_norm.weight", norm_weight, None), (blk + ".ffn_norm.weight", norm_weight, None)]
    makers.insert(len(makers) - 1, ("output_norm.weight", norm_weight, None))
    for name, _, shape in makers:
        if shape is None:
            w.add_tensor_info(name, (D_MODEL,), np.dtype(np.float32), D_MODEL * 4)
        else:
            # Quantized data is given by its byte shape (rows, bytes a row), as gguf-py expects.
            byte_shape = gguf.quant_shape_to_byte_shape(shape, qtype)
            dtype = np.dtype(np.uint16 if a.type == "bf16" else np.uint8)
            w.add_tensor_info(name, shape if a.type == "bf16" else byte_shape, dtype,
                              byte_shape[0] * byte_shape[1], raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    # Draw a few tensors ahead on threads while the main thread writes them in order.
    with ThreadPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(make, seed) for seed, (_, make, _) in enumerate(makers[:a.jobs])]
        for i in range(len(makers)):
            arr = futures[i].result()
            futures[i] = None
            if i + a.jobs < len(makers):
                futures.append(pool.submit(makers[i + a.jobs][1], i + a.jobs))
            w.write_tensor_data(arr)
    w.close()
    size = os.path.getsize(a.out)
    print(f"make_llama8b_gguf: wrote {a.out} ({a.type}, {a.layers} layers, {size / 1e9:.2f} GB) "
          f"in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
