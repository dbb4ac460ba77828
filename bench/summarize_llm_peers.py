#!/usr/bin/env python3
"""Folds the outputs of bench/run_llm_peers.sh into llm_peers_<date>.json (one object per
machine, model, engine, device and phase) and prints the table for docs/benchmarks.md.

    bench/summarize_llm_peers.py <out dir> <date> <threads> MODEL.gguf...

Each model's outputs are in <out dir>/<model's name without .gguf>/; whatever is there is folded
(a missing engine or device is left out). Decode reads every weight once a token, so its roofline
is the bandwidth over the file's bytes (the least any engine reads: kiln's float32 scales and
PyTorch's bfloat16 weights read more): memcpy on the CPU, bench/gpu_peers' device-to-device
copy on the GPU (both count the read and the write). Prefill is bound by compute, not bandwidth:
its roofline fields are null.
"""
import json
import os
import platform
import sys

ROOFLINE = ("decode: bandwidth / file bytes (CPU: BM_Memcpy's bytes/s; GPU: gpu_peers' cuMemcpyDtoDAsync "
            "copy ceiling; both count read + write); prefill: none (compute-bound)")


def load(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        return json.loads(text) if text else None
    except (OSError, json.JSONDecodeError):
        return None


def load_lines(path):
    """A file of one JSON object a line (kiln bench-llm --batch/--threads --json)."""
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except (OSError, json.JSONDecodeError):
        return []


def phases(run, extra_prefill=None, extra_decode=None):
    """The prefill and decode rows of one bench-llm-style record (pp/tg and their tokens/s)."""
    out = []
    for phase, n, tps, extra in (("prefill", run.get("pp"), run.get("pp_tokens_per_s"), extra_prefill or {}),
                                 ("decode", run.get("tg"), run.get("tg_tokens_per_s"), extra_decode or {})):
        if n and tps:
            out.append({"phase": phase, "tokens": n, "tokens_per_s": tps, **extra})
    return out


def model_rows(d):
    """Every row of one model's folder d."""
    rows = []
    for dev in ("cpu", "cuda"):
        k = load(os.path.join(d, f"kiln_{dev}.json"))
        runs = [r for r in [k] + [load(os.path.join(d, f"kiln_{dev}_{a}.json")) for a in ("int8", "exact")] if r]
        for run in runs:
            for r in phases(run):
                rows.append({"engine": "kiln", "device": dev, "activations": run.get("activations", "exact"),
                             "weight_bytes": run["weight_mb"] * 1e6, **r})
        for line in load_lines(os.path.join(d, f"kiln_sessions_{dev}.json")):
            for mode in ("batch", "threads"):
                if mode in line:  # aggregate decode of many sessions on one model
                    rows.append({"engine": "kiln", "device": dev, "activations": line["activations"],
                                 "phase": "decode", "tokens": line["tg"], "sessions": f"{mode} {line[mode]}",
                                 "tokens_per_s": line["aggregate_tokens_per_s"]})
        for r in load(os.path.join(d, f"llama_{dev}.json")) or []:
            phase = "prefill" if r.get("n_prompt", 0) > 0 else "decode"
            n = r.get("n_prompt") if phase == "prefill" else r.get("n_gen")
            rows.append({"engine": "llama.cpp", "device": dev, "phase": phase, "tokens": n,
                         "tokens_per_s": r.get("avg_ts"), "threads": r.get("n_threads")})
        for engine in ("mlx", "pytorch"):
            for dtype in ("float32", "float16", "bfloat16"):
                run = load(os.path.join(d, f"{engine}_{dev}_{dtype}.json"))
                if not run:
                    continue
                base = {"engine": engine, "device": dev, "dtype": dtype, "version": run.get("version")}
                if engine == "pytorch":
                    base.update(compile=run.get("compile"), transformers=run.get("transformers"))
                if run.get("threads"):
                    base["threads"] = run["threads"]
                for r in phases(run, {"ttft_ms": run.get("ttft_ms")},
                                {"ms_per_token": run.get("decode_ms_per_token")}):
                    rows.append({**base, **r})
    return rows


def label(r):
    if r["engine"] == "kiln":
        return f"kiln ({r['activations']})"
    if r["engine"] == "pytorch":
        return f"pytorch ({r['dtype']}, {r['compile']})"
    if r["engine"] == "mlx":
        return f"mlx ({r['dtype']})"
    return r["engine"]


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: bench/summarize_llm_peers.py <out dir> <date> <threads> MODEL.gguf...")
    out, day, threads, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    machine = platform.node() or "unknown"
    bandwidth = {}  # bytes/s a device moves (read + write), the decode roofline's numerator
    memcpy = load(os.path.join(out, "memcpy.json"))
    for b in (memcpy or {}).get("benchmarks", []):
        if b["name"].startswith("BM_Memcpy"):
            bandwidth["cpu"] = b.get("bytes_per_second")
    copy = load(os.path.join(out, "gpu_copy.json"))
    if copy and copy.get("copy_ceiling_TBps") and copy["copy_ceiling_TBps"] == copy["copy_ceiling_TBps"]:
        bandwidth["cuda"] = copy["copy_ceiling_TBps"] * 1e12
    rows, files = [], {}
    for model in models:
        name = os.path.basename(model)
        file_bytes = os.path.getsize(model)
        mine = model_rows(os.path.join(out, name[:-5] if name.endswith(".gguf") else name))
        kiln = next((r for r in mine if "weight_bytes" in r), None)
        files[name] = {"file_bytes": file_bytes, "kiln_weight_bytes": kiln["weight_bytes"] if kiln else None}
        for r in mine:
            r.update({"machine": machine, "model": name, "date": day})
            bw = bandwidth.get(r["device"])
            roof = bw / file_bytes if r["phase"] == "decode" and bw and "sessions" not in r else None
            r["roofline_tokens_per_s"] = roof
            r["fraction_of_roofline"] = r["tokens_per_s"] / roof if roof else None
        rows += mine
    with open(os.path.join(out, f"llm_peers_{day}.json"), "w") as f:
        json.dump({"memcpy_bytes_per_s": bandwidth.get("cpu"), "gpu_copy_bytes_per_s": bandwidth.get("cuda"),
                   "threads": threads, "roofline": ROOFLINE, "models": files, "results": rows}, f, indent=1)
    print("| model | engine | device | phase | tokens/s | vs llama.cpp | of the roofline | first token (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        sessions = f", {r['sessions']}" if "sessions" in r else ""
        peer = None if sessions else next((p for p in rows if p["engine"] == "llama.cpp" and p["model"] == r["model"]
                                           and p["device"] == r["device"] and p["phase"] == r["phase"]), None)
        ratio = f"{r['tokens_per_s'] / peer['tokens_per_s']:.2f}x" if peer and peer["tokens_per_s"] else ""
        frac = f"{r['fraction_of_roofline']:.2f}" if r["fraction_of_roofline"] else ""
        ttft = f"{r['ttft_ms']:.1f}" if r.get("ttft_ms") else ""
        print(f"| {r['model']} | {label(r)} | {r['device']} | {r['phase']} {r['tokens']}{sessions} | "
              f"{r['tokens_per_s']:.1f} | {ratio} | {frac} | {ttft} |")


if __name__ == "__main__":
    main()
