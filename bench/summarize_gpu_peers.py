#!/usr/bin/env python3
"""Merges the two halves of the GPU peers benchmark into the results JSON and a markdown table.

  summarize_gpu_peers.py --kiln KILN.json --python PY.json [--python PY2.json ...]
                         --json OUT.json --md OUT.md

KILN.json comes from bench/gpu_peers.cpp, each PY.json from a run of bench/gpu_peers.py
(run_gpu_peers.sh runs PyTorch and JAX in separate processes; their records are merged,
a measured value winning over a null). Any file may be missing or partial: its fields are
then null. OUT.json is a list with one object per
workload and dtype ("section": "peers"), then one object each for "host_call" (two: the
32-op function and the MLP), "compile_latency" and "matmul_epilogue", then one per
language-model op ("section": "llm"), then one "meta" object (device, versions, copy
ceiling, errors). Derived fields:

  copy_ceiling_TBps          the faster of kiln's two device-to-device copies (256 MiB,
                             cuMemcpyDtoDAsync, read + write), else torch's copy
  <x>_TBps                   bytes / <x>_ms, bytes = the fewest that must move
  <x>_fraction_of_copy       <x>_TBps / copy_ceiling_TBps
  speedup_vs_<peer>          <peer>_ms / kiln_ms (above 1: kiln is faster); for
                             host_call_mlp <peer>_us / kiln_us
  llm: kiln_TBps and kiln_fraction_of_copy for the ops bound by bytes, kiln_TFLOPs for
       those bound by arithmetic (flop > 0), kiln_fraction_of_matmul (kiln's bfloat16
       cuBLASLt matmul on the dequantized weights / the 4-bit prefill product; target
       >= 0.60), speedup_vs_torch_eager and speedup_vs_mlx

Targets: host_call_32op kiln_us <= 5 (host_call_mlp has none); compile_latency cold_ms <= 100 and warm_disk_ms <= 5;
matmul_epilogue kiln_ratio (compiled gelu(x @ W + b) / bare matmul) <= 1.05.
Standard library only.
"""
import argparse
import json
import os
import sys

PEER_MS = ("torch_eager_ms", "torch_builtin_ms", "torch_compile_ms", "jax_jit_ms")
WORKLOAD_ORDER = ["gelu", "swiglu", "rmsnorm", "softmax", "layernorm", "chain10", "sum", "colsum", "argmax", "scale_bias",
                  "batch_bias", "transpose", "transpose_add", "transpose_bias", "strided_mul"]
LLM_PEER_MS = ("torch_eager_ms", "mlx_ms")
TARGET_OF_MATMUL = 0.60
DTYPE_ORDER = ["float32", "bfloat16", "float16"]


def load(path, what):
    if not path:
        return {}, f"{what}: no file given"
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return {}, f"{what}: {path} not found"
    except (OSError, ValueError) as e:
        return {}, f"{what}: {path} unreadable ({e})"


def combine(docs):
    """One document from several gpu_peers.py outputs: records merged by key, non-null values win."""
    out = {"records": [], "errors": []}
    recs = {}
    for d in docs:
        for k, v in d.items():
            if k == "records":
                continue
            if k == "errors":
                out["errors"] += [e for e in v or [] if e not in out["errors"]]
            elif v is not None or k not in out:
                out[k] = v
        for r in d.get("records", []) or []:
            key = (r.get("section"), r.get("workload"), r.get("dtype"))
            cur = recs.setdefault(key, {})
            for k, v in r.items():
                if v is not None or k not in cur:
                    cur[k] = v
    out["records"] = list(recs.values())
    return out


