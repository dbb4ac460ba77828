#!/usr/bin/env bash
# Where a GPU decode step spends its time: Nsight Compute's duration of every kernel of a few
# decode steps of `kiln bench-llm --device cuda`, summed per kernel and per step, beside the
# step's wall time from a plain run (the difference is launch gaps and host work).
#   bench/profile_gpu_decode.sh <kiln build dir> <out dir> [MODEL.gguf]
# Writes <out>/decode_kernels.csv (ncu) and prints the per-kernel table.
set -uo pipefail
build="$(cd "$1" && pwd)"; mkdir -p "$2"; out="$(cd "$2" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${3:-${KILN_MODELS_DIR:-$HOME/.cache/kiln-models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
ncu="${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}"
kiln="$build/tools/kiln/kiln"
steps="${STEPS:-4}"
"$kiln" bench-llm "$model" --device cuda --pp 512 --tg 128 -r 3 >"$out/decode_plain.log" 2>&1
grep -E "^\| .*(pp|tg)[0-9]" "$out/decode_plain.log"
# One repetition of a short prompt and `steps` tokens; ncu times every kernel node of the graphs.
timeout -k 10 "${NCU_TIMEOUT:-240}" "$ncu" --graph-profiling node --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  --print-units base "$kiln" bench-llm "$model" --device cuda --pp 8 --tg "$steps" -r 1 \
  >"$out/decode_kernels.csv" 2>"$out/decode_ncu.log"
echo "ncu rc=$?"
python3 "$root/bench/tools/ncu_kernels.py" "$out/decode_kernels.csv" 40
