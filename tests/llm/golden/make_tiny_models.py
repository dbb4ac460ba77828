#!/usr/bin/env python3
"""Makes tiny random Llama-family checkpoints and the logits Hugging Face transformers computes
for them: the golden data test_llm_tiny_models compares kiln's safetensors path against.

Usage: /work/venv-golden/bin/python tests/llm/golden/make_tiny_models.py [OUT_DIR]
       (OUT_DIR defaults to tests/llm/golden/tiny)
Needs: torch, transformers, safetensors, numpy, and mlx (`pip install "mlx[cpu]"`: MLX's own
quantize and safetensors writer make the MLX checkpoints). CI reads the output and needs none of them.

Each model is a folder kiln loads as it is (config.json + model.safetensors, or shards with
model.safetensors.index.json) plus
  golden.json   the token ids of the teacher-forced sequences and the greedy prompts, transformers'
                greedy continuations with the gap between the top two logits at each step, the
                versions that made it
  logits.f32    transformers' float32 logits at every position of every teacher-forced sequence,
                [sequences, positions, vocab], little-endian

The models are random, seeded, and small enough to commit. Every weight is drawn (biases and the
norms too: left at their initial zeros and ones, a model that forgot a bias or a norm weight would
still pass), with a spread that keeps the logits a few units apart, so greedy picks are decisive.
What each one covers:
  llama2-f16     LlamaForCausalLM as Llama 2: f16, untied, as many key/value heads as query heads,
                 config.json as Llama 2's ("rope_scaling": null, no rope_theta)
  llama-bf16     LlamaForCausalLM, bf16, tied embeddings, Llama 3 rope scaling, rope_theta 500000,
                 config.json in the Hugging Face hub's format (rope_theta + rope_scaling, as Meta's
                 Llama 3.x checkpoints have it)
  qwen2-bf16     Qwen2ForCausalLM, bf16, q/k/v biases, linear rope scaling, rope_theta 1e6,
                 config.json as transformers 5 writes it (rope_parameters)
  qwen3-bf16     Qwen3ForCausalLM, bf16, q/k RMSNorm, head_dim 16 with hidden 32 (q is wider than
                 the residual, as in Qwen3's real sizes)
  mistral-f16    MistralForCausalLM, f16, untied output, sharded with an index, head_dim 16 with
                 hidden 32 (as Mistral Nemo's 128 with 5120 / 32 heads), a sliding window of 5 keys
                 (Mistral 7B v0.1's is 4096) that the sequences and continuations pass
  llama-mlx-4bit LlamaForCausalLM quantized by mx.quantize at 4 bits, groups of 64, tied quantized
                 embedding (mlx_lm's layout: uint32 weight + scales + biases, "quantization" block),
                 attention_bias on: q and k biases reordered with the quantized rows beside them
  qwen2-mlx-8bit Qwen2ForCausalLM quantized at 8 bits, groups of 32 (hidden 32, as the dense
                 models): its linear biases ("bias") sit beside the quantization biases ("biases")
For the MLX checkpoints the reference runs transformers on the dequantized weights (scale*q + bias
in float32 from the stored float16 scales and biases), which is what kiln computes.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config

here = os.path.dirname(os.path.abspath(__file__))

FORCED = 2           # teacher-forced sequences per model
FORCED_TOKENS = 16   # tokens in each
GREEDY = 2           # greedy prompts per model
PROMPT_TOKENS = 6
GREEDY_TOKENS = 16
WEIGHT_STD = 0.2     # logits a few units apart (transformers' 0.02 leaves them within hundredths)

SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, max_position_embeddings=512, rms_norm_eps=1e-5,
             bos_token_id=1, eos_token_id=2, pad_token_id=None)
# MLX groups run along the input dimension: every input width a multiple of the group size.
MLX = dict(SMALL, hidden_size=64, intermediate_size=128)

MODELS = [
    ("llama-bf16", LlamaConfig, dict(SMALL, tie_word_embeddings=True, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 256}), torch.bfloat16, None),
    ("qwen2-bf16", Qwen2Config, dict(SMALL, tie_word_embeddings=True, rope_parameters={
        "rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0}), torch.bfloat16, None),
    ("qwen3-bf16", Qwen3Config, dict(SMALL, head_dim=16, tie_word_embeddings=True,
                                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
     torch.bfloat16, None),
    ("mistral-f16", MistralConfig, dict(SMALL, head_dim=16, sliding_window=5, tie_word_embeddings=False,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
     torch.float16, None),
    ("llama-mlx-4bit", LlamaConfig, dict(MLX, tie_word_embeddings=True, attention_bias=True, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 256}), torch.float16, (4, 64)),
    ("qwen2-mlx-8bit", Qwen2Config, dict(SMALL, tie_word_embeddings=True,
                                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
     torch.float16, (8, 32)),
    # Appended, so that the models above keep their seeds (a model's seed is its index here).
    ("llama2-f16", LlamaConfig, dict(SMALL, num_key_value_heads=4, tie_word_embeddings=False,
                                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
     torch.float16, None),
]


def randomize(model, seed):
    """Every parameter drawn: matrices and biases N(0, WEIGHT_STD), norm weights U(0.5, 1.5)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * WEIGHT_STD)


