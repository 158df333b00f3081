#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, -DNXRT_FUZZ=ON; each compiled from the sources it needs only) and
# runs each for a while, seeded with tests/fuzz/corpus/<target>/. New inputs go to BUILD/corpus/<target>/,
# crashes and broken contracts to BUILD/artifacts/, each run's libFuzzer output to BUILD/logs/. Prints one summary line per target (executions,
# seconds, corpus size) and fails on the first target that finds something.
#   usage: scripts/fuzz.sh [--seconds N] [--build DIR] [--jobs J] [TARGET...]
#   targets: model_reader value_pb templates tokenizer genai_config (default: all, one after another)
# A long campaign: nice -n 19 scripts/fuzz.sh --seconds 3600 tokenizer  (docs/RELIABILITY.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${FUZZ_SECONDS:-60}"
build="$root/build-fuzz"
jobs="${JOBS:-2}"
all=(model_reader value_pb templates tokenizer genai_config)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target '$t' (known: ${all[*]})" >&2; exit 2; }
done

export CCACHE_BASEDIR="$root"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNXRT_FUZZ=ON \
  -DNXRT_BUILD_TESTS=OFF -DNXRT_PYTHON=OFF >/dev/null
ninja -C "$build" -j"$jobs" "${targets[@]/#/nxrt_fuzz_}" >/dev/null

# Per-target libFuzzer options: inputs longer than the bodies read are cut off early.
extra_args() {
  case "$1" in
    templates) echo "-max_len=4096" ;;
    tokenizer) echo "-max_len=8192" ;;
    genai_config) echo "-max_len=4096" ;;
    *) echo "" ;;
  esac
}

mkdir -p "$build/artifacts" "$build/logs"
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  log="$build/logs/$t-$(date +%Y%m%d-%H%M%S).log"
  mkdir -p "$work"
  set +e
  start=$(date +%s)
  # shellcheck disable=SC2046
  "$build/nxrt_fuzz_$t" "$work" "$root/tests/fuzz/corpus/$t" -max_total_time="$seconds" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" $(extra_args "$t") >"$log" 2>&1
  rc=$?
  wall=$(( $(date +%s) - start ))
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  echo "fuzz $t: exit $rc, ${execs:-?} executions in ${wall} s, corpus $(ls "$work" | wc -l) files (log: $log)"
  if [ "$rc" -ne 0 ]; then
    tail -60 "$log"
    exit 1
  fi
done
