#!/usr/bin/env python3
"""The peers' side of the GPU peers benchmark: PyTorch eager, torch.compile, jax.jit and MLX on
the workloads of bench/gpu_peers.cpp (bench/run_gpu_peers.sh runs both and
bench/summarize_gpu_peers.py merges them; docs/benchmarks.md, "GPU peers").

Workloads (the same formulas as bench/gpu_peers.cpp; keep them in step):
  gelu       x: (64M,)               0.5*x*(1 + tanh(0.7978845608028654*(x + 0.044715*x*x*x)))
  swiglu     a, b: (16384, 4096)     a * sigmoid(a) * b                      (silu(a) * b)
  rmsnorm    x: (16384, 4096), w: (4096,)   x * rsqrt(mean(x*x, -1, keepdims) + 1e-6) * w
  softmax    x: (16384, 4096)        softmax over the last axis (each library's softmax op)
  layernorm  x: (16384, 4096), g, b: (4096,)
                                     m = mean(x, -1, keepdims); d = x - m
                                     d * rsqrt(mean(d*d, -1, keepdims) + 1e-5) * g + b
  chain10    x: (64M,)               y = sin(x); y = y*1.5; y = y + x; y = sin(y); y = y*x;
                                     y = y + 0.25; y = sin(y); y = y*2.0; y = y + x; y = sin(y)
  sum        x: (64M,)               sum of every element (one value)
  colsum     x: (16384, 4096)        sum over the first axis (4096 values)
  argmax     x: (64, 1M)             index of the largest element of each row
  scale_bias x: (16384, 4096), w, b: (4096,)
                                     x * w + b
  batch_bias x: (64, 256, 4096), b: (64, 1, 4096)
                                     x + b
  transpose  x: (16384, 4096)        x transposed, as a new row-major (4096, 16384) array
  transpose_add  x: (16384, 4096), y: (4096, 16384)
                                     transpose(x) + y
  transpose_bias x: (16384, 4096), b: (16384,)
                                     transpose(x) + b
  strided_mul    x: (16384, 8192)     x[:, 0::2] * x[:, 1::2]  (even columns times odd ones)
in float32 and bfloat16 (Python float constants keep the dtype in both libraries), on
fresh inputs uniform in [-3, 3] made on the device (not timed).

What is timed:
  torch_eager_ms    the formula above in PyTorch eager ops (one kernel per op).
  torch_builtin_ms  PyTorch eager with its fused library op where there is one:
                    F.gelu(approximate="tanh"), F.silu(a) * b, F.rms_norm, softmax,
                    F.layer_norm (none for chain10).
  torch_compile_ms  torch.compile(formula), default mode, after warm-up calls that compile.
  jax_jit_ms        jax.jit(formula), after warm-up calls that compile.
PyTorch: CUDA events around each call on the current stream, calls back to back, one
synchronize at the end; the median over --reps. JAX has no event API: each repetition
times --jax-inner calls dispatched back to back with the host clock (time.perf_counter)
and ends with block_until_ready on the last output, divided by the number of calls; the
median over --reps repetitions. This includes one dispatch-and-wait latency per
repetition (a few microseconds, spread over the inner calls).
  host_call   host time of one call (no synchronization inside the timed region) of a
              32-op elementwise function on 1k float32 elements, calls back to back with a
              synchronize every 64 calls outside the timed region; median per call.
              host_call_mlp: the same for a small MLP with matrix products,
              gelu_tanh(x @ W1 + b1) @ W2 + b2 in bfloat16, x (8, 512), W1 (512, 2048),
              W2 (2048, 512) (F.gelu(approximate="tanh"), jax.nn.gelu(approximate=True)).
  matmul_epilogue  gelu(x @ W + b) against the bare x @ W, bfloat16, 4096^3.
  copy        torch's device-to-device copy of 256 MiB (read + write), a cross-check of
              the ceiling that bench/gpu_peers.cpp measures with cuMemcpyDtoDAsync.
  llm         the language-model ops of bench/gpu_peers.cpp's llm section (llm_cases: 4-bit
              group-64 products on Llama-3-8B shapes, decode and causal prefill attention
              with 32 query and 8 key/value heads, rope, rms_norm; bfloat16):
              torch_eager_ms  PyTorch's own ops: x @ W.t() on bfloat16 weights of the same
                     shape (it has no 4-bit affine product), F.scaled_dot_product_attention
                     (enable_gqa=True), x * cos + rotate_half(x) * sin with the tables made
                     once, F.rms_norm; timed as above, each call after a read of 256 MiB
                     outside its events (the inputs come from device memory, not L2).
              mlx_ms  (--frameworks mlx) mx.quantized_matmul on mx.quantize's weights (kiln's
                     format), mx.fast.scaled_dot_product_attention, mx.fast.rope,
                     mx.fast.rms_norm, on MLX's GPU (MLX-CUDA); the host clock around mx.eval
                     of N calls made back to back, cycling through enough copies of the
                     inputs (up to 32) that together exceed 256 MiB, divided by N; the median
                     over --reps. This includes MLX's launch of each call where that is
                     longer than the kernel. An MLX without a GPU is skipped with the reason.

Missing jax, triton or mlx, or a JAX or MLX without a GPU backend, leaves those fields null
with the reason in "<framework>_error"; everything else still runs.

Usage: python3 bench/gpu_peers.py --out FILE.json [--reps 20] [--sections peers,host,matmul,llm]
         [--workloads gelu,...] [--dtypes float32,bfloat16]
         [--frameworks torch_eager,jax,torch_compile,mlx] [--scale K] [--budget-s S] [--cpu-dry-run]
--frameworks defaults to torch_eager,jax,torch_compile (run_gpu_peers.sh runs MLX in a
process of its own).
--cpu-dry-run runs on the CPU with host timers and --scale 256 (tests this script where
there is no GPU; its numbers mean nothing).
Exit status: 0 when everything ran, 1 when some measurement failed or was skipped (the
JSON holds the rest), 2 on bad arguments, 77 when none of the requested frameworks has a GPU.
"""
import os

