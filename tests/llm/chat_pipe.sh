#!/bin/sh
# `kiln chat` through a pipe: two turns from standard input, greedy, each answered on stdout;
# the second turn goes on from the first (the session keeps the conversation).
# Usage: chat_pipe.sh <kiln command>. Exits 77 (a skip) without the default model.
set -eu
kiln=$1
model="${KILN_MODELS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-models}/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || { echo "SKIP: no default model at $model (scripts/setup)"; exit 77; }
out=$(printf 'What is the capital of France?\n\nAnd of Italy?\n' | "$kiln" chat "$model" --temp 0 -n 24)
echo "$out"
[ "$(printf '%s\n' "$out" | grep -c .)" -ge 2 ] || { echo "expected two answers"; exit 1; }
printf '%s\n' "$out" | grep -q "Paris" || { echo "the first answer does not name Paris"; exit 1; }
