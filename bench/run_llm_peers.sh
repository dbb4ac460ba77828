#!/usr/bin/env bash
# Language models against their peers on the same files and machine (docs/benchmarks.md,
# "Language models"): kiln's `kiln bench-llm` (on the CPU with int16, its default, int8 and exact
# activations; then batched decode and sessions on many threads), llama.cpp's `llama-bench`
# (built from the llama.cpp that the llama-cpp-python source package on PyPI vendors), MLX
# (bench/llm_peer_mlx.py: float32 on the CPU, float16 and bfloat16 on the GPU) and PyTorch
# (bench/llm_peer_torch.py: transformers' Llama, static cache, torch.compile reduce-overhead in
# bfloat16 on the GPU; eager float32 on the CPU); prefill pp512 and decode tg128, with the memory
# roofline (memcpy bandwidth / file bytes; on the GPU bench/gpu_peers' device copy) measured in
# the same run. On a machine with nvidia-smi all also run on the GPU (llama.cpp with GGML_CUDA).
# A peer that cannot be imported (mlx, torch + transformers + gguf) is skipped with a note.
#
#   bench/run_llm_peers.sh <kiln build dir> <out dir> [MODEL.gguf ...]
#
# Writes <out dir>/llm_peers_<date>.json (one object per machine, model, engine, device and
# phase), <out dir>/llm_peers_<date>.md (the table) and the logs of every step (one folder a
# model). Environment: THREADS (llama.cpp's and PyTorch's CPU threads: the cores), REPS (3),
# PP (512), TG (128), LLAMA_CPP_VERSION (llama-cpp-python's, 0.3.36), LLAMA_CPP_DIR (an
# extracted source to use instead of downloading one), LLAMA_BENCH (a built llama-bench: no
# build), MODELS (model files, space-separated, after those given as arguments; the default
# model when neither names one), ENGINES (which run, of "kiln llama.cpp mlx pytorch"; all by
# default), CPU_MAX_MB (larger files run on the GPU only; 1000), PYTHON (the interpreter for MLX
# and PyTorch; python3), MLX_GPU_DTYPES ("float16 bfloat16"). Every step's output stays in
# <out dir> and the summary folds whatever is there, so ENGINES and MODELS can split one
# benchmark over several runs into one folder.
set -uo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: bench/run_llm_peers.sh <kiln build dir> <out dir> [MODEL.gguf ...]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
shift 2
kiln="$build/tools/kiln/kiln"
read -r -a extra <<<"${MODELS:-}"
models=("$@" "${extra[@]}")
((${#models[@]})) || models=("${KILN_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models}/SmolLM2-135M-Instruct.Q4_1.gguf")
threads="${THREADS:-$(nproc)}" reps="${REPS:-3}" pp="${PP:-512}" tg="${TG:-128}"
version="${LLAMA_CPP_VERSION:-0.3.36}"
engines=" ${ENGINES:-kiln llama.cpp mlx pytorch} "
cpu_max_mb="${CPU_MAX_MB:-1000}" py="${PYTHON:-python3}"
day="$(date -u +%Y-%m-%d)"
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && gpu=1
for model in "${models[@]}"; do
  [[ -f $model ]] || { echo "run_llm_peers: no model at $model (scripts/setup fetches the default one)" >&2; exit 1; }
done
runs() { [[ $engines == *" $1 "* ]]; }
note() { echo "run_llm_peers: $*" | tee -a "$out/notes.log" >&2; }

# ---- llama.cpp's llama-bench ----------------------------------------------------------
llama_bench="${LLAMA_BENCH:-}"
if runs llama.cpp && [[ -z $llama_bench ]]; then
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
  fi
fi

# ---- the roofline: memcpy bandwidth, and the GPU's device-to-device copy ---------------
echo "=== memcpy bandwidth"
"$build/bench/bench_llm_ops" --benchmark_filter=BM_Memcpy --benchmark_format=json >"$out/memcpy.json" 2>"$out/memcpy.log"
if ((gpu)); then
  if [[ -x $build/bench/gpu_peers ]]; then
    echo "=== GPU copy bandwidth"
    "$build/bench/gpu_peers" --sections copy --reps 20 --out "$out/gpu_copy.json" >"$out/gpu_copy.log" 2>&1
  else
    note "no $build/bench/gpu_peers (build its target): the GPU rows get no roofline"
  fi
fi

# ---- the peers in Python: which of them can run here ---------------------------------
devices=(cpu)
((gpu)) && devices+=(cuda)
have_mlx_cpu=0 have_mlx_gpu=0 have_torch_cpu=0 have_torch_cuda=0
if runs mlx; then
  if "$py" -c "import mlx.core" >/dev/null 2>&1; then
    have_mlx_cpu=1
    if ((gpu)); then
      if "$py" -c "import mlx.core as mx, sys; sys.exit(not mx.is_available(mx.gpu))" >/dev/null 2>&1; then have_mlx_gpu=1
      else note "MLX has no GPU here (install mlx-cuda): MLX runs on the CPU only"; fi
    fi
  else
    note "$py cannot import mlx: MLX skipped"
  fi
fi
if runs pytorch; then
  if "$py" -c "import torch, transformers, gguf" >/dev/null 2>&1; then
    have_torch_cpu=1
    if ((gpu)); then
      if "$py" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" >/dev/null 2>&1; then have_torch_cuda=1
      else note "torch has no CUDA here: PyTorch runs on the CPU only"; fi
    fi
  else
    note "$py cannot import torch, transformers and gguf: PyTorch skipped"
  fi
fi

for model in "${models[@]}"; do
  name="$(basename "$model" .gguf)"
  m="$out/$name"
  mkdir -p "$m"
  mb=$(($(stat -c %s "$model") / 1000000))
  model_devices=()
  for d in "${devices[@]}"; do
    if [[ $d == cpu ]] && ((mb > cpu_max_mb)); then
      note "$name: $mb MB is more than CPU_MAX_MB=$cpu_max_mb: not run on the CPU"
    else
      model_devices+=("$d")
    fi
  done

  # ---- kiln --------------------------------------------------------------------------
  if runs kiln; then
    for d in "${model_devices[@]}"; do
      echo "=== $name: kiln bench-llm ($d)"
      "$kiln" bench-llm "$model" --pp "$pp" --tg "$tg" -r "$reps" --device "$d" --json >"$m/kiln_$d.json" 2>"$m/kiln_$d.log"
    done
    # The CPU again with int8 (llama.cpp's rounding) and exact activations (the default is int16).
    if [[ " ${model_devices[*]} " == *" cpu "* ]]; then
      for a in int8 exact; do
        echo "=== $name: kiln bench-llm (cpu, $a activations)"
        "$kiln" bench-llm "$model" --pp "$pp" --tg "$tg" -r "$reps" --device cpu --activations "$a" --json \
          >"$m/kiln_cpu_$a.json" 2>"$m/kiln_cpu_$a.log"
      done
    fi
    # Many sessions on one loaded model: B sessions in one step, and T sessions on T threads.
    for d in "${model_devices[@]}"; do
      echo "=== $name: kiln bench-llm sessions ($d)"
      "$kiln" bench-llm "$model" --pp 1 --tg "${TG_SESSIONS:-32}" -r 1 --device "$d" --batch 1,4,16,64 --threads 1,2,4,8 \
        --json >"$m/kiln_sessions_$d.json" 2>"$m/kiln_sessions_$d.log"
    done
  fi

  # ---- llama.cpp ---------------------------------------------------------------------
  if runs llama.cpp && [[ -n $llama_bench ]]; then
    for d in "${model_devices[@]}"; do
      if [[ $d == cpu ]]; then
        echo "=== $name: llama-bench (cpu, $threads threads)"
        "$llama_bench" -m "$model" -p "$pp" -n "$tg" -r "$reps" -t "$threads" -ngl 0 -o json >"$m/llama_cpu.json" 2>"$m/llama_cpu.log"
      else
        echo "=== $name: llama-bench (cuda)"
        "$llama_bench" -m "$model" -p "$pp" -n "$tg" -r "$reps" -ngl 99 -o json >"$m/llama_cuda.json" 2>"$m/llama_cuda.log"
      fi
    done
  fi

  # ---- MLX: float32 on the CPU, float16 and bfloat16 on the GPU ------------------------
  for d in "${model_devices[@]}"; do
    if [[ $d == cpu ]]; then ((have_mlx_cpu)) || continue; dtypes=(float32) mdev=cpu
    else ((have_mlx_gpu)) || continue; read -r -a dtypes <<<"${MLX_GPU_DTYPES:-float16 bfloat16}"; mdev=gpu; fi
    for t in "${dtypes[@]}"; do
      echo "=== $name: MLX ($d, $t)"
      "$py" "$root/bench/llm_peer_mlx.py" "$model" --device "$mdev" --dtype "$t" --pp "$pp" --tg "$tg" -r "$reps" --json \
        >"$m/mlx_${d}_$t.json" 2>"$m/mlx_${d}_$t.log" || note "$name: MLX ($d, $t) failed (see $m/mlx_${d}_$t.log)"
    done
  done

  # ---- PyTorch: compiled bfloat16 on the GPU, eager float32 on the CPU ------------------
  for d in "${model_devices[@]}"; do
    if [[ $d == cpu ]]; then ((have_torch_cpu)) || continue; t=float32
    else ((have_torch_cuda)) || continue; t=bfloat16; fi
    echo "=== $name: PyTorch ($d, $t)"
    "$py" "$root/bench/llm_peer_torch.py" "$model" --device "$d" --dtype "$t" --threads "$threads" --pp "$pp" --tg "$tg" \
      -r "$reps" --json >"$m/pytorch_${d}_$t.json" 2>"$m/pytorch_${d}_$t.log" ||
      note "$name: PyTorch ($d, $t) failed (see $m/pytorch_${d}_$t.log)"
  done
done

python3 "$root/bench/summarize_llm_peers.py" "$out" "$day" "$threads" "${models[@]}" >"$out/llm_peers_$day.md" &&
  cat "$out/llm_peers_$day.md"
