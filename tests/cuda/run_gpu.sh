#!/usr/bin/env bash
# Builds kiln with the CUDA backend and runs the GPU tests (used on the lent H100; see
# docs/cuda.md). Usage: tests/cuda/run_gpu.sh <build dir> <log dir> [phase...]
# phases (default: build cuda suite):
#   build     configure and build test_cuda, every suite below and the kiln command
#   cuda      test_cuda
#   suite     every test executable that means something on a GPU, with KILN_TEST_DEVICE=cuda
#             (the GPU as default device), then `kiln run --device cuda` on each example graph
#   llm       the language-model tests' GPU cases (test_llm_model, test_llm_tiny_models; the
#             default model from KILN_MODELS_DIR) and test_tiers on the GPU
#   python    the Python module (needs nanobind for python3) and its pytest suite, DLPack
#             with PyTorch's CUDA tensors included
#   sanitize  compute-sanitizer: memcheck over test_cuda and the per-op suites (with
#             KILN_TEST_DEVICE=cuda), racecheck over test_cuda; SAN_JOBS at once, all
#             within SAN_BUDGET seconds (a job still running then is stopped and reported)
# Output: one line per executable plus its failures; full logs under the log dir.
# Knobs: SUITE, SAN_SUITES (lists), KILN_TEST_FUZZ_COUNT (test_fuzz, 60), SUITE_TIMEOUT (240 s
# each), SAN_FUZZ (test_cuda's random graphs under the sanitizers, 8), SAN_JOBS (4),
# SAN_SHARDS (1: each sanitizer job split into this many gtest shards run side by side),
# SAN_BUDGET (330 s), SAN_FILTER (test_cuda filter there; left out by default: the out-of-memory
# test, and the epilogue timing test, whose 4096^3 products take minutes under a sanitizer
# and measure nothing there).
set -uo pipefail
B=${1:-/tmp/kb}; L=${2:-/tmp/kl}; shift 2 || true
PHASES=${*:-build cuda suite}
mkdir -p "$L"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
# name[:gtest filter]. Left out as CPU-only by nature: test_jit (the C++ JIT of CPU
# kernels), test_fast_math (host calls of math.h), and in test_threads the two tests that
# need the CPU path (a gate primitive that is a Copy on the GPU; the CPU JIT's kernel cache).
SUITE=${SUITE:-"test_nn test_quantized test_core test_dtype test_unary test_binary test_elementwise_misc test_creation test_layout
  test_views test_reduce test_random test_sort test_matmul test_compile test_fusion test_passes test_fuzz
  test_threads:-Threads.EachThreadHasItsOwnStream:Threads.KernelCacheIsBounded test_memory_cycles
  test_graph test_executable test_executable_cuda test_extent"}
SAN_SUITES=${SAN_SUITES:-"test_nn test_quantized test_unary test_binary test_elementwise_misc test_creation test_layout test_views test_reduce test_random test_sort test_matmul"}
SAN=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}

