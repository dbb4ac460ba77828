#!/bin/sh
# `kiln dot` writes exactly one DOT document to stdout for every example graph (as written,
# and --fused where the graph has one fused form), with inputs and parameters named;
# --out PREFIX writes PREFIX.dot and PREFIX.fused.dot. Graphviz checks them when installed.
# Usage: dot_documents.sh <kiln command> <source dir> <scratch dir>
set -eu
kiln=$1 src=$2 tmp=$3
mkdir -p "$tmp"
fail() { echo "FAIL: $*" >&2; exit 1; }

# One document: a single digraph line first, balanced braces, "}" last.
check() {
  file=$1 what=$2
  [ "$(grep -c '^digraph ' "$file")" = 1 ] || fail "$what: not exactly one digraph"
  head -n 1 "$file" | grep -q '^digraph ' || fail "$what: does not start with digraph"
  [ "$(tail -n 1 "$file")" = "}" ] || fail "$what: does not end with }"
  open=$(tr -cd '{' <"$file" | wc -c) close=$(tr -cd '}' <"$file" | wc -c)
  [ "$open" = "$close" ] || fail "$what: $open '{' and $close '}'"
  if command -v dot >/dev/null 2>&1; then dot -Tsvg "$file" >/dev/null || fail "$what: dot -Tsvg rejects it"; fi
}

for g in "$src"/examples/graphs/*.kgraph; do
  name=$(basename "$g" .kgraph)
  "$kiln" dot "$g" >"$tmp/$name.dot" || fail "kiln dot $name"
  check "$tmp/$name.dot" "$name"
  if grep -q ' if(\| while(' "$g"; then
    if "$kiln" dot "$g" --fused --random-params >"$tmp/$name.fused.dot" 2>"$tmp/err"; then fail "$name --fused should refuse"; fi
    grep -q "has no single fused form" "$tmp/err" || fail "$name --fused: $(cat "$tmp/err")"
  else
    "$kiln" dot "$g" --fused --random-params >"$tmp/$name.fused.dot" 2>/dev/null || fail "kiln dot $name --fused"
    check "$tmp/$name.fused.dot" "$name --fused"
  fi
done
# Names, not "const" and "input 0".
grep -q 'label="input x' "$tmp/mlp.dot" || fail "mlp.dot does not name input x"
grep -q 'label="param w1' "$tmp/mlp.dot" || fail "mlp.dot does not name parameter w1"
grep -q 'label="x\\n' "$tmp/mlp.fused.dot" || fail "mlp.fused.dot does not name input x"
for p in w1 b1 w2; do grep -q "label=\"$p\\\\n" "$tmp/mlp.fused.dot" || fail "mlp.fused.dot does not name parameter $p"; done
rm -f "$tmp/out.dot" "$tmp/out.fused.dot"
"$kiln" dot "$src/examples/graphs/decoder.kgraph" --out "$tmp/out" >"$tmp/stdout" 2>/dev/null
[ -s "$tmp/stdout" ] && fail "--out wrote to stdout"
check "$tmp/out.dot" "--out .dot"
check "$tmp/out.fused.dot" "--out .fused.dot"
echo "kiln dot: one document per output for every example"
