"""Tables for docs/benchmarks.md from bench/run_distributed.sh's JSON lines (one object a line)."""

import json
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    sums = {}
    for r in rows:
        if r["bench"] == "all_sum":
            sums.setdefault(r["bytes"], {})[r["engine"]] = r
    if sums:
        ranks = next(iter(next(iter(sums.values())).values()))["ranks"]
        print(f"All-reduce of float32 over {ranks} GPUs, bus bandwidth (GB/s):\n")
        print("| size | kiln all_sum | PyTorch all_reduce | kiln / PyTorch |")
        print("|---|---|---|---|")
        for nbytes in sorted(sums):
            k, t = sums[nbytes].get("kiln"), sums[nbytes].get("torch")
            ratio = f"{k['busbw_gbs'] / t['busbw_gbs']:.2f}" if k and t else "-"
            size = f"{nbytes >> 20} MiB" if nbytes < (1 << 30) else f"{nbytes >> 30} GiB"
            print(f"| {size} | {k['busbw_gbs'] if k else '-'} | {t['busbw_gbs'] if t else '-'} | {ratio} |")
        print()
    graph = {}
    for r in rows:
        if r["bench"] == "all_sum_graph":
            graph.setdefault(r["bytes"], {})[r["engine"]] = r
    if graph:
        print("All-reduce of bfloat16 inside a CUDA graph (64 a graph, as a decode step holds them), µs each:\n")
        print("| size | kiln all_sum | PyTorch all_reduce | kiln / PyTorch time |")
        print("|---|---|---|---|")
        for nbytes in sorted(graph):
            k, t = graph[nbytes].get("kiln"), graph[nbytes].get("torch")
            ratio = f"{k['time_us'] / t['time_us']:.2f}" if k and t else "-"
            print(f"| {nbytes >> 10} KiB | {k['time_us'] if k else '-'} | {t['time_us'] if t else '-'} | {ratio} |")
        print()
    decode = [r for r in rows if r["bench"] == "decode"]
    if decode:
        print("Decode of a Llama-3-8B-shaped model (random weights), bfloat16 activations; tokens/s over every "
              "session of a step:\n")
        print("(llama3-8b-half-shape: one TP=2 rank's weights as a model of its own, TP=2 without its collectives)\n")
        print("| model | weights | TP | sessions | tokens/s | ms a step | speed-up over TP=1 | weights read a step (GB) |")
        print("|---|---|---|---|---|---|---|---|")
        whole = [r for r in decode if r.get("model") != "llama3-8b-half-shape"]
        one = {(r["type"], r.get("sessions", 1)): r["tokens_per_s"] for r in whole if r["tp"] == 1}
        for r in sorted(decode, key=lambda r: (r["type"], r.get("model", ""), r.get("sessions", 1), r["tp"])):
            key = (r["type"], r.get("sessions", 1))
            speedup = f"{r['tokens_per_s'] / one[key]:.2f}x" if key in one and r in whole else "-"
            ms = r.get("ms_per_step", r.get("ms_per_token", 0))
            print(f"| {r.get('model', '-')} | {r['type']} | {r['tp']} | {key[1]} | {r['tokens_per_s']:.1f} | {ms:.2f} | "
                  f"{speedup} | {r['weight_gb']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
