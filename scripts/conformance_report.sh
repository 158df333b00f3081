#!/usr/bin/env bash
# Runs every test of every suite present, then regenerates tests/conformance/expected_pass.txt,
# tests/conformance/report.md and the README status table from the results.
set -uo pipefail
nxrt="$(realpath "${1:?usage: conformance_report.sh path/to/nxrt}")"
source "$(dirname "$0")/suites.sh"
out="$repo_root/build/conformance"
mkdir -p "$out"
for s in "${SUITES[@]}"; do
  root="${SUITE_ROOT[$s]}"
  [ -d "$root" ] || { echo "suite $s: $root not present, skipped"; rm -f "$out/$s.tsv"; continue; }
  echo "suite $s: running every test under $root"
  dirs=()
  for d in "$root"/*/; do dirs+=("${d%/}"); done
  # ids are relative to the suite root: run from the root so they come out that way
  (cd "$root" && "$nxrt" test $(for d in "${dirs[@]}"; do basename "$d"; done) --jobs "${JOBS:-2}" --quiet \
     --timeout "${NXRT_TEST_TIMEOUT:-300}" --report "$out/$s.tsv") | tail -1
done
/usr/bin/python3 "$repo_root/scripts/conformance_report.py" "$out" "$repo_root"
