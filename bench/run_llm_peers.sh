#!/usr/bin/env bash
# Language models against llama.cpp on the same file and machine (docs/benchmarks.md,
# "Language models"): kiln's `kiln bench-llm` (on the CPU with int16, its default, int8 and exact
# activations; then batched decode and sessions on many threads)
# and llama.cpp's `llama-bench` (built from the
# llama.cpp that the llama-cpp-python source package on PyPI vendors), prefill pp512 and decode
# tg128, with the memory roofline (memcpy bandwidth / weight bytes a token) measured in the
# same run. On a machine with nvidia-smi both also run on the GPU (llama.cpp with GGML_CUDA).
#
#   bench/run_llm_peers.sh <kiln build dir> <out dir> [MODEL.gguf]
#
# Writes <out dir>/llm_peers_<date>.json (one object per machine, model, engine, device and
# phase) and the logs of every step. Environment: THREADS (llama.cpp threads: the cores),
# REPS (3), LLAMA_CPP_VERSION (llama-cpp-python's, 0.3.36), LLAMA_CPP_DIR (an extracted source
# to use instead of downloading one), PP (512), TG (128).
set -uo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: bench/run_llm_peers.sh <kiln build dir> <out dir> [MODEL.gguf]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
kiln="$build/tools/kiln/kiln"
model="${3:-${KILN_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
threads="${THREADS:-$(nproc)}" reps="${REPS:-3}" pp="${PP:-512}" tg="${TG:-128}"
version="${LLAMA_CPP_VERSION:-0.3.36}"
day="$(date -u +%Y-%m-%d)"
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && gpu=1
[[ -f $model ]] || { echo "run_llm_peers: no model at $model (scripts/setup fetches it)" >&2; exit 1; }

# ---- llama.cpp's llama-bench ----------------------------------------------------------
src="${LLAMA_CPP_DIR:-}"
if [[ -z $src ]]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/kiln-peers"
  mkdir -p "$cache"
  if [[ ! -d $cache/llama_cpp_python-$version ]]; then
    python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$cache" >"$out/pip.log" 2>&1 &&
      tar -xzf "$cache/llama_cpp_python-$version.tar.gz" -C "$cache"
  fi
  src="$cache/llama_cpp_python-$version/vendor/llama.cpp"
fi
bench_dir="$out/llama.cpp-build"
cuda_flags=()
((gpu)) && cuda_flags=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native)
echo "=== build llama-bench from $src"
if cmake -S "$src" -B "$bench_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "${cuda_flags[@]}" >"$out/llama_cmake.log" 2>&1 &&
   cmake --build "$bench_dir" -j "$(nproc)" --target llama-bench >"$out/llama_build.log" 2>&1; then
  llama_bench="$bench_dir/bin/llama-bench"
else
  echo "run_llm_peers: llama-bench did not build (see $out/llama_cmake.log, llama_build.log)" >&2
  llama_bench=""
fi

# ---- the roofline: memcpy bandwidth --------------------------------------------------
echo "=== memcpy bandwidth"
"$build/bench/bench_llm_ops" --benchmark_filter=BM_Memcpy --benchmark_format=json >"$out/memcpy.json" 2>"$out/memcpy.log"

# ---- kiln ----------------------------------------------------------------------------
devices=(cpu)
((gpu)) && devices+=(cuda)
for d in "${devices[@]}"; do
  echo "=== kiln bench-llm ($d)"
  "$kiln" bench-llm "$model" --pp "$pp" --tg "$tg" -r "$reps" --device "$d" --json >"$out/kiln_$d.json" 2>"$out/kiln_$d.log"
done
# The CPU again with int8 (llama.cpp's rounding) and exact activations (the default is int16).
for a in int8 exact; do
  echo "=== kiln bench-llm (cpu, $a activations)"
  "$kiln" bench-llm "$model" --pp "$pp" --tg "$tg" -r "$reps" --device cpu --activations "$a" --json \
    >"$out/kiln_cpu_$a.json" 2>"$out/kiln_cpu_$a.log"
done
# Many sessions on one loaded model: B sessions in one step, and T sessions on T threads.
for d in "${devices[@]}"; do
  echo "=== kiln bench-llm sessions ($d)"
  "$kiln" bench-llm "$model" --pp 1 --tg "${TG_SESSIONS:-32}" -r 1 --device "$d" --batch 1,4,16,64 --threads 1,2,4,8 \
    --json >"$out/kiln_sessions_$d.json" 2>"$out/kiln_sessions_$d.log"
done

# ---- llama.cpp -----------------------------------------------------------------------
if [[ -n $llama_bench ]]; then
  echo "=== llama-bench (cpu, $threads threads)"
  "$llama_bench" -m "$model" -p "$pp" -n "$tg" -r "$reps" -t "$threads" -ngl 0 -o json >"$out/llama_cpu.json" 2>"$out/llama_cpu.log"
  if ((gpu)); then
    echo "=== llama-bench (cuda)"
    "$llama_bench" -m "$model" -p "$pp" -n "$tg" -r "$reps" -ngl 99 -o json >"$out/llama_cuda.json" 2>"$out/llama_cuda.log"
  fi
fi

python3 "$root/bench/summarize_llm_peers.py" "$out" "$model" "$day" "$threads" >"$out/llm_peers_$day.md" &&
  cat "$out/llm_peers_$day.md"
