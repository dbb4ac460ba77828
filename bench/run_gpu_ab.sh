#!/usr/bin/env bash
# A/B runs of the GPU peers harness: each setting in its own process, settings alternating
# within each round, so every setting sees the same machine (docs/benchmarks.md, "GPU peers").
#
#   bench/run_gpu_ab.sh <gpu_peers> <out dir> <tag> <rounds> <setting>... -- <gpu_peers arguments>
#
# A setting is a label, optionally followed by environment assignments: base or
# old:KILN_CUDA_ROW_SHARED_KB=48 or t512:KILN_CUDA_LONG_ROW_THREADS=512:KILN_CUDA_FMAD=0.
# Writes <out dir>/<tag>_<label>_r<round>.json; bench/summarize_gpu_ab.py folds them.
set -uo pipefail
if [[ $# -lt 5 ]]; then
  echo "usage: bench/run_gpu_ab.sh <gpu_peers> <out dir> <tag> <rounds> <setting>... -- <gpu_peers arguments>" >&2
  exit 2
fi
exe="$1" out="$2" tag="$3" rounds="$4"
shift 4
settings=()
while (($#)) && [[ $1 != -- ]]; do settings+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
mkdir -p "$out"
status=0
for ((r = 1; r <= rounds; ++r)); do
  for s in "${settings[@]}"; do
    label="${s%%:*}" assignments=""; [[ $s == *:* ]] && assignments="${s#*:}"
    env_args=()
    [[ -n ${assignments:-} ]] && IFS=: read -r -a env_args <<<"$assignments"
    json="$out/${tag}_${label}_r${r}.json"
    if ! env "${env_args[@]}" "$exe" --out "$json" "$@" >"$out/${tag}_${label}_r${r}.log" 2>&1; then
      echo "$tag $label round $r failed:"; tail -3 "$out/${tag}_${label}_r${r}.log"
      status=1
    fi
  done
done
exit $status
