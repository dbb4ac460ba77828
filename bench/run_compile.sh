#!/usr/bin/env bash
# Runs bench_compile (5 repetitions) and compile_latency (3 cold + 3 warm-disk runs, each
# in a new process, of chain10 and of the bundled decoder) and writes both into
# bench/results/compile_<date>.json, then prints the ratios against the targets
# (KILN_BENCH_OUT=<path> writes the JSON there instead).
#   bench/run_compile.sh [build dir, default build/] [extra benchmark flags...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift $(($# > 0 ? 1 : 0))
bench="$build/bench/bench_compile"
latency="$build/bench/compile_latency"
for bin in "$bench" "$latency"; do
  if [[ ! -x "$bin" ]]; then
    echo "run_compile: $bin not found; build first (scripts/build)" >&2
    exit 1
  fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# First calls: a new, empty cache directory per pair; cold run, then warm run in a new process.
: >"$tmp/latency.jsonl"
for i in 1 2 3; do
  dir="$tmp/cache$i"
  mkdir -p "$dir"
  printf '{"run": "cold", %s\n' "$(KILN_CACHE_DIR="$dir" "$latency" | sed 's/^{//')" >>"$tmp/latency.jsonl"
  printf '{"run": "warm_disk", %s\n' "$(KILN_CACHE_DIR="$dir" "$latency" | sed 's/^{//')" >>"$tmp/latency.jsonl"
done

# The bundled decoder block the same way: first compiled run, then steady state against wait.
: >"$tmp/graph.jsonl"
for i in 1 2 3; do
  dir="$tmp/graph-cache$i"
  mkdir -p "$dir"
  for run in cold warm_disk; do
    printf '{"run": "%s", %s\n' "$run" "$(KILN_CACHE_DIR="$dir" "$latency" --graph "$root/examples/graphs/decoder.kgraph" | sed 's/^{//')" >>"$tmp/graph.jsonl"
  done
done

# Throughput and host time, with kernels compiled into a cache of their own.
KILN_CACHE_DIR="$tmp/bench-cache" "$bench" --benchmark_format=json --benchmark_repetitions=5 \
  --benchmark_out="$tmp/bench.json" --benchmark_out_format=json "$@" >/dev/null

out="${KILN_BENCH_OUT:-$root/bench/results/compile_$(date +%Y-%m-%d).json}"
mkdir -p "$(dirname "$out")"
python3 - "$tmp/bench.json" "$tmp/latency.jsonl" "$tmp/graph.jsonl" "$out" <<'PY'
import json, sys
bench = json.load(open(sys.argv[1]))
bench["first_calls"] = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
bench["first_runs"] = [json.loads(line) for line in open(sys.argv[3]) if line.strip()]
json.dump(bench, open(sys.argv[4], "w"), indent=1)
PY
echo "wrote $out"
python3 "$root/bench/summarize_compile.py" "$out"
