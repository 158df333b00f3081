#!/usr/bin/env bash
# Sets up the ORT reference tool (../shared/tools/ort: onnxruntime-node behind the nxrt CLI contract) in
# DEST (npm ci once; idempotent) and prints the path of its `ort` entry point. Needs node/npm and the
# npm registry the first time; exits 1 with a message on stderr when it cannot be set up.
#   usage: scripts/setup_ort_tool.sh DEST [SHARED_DIR]     (SHARED_DIR default: $NXRT_SHARED or ../shared)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:?usage: setup_ort_tool.sh DEST [SHARED_DIR]}"
shared="${2:-${NXRT_SHARED:-$root/../shared}}"
if [ ! -x "$dest/ort" ] || ! (cd "$dest" && node -e "require('onnxruntime-node')" 2>/dev/null); then
  [ -f "$shared/tools/ort/setup.sh" ] || { echo "setup_ort_tool: $shared/tools/ort not found" >&2; exit 1; }
  command -v npm >/dev/null || { echo "setup_ort_tool: npm is not installed" >&2; exit 1; }
  echo "setup_ort_tool: npm ci of onnxruntime-node in $(basename "$dest") (first run only)" >&2
  rm -rf "$dest" && mkdir -p "$dest"
  cp -r "$shared/tools/ort/." "$dest/" && chmod -R u+w "$dest"
  if ! (cd "$dest" && ./setup.sh >setup.log 2>&1); then
    tail -5 "$dest/setup.log" >&2
    echo "setup_ort_tool: npm ci in $dest failed (log: $dest/setup.log)" >&2
    exit 1
  fi
fi
echo "$dest/ort"
