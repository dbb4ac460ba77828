#!/usr/bin/env bash
# The GPU peers benchmark (docs/benchmarks.md, "GPU peers"): builds bench/gpu_peers (kiln
# with the CUDA backend), runs it, runs bench/gpu_peers.py for JAX, for MLX (the llm section
# only; skipped, not failed, where MLX has no GPU) and for PyTorch (eager and torch.compile)
# in separate processes, and merges everything with bench/summarize_gpu_peers.py.
#
#   bench/run_gpu_peers.sh <build dir> <out dir> [extra gpu_peers arguments...]
#
# Writes into <out dir>: gpu_peers_<date>.json (the results list, for bench/results/),
# gpu_peers_<date>.md (the table for docs/benchmarks.md), and the raw kiln.json,
# python_jax.json, python_mlx.json, python_torch.json, with the logs of every step (cmake.log,
# build.log, kiln.log, python_jax.log, python_mlx.log, python_torch.log, nvidia-smi.txt).
#
# Every step runs even when an earlier one failed (their fields are then null); the exit
# status is 0 when all steps succeeded and 1 otherwise, with the failed steps listed last.
# Environment: JOBS (ninja jobs, 16), PYTHON (python3), REPS (20), SKIP_BUILD=1 (use the
# existing build), BUILD_TIMEOUT (330 s), DEADLINE (560: seconds from the start by which everything has ended, so
# that one 600 s command holds the whole run; each step's time limit shrinks to fit, and a
# step killed at its limit keeps the results it had written), CPP_TIMEOUT (150 s),
# JAX_TIMEOUT (120 s), MLX_TIMEOUT (60 s), TORCH_TIMEOUT (260 s; no new torch.compile measurement starts in
# its last 60 s), GPU_PEERS_DRY_RUN=1 (everything on the CPU at 1/256 size: tests the
# scripts, measures nothing).
set -uo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: bench/run_gpu_peers.sh <build dir> <out dir> [extra gpu_peers arguments...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$1"
out="$2"
shift 2
mkdir -p "$out" "$build"
out="$(cd "$out" && pwd)"
build="$(cd "$build" && pwd)"
py="${PYTHON:-python3}"
reps="${REPS:-20}"
day="$(date -u +%Y-%m-%d)"
dry=()
[[ -n "${GPU_PEERS_DRY_RUN:-}" ]] && dry=(--cpu-dry-run)
failed=()
notes=()
rm -f "$out/kiln.json" "$out/python_jax.json" "$out/python_mlx.json" "$out/python_torch.json"  # never merge a previous run's
t_start=$SECONDS
deadline=$((t_start + ${DEADLINE:-560}))
source "$root/bench/step_limits.sh"

# ---- build ---------------------------------------------------------------------------
exe="$build/bench/gpu_peers"
if [[ -z "${SKIP_BUILD:-}" ]]; then
  step "configure and build gpu_peers in $build"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON \
      -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF "${launcher[@]}" >"$out/cmake.log" 2>&1; then
    tail -20 "$out/cmake.log"
    failed+=("cmake (see $out/cmake.log)")
  elif ! grep -q '^KILN_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
    echo "kiln was configured without the CUDA backend (CMake found no CUDA toolkit): gpu_peers is not built"
    grep -i cuda "$out/cmake.log" | head -5
    failed+=("build: no CUDA toolkit found by CMake")
  elif ! timeout -k 5 "$(limit "${BUILD_TIMEOUT:-330}" 200)" ninja -C "$build" -j"${JOBS:-16}" gpu_peers \
      >"$out/build.log" 2>&1; then
    grep -E "error|FAILED" -A5 "$out/build.log" | head -60
    tail -3 "$out/build.log"
    failed+=("build (see $out/build.log; a build cut short by the deadline can be resumed with the same command)")
  else
    echo "built $exe"
  fi
fi

if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv \
    >"$out/nvidia-smi.txt" 2>&1 && cat "$out/nvidia-smi.txt"
fi

# ---- kiln ----------------------------------------------------------------------------
step "kiln: $exe"
cache="$(mktemp -d /tmp/kiln-gpu-peers-XXXXXX)"
trap 'rm -rf "$cache"' EXIT
cpp_limit=$(limit "${CPP_TIMEOUT:-150}" 170)
if ((cpp_limit < 30)); then
  echo "only $cpp_limit s left before the deadline: kiln not measured"
  failed+=("kiln: no time left (DEADLINE)")
elif [[ -x "$exe" ]]; then
  echo "time limit ${cpp_limit} s"
  KILN_CACHE_DIR="$cache" timeout -k 5 "$cpp_limit" "$exe" --out "$out/kiln.json" --reps "$reps" \
    "${dry[@]}" "$@" 2>&1 | tee "$out/kiln.log"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) ;;
    77) failed+=("kiln: no usable CUDA device (see $out/kiln.log)") ;;
    124 | 137) failed+=("kiln: timed out after $cpp_limit s (partial results kept)") ;;
    *) failed+=("kiln: exit status $rc (see $out/kiln.log)") ;;
  esac
else
  echo "no $exe: kiln not measured"
  failed+=("kiln: not built")
fi

# ---- peers ---------------------------------------------------------------------------
run_py() {  # name wanted-limit reserve-for-later args...
  local name=$1 lim
  lim=$(limit "$2" "$3")
  shift 3
  step "python: gpu_peers.py $* (time limit $lim s)"
  if ((lim < 20)); then
    echo "only $lim s left before the deadline: skipped"
    failed+=("python $name: no time left (DEADLINE)")
    return
  fi
  local extra=()
  [[ $name == torch ]] && extra=(--budget-s $((lim > 90 ? lim - 60 : lim * 2 / 3)))
  timeout -k 5 "$lim" "$py" "$root/bench/gpu_peers.py" --out "$out/python_$name.json" --reps "$reps" \
    "${dry[@]}" "${extra[@]}" "$@" 2>&1 | tee "$out/python_$name.log"
  local rc=${PIPESTATUS[0]}
  case $rc in
    0) ;;
    77) if [[ $name == mlx ]]; then  # an optional peer: MLX-CUDA is rarely installed
          notes+=("python mlx: MLX not usable here, skipped (see $out/python_mlx.log)")
        else
          failed+=("python $name: framework not usable here (see $out/python_$name.log)")
        fi ;;
    124 | 137) failed+=("python $name: timed out after $lim s (partial results kept)") ;;
    *) failed+=("python $name: exit status $rc (see $out/python_$name.log)") ;;
  esac
}
run_py jax "${JAX_TIMEOUT:-120}" 100 --frameworks jax
run_py mlx "${MLX_TIMEOUT:-60}" 100 --frameworks mlx --sections llm
run_py torch "${TORCH_TIMEOUT:-260}" 10 --frameworks torch_eager,torch_compile

# ---- merge ---------------------------------------------------------------------------
step "merge"
if ! "$py" "$root/bench/summarize_gpu_peers.py" --kiln "$out/kiln.json" --python "$out/python_jax.json" \
    --python "$out/python_mlx.json" --python "$out/python_torch.json" --json "$out/gpu_peers_$day.json" --md "$out/gpu_peers_$day.md"; then
  failed+=("merge")
fi

echo
echo "=== done in $((SECONDS - t_start)) s; outputs in $out"
((${#notes[@]})) && printf '  - %s\n' "${notes[@]}"
if ((${#failed[@]})); then
  echo "failed or incomplete steps:"
  printf '  - %s\n' "${failed[@]}"
  exit 1
fi
echo "all steps succeeded"
