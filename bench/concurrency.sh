#!/usr/bin/env bash
# Aggregate throughput of N concurrent runs on one session against serial runs (N = 1), per model and
# intra-op thread count: `nxrt bench --concurrency 1,2,4,8` (the Ns alternate inside every round, so
# load on a shared machine hits them alike; medians over rounds; process CPU time per run too).
# Prints the CPU, the load average before and after, and one JSON line per model and thread count.
#
#   bench/concurrency.sh [--models DIR,DIR,...] [--threads 1,2] [--levels 1,2,4,8] [--rounds 5] [--runs 16]
#                        [--nxrt PATH]
# A model is a folder holding model.onnx and test_data_set_0/input_0.pb (default: three of
# ../shared/models/light).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
light="$root/../shared/models/light"
models="$light/light_squeezenet,$light/light_shufflenet,$light/light_resnet50"
threads="1,2" levels="1,2,4,8" rounds=5 runs=16 nxrt="$root/build/nxrt"
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --levels) levels="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --nxrt) nxrt="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "concurrency: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs, flags: $(grep -o -w 'avx2\|avx512f\|fma' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
IFS=, read -r -a model_list <<< "$models"
IFS=, read -r -a thread_list <<< "$threads"
for m in "${model_list[@]}"; do
  [ -f "$m/model.onnx" ] || { echo "skip $m: no model.onnx" >&2; continue; }
  input=()
  [ -f "$m/test_data_set_0/input_0.pb" ] && input=(--input "$m/test_data_set_0/input_0.pb")
  for t in "${thread_list[@]}"; do
    printf '%s threads=%s ' "$(basename "$m")" "$t"
    "$nxrt" bench "$m/model.onnx" "${input[@]}" --threads "$t" --warmup 3 --runs "$runs" --rounds "$rounds" \
      --concurrency "$levels"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
