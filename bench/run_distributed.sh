#!/usr/bin/env bash
# Several GPUs of one host (docs/distributed.md; docs/benchmarks.md, "Several GPUs"): builds kiln
# (Release, Ninja), runs the multi-GPU tests, then times kiln's all_sum against PyTorch's NCCL
# all-reduce (bus bandwidth, 1 MiB to 1 GiB) and the decode of a Llama-3-8B-shaped model at TP=1
# and TP=2 (TP=4 too with 4 GPUs), bfloat16 and 4-bit weights.
#
#   bench/run_distributed.sh <out dir> [build dir]
#
# Writes into <out dir>: distributed_<date>.json (every result, one object a line: the raw data for
# bench/results/), summary.md (the tables for docs/benchmarks.md), and the logs of each step
# (cmake.log, build.log, test_distributed.log, test_tensor_parallel.log, kiln_all_sum.json,
# torch_all_sum.json, kiln_all_sum_graph.json, torch_all_sum_graph.json, decode.json,
# decode_half.json, nvidia-smi.txt). Every step runs even when an earlier one
# failed; the exit status is 0 when all succeeded, else 1 with the failed steps listed.
# Environment: JOBS (ninja jobs, 32), PYTHON (python3), DEADLINE (470: seconds from the start by
# which everything has ended; each step's limit shrinks to fit), TOKENS (decode steps timed, 64),
# SKIP_BUILD=1 (use the build dir as it is), DISTRIBUTED_DRY_RUN=1 (kiln's parts on CPU threads at a
# small shape, no PyTorch: tests the scripts, measures nothing).
set -uo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: bench/run_distributed.sh <out dir> [build dir]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$1"
build="${2:-$root/build-distributed}"
mkdir -p "$out" "$build"
out="$(cd "$out" && pwd)"
build="$(cd "$build" && pwd)"
py="${PYTHON:-python3}"
day="$(date -u +%Y-%m-%d)"
export NCCL_NVLS_ENABLE=0                 # NVLink multicast stays off (it can take the host's GPUs down)
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_DISABLE_NVLS=1
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-$build/kernel-cache}"
failed=()
dry=()
max_mib=1024
[[ -n "${DISTRIBUTED_DRY_RUN:-}" ]] && dry=(--cpu) && max_mib=8
t_start=$SECONDS
deadline=$((t_start + ${DEADLINE:-470}))
source "$root/bench/step_limits.sh"
# run <name> <wanted seconds> <seconds kept for later> <log> command...: a step with its time limit.
run() {
  local name=$1 wanted=$2 keep=$3 log=$4
  shift 4
  local t
  t=$(limit "$wanted" "$keep")
  timeout -k 10 "$t" "$@" >"$log" 2>&1
  local rc=$?
  echo "$name: rc=$rc in $((SECONDS - t_start)) s$([[ $rc == 124 ]] && echo " (stopped at its ${t} s limit)")"
  ((rc == 0)) || failed+=("$name")
  return $rc
}

nvidia-smi >"$out/nvidia-smi.txt" 2>&1
nvidia-smi topo -m >>"$out/nvidia-smi.txt" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c GPU)
echo "GPUs: $gpus; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"

# ---- build ---------------------------------------------------------------------------------
if [[ -z "${SKIP_BUILD:-}" ]]; then
  step "configure and build in $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON -DKILN_BUILD_TESTS=ON \
    -DKILN_BUILD_EXAMPLES=OFF -DKILN_PYTHON=OFF -DKILN_WERROR=OFF >"$out/cmake.log" 2>&1 || failed+=(cmake)
  grep -E "CUDA backend|nccl" "$out/cmake.log"
  run build 300 280 "$out/build.log" ninja -C "$build" -j "${JOBS:-32}" bench_distributed test_distributed test_tensor_parallel ||
    grep -E "error" -A3 "$out/build.log" | head -40
fi

# ---- collectives on every GPU --------------------------------------------------------------------
step "test_distributed"
run test_distributed 90 250 "$out/test_distributed.log" "$build/tests/test_distributed"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|Failure|error:" "$out/test_distributed.log" | cut -c1-240 | head -40

# ---- all_sum against PyTorch ------------------------------------------------------------------
step "all-reduce bus bandwidth: kiln all_sum, then PyTorch (one process a GPU)"
run kiln_all_sum 60 200 "$out/kiln_all_sum.json" "$build/bench/bench_distributed" all_sum --min-mib 1 --max-mib "$max_mib" "${dry[@]}"
cat "$out/kiln_all_sum.json"
if ((${#dry[@]} == 0)); then
  run torch_all_sum 90 150 "$out/torch_all_sum.log" "$py" "$root/bench/nccl_allreduce.py" --out "$out/torch_all_sum.json"
  tail -n 12 "$out/torch_all_sum.log"
fi
step "all-reduce of decode-sized messages inside a CUDA graph: kiln, then PyTorch"
run kiln_all_sum_graph 30 150 "$out/kiln_all_sum_graph.json" "$build/bench/bench_distributed" all_sum_graph "${dry[@]}"
cat "$out/kiln_all_sum_graph.json"
if ((${#dry[@]} == 0)); then
  run torch_all_sum_graph 60 120 "$out/torch_all_sum_graph.log" "$py" "$root/bench/nccl_allreduce.py" --graph \
    --out "$out/torch_all_sum_graph.json"
  cat "$out/torch_all_sum_graph.json"
fi

# ---- 8B-shaped decode ---------------------------------------------------------------------------
step "decode tokens/s of a Llama-3-8B-shaped model"
tps="1,2"
((gpus >= 4)) && tps="1,2,4"
run decode 200 60 "$out/decode.json" "$build/bench/bench_distributed" decode --tp "$tps" --types BF16,Q4 --tokens "${TOKENS:-64}" "${dry[@]}"
cat "$out/decode.json"
if ((${#dry[@]} == 0)); then  # one TP=2 rank's work alone: TP=2 without its collectives
  run decode_half 60 40 "$out/decode_half.json" "$build/bench/bench_distributed" decode --tp 1 --types BF16,Q4 \
    --tokens "${TOKENS:-64}" --model llama3-8b-half
  cat "$out/decode_half.json"
fi

# ---- tensor-parallel models against one rank -------------------------------------------------------
step "test_tensor_parallel"
run test_tensor_parallel 150 5 "$out/test_tensor_parallel.log" "$build/tests/test_tensor_parallel"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|ranks: largest|Failure|error:" "$out/test_tensor_parallel.log" | cut -c1-240 | head -40

# ---- summary --------------------------------------------------------------------------------
cat "$out"/kiln_all_sum.json "$out"/torch_all_sum.json "$out"/kiln_all_sum_graph.json "$out"/torch_all_sum_graph.json \
  "$out"/decode.json "$out"/decode_half.json 2>/dev/null | grep '^{' >"$out/distributed_$day.json"
"$py" "$root/bench/summarize_distributed.py" "$out/distributed_$day.json" >"$out/summary.md" 2>&1 || failed+=(summary)
cat "$out/summary.md"
echo
echo "total $((SECONDS - t_start)) s"
if ((${#failed[@]})); then
  echo "failed: ${failed[*]}"
  exit 1
fi
