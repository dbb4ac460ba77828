#!/bin/sh
# Runs the Go binding's tests (with the race detector) against a kiln build.
# Usage: bindings/go/test.sh <build dir holding libkiln.a>
# Exits 77 (CTest's skip code) when go is not installed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: test.sh <build dir>}
build=$(cd "$build" && pwd)
if ! command -v go >/dev/null 2>&1; then
  echo "SKIP: go is not installed (apt-get install golang-go)"
  exit 77
fi
if [ ! -f "$build/libkiln.a" ]; then
  echo "error: $build/libkiln.a not found; build the kiln target first" >&2
  exit 1
fi
export CGO_ENABLED=1
export CGO_CFLAGS="-I$here/../../include -I$build/generated/include ${CGO_CFLAGS:-}"
export CGO_LDFLAGS="-L$build ${CGO_LDFLAGS:-}"
# Offline, as the README says: the module has no dependencies to download.
export GOPROXY=off
# Keep Go's caches inside the build dir so that CTest runs need no writable HOME.
export GOCACHE="${GOCACHE:-$build/go-cache}"
export GOPATH="${GOPATH:-$build/go-path}"
cd "$here"
go vet ./...
shift
go test -race -count=1 "$@" ./...
# A module of one's own uses the binding as the README shows: require plus replace.
app="$build/go-consumer"
mkdir -p "$app"
printf 'module example.com/app\n\ngo 1.19\n\nrequire kiln.dev/kiln v0.0.0\n\nreplace kiln.dev/kiln => %s\n' "$here" >"$app/go.mod"
printf 'package main\n\nimport "kiln.dev/kiln"\n\nfunc main() {\n\tx, _ := kiln.FromSlice([]float32{1, 2})\n\ty, _ := kiln.Add(x, x)\n\tv, _ := y.Float32s()\n\tif v[1] != 4 {\n\t\tpanic(v)\n\t}\n}\n' >"$app/main.go"
(cd "$app" && go run .)
