#!/usr/bin/env python3
"""Times MLX (mlx-cpu) and PyTorch (CPU) on the shapes of bench_llm_ops, so their
numbers sit beside kiln's (bench/run_llm_ops.sh). Prints one JSON object per line:
{"peer", "case", "ms"} with the median of 20 timed runs after 3 warm-ups. Either peer
is skipped when it is not installed.
    python3 bench/llm_ops_peers.py > bench/results/llm_ops_peers_<date>.jsonl
"""
import json
import statistics
import time

import numpy as np


def median_ms(fn, runs=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def emit(peer, case, ms):
    print(json.dumps({"peer": peer, "case": case, "ms": round(ms, 4)}), flush=True)


rng = np.random.default_rng(0)
CASES = {"gemv_1536x576": (1, 1536, 576), "gemv_4096x4096": (1, 4096, 4096), "gemm_512x1536x576": (512, 1536, 576)}

try:
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    for case, (m, n, k) in CASES.items():
        w = mx.array(rng.uniform(-1, 1, (n, k)).astype(np.float32)).astype(mx.bfloat16)
        wq, s, b = mx.quantize(w, group_size=64, bits=4)
        x = mx.array(rng.uniform(-1, 1, (m, k)).astype(np.float32))
        mx.eval(wq, s, b, x)
        emit("mlx", case, median_ms(lambda: mx.eval(mx.quantized_matmul(x, wq, s, b, group_size=64, bits=4))))
    for dt, name in ((mx.float32, "float32"), (mx.bfloat16, "bfloat16")):
        q = mx.array(rng.uniform(-1, 1, (1, 32, 1, 128)).astype(np.float32)).astype(dt)
        kk = mx.array(rng.uniform(-1, 1, (1, 8, 4096, 128)).astype(np.float32)).astype(dt)
        vv = mx.array(rng.uniform(-1, 1, (1, 8, 4096, 128)).astype(np.float32)).astype(dt)
        mx.eval(q, kk, vv)
        emit("mlx", f"sdpa_decode_{name}",
             median_ms(lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, kk, vv, scale=0.088))))
    q, kk, vv = (mx.array(rng.uniform(-1, 1, (1, 32, 512, 128)).astype(np.float32)) for _ in range(3))
    mx.eval(q, kk, vv)
    emit("mlx", "sdpa_prefill_causal",
         median_ms(lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, kk, vv, scale=0.088, mask="causal")), 5))
    x = mx.array(rng.uniform(-1, 1, (512, 4096)).astype(np.float32))
    w = mx.array(rng.uniform(-1, 1, (4096,)).astype(np.float32))
    emit("mlx", "rms_norm_512x4096", median_ms(lambda: mx.eval(mx.fast.rms_norm(x, w, 1e-5))))
    x = mx.array(rng.uniform(-1, 1, (1, 32, 512, 128)).astype(np.float32))
    emit("mlx", "rope_32x512x128", median_ms(lambda: mx.eval(mx.fast.rope(x, 128, traditional=False, base=10000.0,
                                                                         scale=1.0, offset=100))))
except ImportError:
    pass

try:
    import torch

    torch.manual_seed(0)
    for case, (m, n, k) in CASES.items():  # PyTorch on the dequantized bfloat16 weights
        w = torch.rand(n, k, dtype=torch.bfloat16) - 0.5
        x = torch.rand(m, k, dtype=torch.bfloat16) - 0.5
        emit("torch", case, median_ms(lambda: x @ w.T))
    for dt, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        q = torch.rand(1, 32, 1, 128, dtype=dt)
        kk = torch.rand(1, 8, 4096, 128, dtype=dt)
        vv = torch.rand(1, 8, 4096, 128, dtype=dt)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        emit("torch", f"sdpa_decode_{name}", median_ms(lambda: sdpa(q, kk, vv, scale=0.088, enable_gqa=True)))
    q, kk, vv = (torch.rand(1, 32, 512, 128) for _ in range(3))
    emit("torch", "sdpa_prefill_causal",
         median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, vv, is_causal=True, scale=0.088), 5))
    x = torch.rand(512, 4096)
    w = torch.rand(4096)
    emit("torch", "rms_norm_512x4096", median_ms(lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5)))
except ImportError:
    pass
