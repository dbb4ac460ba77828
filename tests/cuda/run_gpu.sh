#!/usr/bin/env bash
# Builds kiln with the CUDA backend and runs the GPU tests (used on the lent H100; see
# docs/cuda.md). Usage: tests/cuda/run_gpu.sh <build dir> <log dir> [phase...]
# phases: build, cuda (test_cuda), suite (per-op/compile/fuzz suites with
# KILN_TEST_DEVICE=cuda), sanitize (compute-sanitizer memcheck and racecheck).
set -uo pipefail
B=${1:-/tmp/kb}; L=${2:-/tmp/kl}; shift 2 || true
PHASES=${*:-build cuda suite}
mkdir -p "$L"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
SUITE="test_unary test_binary test_elementwise_misc test_creation test_layout test_views test_reduce test_matmul test_compile test_fusion test_fuzz"
for phase in $PHASES; do
  case $phase in
    build)
      cmake -S . -B "$B" -G Ninja -DKILN_BUILD_BENCH=OFF -DKILN_BUILD_EXAMPLES=OFF >"$L/cmake.log" 2>&1 || { tail -20 "$L/cmake.log"; exit 1; }
      ninja -C "$B" -j16 test_cuda $SUITE >"$L/build.log" 2>&1 || { grep -E "error" -A5 "$L/build.log" | head -60; exit 1; }
      echo "build ok";;
    cuda)
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      "$B/tests/test_cuda" 2>&1 | tee "$L/test_cuda.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |^\[ *OK|compared|async_eval|Failure|error|seed [0-9]+:|Actual|C\+\+ exception" | cut -c1-300 | awk '!seen[$0]++ && n++ < 150';;
    suite)
      for t in $SUITE; do
        KILN_TEST_DEVICE=cuda KILN_FUZZ_COUNT=${KILN_FUZZ_COUNT:-60} timeout 150 "$B/tests/$t" >/tmp/suite_$t.log 2>&1
        echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' /tmp/suite_$t.log | tr '\n' ' ')"
        grep -E "^\[  FAILED  \] [A-Z]" /tmp/suite_$t.log | head -20
        { echo "===== $t"; cat /tmp/suite_$t.log; } >>"$L/suite.log"
      done;;
    sanitize)
      for tool in memcheck racecheck; do
        KILN_CUDA_FUZZ_COUNT=20 timeout 500 compute-sanitizer --tool $tool --error-exitcode 9 \
          "$B/tests/test_cuda" --gtest_filter=${SAN_FILTER:-'-Cuda.OutOfMemory*'} >"$L/sanitize_$tool.log" 2>&1
        echo "compute-sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/sanitize_$tool.log" | tr '\n' ' ')"
      done;;
  esac
done