def num(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def div(a, b):
    a, b = num(a), num(b)
    return a / b if a is not None and b else None


def by_key(doc):
    out = {}
    for r in doc.get("records", []) or []:
        out[(r.get("section"), r.get("workload"), r.get("dtype"))] = r
    return out


def errors_of(r):
    return {k: v for k, v in r.items() if k.endswith("_error") and v}


def ceiling(kiln, py):
    vals = []
    for key in ("copy_before", "copy_after"):
        c = kiln.get(key)
        if isinstance(c, dict) and num(c.get("copy_TBps")):
            vals.append(c["copy_TBps"])
    if vals:
        return max(vals), "kiln cuMemcpyDtoDAsync 256 MiB (faster of before/after the workloads)", vals
    if num(py.get("torch_copy_TBps")):
        return py["torch_copy_TBps"], "torch copy_ 256 MiB (kiln's run has none)", [py["torch_copy_TBps"]]
    return None, "none measured", []


def merge(kiln, py):
    kr, pr = by_key(kiln), by_key(py)
    ceil, ceil_src, ceil_all = ceiling(kiln, py)
    device = kiln.get("device") if kiln.get("device") not in (None, "none") else py.get("device")
    date = kiln.get("date") or py.get("date")
    keys = list(dict.fromkeys(list(kr) + list(pr)))

    def order(k):  # llm cases (not in WORKLOAD_ORDER) as the harness wrote them
        sec = {"peers": 0, "host_call": 1, "compile_latency": 2, "matmul_epilogue": 3, "llm": 4}.get(k[0], 9)
        w = WORKLOAD_ORDER.index(k[1]) if k[1] in WORKLOAD_ORDER else 99
        d = DTYPE_ORDER.index(k[2]) if k[2] in DTYPE_ORDER else 99
        return (sec, w, d, keys.index(k))

    out = []
    for key in sorted(keys, key=order):
        k, p = kr.get(key, {}), pr.get(key, {})
        sec, workload, dtype = key
        o = {"section": sec, "workload": workload, "dtype": dtype, "device": device, "date": date}
        errs = {}
        errs.update({"kiln_" + e if not e.startswith("kiln") else e: v for e, v in errors_of(k).items()})
        if k.get("error"):
            errs["kiln_error"] = k["error"]
        errs.update(errors_of(p))
        if sec == "peers":
            bytes_ = num(k.get("bytes")) or num(p.get("bytes"))
            if num(k.get("bytes")) and num(p.get("bytes")) and k["bytes"] != p["bytes"]:
                errs["bytes_mismatch"] = f"kiln counts {k['bytes']} bytes, python {p['bytes']}"
            o.update({"shapes": k.get("shapes"), "bytes": bytes_})
            o["kiln_ms"] = num(k.get("kiln_ms"))
            for f in PEER_MS:
                o[f] = num(p.get(f))
            o["kiln_eval_wall_ms"] = num(k.get("kiln_eval_wall_ms"))
            o["kiln_eager_ms"] = num(k.get("kiln_eager_ms"))
            o["copy_ceiling_TBps"] = ceil
            for name in ("kiln",) + tuple(f[:-3] for f in PEER_MS):
                t = o.get(name + "_ms")
                bw = div(bytes_, t * 1e-3 * 1e12) if num(t) else None
                o[name + "_TBps"] = bw
                o[name + "_fraction_of_copy"] = div(bw, ceil)
            for f in PEER_MS:
                o["speedup_vs_" + f[:-3]] = div(o[f], o["kiln_ms"])
            o["torch_compile_first_call_s"] = num(p.get("torch_compile_first_call_s"))
            o["jax_jit_first_call_s"] = num(p.get("jax_jit_first_call_s"))
            o["kiln_check_max_abs_err_vs_cpu"] = num(k.get("check_max_abs_err_vs_cpu_eager"))
            o["kiln_check_max_abs_ref"] = num(k.get("check_max_abs_ref"))
            if k.get("kiln_gelu"):
                o["kiln_gelu"] = k["kiln_gelu"]
        elif sec == "host_call" and workload == "host_call_mlp":
            for f in ("m", "k", "hidden"):
                o[f] = k.get(f) or p.get(f)
            for f in ("kiln_us", "kiln_p90_us", "kiln_new_input_us"):
                o[f] = num(k.get(f))
            if k.get("skipped"):
                o["kiln_skipped"] = k["skipped"]
            for f in ("torch_eager_us", "torch_eager_p90_us", "torch_compile_us", "torch_compile_p90_us", "jax_jit_us",
                      "jax_jit_p90_us"):
                o[f] = num(p.get(f))
            for peer in ("torch_eager", "torch_compile", "jax_jit"):
                o["speedup_vs_" + peer] = div(o[peer + "_us"], o["kiln_us"])
        elif sec == "host_call":
            o["elements"] = k.get("elements") or p.get("elements")
            for f in ("kiln_us", "kiln_p90_us", "kiln_new_input_us", "kiln_eval_us", "kiln_graph_us"):
                o[f] = num(k.get(f))
            for f in ("torch_eager_us", "torch_compile_us", "jax_jit_us"):
                o[f] = num(p.get(f))
            o["target_us"] = 5.0
            o["kiln_meets_target"] = None if o["kiln_us"] is None else o["kiln_us"] <= 5.0
        elif sec == "compile_latency":
            for f in ("cold_ms", "warm_disk_ms", "cold_runs_ms", "warm_disk_runs_ms", "cold_nvrtc_compiles",
                      "warm_nvrtc_compiles", "warm_disk_loads"):
                o[f] = k.get(f)
            o["target_cold_ms"], o["target_warm_disk_ms"] = 100.0, 5.0
            o["cold_meets_target"] = None if num(o["cold_ms"]) is None else o["cold_ms"] <= 100.0
            o["warm_meets_target"] = None if num(o["warm_disk_ms"]) is None else o["warm_disk_ms"] <= 5.0
        elif sec == "matmul_epilogue":
            for f in ("m", "n", "k"):
                o[f] = k.get(f) or p.get(f)
            for f in ("kiln_matmul_ms", "kiln_compiled_ms", "kiln_ratio", "kiln_matmul_TFLOPs"):
                o[f] = num(k.get(f))
            for f in ("torch_matmul_ms", "torch_eager_ms", "torch_builtin_ms", "torch_compile_ms", "jax_matmul_ms",
                      "jax_jit_ms"):
                o[f] = num(p.get(f))
            o["torch_compile_ratio"] = div(o["torch_compile_ms"], o["torch_matmul_ms"])
            o["jax_jit_ratio"] = div(o["jax_jit_ms"], o["jax_matmul_ms"])
            o["speedup_vs_torch_compile"] = div(o["torch_compile_ms"], o["kiln_compiled_ms"])
            o["target_ratio"] = 1.05
            o["kiln_meets_target"] = None if o["kiln_ratio"] is None else o["kiln_ratio"] <= 1.05
            if k.get("kiln_gelu"):
                o["kiln_gelu"] = k["kiln_gelu"]
        elif sec == "llm":
            o["shapes"] = k.get("shapes")
            for f in ("bytes", "flop", "kiln_ms", "kiln_compiled_ms", "kiln_matmul_ms", "check_max_abs_err",
                      "check_max_abs_ref"):
                o[f] = num(k.get(f))
            o["check_reference"] = k.get("check_reference")
            for f in LLM_PEER_MS:
                o[f] = num(p.get(f))
            o["copy_ceiling_TBps"] = ceil
            if o["flop"]:  # bound by arithmetic
                o["kiln_TFLOPs"] = div(o["flop"], o["kiln_ms"] * 1e-3 * 1e12) if o["kiln_ms"] else None
            else:
                o["kiln_TBps"] = div(o["bytes"], o["kiln_ms"] * 1e-3 * 1e12) if o["kiln_ms"] else None
                o["kiln_fraction_of_copy"] = div(o["kiln_TBps"], ceil)
            if o["kiln_matmul_ms"] is not None:
                o["kiln_matmul_TFLOPs"] = div(o["flop"], o["kiln_matmul_ms"] * 1e-3 * 1e12)
                o["kiln_fraction_of_matmul"] = div(o["kiln_matmul_ms"], o["kiln_ms"])
                o["target_fraction_of_matmul"] = TARGET_OF_MATMUL
                frac = o["kiln_fraction_of_matmul"]
                o["kiln_meets_target"] = None if frac is None else frac >= TARGET_OF_MATMUL
            for f in LLM_PEER_MS:
                o["speedup_vs_" + f[:-3]] = div(o[f], o["kiln_ms"])
            o["mlx_input_copies"] = p.get("mlx_input_copies")
        else:
            for src in (k, p):
                for f, v in src.items():
                    o.setdefault(f, v)
        o["errors"] = errs
        out.append(o)
    meta = {
        "section": "meta", "workload": None, "dtype": None, "device": device, "date": date,
        "copy_ceiling_TBps": ceil, "copy_ceiling_source": ceil_src, "copy_ceiling_runs_TBps": ceil_all,
        "torch_copy_TBps": num(py.get("torch_copy_TBps")),
        "kiln_harness": {k: v for k, v in kiln.items() if k != "records"},
        "python_harness": {k: v for k, v in py.items() if k != "records"},
    }
    out.append(meta)
    return out


def f(x, fmt="{:.3f}"):
    return "—" if x is None else fmt.format(x)


def markdown(rows, notes):
    meta = next((r for r in rows if r["section"] == "meta"), {})
    kh, ph = meta.get("kiln_harness", {}), meta.get("python_harness", {})
    L = []
    L.append(f"**Results, {meta.get('date') or '?'}**, {meta.get('device') or 'no device'}"
             + (f" ({kh.get('arch')}, {kh.get('sms')} SMs, CUDA driver API {kh.get('cuda_driver_version')})"
                if kh.get("arch") else "")
             + f"; torch {ph.get('torch_version') or '—'}, triton {ph.get('triton_version') or '—'}, "
               f"jax {ph.get('jax_version') or '—'}.")
    L.append("")
    L.append(f"Copy ceiling: **{f(meta.get('copy_ceiling_TBps'))} TB/s** ({meta.get('copy_ceiling_source')}; "
             f"runs: {', '.join(f(v) for v in meta.get('copy_ceiling_runs_TBps', [])) or '—'}; "
             f"torch's own copy: {f(meta.get('torch_copy_TBps'))} TB/s).")
    L.append("")
    L.append("| workload | dtype | kiln ms | torch eager ms | torch builtin ms | torch.compile ms | jax.jit ms "
             "| kiln TB/s | **kiln ÷ copy** | torch.compile ÷ copy | jax.jit ÷ copy | **speedup vs torch.compile** "
             "| speedup vs jax.jit |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["section"] != "peers":
            continue
        L.append(f"| {r['workload']} | {r['dtype']} | {f(r['kiln_ms'], '{:.4f}')} | {f(r['torch_eager_ms'], '{:.4f}')} "
                 f"| {f(r['torch_builtin_ms'], '{:.4f}')} | {f(r['torch_compile_ms'], '{:.4f}')} "
                 f"| {f(r['jax_jit_ms'], '{:.4f}')} | {f(r['kiln_TBps'])} | **{f(r['kiln_fraction_of_copy'], '{:.2f}')}** "
                 f"| {f(r['torch_compile_fraction_of_copy'], '{:.2f}')} | {f(r['jax_jit_fraction_of_copy'], '{:.2f}')} "
                 f"| **{f(r['speedup_vs_torch_compile'], '{:.2f}×')}** | {f(r['speedup_vs_jax_jit'], '{:.2f}×')} |")
    L.append("")
    h = next((r for r in rows if r["section"] == "host_call" and r["workload"] == "host_call_32op"), None)
    hm = next((r for r in rows if r["section"] == "host_call" and r["workload"] == "host_call_mlp"), None)
    c = next((r for r in rows if r["section"] == "compile_latency"), None)
    m = next((r for r in rows if r["section"] == "matmul_epilogue"), None)

    def ok(v):
        return "—" if v is None else ("yes" if v else "**no**")

    L.append("| target | kiln | met? | peers |")
    L.append("|---|---|---|---|")
    if h:
        L.append(f"| host time per call, compiled 32-op function on 1k float32, ≤ 5 µs | {f(h.get('kiln_us'), '{:.2f} µs')} "
                 f"(new input buffers each call: {f(h.get('kiln_new_input_us'), '{:.2f} µs')}; "
                 f"with eval: {f(h.get('kiln_eval_us'), '{:.2f} µs')}) | {ok(h.get('kiln_meets_target'))} "
                 f"| torch.compile {f(h.get('torch_compile_us'), '{:.2f} µs')}, jax.jit {f(h.get('jax_jit_us'), '{:.2f} µs')}, "
                 f"torch eager {f(h.get('torch_eager_us'), '{:.2f} µs')} |")
    if hm:
        us = lambda k: f(hm.get(k), "{:.2f} µs")  # noqa: E731
        L.append(f"| host time per call, compiled MLP gelu_tanh(x @ W1 + b1) @ W2 + b2, bfloat16, x {hm.get('m')}×{hm.get('k')}, "
                 f"hidden {hm.get('hidden')} (no target) | {us('kiln_us')} (new input buffers each call: "
                 f"{us('kiln_new_input_us')}) | — | torch.compile {us('torch_compile_us')}, jax.jit {us('jax_jit_us')}, "
                 f"torch eager {us('torch_eager_us')}; kiln faster: "
                 f"{f(hm.get('speedup_vs_torch_compile'), '{:.2f}×')} vs torch.compile, "
                 f"{f(hm.get('speedup_vs_jax_jit'), '{:.2f}×')} vs jax.jit |")
    if c:
        runs = lambda v: ", ".join(f(x, "{:.1f}") for x in v) if isinstance(v, list) else "—"  # noqa: E731
        L.append(f"| first call of a fresh 10-op function, cold (empty cache), ≤ 100 ms | {f(c.get('cold_ms'), '{:.1f} ms')} "
                 f"({runs(c.get('cold_runs_ms'))}) | {ok(c.get('cold_meets_target'))} | |")
        L.append(f"| the same in a new process, warm disk cache, ≤ 5 ms | {f(c.get('warm_disk_ms'), '{:.2f} ms')} "
                 f"({runs(c.get('warm_disk_runs_ms'))}) | {ok(c.get('warm_meets_target'))} | |")
    if m:
        L.append(f"| gelu(x @ W + b) compiled ÷ bare matmul, bfloat16 {m.get('m')}³, ≤ 1.05 | {f(m.get('kiln_ratio'))} "
                 f"({f(m.get('kiln_compiled_ms'), '{:.4f}')} / {f(m.get('kiln_matmul_ms'), '{:.4f}')} ms, "
                 f"{f(m.get('kiln_matmul_TFLOPs'), '{:.0f}')} TFLOP/s) | {ok(m.get('kiln_meets_target'))} "
                 f"| torch.compile {f(m.get('torch_compile_ratio'))} ({f(m.get('torch_compile_ms'), '{:.4f}')} / "
                 f"{f(m.get('torch_matmul_ms'), '{:.4f}')} ms), jax.jit {f(m.get('jax_jit_ratio'))} |")
    L += llm_markdown([r for r in rows if r["section"] == "llm"], ph)
    errs = [(r["section"], r["workload"], r["dtype"], k, v) for r in rows for k, v in (r.get("errors") or {}).items()]
    top = list(kh.get("errors") or []) + list(ph.get("errors") or [])
    if errs or top or notes:
        L.append("")
        L.append("Errors and notes:")
        L.append("")
        for n in notes:
            L.append(f"- {n}")
        seen = set()
        for s, w, d, k, v in errs:
            L.append(f"- {w} {d or ''} {k}: {v}")
            seen.add(v)
        for v in top:
            if v not in seen and not any(v in x for x in seen):
                L.append(f"- {v}")
    return "\n".join(L) + "\n"


def llm_markdown(rows, ph):
    """The LLM ops table: each op's time, its fraction of its limit, and the peers'."""
    if not rows:
        return []
    L = ["", "LLM ops, bfloat16 (kiln: the eager op; compiled: the op as a one-op compiled function). Limit: the "
         "fraction of the copy ceiling for the ops bound by bytes (fewest bytes: inputs read once, output written "
         "once), else TFLOP/s; the 4-bit prefill product also as a fraction of kiln's bfloat16 cuBLASLt matmul on "
         f"the dequantized weights (target ≥ {TARGET_OF_MATMUL:.2f}). PyTorch's products multiply bfloat16 weights "
         "(it has no 4-bit affine product).", ""]
    if ph.get("mlx_error") and all(r.get("mlx_ms") is None for r in rows):
        L += [f"MLX: {ph['mlx_error']}", ""]
    L.append("| op | shapes | kiln ms | compiled ms | **kiln's limit** | PyTorch eager ms | MLX ms "
             "| **speedup vs PyTorch** | speedup vs MLX | check: max error / max value |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("flop"):
            limit = f"{f(r.get('kiln_TFLOPs'), '{:.1f}')} TFLOP/s"
        else:
            limit = f"**{f(r.get('kiln_fraction_of_copy'), '{:.2f}')}** of copy ({f(r.get('kiln_TBps'))} TB/s)"
        if r.get("kiln_matmul_ms") is not None:
            met = {None: "—", True: "met", False: "**not met**"}[r.get("kiln_meets_target")]
            limit += (f"; **{f(r.get('kiln_fraction_of_matmul'), '{:.2f}')}** of cuBLASLt bf16 "
                      f"({f(r.get('kiln_matmul_ms'), '{:.4f}')} ms, {f(r.get('kiln_matmul_TFLOPs'), '{:.0f}')} "
                      f"TFLOP/s; target {met})")
        L.append(f"| {r['workload']} | {r.get('shapes') or '—'} | {f(r.get('kiln_ms'), '{:.4f}')} "
                 f"| {f(r.get('kiln_compiled_ms'), '{:.4f}')} | {limit} | {f(r.get('torch_eager_ms'), '{:.4f}')} "
                 f"| {f(r.get('mlx_ms'), '{:.4f}')} | **{f(r.get('speedup_vs_torch_eager'), '{:.2f}×')}** "
                 f"| {f(r.get('speedup_vs_mlx'), '{:.2f}×')} "
                 f"| {f(r.get('check_max_abs_err'), '{:.3g}')} / {f(r.get('check_max_abs_ref'), '{:.3g}')} |")
    return L


def main(argv):
    ap = argparse.ArgumentParser(description="Merge bench/gpu_peers.cpp and bench/gpu_peers.py results.")
    ap.add_argument("--kiln")
    ap.add_argument("--python", action="append", default=[])
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args(argv)
    kiln, e1 = load(a.kiln, "kiln results")
    pys, notes = [], [e1] if e1 else []
    for path in a.python or [None]:
        d, e = load(path, "python results")
        pys.append(d)
        if e:
            notes.append(e)
    py = combine(pys)
    for n in notes:
        print(f"summarize_gpu_peers: {n}", file=sys.stderr)
    rows = merge(kiln, py)
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w") as fh:
        json.dump(rows, fh, indent=1)
    md = markdown(rows, notes)
    with open(a.md, "w") as fh:
        fh.write(md)
    print(md)
    print(f"wrote {a.json} and {a.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
