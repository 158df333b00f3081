#!/usr/bin/env bash
# Runs every test listed in tests/conformance/expected_pass.txt (lines "suite:id") over the suites
# present on this machine; any listed test failing fails the run. OPT=disabled|basic|all (default all)
# picks the optimizer level, THREADS (default 1) each session's intra-op threads (with
# NXRT_KERNEL_OVERRIDES=pool=exact, that many even past this machine's CPUs).
set -uo pipefail
nxrt="$(realpath "${1:?usage: run_conformance.sh path/to/nxrt}")"
source "$(dirname "$0")/suites.sh"
manifest="$repo_root/tests/conformance/expected_pass.txt"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
total_pass=0; total_fail=0; ran=0
for s in "${SUITES[@]}"; do
  root="${SUITE_ROOT[$s]}"
  grep -E "^$s:" "$manifest" | sed "s/^$s://" > "$tmp/$s.ids" || true
  n=$(wc -l < "$tmp/$s.ids")
  [ "$n" -eq 0 ] && continue
  if [ ! -d "$root" ]; then
    echo "suite $s: $root not present, $n listed tests not run"
    continue
  fi
  ran=1
  echo "suite $s: $n listed tests under $root"
  "$nxrt" test --root "$root" --ids-file "$tmp/$s.ids" --jobs "${JOBS:-2}" --opt "${OPT:-all}" --threads "${THREADS:-1}" --quiet > "$tmp/$s.out" 2>&1
  grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/$s.out" || true
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/$s.out" | tail -1)
  if [ -z "$line" ]; then echo "suite $s: the runner printed no summary"; total_fail=$((total_fail + n)); continue; fi
  echo "suite $s: $line"
  total_pass=$((total_pass + $(echo "$line" | cut -d' ' -f1)))
  total_fail=$((total_fail + $(echo "$line" | cut -d' ' -f3)))
done
if [ "$ran" -eq 0 ]; then echo "no conformance suite found"; exit 1; fi
echo "conformance: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
