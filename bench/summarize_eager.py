#!/usr/bin/env python3
"""Prints the eager benchmark ratios from a bench_eager JSON file.

add / memcpy: bytes per second of kiln's float32 add (3 x array bytes moved)
over memcpy's (2 x array bytes moved); target >= 0.70.
matmul: direct cblas_sgemm time over kiln matmul time (a speed ratio); target >= 0.95.
Uses the median of the repetitions. Standard library only.
"""
import json
import sys


def medians(path, full_names=False):
    """The median aggregate of each benchmark, keyed by its name before the first '/'
    (or its whole name)."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b.get("run_name", b["name"])
        name = name if full_names else name.split("/")[0]
        # Prefer the median aggregate; fall back to a lone iteration when run without repetitions.
        if b.get("run_type") == "aggregate" or name not in out:
            out[name] = b
    return data.get("context", {}), out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize_eager.py RESULTS.json")
    context, b = medians(sys.argv[1])
    print(f"{context.get('date', '?')}  {context.get('num_cpus', '?')} cpus  "
          f"{context.get('mhz_per_cpu', '?')} MHz  (benchmark library built as {context.get('library_build_type', '?')})")
    print(f"{'benchmark':<12} {'median time':>12}  {'throughput':>14}")
    order = ["BM_Add", "BM_Memcpy", "BM_Transpose", "BM_Exp", "BM_RowSum", "BM_Matmul", "BM_Sgemm"]
    for name in sorted(b, key=lambda n: (order.index(n) if n in order else len(order), n)):
        r = b[name]
        tput = ""
        if "bytes_per_second" in r:
            tput = f"{r['bytes_per_second'] / 1e9:8.2f} GB/s"
        elif "flops" in r:
            tput = f"{r['flops'] / 1e9:8.1f} GFLOP/s"
        print(f"{name:<12} {r['real_time']:9.3f} {r['time_unit']:<2}  {tput:>14}")

    rows = []
    failed = False
    if "BM_Add" in b and "BM_Memcpy" in b:
        ratio = b["BM_Add"]["bytes_per_second"] / b["BM_Memcpy"]["bytes_per_second"]
        ok = ratio >= 0.70
        failed |= not ok
        rows.append(("add bytes/s / memcpy bytes/s", ratio, 0.70, ok))
    if "BM_Transpose" in b and "BM_Memcpy" in b:  # no target: how far a transpose is from a copy
        ratio = b["BM_Transpose"]["bytes_per_second"] / b["BM_Memcpy"]["bytes_per_second"]
        rows.append(("transpose bytes/s / memcpy", ratio, None, True))
    if "BM_TransposeAdd" in b and "BM_Add" in b:  # no target: a transposed operand against a plain add
        ratio = b["BM_TransposeAdd"]["bytes_per_second"] / b["BM_Add"]["bytes_per_second"]
        rows.append(("transpose add / add bytes/s", ratio, None, True))
    if "BM_Matmul" in b and "BM_Sgemm" in b:
        ratio = b["BM_Sgemm"]["real_time"] / b["BM_Matmul"]["real_time"]
        ok = ratio >= 0.95
        failed |= not ok
        rows.append(("sgemm time / kiln matmul time", ratio, 0.95, ok))
    print()
    print(f"{'ratio':<32} {'value':>6}  {'target':>7}")
    for label, value, target, ok in rows:
        if target is None:
            print(f"{label:<32} {value:6.3f}")
        else:
            print(f"{label:<32} {value:6.3f}  >= {target:.2f}  {'ok' if ok else 'BELOW TARGET'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
