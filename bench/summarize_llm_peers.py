#!/usr/bin/env python3
"""Folds the outputs of bench/run_llm_peers.sh into llm_peers_<date>.json (one object per
machine, model, engine, device and phase) and prints the table for docs/benchmarks.md.

    bench/summarize_llm_peers.py <out dir> <model> <date> <threads>
"""
import json
import os
import platform
import sys


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


def main():
    out, model, day, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    machine = platform.node() or "unknown"
    memcpy = load(os.path.join(out, "memcpy.json"))
    bandwidth = None  # bytes/s: BM_Memcpy's bytes_per_second counts the bytes copied once
    if memcpy:
        for b in memcpy.get("benchmarks", []):
            if b["name"].startswith("BM_Memcpy"):
                bandwidth = b.get("bytes_per_second")
    rows = []
    weight_bytes = None
    for dev in ("cpu", "cuda"):
        k = load(os.path.join(out, f"kiln_{dev}.json"))
        if not k:
            continue
        weight_bytes = k["weight_mb"] * 1e6
        runs = [k] + [r for a in ("int8", "exact") for r in [load(os.path.join(out, f"kiln_{dev}_{a}.json"))] if r]
        for run in runs:
            for phase, n, tps in (("prefill", run["pp"], run["pp_tokens_per_s"]),
                                  ("decode", run["tg"], run["tg_tokens_per_s"])):
                rows.append({"engine": "kiln", "device": dev, "activations": run.get("activations", "exact"),
                             "weight_bytes": run["weight_mb"] * 1e6, "phase": phase, "tokens": n, "tokens_per_s": tps})
        for line in load_lines(os.path.join(out, f"kiln_sessions_{dev}.json")):
            for mode in ("batch", "threads"):
                if mode in line:  # aggregate decode of many sessions on one model
                    rows.append({"engine": "kiln", "device": dev, "activations": line["activations"],
                                 "phase": "decode", "tokens": line["tg"], "sessions": f"{mode} {line[mode]}",
                                 "tokens_per_s": line["aggregate_tokens_per_s"]})
        llama = load(os.path.join(out, f"llama_{dev}.json")) or []
        for r in llama:
            phase = "prefill" if r.get("n_prompt", 0) > 0 else "decode"
            n = r.get("n_prompt") if phase == "prefill" else r.get("n_gen")
            rows.append({"engine": "llama.cpp", "device": dev, "phase": phase, "tokens": n,
                         "tokens_per_s": r.get("avg_ts"), "threads": r.get("n_threads")})
    for r in rows:
        r.update({"machine": machine, "model": os.path.basename(model), "date": day})
        # Decode reads every weight once a token: the CPU roofline is memcpy bandwidth over the
        # file's bytes (the least any engine reads; kiln's float32 scales read more).
        if r["phase"] == "decode" and r["device"] == "cpu" and bandwidth and "sessions" not in r:
            r["roofline_tokens_per_s"] = bandwidth / os.path.getsize(model)
            r["fraction_of_roofline"] = r["tokens_per_s"] / r["roofline_tokens_per_s"]
    with open(os.path.join(out, f"llm_peers_{day}.json"), "w") as f:
        json.dump({"memcpy_bytes_per_s": bandwidth, "file_bytes": os.path.getsize(model),
                   "kiln_weight_bytes": weight_bytes, "threads": threads,
                   "results": rows}, f, indent=1)
    print(f"| engine | device | phase | tokens/s | vs llama.cpp | of the roofline |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        sessions = f", {r['sessions']}" if "sessions" in r else ""
        peer = None if sessions else next((p for p in rows if p["engine"] == "llama.cpp" and p["device"] == r["device"]
                                           and p["phase"] == r["phase"]), None)
        ratio = f"{r['tokens_per_s'] / peer['tokens_per_s']:.2f}x" if peer and peer["tokens_per_s"] else ""
        frac = f"{r['fraction_of_roofline']:.2f}" if "fraction_of_roofline" in r else ""
        engine = f"{r['engine']} ({r['activations']})" if "activations" in r else r["engine"]
        print(f"| {engine} | {r['device']} | {r['phase']} {r['tokens']}{sessions} | {r['tokens_per_s']:.1f} | {ratio} | {frac} |")


if __name__ == "__main__":
    main()
