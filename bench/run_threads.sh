#!/usr/bin/env bash
# Runs bench_threads (independent compiled calls from 1 and 2 threads, kernel pool off)
# into bench/results/threads_<date>.json and prints the 2-thread / 1-thread throughput ratio.
#   bench/run_threads.sh [build dir, default build/] [extra benchmark flags...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift $(($# > 0 ? 1 : 0))
bin="$build/bench/bench_threads"
if [[ ! -x "$bin" ]]; then
  echo "run_threads: $bin not found; build first (scripts/build)" >&2
  exit 1
fi

out="${KILN_BENCH_OUT:-$root/bench/results/threads_$(date +%Y-%m-%d).json}"
mkdir -p "$(dirname "$out")"
KILN_NUM_THREADS=1 "$bin" --benchmark_repetitions=5 --benchmark_out="$out" --benchmark_out_format=json "$@" >/dev/null
echo "wrote $out"
python3 - "$out" <<'PY'
import json, statistics, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
rate = {}
for b in runs:
    if b.get("run_type") == "iteration":
        rate.setdefault(b["threads"], []).append(b["items_per_second"])
one, two = statistics.median(rate[1]), statistics.median(rate[2])
print(f"1 thread:  {one / 1e6:.2f} M elements/s (median of {len(rate[1])})")
print(f"2 threads: {two / 1e6:.2f} M elements/s (median of {len(rate[2])})")
print(f"ratio: {two / one:.2f}x")
PY
