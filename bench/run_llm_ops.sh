#!/usr/bin/env bash
# Runs bench_llm_ops (5 repetitions, JSON) into bench/results/llm_ops_<date>.json and
# prints each op's fraction of its limit.
#   bench/run_llm_ops.sh [build dir, default build/] [extra benchmark flags...]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
shift $(($# > 0 ? 1 : 0))
bin="$build/bench/bench_llm_ops"
if [[ ! -x "$bin" ]]; then
  echo "run_llm_ops: $bin not found; build first (scripts/build)" >&2
  exit 1
fi
out="$root/bench/results/llm_ops_$(date +%Y-%m-%d).json"
mkdir -p "$(dirname "$out")"
"$bin" --benchmark_format=json --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out" --benchmark_out_format=json "$@" >/dev/null
echo "wrote $out"
python3 "$root/bench/summarize_llm_ops.py" "$out"
