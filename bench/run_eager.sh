#!/usr/bin/env bash
# Runs bench_eager (5 repetitions, JSON) into bench/results/eager_<date>.json
# and prints the ratios against the memcpy and sgemm baselines.
#   bench/run_eager.sh [build dir, default build/] [extra benchmark flags...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift $(($# > 0 ? 1 : 0))
bin="$build/bench/bench_eager"
if [[ ! -x "$bin" ]]; then
  echo "run_eager: $bin not found; build first (scripts/build)" >&2
  exit 1
fi

out="$root/bench/results/eager_$(date +%Y-%m-%d).json"
mkdir -p "$(dirname "$out")"
# Repetitions are interleaved at random so that drift in the machine's speed
# (other tenants, clock changes) spreads over every benchmark instead of one.
"$bin" --benchmark_format=json --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out" --benchmark_out_format=json "$@" >/dev/null
echo "wrote $out"
python3 "$root/bench/summarize_eager.py" "$out"
