#!/usr/bin/env bash
# Builds the .kgraph parser with clang++ and libFuzzer and fuzzes it for a short time.
#   fuzz_parser.sh SOURCE_DIR LIBKILN_A WORK_DIR [SECONDS]
# The parser and verifier are compiled with the fuzzer's instrumentation; the rest of
# kiln comes from the already built library. Exits 77 (CTest skip) without clang++ or
# libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
set -uo pipefail
src="${1:?source dir}"; lib="${2:?libkiln.a}"; work="${3:?work dir}"; secs="${4:-20}"

cxx=""
for c in clang++ clang++-14 clang++-15 clang++-16; do
  if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
done
[[ -n "$cxx" ]] || { echo "fuzz_parser: no clang++, skipping"; exit 77; }
mkdir -p "$work/corpus"
probe="$work/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe"
if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "fuzz_parser: $cxx has no libFuzzer (libclang-rt-*-dev), skipping"; exit 77
fi

blas="$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)"
parser_sources=(text_lexer text_parse text_print verify interp ops attrs graph)
objs=()
for s in "${parser_sources[@]}"; do objs+=("$src/src/runtime/$s.cpp"); done
echo "fuzz_parser: building with $cxx"
if ! "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
     -I"$src/include" -I"$src/src" "$src/tests/runtime/fuzz_parser.cpp" "${objs[@]}" \
     "$lib" $blas -lpthread -ldl -o "$work/fuzz_parser"; then
  echo "fuzz_parser: build failed"; exit 1
fi
cp "$src"/examples/graphs/*.kgraph "$work/corpus/" 2>/dev/null
"$work/fuzz_parser" "$work/corpus" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
  -print_final_stats=1 2>&1 | tail -15
status=${PIPESTATUS[0]}
[[ $status -eq 0 ]] && echo "fuzz_parser: no crashes in ${secs}s"
exit "$status"
