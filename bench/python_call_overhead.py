#!/usr/bin/env python3
"""Host time of one compiled call from Python, next to the C++ figure and MLX's mx.compile.

The workload is the C++ benchmark's (bench/bench_compile.cpp, BM_HostCall32): a 32-op
elementwise graph on two float32 vectors of 1000 elements, compiled, called and evaluated;
each call is timed on its own and the median reported. In the same run:
  - kiln from Python: f(x, y) then .eval() on the output (kiln.compile);
  - kiln from C++: BM_HostCall32's median_ns, when the bench_compile binary is given;
  - MLX from Python: mx.eval(f(x, y)) with mx.compile, when mlx imports.

  python bench/python_call_overhead.py [--bench-compile build/bench/bench_compile] [--calls N] [--json FILE]
(kiln importable: the venv's installed package, or PYTHONPATH=build/python.)
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np


def graph32(ops, x, y):
    """bench/workloads.h's graph32: 2 + 5 * 6 = 32 elementwise ops."""
    a, b = x + y, x * y
    for _ in range(5):
        a = a * b + 0.5
        b = ops.maximum(b - a, x)
        a = ops.minimum(a, y) - b
    return a


def median_ns(call, calls, warmup=200):
    for _ in range(warmup):
        call()
    times = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        call()
        times.append(clock() - t0)
    times.sort()
    return statistics.median(times), times[len(times) * 9 // 10]


def kiln_python(calls):
    import kiln

    rng = np.random.default_rng(11)
    x = kiln.array(rng.uniform(-1, 1, 1000).astype(np.float32))
    y = kiln.array(rng.uniform(-1, 1, 1000).astype(np.float32))
    f = kiln.compile(lambda a, b: graph32(kiln, a, b), name="graph32")
    med, p90 = median_ns(lambda: f(x, y).eval(), calls)
    want = graph32(np, np.asarray(x).astype(np.float64), np.asarray(y).astype(np.float64))
    assert np.allclose(np.asarray(f(x, y)), want, rtol=1e-4, atol=1e-4), "kiln's result differs from NumPy's"
    call_only, _ = median_ns(lambda: f(x, y), calls)  # without the eval: the binding's share
    return {"median_ns": med, "p90_ns": p90, "call_only_median_ns": call_only}


def kiln_cpp(binary):
    out = subprocess.run(
        [binary, "--benchmark_filter=^BM_HostCall32/", "--benchmark_format=json"],
        capture_output=True, text=True, check=True)
    runs = [b for b in json.loads(out.stdout)["benchmarks"] if b.get("run_type") == "iteration"]
    return {"median_ns": statistics.median(b["median_ns"] for b in runs),
            "p90_ns": statistics.median(b["p90_ns"] for b in runs)}


def mlx_python(calls):
    try:
        import mlx.core as mx
    except ImportError:
        return None
    rng = np.random.default_rng(11)
    x = mx.array(rng.uniform(-1, 1, 1000).astype(np.float32))
    y = mx.array(rng.uniform(-1, 1, 1000).astype(np.float32))
    f = mx.compile(lambda a, b: graph32(mx, a, b))
    med, p90 = median_ns(lambda: mx.eval(f(x, y)), calls)
    return {"median_ns": med, "p90_ns": p90, "device": str(mx.default_device())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench-compile", help="the bench_compile binary, for the C++ figure in the same run")
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3, help="rounds of all three, one after another")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()

    # Rounds alternate the three so that a machine whose load changes affects each alike; the
    # best round's median is the host cost with the least interference.
    rounds = []
    for _ in range(args.rounds):
        r = {"kiln_python": kiln_python(args.calls)}
        if args.bench_compile:
            r["kiln_cpp"] = kiln_cpp(args.bench_compile)
        mlx = mlx_python(args.calls)
        if mlx:
            r["mlx_python"] = mlx
        rounds.append(r)
    best = {k: min(r[k]["median_ns"] for r in rounds) for k in rounds[0]}
    medians = {k: [round(r[k]["median_ns"]) for r in rounds] for k in rounds[0]}
    results = {"rounds": rounds, "best_median_ns": best}

    us = lambda ns: f"{ns / 1000:.2f} µs"
    each = lambda k: ", ".join(us(v) for v in medians[k])
    call_only = min(r["kiln_python"]["call_only_median_ns"] for r in rounds)
    print(f"kiln from Python, call + eval: best median {us(best['kiln_python'])} (rounds: {each('kiln_python')}); "
          f"the call alone {us(call_only)}")
    if "kiln_cpp" in best:
        results["python_minus_cpp_ns"] = best["kiln_python"] - best["kiln_cpp"]
        print(f"kiln from C++ (BM_HostCall32): best median {us(best['kiln_cpp'])} (rounds: {each('kiln_cpp')}); "
              f"Python adds {us(results['python_minus_cpp_ns'])} (target: at most 3 µs)")
    if "mlx_python" in best:
        print(f"MLX mx.compile from Python ({rounds[0]['mlx_python']['device']}): best median "
              f"{us(best['mlx_python'])} (rounds: {each('mlx_python')})")
    else:
        print("MLX: not importable, skipped")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