# Before JAX is imported: do not grab 75% of the GPU up front (PyTorch shares the process).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse
import datetime
import functools
import gc
import json
import platform
import statistics
import sys
import time
import traceback

torch = None  # imported in main()
F = None
jax = None
jnp = None
mx = None

N = 1 << 26
ROWS, COLS = 16384, 4096
MM = 4096
MLP_M, MLP_K, MLP_HIDDEN = 8, 512, 2048
GELU_K = 0.7978845608028654  # sqrt(2 / pi)


# ---- the workloads, written once against an ops adapter ------------------------------
class TorchOps:
    @staticmethod
    def tanh(x):
        return torch.tanh(x)

    @staticmethod
    def sigmoid(x):
        return torch.sigmoid(x)

    @staticmethod
    def sin(x):
        return torch.sin(x)

    @staticmethod
    def rsqrt(x):
        return torch.rsqrt(x)

    @staticmethod
    def mean_last(x):
        return torch.mean(x, dim=-1, keepdim=True)

    @staticmethod
    def softmax_last(x):
        return torch.softmax(x, dim=-1)

    @staticmethod
    def maximum(a, b):
        return torch.maximum(a, b)

    @staticmethod
    def minimum(a, b):
        return torch.minimum(a, b)

    @staticmethod
    def matmul(a, b):
        return torch.matmul(a, b)

    @staticmethod
    def sum_axis(x, axis):
        return torch.sum(x) if axis is None else torch.sum(x, dim=axis)

    @staticmethod
    def argmax_last(x):
        return torch.argmax(x, dim=-1)

    @staticmethod
    def transpose_copy(x):
        return x.t().contiguous()

    @staticmethod
    def transpose(x):
        return x.t()

    @staticmethod
    def gelu_tanh(x):
        return F.gelu(x, approximate="tanh")


class JaxOps:
    @staticmethod
    def tanh(x):
        return jnp.tanh(x)

    @staticmethod
    def sigmoid(x):
        return jax.nn.sigmoid(x)

    @staticmethod
    def sin(x):
        return jnp.sin(x)

    @staticmethod
    def rsqrt(x):
        return jax.lax.rsqrt(x)

    @staticmethod
    def mean_last(x):
        return jnp.mean(x, axis=-1, keepdims=True)

    @staticmethod
    def softmax_last(x):
        return jax.nn.softmax(x, axis=-1)

    @staticmethod
    def maximum(a, b):
        return jnp.maximum(a, b)

    @staticmethod
    def minimum(a, b):
        return jnp.minimum(a, b)

    @staticmethod
    def matmul(a, b):
        return jnp.matmul(a, b)

    @staticmethod
    def sum_axis(x, axis):
        return jnp.sum(x, axis=axis)

    @staticmethod
    def argmax_last(x):
        return jnp.argmax(x, axis=-1)

    @staticmethod
    def transpose_copy(x):
        return jnp.transpose(x)  # a jitted function's output is a new row-major array

    @staticmethod
    def transpose(x):
        return jnp.transpose(x)

    @staticmethod
    def gelu_tanh(x):
        return jax.nn.gelu(x, approximate=True)


def gelu(m, x):
    return 0.5 * x * (1.0 + m.tanh(GELU_K * (x + 0.044715 * x * x * x)))


def swiglu(m, a, b):
    return a * m.sigmoid(a) * b


def rmsnorm(m, x, w):
    return x * m.rsqrt(m.mean_last(x * x) + 1e-6) * w


def softmax(m, x):
    return m.softmax_last(x)


def layernorm(m, x, g, b):
    mu = m.mean_last(x)
    d = x - mu
    return d * m.rsqrt(m.mean_last(d * d) + 1e-5) * g + b


def chain10(m, x):
    y = m.sin(x)
    y = y * 1.5
    y = y + x
    y = m.sin(y)
    y = y * x
    y = y + 0.25
    y = m.sin(y)
    y = y * 2.0
    y = y + x
    return m.sin(y)


def total(m, x):
    return m.sum_axis(x, None)


def colsum(m, x):
    return m.sum_axis(x, 0)


def argmax_rows(m, x):
    return m.argmax_last(x)


def scale_bias(m, x, w, b):
    return x * w + b


def batch_bias(m, x, b):
    return x + b


def transposed(m, x):
    return m.transpose_copy(x)


def transposed_add(m, x, y):
    return m.transpose(x) + y


def strided_mul(m, x):
    return x[:, 0::2] * x[:, 1::2]


def graph32(m, x, y):
    a = x + y
    b = x * y  # 2 ops
    for _ in range(5):
        a = a * b + 0.5  # 2
        b = m.maximum(b - a, x)  # 2
        a = m.minimum(a, y) - b  # 2
    return a  # 2 + 5 * 6 = 32 ops