def to_hub_format(folder):
    """config.json as the hub's Llama checkpoints write it (transformers 5 writes rope_parameters;
    it reads both): Llama 3.x's rope_theta and rope_scaling at the top level, Llama 2's
    "rope_scaling": null and no rope_theta at all (10000, Hugging Face's default)."""
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        config = json.load(f)
    rope = config.pop("rope_parameters")
    theta = rope.pop("rope_theta")
    if rope["rope_type"] == "default":
        assert theta == 10000.0, "Llama 2's config has no rope_theta: the default must be meant"
        config["rope_scaling"] = None
    else:
        config["rope_theta"] = theta
        config["rope_scaling"] = rope
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)


def quantize_mlx(model, folder, bits, group_size):
    """mlx_lm's layout: each Linear and the Embedding quantized by mx.quantize (uint32 weight,
    scales, biases in the model's float16), norms and linear biases as they are; config.json with
    the "quantization" block. Returns the dequantized state dict (float32) for the reference."""
    import mlx.core as mx

    tensors, reference = {}, {}
    for name, p in model.state_dict().items():
        w = p.to(torch.float32).numpy()
        module = name[: -len(".weight")]
        if name.endswith(".weight") and w.ndim == 2:
            wq, scales, biases = mx.quantize(mx.array(w).astype(mx.float16), group_size=group_size, bits=bits)
            tensors[name], tensors[module + ".scales"], tensors[module + ".biases"] = wq, scales, biases
            deq = mx.dequantize(wq, scales.astype(mx.float32), biases.astype(mx.float32), group_size=group_size,
                                bits=bits)
            reference[name] = torch.from_numpy(np.array(deq, dtype=np.float32))
        else:
            tensors[name] = mx.array(w).astype(mx.float16)
            reference[name] = torch.from_numpy(np.array(tensors[name].astype(mx.float32)))
    if model.config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None), tensors.pop("lm_head.scales", None), tensors.pop("lm_head.biases", None)
        reference["lm_head.weight"] = reference["model.embed_tokens.weight"]
    mx.save_safetensors(os.path.join(folder, "model.safetensors"), tensors, metadata={"format": "mlx"})
    path = os.path.join(folder, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["architectures"] = [type(model).__name__]  # config.save_pretrained alone leaves it out
    config["dtype"] = "float16"  # what the file holds
    config["quantization"] = config["quantization_config"] = {"group_size": group_size, "bits": bits}
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    return reference


def greedy(model, prompt):
    """Greedy tokens by a full forward pass per step (no cache), with each step's top-two gap."""
    ids, gaps = list(prompt), []
    with torch.no_grad():
        for _ in range(GREEDY_TOKENS):
            row = model(torch.tensor([ids])).logits[0, -1].to(torch.float32)
            top = torch.topk(row, 2).values
            gaps.append(float(top[0] - top[1]))
            ids.append(int(row.argmax()))
    return ids[len(prompt):], gaps


def make(out_dir, index, name, config_class, kwargs, dtype, quant):
    folder = os.path.join(out_dir, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    config = config_class(**kwargs)
    torch.manual_seed(index)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    randomize(model, 1000 + index)
    if quant:
        model.config.save_pretrained(folder)
        reference_state = quantize_mlx(model, folder, *quant)
        reference = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        reference.load_state_dict(reference_state)
    else:
        model.to(dtype).save_pretrained(folder, max_shard_size="20KB" if name.startswith("mistral") else "50GB")
        if name.startswith("llama"):
            to_hub_format(folder)
        # What kiln reads: the file's values, upcast exactly to float32.
        reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    reference.eval()

    rng = np.random.default_rng(27 + index)
    vocab = config.vocab_size
    forced = [rng.integers(3, vocab, size=FORCED_TOKENS).tolist() for _ in range(FORCED)]
    prompts = [rng.integers(3, vocab, size=PROMPT_TOKENS).tolist() for _ in range(GREEDY)]
    with torch.no_grad():
        logits = np.stack([reference(torch.tensor([ids])).logits[0].to(torch.float32).numpy() for ids in forced])
    logits.astype("<f4").tofile(os.path.join(folder, "logits.f32"))
    continuations = []
    for p in prompts:
        tokens, gaps = greedy(reference, p)
        continuations.append({"prompt": p, "continuation": tokens, "gaps": gaps})
    golden = {
        "model": name,
        "made_by": "tests/llm/golden/make_tiny_models.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "architecture": type(reference).__name__,
        "vocab_size": vocab,
        "forced": forced,
        "logits": "logits.f32: float32 [%d, %d, %d], transformers' logits at every position of 'forced'"
                  % (FORCED, FORCED_TOKENS, vocab),
        "greedy": continuations,
    }
    if quant:
        import mlx.core as mx

        golden["mlx"] = mx.__version__
        golden["quantization"] = {"bits": quant[0], "group_size": quant[1]}
    with open(os.path.join(folder, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    smallest = min(min(c["gaps"]) for c in continuations)
    print(f"{name}: {type(reference).__name__}, logits in [{logits.min():.2f}, {logits.max():.2f}], "
          f"smallest greedy gap {smallest:.4f}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "tiny")
    torch.set_num_threads(1)
    for i, (name, cls, kwargs, dtype, quant) in enumerate(MODELS):
        make(out_dir, i, name, cls, kwargs, dtype, quant)


if __name__ == "__main__":
    main()
