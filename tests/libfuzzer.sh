#!/usr/bin/env bash
# Builds a libFuzzer target with clang++ and fuzzes it for a short time.
#   libfuzzer.sh NAME SOURCE_DIR LIBKILN_A WORK_DIR SECONDS TARGET_CPP 'SEED_GLOB...' SOURCE...
# TARGET_CPP, each SEED_GLOB (several: separated by spaces) and each SOURCE are relative to SOURCE_DIR. The SOURCEs (the code
# under test) are compiled with the fuzzer's instrumentation; the rest of kiln comes from the
# already built library. Inputs that crash are left in WORK_DIR. Exits 77 (CTest skip) without
# clang++ or libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
set -uo pipefail
name="${1:?name}"; src="${2:?source dir}"; lib="${3:?libkiln.a}"; work="${4:?work dir}"
secs="${5:?seconds}"; target="${6:?target}"; seeds="${7:?seed glob}"; shift 7

cxx=""
for c in clang++ clang++-14 clang++-15 clang++-16; do
  if command -v "$c" >/dev/null 2>&1; then cxx="$c"; break; fi
done
[[ -n "$cxx" ]] || { echo "$name: no clang++, skipping"; exit 77; }
mkdir -p "$work/corpus"
probe="$work/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe"
if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "$name: $cxx has no libFuzzer (libclang-rt-*-dev), skipping"; exit 77
fi

blas="$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas) $(pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8)"
objs=()
for s in "$@"; do objs+=("$src/$s"); done
echo "$name: building with $cxx"
if ! "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
     -I"$src/include" -I"$(dirname "$lib")/generated/include" -I"$src/src" -I"$(dirname "$src/$target")" "$src/$target" "${objs[@]}" \
     "$lib" $blas -lpthread -ldl -o "$work/$name"; then
  echo "$name: build failed"; exit 1
fi
shopt -s nullglob
for glob in $seeds; do
  for f in $src/$glob; do cp "$f" "$work/corpus/"; done
done
# -close_fd_mask=2 hides the target's own stderr lines; libFuzzer's reports still show.
# -max_len: inputs up to 64 KB (libFuzzer's default of 4 KB never reaches deep nesting).
"$work/$name" "$work/corpus" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 -close_fd_mask=2 \
  -artifact_prefix="$work/" -print_final_stats=1 2>&1 | tail -15
status=${PIPESTATUS[0]}
[[ $status -eq 0 ]] && echo "$name: no crashes in ${secs}s"
exit "$status"
