#!/bin/sh
# `kiln bench-llm --activations`: the JSON names what the products multiplied; an unknown
# choice is an error naming the flag. Usage: bench_activations.sh <kiln command>. Exits 77
# (a skip) without the default model.
set -eu
kiln=$1
model="${KILN_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models}/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || { echo "SKIP: no default model at $model (scripts/setup)"; exit 77; }
for a in int8 int16 exact; do
  out=$("$kiln" bench-llm "$model" --pp 4 --tg 2 -r 1 --activations "$a" --json)
  echo "$out"
  printf '%s\n' "$out" | grep -q "\"activations\":\"$a\"" || { echo "expected activations $a"; exit 1; }
done
if err=$("$kiln" bench-llm "$model" --pp 4 --tg 2 -r 1 --activations fast 2>&1); then
  echo "--activations fast did not fail"; exit 1
fi
printf '%s\n' "$err" | grep -q "unknown --activations 'fast' (exact, int8 or int16)" || { echo "unexpected error: $err"; exit 1; }