targets() { for s in $SUITE $SAN_SUITES; do echo "${s%%:*}"; done | sort -u | tr '\n' ' '; }
# "[  PASSED  ] N tests." and "[  FAILED  ] N tests," of a gtest log, on one line.
verdict() { grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$1" | tr '\n' ' '; }

for phase in $PHASES; do
  case $phase in
    build)
      cmake -S . -B "$B" -G Ninja -DKILN_BUILD_BENCH=${KILN_BUILD_BENCH:-OFF} -DKILN_BUILD_EXAMPLES=OFF -DKILN_WERROR=OFF >"$L/cmake.log" 2>&1 || { tail -20 "$L/cmake.log"; exit 1; }
      ninja -C "$B" -j16 test_cuda kiln_cli test_llm_model test_llm_tiny_models test_tiers $(targets) >"$L/build.log" 2>&1 || { grep -E "error" -A5 "$L/build.log" | head -60; exit 1; }
      echo "build ok";;
    cuda)
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      "$B/tests/test_cuda" 2>&1 | tee "$L/test_cuda.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[ *OK|compared|async_eval|Failure|error|seed [0-9]+:|Actual|C\+\+ exception" | cut -c1-300 | awk '!seen[$0]++ && n++ < 150';;
    suite)
      : >"$L/suite.log"
      phase_start=$SECONDS
      for entry in $SUITE; do
        t=${entry%%:*}; filter=()
        [[ $entry == *:* ]] && filter=("--gtest_filter=${entry#*:}")
        log="$L/suite_$t.log"; start=$SECONDS
        KILN_TEST_DEVICE=cuda KILN_TEST_FUZZ_COUNT=${KILN_TEST_FUZZ_COUNT:-60} timeout -k 10 "${SUITE_TIMEOUT:-240}" \
          "$B/tests/$t" "${filter[@]}" >"$log" 2>&1
        rc=$?
        echo "$t rc=$rc $((SECONDS - start))s $(verdict "$log")$([[ $rc == 124 ]] && echo "TIMED OUT")"
        grep -E "^\[  FAILED  \] [A-Z]" "$log" | head -20
        [[ $rc != 0 ]] && ! grep -qE "^\[  FAILED  \] [A-Z]" "$log" && tail -5 "$log" | cut -c1-300
        { echo "===== $t ${filter[*]}"; cat "$log"; } >>"$L/suite.log"
      done
      # The kiln command on the GPU: every mode of every example graph, and how far they differ.
      for g in examples/graphs/*.kgraph; do
        log="$L/kiln_run_$(basename "$g" .kgraph).log"
        timeout -k 10 120 "$B/tools/kiln/kiln" run "$g" --device cuda --bench 3 --random-params >"$log" 2>&1
        rc=$?
        echo "kiln run $(basename "$g") --device cuda rc=$rc $(grep -E "nodes, device|largest difference between" "$log" | sed "s/.*nodes, //" | tr '\n' ' ')"
        [[ $rc != 0 ]] && tail -3 "$log" | cut -c1-300
      done
      echo "suite: $((SECONDS - phase_start))s";;
    llm)
      for t in test_llm_model:*Cuda* test_llm_tiny_models:*Cuda* test_tiers; do
        log="$L/llm_${t%%:*}.log"; filter=()
        [[ $t == *:* ]] && filter=("--gtest_filter=${t#*:}")
        KILN_TEST_DEVICE=cuda timeout -k 10 "${SUITE_TIMEOUT:-240}" "$B/tests/${t%%:*}" "${filter[@]}" >"$log" 2>&1
        echo "${t%%:*} rc=$? $(verdict "$log")"
        grep -E "^\[  (FAILED|SKIPPED) *\] [A-Z]|Failure|Skipped|skip" "$log" | head -10 | cut -c1-300
      done;;
    python)
      cmake -S . -B "$B" -DKILN_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" >"$L/cmake_python.log" 2>&1 &&
        ninja -C "$B" -j16 _kiln >"$L/build_python.log" 2>&1 || { tail -20 "$L/cmake_python.log" "$L/build_python.log"; exit 1; }
      PYTHONPATH="$B/python:${PYTHONPATH:-}" timeout -k 10 "${SUITE_TIMEOUT:-240}" python3 -m pytest -q -p no:cacheprovider \
        bindings/python/tests >"$L/pytest.log" 2>&1
      echo "pytest rc=$? $(tail -1 "$L/pytest.log")"
      grep -E "^FAILED|^ERROR|SKIPPED.*dlpack_cuda" "$L/pytest.log" | head -20 | cut -c1-300;;
    sanitize)
      [[ -x $SAN ]] || { echo "compute-sanitizer not found (set COMPUTE_SANITIZER)"; exit 1; }
      # tool|executable|gtest filter|environment; racecheck first, the slowest.
      jobs_list=("racecheck|test_cuda|${SAN_FILTER:--Cuda.OutOfMemory*:Cuda.MatmulEpilogueAtScaleRunsInCublasLt}|KILN_TEST_CUDA_FUZZ_COUNT=${SAN_FUZZ:-8}"
                 "memcheck|test_cuda|${SAN_FILTER:--Cuda.OutOfMemory*:Cuda.MatmulEpilogueAtScaleRunsInCublasLt}|KILN_TEST_CUDA_FUZZ_COUNT=${SAN_FUZZ:-8}")
      for t in $SAN_SUITES; do jobs_list+=("memcheck|$t||KILN_TEST_DEVICE=cuda"); done
      shards=${SAN_SHARDS:-1}
      if ((shards > 1)); then  # tool|executable|filter|environment with a shard each
        sharded=()
        for job in "${jobs_list[@]}"; do
          for ((i = 0; i < shards; ++i)); do sharded+=("$job GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i|.$i"); done
        done
        jobs_list=("${sharded[@]}")
      fi
      phase_start=$SECONDS
      budget=${SAN_BUDGET:-330}
      running=0
      for job in "${jobs_list[@]}"; do
        IFS='|' read -r tool t filter envs shard <<<"$job"
        while ((running >= ${SAN_JOBS:-4})); do wait -n; running=$((running - 1)); done
        left=$((budget - (SECONDS - phase_start)))
        ((left < 20)) && left=20
        log="$L/sanitize_${tool}_$t$shard.log"
        args=()
        [[ -n $filter ]] && args=("--gtest_filter=$filter")
        (
          start=$SECONDS
          env $envs timeout -k 10 "$left" "$SAN" --tool "$tool" --error-exitcode 9 \
            "$B/tests/$t" "${args[@]}" >"$log" 2>&1
          echo "$? $((SECONDS - start))" >"$log.status"
        ) &
        running=$((running + 1))
      done
      wait
      for job in "${jobs_list[@]}"; do
        IFS='|' read -r tool t filter envs shard <<<"$job"
        log="$L/sanitize_${tool}_$t$shard.log"
        read -r rc secs <"$log.status"
        summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
        reports=$(grep -cE "^========= +(Invalid|Program hit|Error|Race|Warning|Uninitialized|Barrier|Malloc|Leaked)" "$log")
        if [[ $rc == 124 || $rc == 137 ]]; then
          summary="TIMED OUT (partial: $(grep -c '^\[       OK \]' "$log") tests finished, $reports sanitizer reports so far)"
        fi
        echo "$tool $t$shard rc=$rc ${secs}s ${summary:-no summary} $(verdict "$log")"
        grep -E "^========= +(Invalid|Program hit|Error|Race|Warning|Uninitialized|Barrier|Malloc|Leaked)" "$log" | sort | uniq -c | sort -rn | head -5 | cut -c1-250
        grep -E "^\[  FAILED  \] [A-Z]" "$log" | head -10
      done
      echo "sanitize: $((SECONDS - phase_start))s";;
  esac
done
