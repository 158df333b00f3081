#!/usr/bin/env bash
# Layering check: every #include "..." under src/<layer>/ names a header of a layer it may depend on.
#   ir <- onnx, shape, ep;  shape <- optimizer;  ep <- ops, optimizer;  optimizer, onnx, ops <- session;
#   genai uses only the public API (include/nxrt/) and its own headers.
# session is the composition root: the one file that names the CPU provider may include
# ops/cpu_provider.h, nothing else of ops/. Prints each offending include; exit 1 if any.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/src"
allowed() {
  case "$1" in
    ir) echo "ir nxrt" ;;
    onnx) echo "onnx ir nxrt" ;;
    shape) echo "shape ir nxrt" ;;
    ep) echo "ep ir nxrt" ;;
    ops) echo "ops ep shape ir nxrt" ;;
    optimizer) echo "optimizer shape ep ir nxrt" ;;
    session) echo "session optimizer shape onnx ep ir nxrt" ;;
    genai) echo "genai nxrt" ;;
    *) echo "" ;;
  esac
}
bad=0
for layer in */; do
  layer="${layer%/}"
  ok="$(allowed "$layer")"
  if [ -z "$ok" ]; then echo "check_layers: src/$layer is not a known layer (add it here)"; bad=1; continue; fi
  while IFS=: read -r file line inc; do
    target="${inc#*\"}"; target="${target%%\"*}"
    top="${target%%/*}"
    [ "$target" = "$top" ] && continue  # a header beside the file
    case " $ok " in *" $top "*) continue ;; esac
    if [ "$layer" = session ] && [ "$target" = ops/cpu_provider.h ]; then continue; fi
    echo "src/$file:$line: layer '$layer' includes $target (a layer it must not depend on)"
    bad=1
  done < <(grep -rn '^#include "' "$layer" || true)
done
[ "$bad" = 0 ] && echo "check_layers: every include follows the layer order"
exit "$bad"
