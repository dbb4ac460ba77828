#!/usr/bin/env bash
# Proves both ways to consume kiln from CMake, building and running the consumer
# in tests/install each way:
#   (a) add_subdirectory of the source tree;
#   (b) cmake --install of the current build into a temporary prefix (the library,
#       headers and the kiln command), then find_package(kiln) with CMAKE_PREFIX_PATH.
# usage: run.sh SOURCE_DIR BUILD_DIR WORK_DIR BUILD_TYPE GENERATOR CXX_COMPILER [LAUNCHER]
# The consumer builds use the parent build's compiler, flags and launcher, so
# that with ccache the library's sources in (a) come from the cache. When the
# parent build directory sits directly in the source tree (build/, build-*/),
# (a) builds in a sibling directory: with ccache's base directory set to the
# source tree, compiler paths are then identical to the parent's.
set -euo pipefail

src="$1" build="$2" work="$3" type="$4" generator="$5" cxx="$6" launcher="${7:-}"
here="$src/tests/install"
cmake="${CMAKE_COMMAND:-cmake}"

common=(-G "$generator" -DCMAKE_BUILD_TYPE="$type" -DCMAKE_CXX_COMPILER="$cxx")
[[ -n "$launcher" ]] && common+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_C_COMPILER_LAUNCHER="$launcher")
jobs="$(nproc 2>/dev/null || echo 2)"

rm -rf "$work"
mkdir -p "$work"

echo "--- (a) add_subdirectory"
sub="$work/sub"
if [[ "$(cd "$(dirname "$build")" && pwd)" == "$(cd "$src" && pwd)" ]]; then
  sub="$src/$(basename "$build")-consumer"  # matches the /build*/ line of .gitignore
fi
rm -rf "$sub"
"$cmake" -S "$here" -B "$sub" "${common[@]}" -DKILN_SOURCE_DIR="$src" >"$work/sub.log" 2>&1 \
  || { cat "$work/sub.log"; exit 1; }
"$cmake" --build "$sub" -j "$jobs" --target consumer >>"$work/sub.log" 2>&1 \
  || { cat "$work/sub.log"; exit 1; }
"$sub/consumer"
# A subproject builds the kiln command only when asked.
if grep -q "kiln_cli" "$sub/build.ninja" 2>/dev/null || grep -rq "kiln_cli" "$sub/Makefile" 2>/dev/null; then
  echo "add_subdirectory(kiln) defines the kiln command without KILN_BUILD_TOOLS"; exit 1
fi

echo "--- (b) cmake --install, then find_package(kiln)"
"$cmake" --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
test -f "$work/prefix/include/kiln/kiln.h"
# The kiln command is installed and runs.
# (Output captured first: grep -q closing the pipe early would fail kiln's writes under pipefail.)
info="$("$work/prefix/bin/kiln" info 2>&1)" || { echo "cmake --install: bin/kiln info failed: $info"; exit 1; }
grep -q "^kiln " <<<"$info" || { echo "cmake --install did not install a working bin/kiln: $info"; exit 1; }
"$cmake" -S "$here" -B "$work/pkg" "${common[@]}" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/pkg.log" 2>&1 \
  || { cat "$work/pkg.log"; exit 1; }
grep -q "kiln_DIR:PATH=$work/prefix" "$work/pkg/CMakeCache.txt" \
  || { echo "find_package(kiln) did not use the installed copy"; grep kiln_DIR "$work/pkg/CMakeCache.txt"; exit 1; }
"$cmake" --build "$work/pkg" -j "$jobs" >>"$work/pkg.log" 2>&1 || { cat "$work/pkg.log"; exit 1; }
"$work/pkg/consumer"
echo "install test passed"