def matmul_gelu(m, x, w, b):
    return gelu(m, m.matmul(x, w) + b)


def matmul_only(m, x, w):
    return m.matmul(x, w)


def mlp(m, x, w1, b1, w2, b2):
    return m.matmul(m.gelu_tanh(m.matmul(x, w1) + b1), w2) + b2


# PyTorch's fused library ops where there is one (torch_builtin_ms).
def builtin_gelu(x):
    return F.gelu(x, approximate="tanh")


def builtin_swiglu(a, b):
    return F.silu(a) * b


def builtin_rmsnorm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def builtin_softmax(x):
    return torch.softmax(x, dim=-1)


def builtin_layernorm(x, g, b):
    return F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)


def builtin_matmul_gelu(x, w, b):
    return F.gelu(torch.matmul(x, w) + b, approximate="tanh")


def workloads(scale):
    n = N // scale
    rows, cols = ROWS // scale, COLS
    m = rows * cols
    return [
        # name, input shapes, formula, builtin, fewest elements moved
        ("gelu", [(n,)], gelu, builtin_gelu, 2 * n),
        ("swiglu", [(rows, cols), (rows, cols)], swiglu, builtin_swiglu, 3 * m),
        ("rmsnorm", [(rows, cols), (cols,)], rmsnorm, builtin_rmsnorm, 2 * m + cols),
        ("softmax", [(rows, cols)], softmax, builtin_softmax, 2 * m),
        ("layernorm", [(rows, cols), (cols,), (cols,)], layernorm, builtin_layernorm, 2 * m + 2 * cols),
        ("chain10", [(n,)], chain10, None, 2 * n),
        ("sum", [(n,)], total, None, n),
        ("colsum", [(rows, cols)], colsum, None, m + cols),
        ("argmax", [(64, n // 64)], argmax_rows, None, n),
        ("scale_bias", [(rows, cols), (cols,), (cols,)], scale_bias, None, 2 * m + 2 * cols),
        ("batch_bias", [(64, rows // 64, cols), (64, 1, cols)], batch_bias, None, 2 * m + 64 * cols),
        ("transpose", [(rows, cols)], transposed, None, 2 * m),
        ("transpose_add", [(rows, cols), (cols, rows)], transposed_add, None, 3 * m),
        ("transpose_bias", [(rows, cols), (rows,)], transposed_add, None, 2 * m + rows),
        ("strided_mul", [(rows, 2 * cols)], strided_mul, None, 3 * m),
    ]


DTYPE_SIZE = {"float32": 4, "bfloat16": 2, "float16": 2}

# ---- the llm section: language-model ops on Llama-3-8B shapes, bfloat16 -------------------
# The cases of bench/gpu_peers.cpp llm_cases (keep them in step); kiln's record of each case
# holds its bytes and flop.
LLM_GROUP, LLM_BITS = 64, 4
ROPE_BASE, NORM_EPS = 500000.0, 1e-5
HQ, HKV, HD = 32, 8, 128
SDPA_SCALE = HD ** -0.5
L2_BYTES = 1 << 28  # the read before each timed torch call; the inputs MLX cycles through


def llm_divisor(scale):
    """The largest power of two <= min(scale, 16) (whole quantization groups)."""
    d = 1
    while d * 2 <= min(scale, 16):
        d *= 2
    return d


def llm_cases(scale):
    """(name, kind, dims): qmm (m, n, k): x (m, k) @ W (n, k)^T; sdpa (lq, lk, causal);
    rope (length,); rms_norm (rows, cols)."""
    d = llm_divisor(scale)
    ctx, prompt = 4096 // d, 512 // d
    return [
        ("qmm_decode_4096x4096", "qmm", (1, 4096 // d, 4096 // d)),
        ("qmm_decode_14336x4096", "qmm", (1, 14336 // d, 4096 // d)),
        ("qmm_decode_28672x4096", "qmm", (1, 28672 // d, 4096 // d)),
        ("qmm_decode_4096x14336", "qmm", (1, 4096 // d, 14336 // d)),
        ("qmm_decode_128256x4096", "qmm", (1, 128256 // d, 4096 // d)),
        ("qmm_decode8_14336x4096", "qmm", (8, 14336 // d, 4096 // d)),
        ("qmm_decode32_14336x4096", "qmm", (32, 14336 // d, 4096 // d)),
        ("qmm_decode64_14336x4096", "qmm", (64, 14336 // d, 4096 // d)),
        ("qmm_prefill512_14336x4096", "qmm", (prompt, 14336 // d, 4096 // d)),
        ("sdpa_decode_4096", "sdpa", (1, ctx, False)),
        ("sdpa_prefill_512_causal", "sdpa", (prompt, prompt, True)),
        ("rope_32x512x128", "rope", (prompt,)),
        ("rms_norm_512x4096", "rms_norm", (prompt, 4096)),
    ]


def torch_rope(x, cos, sin):
    """Rotary embedding of the halves, cos and sin (length, HD) made once (as transformers does)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def torch_rope_tables(ctx, length):
    inv_freq = ROPE_BASE ** (-torch.arange(0, HD, 2, dtype=torch.float32) / HD)
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq).repeat(1, 2)
    dev = "cpu" if ctx.cpu else "cuda"
    return angles.cos().to(dev, torch.bfloat16), angles.sin().to(dev, torch.bfloat16)


def torch_llm_case(ctx, kind, dims):
    """(fn, args): the case in PyTorch's own ops, bfloat16. PyTorch has no 4-bit affine product:
    it multiplies bfloat16 weights of the same shape (what the 4-bit ones dequantize to)."""
    def rand(*shape):
        return torch_inputs(ctx, [shape], "bfloat16", -1.0, 1.0)[0]

    if kind == "qmm":
        m, n, k = dims
        return (lambda x, w: x @ w.t()), (rand(m, k), rand(n, k))
    if kind == "sdpa":
        lq, lk, causal = dims
        fn = functools.partial(F.scaled_dot_product_attention, is_causal=causal, scale=SDPA_SCALE, enable_gqa=True)
        return fn, (rand(1, HQ, lq, HD), rand(1, HKV, lk, HD), rand(1, HKV, lk, HD))
    if kind == "rope":
        (length,) = dims
        return torch_rope, (rand(1, HQ, length, HD),) + torch_rope_tables(ctx, length)
    rows, cols = dims
    return (lambda x, w: F.rms_norm(x, (cols,), w, eps=NORM_EPS)), (rand(rows, cols), rand(cols))


def mlx_llm_case(kind, dims):
    """(make, fn): make() returns fresh evaluated inputs, fn the case in MLX's ops (the same
    4-bit group-64 format as kiln's, mx.fast kernels)."""
    def rand(*shape):
        return mx.random.uniform(-1.0, 1.0, shape).astype(mx.bfloat16)

    if kind == "qmm":
        m, n, k = dims

        def make():
            return (rand(m, k),) + tuple(mx.quantize(rand(n, k), group_size=LLM_GROUP, bits=LLM_BITS))

        def fn(x, w, s, b):
            return mx.quantized_matmul(x, w, s, b, transpose=True, group_size=LLM_GROUP, bits=LLM_BITS)
    elif kind == "sdpa":
        lq, lk, causal = dims

        def make():
            return rand(1, HQ, lq, HD), rand(1, HKV, lk, HD), rand(1, HKV, lk, HD)

        def fn(q, k, v):
            return mx.fast.scaled_dot_product_attention(q, k, v, scale=SDPA_SCALE, mask="causal" if causal else None)
    elif kind == "rope":
        (length,) = dims

        def make():
            return (rand(1, HQ, length, HD),)

        def fn(x):
            return mx.fast.rope(x, HD, traditional=False, base=ROPE_BASE, scale=1.0, offset=0)
    else:
        rows, cols = dims

        def make():
            return rand(rows, cols), rand(cols)

        def fn(x, w):
            return mx.fast.rms_norm(x, w, NORM_EPS)

    def made():
        args = make()
        mx.eval(args)
        return args

    return made, fn


# ---- timing ---------------------------------------------------------------------------
def median(v):
    return statistics.median(v) if v else None


class Ctx:
    def __init__(self, args):
        self.args = args
        self.cpu = args.cpu_dry_run
        self.start = time.monotonic()
        self.records = {}  # (section, workload, dtype) -> dict
        self.meta = {}
        self.errors = []

    def over_budget(self):
        return time.monotonic() - self.start > self.args.budget_s

    def rec(self, section, workload, dtype):
        key = (section, workload, dtype)
        if key not in self.records:
            self.records[key] = {"section": section, "workload": workload, "dtype": dtype}
        return self.records[key]

    def fail(self, rec, field, what, exc):
        msg = f"{what}: {type(exc).__name__}: {exc}".strip()
        if len(msg) > 600:
            msg = msg[:600] + "..."
        print(f"gpu_peers.py: {msg}", file=sys.stderr, flush=True)
        if os.environ.get("GPU_PEERS_TRACEBACK"):
            traceback.print_exc()
        rec[field] = msg
        self.errors.append(msg)

    def write(self):
        out = dict(self.meta)
        out["elapsed_s"] = round(time.monotonic() - self.start, 2)
        out["errors"] = self.errors
        out["records"] = list(self.records.values())
        tmp = self.args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, self.args.out)


def torch_sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def time_torch(ctx, fn, args, reps, warmup=3, flush=None):
    """Median ms per call: CUDA events around each call, back to back (host clock on the CPU);
    flush() before each call, outside the events."""
    flush = flush or (lambda: None)
    for _ in range(warmup):
        fn(*args)
    if ctx.cpu:
        ts = []
        for _ in range(reps):
            flush()
            t0 = time.perf_counter()
            fn(*args)
            ts.append((time.perf_counter() - t0) * 1e3)
        return median(ts), ts
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        flush()
        s.record()
        fn(*args)
        e.record()
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) for s, e in ev]
    return median(ts), ts


def time_jax(fn, args, reps, inner, warmup=3):
    """Median ms per call: host clock over `inner` calls back to back ending in block_until_ready."""
    for _ in range(warmup):
        fn(*args).block_until_ready()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            out = fn(*args)
        out.block_until_ready()
        ts.append((time.perf_counter() - t0) * 1e3 / inner)
        del out
    return median(ts), ts


def time_mlx(fn, arg_sets, reps, calls):
    """Median ms per call: the host clock around mx.eval of `calls` calls made back to back,
    cycling through arg_sets (so that the inputs of most calls are not in the L2 cache)."""
    for args in arg_sets:
        mx.eval(fn(*args))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        mx.eval([fn(*arg_sets[i % len(arg_sets)]) for i in range(calls)])
        ts.append((time.perf_counter() - t0) * 1e3 / calls)
    return median(ts), ts


def host_call_us(fn, args, calls, sync, sync_every=64, warmup=200):
    for _ in range(warmup):
        fn(*args)
    sync()
    ts = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        out = fn(*args)
        ts.append((time.perf_counter_ns() - t0) / 1e3)
        if (i + 1) % sync_every == 0:
            sync(out)
        del out
    sync()
    ts.sort()
    return median(ts), ts[len(ts) // 10], ts[len(ts) * 9 // 10]


# ---- inputs ---------------------------------------------------------------------------
def torch_dtype(name):
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def torch_inputs(ctx, shapes, dtype, lo=-3.0, hi=3.0):
    dev = "cpu" if ctx.cpu else "cuda"
    return [(torch.rand(s, device=dev, dtype=torch.float32) * (hi - lo) + lo).to(torch_dtype(dtype)) for s in shapes]


_jax_key = [None]


def jax_inputs(shapes, dtype, lo=-3.0, hi=3.0):
    out = []
    for s in shapes:
        _jax_key[0], k = jax.random.split(_jax_key[0])
        x = jax.random.uniform(k, s, jnp.float32, lo, hi).astype(jnp.dtype(dtype))
        out.append(x.block_until_ready())
    return out


def torch_compiled(fn):
    c = torch.compile(fn)  # default mode
    return c


# ---- sections -------------------------------------------------------------------------
def torch_copy(ctx):
    try:
        nbytes = (1 << 28) // ctx.args.scale
        src = torch.empty(nbytes, dtype=torch.uint8, device="cpu" if ctx.cpu else "cuda").fill_(1)
        dst = torch.empty_like(src)
        ms, _ = time_torch(ctx, dst.copy_, (src,), ctx.args.reps)
        ctx.meta["torch_copy_ms"] = ms
        ctx.meta["torch_copy_TBps"] = 2 * nbytes / (ms * 1e-3) / 1e12
        print(f"torch copy: {nbytes >> 20} MiB in {ms:.4f} ms = {ctx.meta['torch_copy_TBps']:.3f} TB/s", flush=True)
    except Exception as e:  # noqa: BLE001
        ctx.meta["torch_copy_error"] = f"{type(e).__name__}: {e}"
        ctx.errors.append("torch copy: " + ctx.meta["torch_copy_error"])


def selected(ctx):
    for name, shapes, formula, builtin, elems in workloads(ctx.args.scale):
        if ctx.args.workloads and name not in ctx.args.workloads:
            continue
        for dt in ctx.args.dtypes:
            yield name, shapes, formula, builtin, elems, dt


def each_peer_case(ctx, error_field, label, measure, budgeted=False, torch_memory=True):
    """measure(r, name, shapes, formula, builtin, dt) for every selected workload and dtype, r
    its record: a failure goes to r[error_field]; the results are written after each case."""
    for name, shapes, formula, builtin, elems, dt in selected(ctx):
        r = ctx.rec("peers", name, dt)
        r["bytes"] = elems * DTYPE_SIZE[dt]
        what = f"{name} {dt} {label}"
        if budgeted and ctx.over_budget():
            ctx.fail(r, error_field, what, RuntimeError("skipped: --budget-s exceeded"))
            continue
        try:
            measure(r, name, shapes, formula, builtin, dt)
        except Exception as e:  # noqa: BLE001
            ctx.fail(r, error_field, what, e)
        ctx.write()
        gc.collect()
        if torch_memory and not ctx.cpu:
            torch.cuda.empty_cache()


def peers_torch_eager(ctx):
    def measure(r, name, shapes, formula, builtin, dt):
        x = torch_inputs(ctx, shapes, dt)
        ms, _ = time_torch(ctx, functools.partial(formula, TorchOps), x, ctx.args.reps)
        r["torch_eager_ms"] = ms
        r["torch_builtin_ms"] = None
        if builtin is not None:
            try:
                r["torch_builtin_ms"], _ = time_torch(ctx, builtin, x, ctx.args.reps)
            except Exception as e:  # noqa: BLE001 (an older PyTorch may lack F.rms_norm)
                ctx.fail(r, "torch_builtin_error", f"{name} {dt} torch builtin", e)
        print(f"{name:<10} {dt:<9} torch eager {ms:9.4f} ms  builtin {r['torch_builtin_ms'] or float('nan'):9.4f} ms",
              flush=True)

    each_peer_case(ctx, "torch_eager_error", "torch eager", measure)


def peers_torch_compile(ctx):
    def measure(r, name, shapes, formula, builtin, dt):
        x = torch_inputs(ctx, shapes, dt)
        fn = torch_compiled(functools.partial(formula, TorchOps))
        t0 = time.perf_counter()
        fn(*x)
        torch_sync()
        r["torch_compile_first_call_s"] = time.perf_counter() - t0
        ms, _ = time_torch(ctx, fn, x, ctx.args.reps)
        r["torch_compile_ms"] = ms
        print(f"{name:<10} {dt:<9} torch.compile {ms:9.4f} ms (first call {r['torch_compile_first_call_s']:.1f} s)",
              flush=True)

    each_peer_case(ctx, "torch_compile_error", "torch.compile", measure, budgeted=True)


def peers_jax(ctx):
    def measure(r, name, shapes, formula, builtin, dt):
        x = jax_inputs(shapes, dt)
        fn = jax.jit(functools.partial(formula, JaxOps))
        t0 = time.perf_counter()
        fn(*x).block_until_ready()
        r["jax_jit_first_call_s"] = time.perf_counter() - t0
        ms, _ = time_jax(fn, x, ctx.args.reps, ctx.args.jax_inner)
        r["jax_jit_ms"] = ms
        print(f"{name:<10} {dt:<9} jax.jit {ms:9.4f} ms", flush=True)

    each_peer_case(ctx, "jax_jit_error", "jax.jit", measure, torch_memory=False)


def host_rec(ctx):
    r = ctx.rec("host_call", "host_call_32op", "float32")
    r["elements"] = 1000
    return r


def mlp_rec(ctx):
    r = ctx.rec("host_call", "host_call_mlp", "bfloat16")
    r["m"], r["k"], r["hidden"] = MLP_M, MLP_K, MLP_HIDDEN
    return r


MLP_SHAPES = [(MLP_M, MLP_K), (MLP_K, MLP_HIDDEN), (MLP_HIDDEN,), (MLP_HIDDEN, MLP_K), (MLP_K,)]


def host_call_torch(ctx, r, what, formula, inputs, compiled, calls):
    """host_call_us of formula on inputs() (made inside, so that a failure is recorded) into r."""
    field = "torch_compile" if compiled else "torch_eager"
    if compiled and ctx.over_budget():
        ctx.fail(r, field + "_error", f"{what} torch.compile", RuntimeError("skipped: --budget-s exceeded"))
        return
    try:
        args = tuple(inputs())
        fn = functools.partial(formula, TorchOps)
        if compiled:
            fn = torch_compiled(fn)
        med, p10, p90 = host_call_us(fn, args, calls, lambda *_: torch_sync())
        r[field + "_us"], r[field + "_p90_us"] = med, p90
        print(f"{what}, {field}: {med:.2f} us per call (p90 {p90:.2f})", flush=True)
    except Exception as e:  # noqa: BLE001
        ctx.fail(r, field + "_error", f"{what} {field}", e)
    ctx.write()


def host_call_jax(ctx, r, what, formula, inputs, calls):
    try:
        args = tuple(inputs())
        fn = jax.jit(functools.partial(formula, JaxOps))

        def sync(out=None):
            if out is not None:
                out.block_until_ready()
            else:
                fn(*args).block_until_ready()

        med, p10, p90 = host_call_us(fn, args, calls, sync)
        r["jax_jit_us"], r["jax_jit_p90_us"] = med, p90
        print(f"{what}, jax.jit: {med:.2f} us per call (p90 {p90:.2f})", flush=True)
    except Exception as e:  # noqa: BLE001
        ctx.fail(r, "jax_jit_error", f"{what} jax.jit", e)
    ctx.write()


def host_torch(ctx, compiled):
    host_call_torch(ctx, host_rec(ctx), "host call 32 ops", graph32,
                    lambda: torch_inputs(ctx, [(1000,), (1000,)], "float32"), compiled, 20000 if compiled else 3000)


def host_jax(ctx):
    host_call_jax(ctx, host_rec(ctx), "host call 32 ops", graph32, lambda: jax_inputs([(1000,), (1000,)], "float32"),
                  20000)


# Fewer calls than the 32-op function: each computes about 34 MFLOP.
def host_mlp_torch(ctx, compiled):
    host_call_torch(ctx, mlp_rec(ctx), "host call MLP", mlp,
                    lambda: torch_inputs(ctx, MLP_SHAPES, "bfloat16", -1.0, 1.0), compiled, 5000 if compiled else 3000)


def host_mlp_jax(ctx):
    host_call_jax(ctx, mlp_rec(ctx), "host call MLP", mlp, lambda: jax_inputs(MLP_SHAPES, "bfloat16", -1.0, 1.0), 5000)


def mm_rec(ctx):
    r = ctx.rec("matmul_epilogue", "matmul_gelu", "bfloat16")
    r["m"] = r["n"] = r["k"] = MM // min(ctx.args.scale, 16)
    return r


def matmul_torch(ctx, compiled):
    r = mm_rec(ctx)
    n = r["m"]
    field = "torch_compile" if compiled else "torch_eager"
    if compiled and ctx.over_budget():
        ctx.fail(r, field + "_error", "matmul torch.compile", RuntimeError("skipped: --budget-s exceeded"))
        return
    try:
        x, w, b = torch_inputs(ctx, [(n, n), (n, n), (n,)], "bfloat16", -1.0, 1.0)
        reps = max(10, ctx.args.reps)
        if compiled:
            fn = torch_compiled(functools.partial(matmul_gelu, TorchOps))
            r["torch_compile_ms"], _ = time_torch(ctx, fn, (x, w, b), reps)
        else:
            r["torch_matmul_ms"], _ = time_torch(ctx, torch.matmul, (x, w), reps)
            r["torch_eager_ms"], _ = time_torch(ctx, functools.partial(matmul_gelu, TorchOps), (x, w, b), reps)
            r["torch_builtin_ms"], _ = time_torch(ctx, builtin_matmul_gelu, (x, w, b), reps)
        print(f"matmul_gelu {n}^3 bfloat16 {field}: "
              + ", ".join(f"{k} {v:.4f}" for k, v in r.items() if k.startswith("torch_") and k.endswith("_ms")), flush=True)
        del x, w, b
    except Exception as e:  # noqa: BLE001
        ctx.fail(r, field + "_error", f"matmul {field}", e)
    ctx.write()


def matmul_jax(ctx):
    r = mm_rec(ctx)
    n = r["m"]
    try:
        x, w, b = jax_inputs([(n, n), (n, n), (n,)], "bfloat16", -1.0, 1.0)
        reps = max(10, ctx.args.reps)
        mm = jax.jit(functools.partial(matmul_only, JaxOps))
        fn = jax.jit(functools.partial(matmul_gelu, JaxOps))
        r["jax_matmul_ms"], _ = time_jax(mm, (x, w), reps, 5)
        r["jax_jit_ms"], _ = time_jax(fn, (x, w, b), reps, 5)
        print(f"matmul_gelu {n}^3 bfloat16 jax: matmul {r['jax_matmul_ms']:.4f} ms, jit {r['jax_jit_ms']:.4f} ms",
              flush=True)
    except Exception as e:  # noqa: BLE001
        ctx.fail(r, "jax_jit_error", "matmul jax.jit", e)
    ctx.write()


def each_llm_case(ctx, error_field, label, measure):
    """measure(r, kind, dims) for every selected llm case, r its record (as each_peer_case)."""
    for name, kind, dims in llm_cases(ctx.args.scale):
        if ctx.args.workloads and name not in ctx.args.workloads:
            continue
        r = ctx.rec("llm", name, "bfloat16")
        try:
            measure(r, kind, dims)
        except Exception as e:  # noqa: BLE001
            ctx.fail(r, error_field, f"{name} {label}", e)
        ctx.write()
        gc.collect()
        if torch is not None and not ctx.cpu:
            torch.cuda.empty_cache()


def llm_torch(ctx):
    """PyTorch eager, timed as the peers are, each call after a read of L2_BYTES outside its
    events (as bench/gpu_peers.cpp's L2Flush: the inputs come from device memory, and the host
    has launched the call before the GPU gets to it)."""
    scratch = torch.ones(L2_BYTES // 4 // ctx.args.scale, dtype=torch.float32, device="cpu" if ctx.cpu else "cuda")

    def measure(r, kind, dims):
        fn, args = torch_llm_case(ctx, kind, dims)
        r["torch_eager_ms"], _ = time_torch(ctx, fn, args, ctx.args.reps, flush=scratch.sum)
        print(f"{r['workload']:<26} torch eager {r['torch_eager_ms']:9.4f} ms", flush=True)

    each_llm_case(ctx, "torch_eager_error", "torch eager", measure)
    del scratch


def llm_mlx(ctx):
    def measure(r, kind, dims):
        make, fn = mlx_llm_case(kind, dims)
        args = make()
        out = fn(*args)
        mx.eval(out)
        nbytes = sum(a.nbytes for a in args) + out.nbytes
        copies = max(1, min(32, -(-(L2_BYTES // ctx.args.scale) // nbytes)))
        arg_sets = [args] + [make() for _ in range(copies - 1)]
        calls = max(copies, 10)
        r["mlx_ms"], _ = time_mlx(fn, arg_sets, ctx.args.reps, calls)
        r["mlx_input_copies"], r["mlx_calls"] = copies, calls
        print(f"{r['workload']:<26} mlx {r['mlx_ms']:9.4f} ms ({calls} calls over {copies} copies of the inputs)",
              flush=True)

    each_llm_case(ctx, "mlx_error", "mlx", measure)


# ---- main -----------------------------------------------------------------------------
def load_torch(ctx):
    global torch, F
    try:
        import torch as t
        import torch.nn.functional as f
    except Exception as e:  # noqa: BLE001
        return f"PyTorch could not be imported: {type(e).__name__}: {e}"
    torch, F = t, f
    ctx.meta["torch_version"] = torch.__version__
    ctx.meta["torch_cuda"] = getattr(torch.version, "cuda", None)
    if not ctx.cpu:
        if not torch.cuda.is_available():
            return "PyTorch sees no CUDA device"
        ctx.meta["device"] = torch.cuda.get_device_name(0)
    # One traced entry per workload and dtype; keep dynamo from falling back to eager.
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, max(64, getattr(torch._dynamo.config, knob)))
    return None


def load_triton(ctx):
    if ctx.cpu:
        return None  # inductor's CPU backend needs no triton
    try:
        import triton
    except Exception as e:  # noqa: BLE001
        return f"triton could not be imported ({type(e).__name__}: {e}): torch.compile cannot make GPU kernels"
    ctx.meta["triton_version"] = getattr(triton, "__version__", "?")
    return None


def load_jax(ctx):
    global jax, jnp
    try:
        import jax as j
        import jax.numpy as jn
    except Exception as e:  # noqa: BLE001
        return f"JAX could not be imported: {type(e).__name__}: {e}"
    jax, jnp = j, jn
    ctx.meta["jax_version"] = jax.__version__
    try:
        devs = jax.devices()
    except Exception as e:  # noqa: BLE001
        return f"JAX has no usable backend: {type(e).__name__}: {e}"
    ctx.meta["jax_devices"] = [str(d) for d in devs]
    if not ctx.cpu and devs[0].platform not in ("gpu", "cuda"):
        return f"JAX has no GPU backend (its devices: {', '.join(str(d) for d in devs)})"
    if not ctx.cpu:
        ctx.meta.setdefault("device", getattr(devs[0], "device_kind", str(devs[0])))
    _jax_key[0] = jax.random.PRNGKey(0)
    return None


def load_mlx(ctx):
    global mx
    try:
        import mlx.core as m
    except Exception as e:  # noqa: BLE001
        return f"MLX could not be imported ({type(e).__name__}: {e}): MLX not measured"
    mx = m
    ctx.meta["mlx_version"] = getattr(mx, "__version__", "?")
    if ctx.cpu:
        mx.set_default_device(mx.cpu)
        return None
    if not mx.is_available(mx.gpu):
        return "MLX has no GPU device here (MLX-CUDA, the mlx[cuda] package, is not installed): MLX not measured"
    mx.set_default_device(mx.gpu)
    ctx.meta.setdefault("device", str(mx.default_device()))
    return None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="gpu_peers_python.json")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--jax-inner", type=int, default=10, help="calls per timed JAX repetition")
    p.add_argument("--sections", default="peers,host,matmul,llm")
    p.add_argument("--workloads", default="")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--frameworks", default="torch_eager,jax,torch_compile",
                   help="of torch_eager, jax, torch_compile, mlx (mlx: the llm section only)")
    p.add_argument("--scale", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=400.0,
                   help="start no new torch.compile measurement after this many seconds")
    p.add_argument("--cpu-dry-run", action="store_true")
    a = p.parse_args(argv)
    a.sections = [s for s in a.sections.split(",") if s]
    a.workloads = [s for s in a.workloads.split(",") if s]
    a.dtypes = [s for s in a.dtypes.split(",") if s]
    a.frameworks = [s for s in a.frameworks.split(",") if s]
    for d in a.dtypes:
        if d not in DTYPE_SIZE:
            p.error(f"unsupported dtype {d}")
    if a.scale <= 0:
        a.scale = 256 if a.cpu_dry_run else 1
    a.reps = max(1, a.reps)
    return a


def main(argv):
    args = parse_args(argv)
    ctx = Ctx(args)
    ctx.meta.update({
        "harness": "bench/gpu_peers.py",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "reps": args.reps,
        "jax_inner": args.jax_inner,
        "scale": args.scale,
        "timing": ("host perf_counter (CPU dry run: numbers mean nothing)" if args.cpu_dry_run else
                   "torch: CUDA events around each call, back to back, median; "
                   "jax: host clock over jax_inner calls + block_until_ready, median"),
    })
    fw = args.frameworks
    want_torch = "torch_eager" in fw or "torch_compile" in fw
    # Only what was asked for is imported (run_gpu_peers.sh runs JAX and PyTorch in separate
    # processes, so that their CUDA libraries and memory pools never meet).
    why_torch = load_torch(ctx) if want_torch else "not requested (--frameworks)"
    why_triton = (load_triton(ctx) if why_torch is None else why_torch) if "torch_compile" in fw else "not requested"
    why_jax = load_jax(ctx) if "jax" in fw else "not requested (--frameworks)"
    why_mlx = load_mlx(ctx) if "mlx" in fw else "not requested (--frameworks)"
    if want_torch:
        ctx.meta["torch_error"] = why_torch
    if "torch_compile" in fw:
        ctx.meta["torch_compile_error"] = why_triton
    if "jax" in fw:
        ctx.meta["jax_error"] = why_jax
    if "mlx" in fw:
        ctx.meta["mlx_error"] = why_mlx
    for name, w in (("torch_eager", why_torch), ("torch_compile", why_triton), ("jax", why_jax), ("mlx", why_mlx)):
        if name in fw and w and w not in ctx.errors:
            print(f"gpu_peers.py: {w}", file=sys.stderr, flush=True)
            ctx.errors.append(w)
    ctx.write()
    if (why_torch or not want_torch) and (why_jax or "jax" not in fw) and (why_mlx or "mlx" not in fw):
        print("gpu_peers.py: none of the requested frameworks can run here: nothing measured", file=sys.stderr)
        return 77
    print(f"gpu_peers.py: torch {ctx.meta.get('torch_version')} triton {ctx.meta.get('triton_version')} "
          f"jax {ctx.meta.get('jax_version')} mlx {ctx.meta.get('mlx_version')} on {ctx.meta.get('device', 'cpu')}",
          flush=True)

    sec = args.sections
    if why_torch is None:
        torch_copy(ctx)
    # Cheap compiles first, torch.compile last: a run cut short keeps the most.
    if why_torch is None and "torch_eager" in fw:
        if "peers" in sec:
            peers_torch_eager(ctx)
        if "matmul" in sec:
            matmul_torch(ctx, compiled=False)
        if "host" in sec:
            host_torch(ctx, compiled=False)
            host_mlp_torch(ctx, compiled=False)
        if "llm" in sec:
            llm_torch(ctx)
    if why_torch is None and not ctx.cpu:
        torch.cuda.empty_cache()
    if why_jax is None and "jax" in fw:
        if "peers" in sec:
            peers_jax(ctx)
        if "matmul" in sec:
            matmul_jax(ctx)
        if "host" in sec:
            host_jax(ctx)
            host_mlp_jax(ctx)
    if why_mlx is None and "mlx" in fw and "llm" in sec:
        llm_mlx(ctx)
    if why_torch is None and why_triton is None and "torch_compile" in fw:
        if "peers" in sec:
            peers_torch_compile(ctx)
        if "host" in sec:
            host_torch(ctx, compiled=True)
            host_mlp_torch(ctx, compiled=True)
        if "matmul" in sec:
            matmul_torch(ctx, compiled=True)
    ctx.write()
    print(f"wrote {args.out} ({len(ctx.records)} records, {len(ctx.errors)} errors, "
          f"{time.monotonic() - ctx.start:.0f} s)", flush=True)
    return 0 if not ctx.errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
