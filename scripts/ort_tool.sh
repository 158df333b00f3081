#!/usr/bin/env bash
# Prints the path of the ORT comparison tool (../shared/tools/ort, ONNX Runtime behind nxrt's CLI
# contract), setting it up first in build/ort-tool when needed (the shared copy is read-only and its
# setup runs npm ci). NXRT_ORT overrides. Exit 1 (nothing printed) when it cannot be set up.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${NXRT_ORT:-}" ]; then echo "$NXRT_ORT"; exit 0; fi
shared="${NXRT_SHARED:-$root/../shared}"
dir="$root/build/ort-tool"
if [ ! -x "$dir/ort" ] || ! (cd "$dir" && node -e "require('onnxruntime-node')" 2>/dev/null); then
  [ -d "$shared/tools/ort" ] || exit 1
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$shared/tools/ort/." "$dir/" && chmod -R u+w "$dir"
  (cd "$dir" && ./setup.sh >/dev/null 2>&1) || exit 1
fi
echo "$dir/ort"
