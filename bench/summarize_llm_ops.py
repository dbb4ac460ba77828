#!/usr/bin/env python3
"""Prints each language-model op's throughput as a fraction of its limit, from a
bench_llm_ops JSON file (medians of the repetitions).

Bandwidth-bound ops (decode product, decode attention, norms, rope): bytes per second
over memcpy's bytes per second (both count bytes read plus written). Targets from
issue 26: quantized GEMV >= 0.70, decode attention >= 0.80.
Prefill product: multiply-adds per second over sgemm's on the dequantized problem.
Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize_eager import medians  # noqa: E402

TARGETS = {"BM_QmmGemv": 0.70, "BM_SdpaDecode": 0.80}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize_llm_ops.py RESULTS.json")
    context, b = medians(sys.argv[1], full_names=True)
    print(f"{context.get('date', '?')}  {context.get('num_cpus', '?')} cpus")
    copy = next((r["bytes_per_second"] for n, r in b.items() if n.startswith("BM_Memcpy")), None)
    for r in sorted(b.values(), key=lambda r: r["name"]):
        name = r.get("run_name", r["name"])
        base = name.split("/")[0]
        line = f"{name:<32} {r['real_time']:10.3f} {r['time_unit']:<2}"
        if "bytes_per_second" in r and copy and base != "BM_Memcpy":
            frac = r["bytes_per_second"] / copy
            target = TARGETS.get(base)
            line += f"  {r['bytes_per_second'] / 1e9:7.2f} GB/s  {frac:5.2f} of memcpy"
            if target:
                line += f" (target {target:.2f}: {'ok' if frac >= target else 'BELOW'})"
        elif "items_per_second" in r:
            line += f"  {r['items_per_second'] / 1e9:7.2f} G multiply-adds/s"
        print(line)
    gemm = [r for n, r in b.items() if n.startswith("BM_QmmGemm/")]
    sgemm = [r for n, r in b.items() if n.startswith("BM_SgemmDequantized/")]
    if gemm and sgemm:
        print(f"prefill product / sgemm on dequantized weights: "
              f"{gemm[0]['items_per_second'] / sgemm[0]['items_per_second']:.2f}")


if __name__ == "__main__":
    main()
