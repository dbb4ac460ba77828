#!/usr/bin/env python3
"""Folds the runs of bench/run_gpu_ab.sh: one record per run, workload and dtype, and the
median kiln_ms of each (tag, setting, workload, dtype) with its fraction of the copy ceiling.

    bench/summarize_gpu_ab.py <out dir> [--json FILE]
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    out = sys.argv[1]
    records = []
    for path in sorted(glob.glob(os.path.join(out, "*_r*.json"))):
        m = re.match(r"(.+)_([^_]+)_r(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            data = json.load(f)
        cols = data.get("cols")
        for d in data["records"]:
            if d.get("section") != "peers" or d.get("kiln_ms") is None:
                continue
            records.append({"tag": m.group(1), "run": m.group(2), "round": int(m.group(3)),
                            "workload": d["workload"], "dtype": d["dtype"], "cols": cols,
                            "kiln_ms": d["kiln_ms"], "kiln_fraction_of_copy": d.get("kiln_fraction_of_copy")})
    groups = {}
    for r in records:
        groups.setdefault((r["tag"], r["workload"], r["dtype"], r["run"]), []).append(r)
    print("| tag | workload | dtype | setting | median kiln ms | fraction of copy | runs |")
    print("|---|---|---|---|---|---|---|")
    for (tag, w, dt, run), rs in sorted(groups.items()):
        ms = statistics.median(r["kiln_ms"] for r in rs)
        frac = statistics.median(r["kiln_fraction_of_copy"] or 0 for r in rs)
        print(f"| {tag} | {w} | {dt} | {run} | {ms:.4f} | {frac:.3f} | {len(rs)} |")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
