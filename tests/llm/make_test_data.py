#!/usr/bin/env python3
"""Writes the model-file test data under tests/llm (committed; CI never runs this).

  /work/main/.venv/bin/python tests/llm/make_test_data.py    # needs numpy, gguf (and mlx for the packing check)

data/types.gguf                 a GGUF v3 file with one tensor of every type kiln reads (random block
                                bytes with sane scales), metadata of every value type, and a Q5_0
                                tensor (a type kiln does not read)
data/types_reference.safetensors  each tensor dequantized by gguf.quants.dequantize (float32)
data/mlx_packing.safetensors    MLX's mx.quantize on a small matrix at 2-8 bits: the codes it chose
                                and the uint32 words it packed them into
data/smollm2_rows.safetensors   a few rows of the default model (SmolLM2-135M-Instruct Q4_1 GGUF)
                                dequantized by the gguf package, named "<tensor>.<row>"
corpus/gguf, corpus/safetensors  tiny seed files for the fuzzers
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(27)


def save_safetensors(path, tensors):
    """The safetensors layout: header size, JSON header, data (numpy arrays, little-endian)."""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.uint8): "U8", np.dtype(np.uint32): "U32",
             np.dtype(np.float16): "F16", np.dtype(np.uint16): "BF16"}
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": codes[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def random_blocks(qtype, rows, cols):
    """Random block bytes whose float16 scale fields hold sane values (the rest: every bit pattern)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)

    def halves(n):
        return rng.uniform(-0.05, 0.05, size=n).astype(np.float16).view(np.uint8).reshape(-1, 2)

    n = rows * (cols // block)
    flat = raw.reshape(n, size)
    if qtype in (T.Q4_0, T.Q8_0):
        flat[:, 0:2] = halves(n)
    elif qtype == T.Q4_1:
        flat[:, 0:2] = halves(n)
        flat[:, 2:4] = halves(n)
    elif qtype in (T.Q4_K, T.Q5_K):
        flat[:, 0:2] = halves(n)
        flat[:, 2:4] = halves(n)
    elif qtype == T.Q6_K:
        flat[:, 208:210] = halves(n)
    elif qtype == T.Q5_0:
        flat[:, 0:2] = halves(n)
    return raw.reshape(rows, (cols // block) * size)


def write_types():
    w = gguf.GGUFWriter(os.path.join(here, "data", "types.gguf"), "llama")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo wörld ✓")
    w.add_array("test.strings", ["a", "", "ĠThe", "<|im_end|>"])
    w.add_key_value("test.ints", [3, -1, 7], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    w.add_key_value("test.floats", [0.5, -2.25, 1e-3], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.FLOAT32)
    w.add_key_value("test.bools", [True, False], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
    w.add_array("test.nested", [[1, 2], [3]])
    w.add_uint32("llama.block_count", 1)

    reference = {}
    dense = rng.standard_normal((3, 2, 64)).astype(np.float32)
    w.add_tensor("dense.f32", dense)
    reference["dense.f32"] = dense
    f16 = rng.standard_normal((5, 32)).astype(np.float16)
    w.add_tensor("dense.f16", f16)
    reference["dense.f16"] = f16.astype(np.float32)
    bf16 = (rng.standard_normal((4, 32)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("dense.bf16", bf16.view(np.uint8), raw_dtype=T.BF16)
    reference["dense.bf16"] = (bf16.astype(np.uint32) << 16).view(np.float32)
    for qtype, rows, cols in [(T.Q8_0, 3, 96), (T.Q4_0, 4, 64), (T.Q4_1, 5, 64), (T.Q4_K, 3, 512),
                              (T.Q5_K, 2, 512), (T.Q6_K, 3, 256)]:
        raw = random_blocks(qtype, rows, cols)
        name = "q." + qtype.name.lower()
        w.add_tensor(name, raw, raw_dtype=qtype)
        reference[name] = gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(rows, cols)
    w.add_tensor("q.q5_0", random_blocks(T.Q5_0, 1, 32), raw_dtype=T.Q5_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_safetensors(os.path.join(here, "data", "types_reference.safetensors"), reference)


def write_mlx_packing():
    try:
        import mlx.core as mx
    except ImportError:
        print("mlx is not installed: data/mlx_packing.safetensors left as it is", file=sys.stderr)
        return
    out = {}
    x = rng.standard_normal((3, 128)).astype(np.float32)
    for bits in (2, 3, 4, 5, 6, 8):
        wq, scales, biases = mx.quantize(mx.array(x), group_size=32, bits=bits)
        deq = np.array(mx.dequantize(wq, scales, biases, group_size=32, bits=bits))
        s = np.repeat(np.array(scales), 32, axis=1)
        b = np.repeat(np.array(biases), 32, axis=1)
        codes = np.rint((deq - b) / s).astype(np.uint8)
        out[f"codes.{bits}"] = codes
        out[f"packed.{bits}"] = np.array(wq).astype(np.uint32)
    save_safetensors(os.path.join(here, "data", "mlx_packing.safetensors"), out)


def write_corpus():
    """Tiny seeds: a metadata-only GGUF, one small tensor of each type, safetensors files."""
    seeds = os.path.join(here, "corpus", "gguf")
    w = gguf.GGUFWriter(os.path.join(seeds, "metadata.gguf"), "llama")
    w.add_array("tokenizer.ggml.tokens", ["a", "b"])
    w.add_key_value("tokenizer.ggml.scores", [0.5, 1.0], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.FLOAT32)
    w.add_uint32("general.alignment", 64)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for qtype, cols in [(T.F32, 8), (T.F16, 8), (T.BF16, 8), (T.Q8_0, 32), (T.Q4_0, 32), (T.Q4_1, 32),
                        (T.Q4_K, 256), (T.Q5_K, 256), (T.Q6_K, 256)]:
        w = gguf.GGUFWriter(os.path.join(seeds, qtype.name.lower() + ".gguf"), "llama")
        w.add_uint32("llama.block_count", 1)
        raw = random_blocks(qtype, 2, cols) if gguf.GGML_QUANT_SIZES[qtype][0] > 1 else \
            rng.integers(0, 256, size=(2, cols * gguf.GGML_QUANT_SIZES[qtype][1]), dtype=np.uint8)
        if qtype == T.F32:
            raw = rng.standard_normal((2, cols)).astype(np.float32).view(np.uint8)
        w.add_tensor("t", raw, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    st = os.path.join(here, "corpus", "safetensors")
    save_safetensors(os.path.join(st, "dense.safetensors"), {
        "model.embed_tokens.weight": rng.standard_normal((4, 8)).astype(np.float16),
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((8, 8)).astype(np.float32)})
    with open(os.path.join(st, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "num_hidden_layers": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
                   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                   "quantization": {"group_size": 64, "bits": 4, "lm_head": False}}, f)
    save_safetensors(os.path.join(st, "mlx.safetensors"), {
        "model.layers.0.mlp.up_proj.weight": rng.integers(0, 2**32, size=(2, 4), dtype=np.uint32),
        "model.layers.0.mlp.up_proj.scales": rng.standard_normal((2, 1)).astype(np.float16),
        "model.layers.0.mlp.up_proj.biases": rng.standard_normal((2, 1)).astype(np.float16)})


def write_default_model_rows():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(os.environ.get("KILN_MODELS_DIR") or os.path.join(cache, "kiln-models"),
                        "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        print(path, "is absent: data/smollm2_rows.safetensors left as it is", file=sys.stderr)
        return
    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    out = {}
    for name, rows in [("blk.0.attn_q.weight", (0, 5)), ("token_embd.weight", (1, 100)),
                       ("blk.29.ffn_down.weight", (575,))]:
        t = tensors[name]
        values = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        for r in rows:
            out[f"{name}.{r}"] = values[r]
    save_safetensors(os.path.join(here, "data", "smollm2_rows.safetensors"), out)


if __name__ == "__main__":
    write_types()
    write_default_model_rows()
    write_mlx_packing()
    write_corpus()
    print("wrote", os.path.join(here, "data"), "and", os.path.join(here, "corpus"))
