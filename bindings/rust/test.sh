#!/bin/sh
# Runs the Rust binding's tests against a kiln build.
# Usage: bindings/rust/test.sh <build dir holding libkiln.a> [cargo test args]
# Exits 77 (CTest's skip code) when cargo is not installed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: test.sh <build dir>}
build=$(cd "$build" && pwd)
shift
if ! command -v cargo >/dev/null 2>&1; then
  echo "SKIP: cargo is not installed"
  exit 77
fi
if [ ! -f "$build/libkiln.a" ]; then
  echo "error: $build/libkiln.a not found; build the kiln target first" >&2
  exit 1
fi
export KILN_BUILD_DIR="$build"
# Build products stay in the kiln build dir, out of the source tree.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$build/rust-target}"
cd "$here"
cargo test --offline --quiet "$@"
