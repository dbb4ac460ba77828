#!/usr/bin/env python3
"""Prints compiled-vs-eager ratios and the targets from a bench/run_compile.sh JSON file.

Targets (float32, 2-core machine):
  chain10 compiled / eager speed          >= 3.0
  gelu compiled bytes/s / memcpy bytes/s  >= 0.70 (gelu bytes: input + output)
  host time of a compiled 32-op call on 1k elements (median per call) <= 5 us
Cold and warm-disk first-call times are reported without a target.
Medians over repetitions. Standard library only.
"""
import json
import statistics
import sys


def runs(data):
    """run_name -> list of iteration entries (aggregates are recomputed here)."""
    out = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        out.setdefault(b.get("run_name", b["name"]), []).append(b)
    return out


def med(entries, key):
    vals = [e[key] for e in entries if key in e]
    return statistics.median(vals) if vals else None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize_compile.py RESULTS.json")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    print(f"{ctx.get('date', '?')}  {ctx.get('num_cpus', '?')} cpus  {ctx.get('host_name', '')}")
    r = runs(data)

    workloads = {}  # name -> {"eager": entries, "compiled": entries}
    for name, entries in r.items():
        label = entries[0].get("label", "")
        if name.startswith("BM_Workload") and "/" in label:
            w, mode = label.split("/", 1)
            workloads.setdefault(w, {})[mode] = entries
    memcpy = next((e for n, e in r.items() if n.startswith("BM_Memcpy")), None)
    memcpy_bps = med(memcpy, "bytes_per_second") if memcpy else None

    failed = False
    print(f"\n{'workload':<13} {'eager ms':>9} {'compiled ms':>12} {'speedup':>8} {'compiled GB/s':>14} {'of memcpy':>10}")
    for w, modes in workloads.items():
        if "eager" not in modes or "compiled" not in modes:
            continue
        te, tc = med(modes["eager"], "real_time"), med(modes["compiled"], "real_time")
        bps = med(modes["compiled"], "bytes_per_second")
        frac = bps / memcpy_bps if memcpy_bps else float("nan")
        print(f"{w:<13} {te:9.1f} {tc:12.1f} {te / tc:8.2f} {bps / 1e9:14.2f} {frac:10.2f}")
    if memcpy_bps:
        print(f"{'memcpy':<13} {'':9} {med(memcpy, 'real_time'):12.1f} {'':8} {memcpy_bps / 1e9:14.2f} {1.0:10.2f}")

    rows = []
    if "Chain10" in workloads and len(workloads["Chain10"]) == 2:
        c = workloads["Chain10"]
        v = med(c["eager"], "real_time") / med(c["compiled"], "real_time")
        rows.append(("chain10 compiled speedup over eager", v, ">=", 3.0, v >= 3.0, "x"))
    if "Gelu" in workloads and memcpy_bps:
        v = med(workloads["Gelu"]["compiled"], "bytes_per_second") / memcpy_bps
        rows.append(("gelu compiled bytes/s / memcpy", v, ">=", 0.70, v >= 0.70, ""))
    host = next(
(e for n, e in r.items() if n.startswith("BM_HostCall32")), None)
    if host:
        v = med(host, "median_ns") / 1000.0
        rows.append(("compiled 32-op call, 1k elems (us)", v, "<=", 5.0, v <= 5.0, ""))
    eager_host = next((e for n, e in r.items() if n.startswith("BM_HostEager32")), None)

    print(f"\n{'target':<38} {'value':>8}  {'target':>9}")
    for label, v, op, t, ok, unit in rows:
        failed |= not ok
        print(f"{label:<38} {v:8.2f}  {op} {t:<6.2f} {'ok' if ok else 'BELOW TARGET'}")
    if eager_host:
        print(f"{'(eager 32-op graph, 1k elems, mean us)':<38} {med(eager_host, 'real_time'):8.2f}")

    def line(label, values, unit="ms"):
        print(f"{label + ' (' + unit + ', median of ' + str(len(values)) + ')':<52} {statistics.median(values):9.3f}"
              f"  (runs: {', '.join(f'{m:.3f}' for m in values)})")

    def target(label, value, limit):
        nonlocal failed
        ok = value <= limit
        failed |= not ok
        print(f"{label:<52} {value:9.3f}  <= {limit:<8g} {'ok' if ok else 'ABOVE TARGET'}")

    first = data.get("first_calls", [])
    for kind in ("cold", "warm_disk"):
        sel = [x for x in first if x.get("run") == kind]
        if not sel:
            continue
        ms = [x["first_call_ms"] for x in sel]
        tiers = sorted({x.get("first_tier", "?") for x in sel})
        line(f"chain10 first call, {kind}, tier {'/'.join(tiers)}", ms)
        if kind == "cold":
            target("chain10 first call, cold (ms)", statistics.median(ms), 20)
            if "fused_arrival_ms" in sel[0]:
                line("chain10 fused tier arrived after", [x["fused_arrival_ms"] for x in sel])
        if "host_call_us" in sel[0]:
            line(f"chain10 host call, fused, {kind}", [x["host_call_us"] for x in sel], "us")
            line(f"chain10 host call, compiled under wait, {kind}", [x["host_call_us_wait"] for x in sel], "us")
    graph = data.get("first_runs", [])
    for kind in ("cold", "warm_disk"):
        sel = [x for x in graph if x.get("run") == kind]
        if not sel:
            continue
        ms = [x["first_run_ms"] for x in sel]
        tiers = sorted({x.get("first_tier", "?") for x in sel})
        line(f"decoder first run, {kind}, tier {'/'.join(tiers)}", ms)
        if kind == "cold":
            target("decoder first run, cold (ms)", statistics.median(ms), 1000)
            line("decoder: every kernel compiled after", [x["all_compiled_ms"] for x in sel])
        line(f"decoder run, fused, {kind}", [x["run_ms"] for x in sel])
        line(f"decoder run, compiled under wait, {kind}", [x["run_ms_wait"] for x in sel])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
