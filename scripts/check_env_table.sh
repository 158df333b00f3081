#!/usr/bin/env bash
# Every NXRT_* environment variable the library reads (std::getenv in src/) must have a row in
# docs/ARCHITECTURE.md's table "Environment variables", so none is undocumented.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
doc="$root/docs/ARCHITECTURE.md"
missing=0
for v in $(grep -rhoE 'getenv\("NXRT_[A-Z0-9_]+"\)' "$root/src" | grep -oE 'NXRT_[A-Z0-9_]+' | sort -u); do
  if ! grep -qE "^\| \`$v\` \|" "$doc"; then
    echo "env_table: $v is read in src/ but has no row in docs/ARCHITECTURE.md's environment table" >&2
    missing=1
  fi
done
[ "$missing" = 0 ] && echo "env_table: every NXRT_* variable read in src/ is documented"
exit "$missing"
