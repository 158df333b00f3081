#!/usr/bin/env bash
# nxrt at two ISA tiers vs ONNX Runtime on one machine: per round and model, `ort bench`, `nxrt bench`
# under NXRT_ISA=avx2 and `nxrt bench` at the machine's own tier run one after another (fresh processes,
# the order rotating each round), so every ratio compares runs of the same round. Medians over rounds
# of the per-round medians and of the per-round ratios go into docs/PERF.md between
# <!-- cnn_isa:begin --> and <!-- cnn_isa:end --> (one table per machine kind: the section names the CPU
# and its tier; an AVX2-only machine's rows are the avx2 column alone).
#
#   bench/isa_compare.sh [--models DIR,DIR,...] [--threads 1] [--rounds 5] [--warmup 3] [--runs 10]
#                        [--nxrt PATH] [--ort PATH] [--out docs/PERF.md] [--section NAME] [--report-only]
# --section: the marker name of the block written (default cnn_isa); give each machine kind its own
# (e.g. cnn_isa_zen5) so one machine's table never replaces another's. A block not yet in the file is
# added, with a heading naming the CPU, before "## GenAI".
# A model is a folder holding model.onnx and test_data_set_0/input_K.pb (e.g. ../shared/models/light/
# light_resnet50, the keyword-spotting CNN tools/make_kws_cnn.py writes, the encoder
# tools/make_bert_encoder.py writes, or the log-mel front end tools/make_mel_frontend.py writes).
# 1-thread rounds pin every process of the round to one CPU (taskset; round r takes the r-th CPU this
# script may run on, cycling), so each ratio compares runs on the same core: on a VM the vCPUs differ
# (one Zen 5 host gave one vCPU ~30% less L2 and L3 bandwidth than the other, and ResNet-50 took 37 ms
# on one and 46 on the other), and an unpinned process lands on either. --no-pin leaves placement to
# the scheduler.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
models="" threads=1 rounds=5 warmup=3 runs=10 out="$root/docs/PERF.md" report_only=0 section=cnn_isa pin=1
nxrt="$root/build/nxrt"
ort="${NXRT_ORT:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --nxrt) nxrt="$2"; shift 2 ;;
    --ort) ort="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --section) section="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    --no-pin) pin=0; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "isa_compare: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -z "$ort" ] && ort="$("$root/scripts/setup_ort_tool.sh" "$root/build/ort-tool" || true)"
raw="$root/build/perf/isa_raw.jsonl"
mkdir -p "$(dirname "$raw")"
if [ "$report_only" = 0 ]; then
  [ -n "$models" ] || { echo "isa_compare: --models DIR,DIR,... is required" >&2; exit 2; }
  [ -x "$nxrt" ] || { echo "isa_compare: $nxrt not built" >&2; exit 1; }
  [ -x "$ort" ] || { echo "isa_compare: no ORT tool (--ort or NXRT_ORT; ../shared/tools/ort/README.md)" >&2; exit 1; }
  : >"$raw"
  tier="$("$nxrt" info "${models%%,*}/model.onnx" 2>/dev/null | sed -n 's/^cpu: //p' | head -n1 || true)"
  echo "{\"load_start\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"rounds\": $rounds, \"warmup\": $warmup, \"runs\": $runs, \"tier\": \"$tier\", \"commit\": \"$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')\"}" >>"$raw"
  # The CPUs this script may run on (the pinned 1-thread rounds cycle through them).
  read -r -a cpus <<<"$(/usr/bin/python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"
  command -v taskset >/dev/null || pin=0
  one() {  # one WHO ISA MODEL_DIR THREADS ROUND
    local who="$1" isa="$2" dir="$3" t="$4" r="$5" ins=() f line run=() cpu=null
    while IFS= read -r f; do [ -f "$f" ] && ins+=(--input "$f"); done < <(printf '%s\n' "$dir"/test_data_set_0/input_*.pb | sort -V)
    if [ "$pin" = 1 ] && [ "$t" = 1 ]; then
      cpu="${cpus[$(( (r - 1) % ${#cpus[@]} ))]}"
      run=(taskset -c "$cpu")
    fi
    if [ "$who" = ort ]; then
      line="$("${run[@]}" "$ort" bench "$dir/model.onnx" "${ins[@]}" --threads "$t" --warmup "$warmup" --runs "$runs" 2>/dev/null | tail -n1)"
    elif [ "$isa" = default ]; then
      line="$("${run[@]}" env -u NXRT_ISA "$nxrt" bench "$dir/model.onnx" "${ins[@]}" --threads "$t" --warmup "$warmup" --runs "$runs" 2>/dev/null | tail -n1)"
    else
      line="$("${run[@]}" env NXRT_ISA="$isa" "$nxrt" bench "$dir/model.onnx" "${ins[@]}" --threads "$t" --warmup "$warmup" --runs "$runs" 2>/dev/null | tail -n1)"
    fi
    case "$line" in "{"*) ;; *) line='{"error": "no result"}' ;; esac
    echo "{\"model\": \"$(basename "$dir")\", \"who\": \"$who\", \"isa\": \"$isa\", \"threads\": $t, \"round\": $r, \"cpu\": $cpu, \"result\": $line}" >>"$raw"
  }
  lat="$root/build/nxrt_core_latency"
  for t in ${threads//,/ }; do
    for r in $(seq 1 "$rounds"); do
      # Where the host placed two of the CPUs this round (2-thread speed moves with it on a VM).
      if [ "$t" -gt 1 ] && [ -x "$lat" ]; then
        line="$("$lat" --rounds 3 2>/dev/null | tail -n1)"
        case "$line" in "{"*) echo "{\"core_latency\": $line, \"threads\": $t, \"round\": $r}" >>"$raw" ;; esac
      fi
      for dir in ${models//,/ }; do
        # Rotate the order each round so no runtime always runs first (or right after a cache-warm peer).
        case $((r % 3)) in
          0) one ort - "$dir" "$t" "$r"; one nxrt avx2 "$dir" "$t" "$r"; one nxrt default "$dir" "$t" "$r" ;;
          1) one nxrt avx2 "$dir" "$t" "$r"; one nxrt default "$dir" "$t" "$r"; one ort - "$dir" "$t" "$r" ;;
          2) one nxrt default "$dir" "$t" "$r"; one ort - "$dir" "$t" "$r"; one nxrt avx2 "$dir" "$t" "$r" ;;
        esac
      done
    done
  done
  echo "{\"load_end\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >>"$raw"
fi
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -n1)"
/usr/bin/python3 - "$raw" "$out" "$cpu" "$section" <<'EOF'
import json, os, re, statistics, sys
raw, out, cpu, block = sys.argv[1:5]
recs, load = [], {}
lat_ns = []
for line in open(raw):
    d = json.loads(line)
    if "model" in d:
        recs.append(d)
    elif "core_latency" in d:
        if d["core_latency"].get("round_trip_ns_median"):
            lat_ns.append(d["core_latency"]["round_trip_ns_median"])
    else:
        load.update(d)
def ms(d):
    return d["result"].get("median_ms")
rows = []
keys = sorted({(d["model"], d["threads"]) for d in recs})
for model, t in keys:
    per_round = {}
    for d in recs:
        if d["model"] == model and d["threads"] == t and ms(d) is not None:
            per_round.setdefault(d["round"], {})[d["who"] + ":" + d["isa"]] = ms(d)
    def col(k):
        v = [r[k] for r in per_round.values() if k in r]
        return statistics.median(v) if v else None
    def ratio(k, rr=per_round):
        v = [r["ort:-"] / r[k] for r in rr.values() if k in r and "ort:-" in r]
        return statistics.median(v) if v else None
    # The same from each process's p10 (its fastest tenth of runs): less swayed by other processes.
    p10 = {}
    for d in recs:
        if d["model"] == model and d["threads"] == t and d["result"].get("p10_ms") is not None:
            p10.setdefault(d["round"], {})[d["who"] + ":" + d["isa"]] = d["result"]["p10_ms"]
    # And from each process's median CPU time per run (all its threads, user + system; both bench tools
    # print cpu_median_ms): on a loaded machine this leaves out the time a run waited for a CPU.
    cpu = {}
    for d in recs:
        if d["model"] == model and d["threads"] == t and d["result"].get("cpu_median_ms"):
            cpu.setdefault(d["round"], {})[d["who"] + ":" + d["isa"]] = d["result"]["cpu_median_ms"]
    rows.append((model, t, col("nxrt:avx2"), col("nxrt:default"), col("ort:-"), ratio("nxrt:avx2"),
                 ratio("nxrt:default"), len(per_round), ratio("nxrt:avx2", p10), ratio("nxrt:default", p10),
                 ratio("nxrt:avx2", cpu), ratio("nxrt:default", cpu)))
def f(x, p=2):
    return "-" if x is None else (f"{x:.{p}f}" if x < 100 else f"{x:.0f}")
ncpu = os.cpu_count()
tier, commit = load.get("tier", ""), load.get("commit", "?")
rounds, warmup, runs = load.get("rounds", "?"), load.get("warmup", "?"), load.get("runs", "?")
L = [f"**Machine:** {tier or cpu}, {ncpu} logical CPUs. **Commit:** `{commit}`. Load average (1/5/15 min) at the start "
     f"{load.get('load_start', '?')}, at the end {load.get('load_end', '?')}: a shared machine, so compare "
     f"the ratios (each taken within one round), not the absolute times. Rounds {rounds}, warmup {warmup}, "
     f"runs {runs}; each cell is the median over rounds of the per-round medians (ratios: median of the "
     f"per-round ORT/nxrt; the p10 columns take each process's fastest tenth of runs instead of its median; "
     f"the CPU columns each process's median CPU time per run, all threads, user + system: with 2 threads "
     f"that includes ORT's spinning workers, so only the 1-thread CPU ratios compare work done).", "",
     ] + ([f"Core-to-core round trip before each 2-thread round (`nxrt_core_latency`, where the host placed the "
           f"two vCPUs; 2-thread speed moves with it): {min(lat_ns):.0f}-{max(lat_ns):.0f} ns, median "
           f"{statistics.median(lat_ns):.0f}.", ""] if lat_ns else []) + [
     "| model | threads | nxrt avx2 ms | nxrt own tier ms | ORT ms | ORT/nxrt (avx2 cap) | ORT/nxrt (own tier) "
     "| p10 ratio (avx2 cap) | p10 ratio (own tier) | CPU-time ratio (avx2 cap) | CPU-time ratio (own tier) | rounds |",
     "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    L.append(f"| {r[0]} | {r[1]} | {f(r[2])} | {f(r[3])} | {f(r[4])} | {f(r[5])} | {f(r[6])} | {f(r[8])} | "
             f"{f(r[9])} | {f(r[10])} | {f(r[11])} | {r[7]} |")
L.append("")
L.append("nxrt avx2: `NXRT_ISA=avx2` (the AVX2 kernels on this machine); own tier: the tier `nxrt info` names. "
         "kws_cnn is the keyword-spotting-shaped CNN `tools/make_kws_cnn.py` writes (20 small convs with "
         "LeakyRelu, Max and MaxPool on a [1, 76, 32, 1] input); bert_encoder the BERT-base-shaped encoder "
         "`tools/make_bert_encoder.py` writes (4 layers, seq 128, hidden 768, 12 heads); mel_frontend the log-mel "
         "front end `tools/make_mel_frontend.py` writes (1 s at 16 kHz: STFT as a 512-tap stride-160 Conv to 514 "
         "channels, power, an 80-band mel MatMul, Log); the light_* models are "
         "../shared/models/light.")
for t in sorted({r[1] for r in rows}):
    for i, name in ((5, "avx2 cap"), (6, "own tier"), (10, "avx2 cap, CPU time"), (11, "own tier, CPU time")):
        v = [r[i] for r in rows if r[1] == t and r[i]]
        if v:
            g = statistics.geometric_mean(v)
            L.append("")
            L.append(f"Geomean ORT/nxrt at {t} thread(s), {name}: **{g:.2f}** over {len(v)} models "
                     f"(nxrt faster on {sum(1 for x in v if x > 1)}).")
# Pinned 1-thread rounds: the same ratios per CPU, and how much the CPUs differ for each runtime.
pinned = sorted({d["cpu"] for d in recs if d["threads"] == 1 and d.get("cpu") is not None})
if pinned:
    by_cpu = {}  # cpu -> model -> round -> who:isa -> ms
    for d in recs:
        if d["threads"] == 1 and d.get("cpu") is not None and ms(d) is not None:
            by_cpu.setdefault(d["cpu"], {}).setdefault(d["model"], {}).setdefault(d["round"], {})[
                d["who"] + ":" + d["isa"]] = ms(d)
    def cpu_ratio(c, model):
        v = [r["ort:-"] / r["nxrt:default"] for r in by_cpu[c][model].values() if "ort:-" in r and "nxrt:default" in r]
        return statistics.median(v) if v else None
    parts = []
    for c in pinned:
        v = [x for x in (cpu_ratio(c, m) for m in by_cpu[c]) if x]
        if v:
            parts.append(f"CPU {c} **{statistics.geometric_mean(v):.2f}** over {len(v)} models "
                         f"(nxrt faster on {sum(1 for x in v if x > 1)})")
    slow = []
    if len(pinned) >= 2:
        a, b = pinned[0], pinned[1]
        for who, label in (("nxrt:default", "nxrt own tier"), ("ort:-", "ORT")):
            q = []
            for m in set(by_cpu.get(a, {})) & set(by_cpu.get(b, {})):
                ta = [r[who] for r in by_cpu[a][m].values() if who in r]
                tb = [r[who] for r in by_cpu[b][m].values() if who in r]
                if ta and tb:
                    q.append(statistics.median(tb) / statistics.median(ta))
            if q:
                slow.append(f"{label} {statistics.median(q):.2f}")
    L.append("")
    L.append("1-thread rounds ran pinned (taskset), every process of a round on one CPU, the CPU cycling "
             f"through {', '.join(str(c) for c in pinned)} round by round. Geomean ORT/nxrt at 1 thread, own "
             "tier, by CPU: " + "; ".join(parts) + "." +
             (f" Median over models of the 1-thread time on CPU {pinned[1]} / CPU {pinned[0]}: " + ", ".join(slow) +
              " (the vCPUs of a VM need not be alike)." if slow else ""))
body = "\n".join(L)
print(body)
text = open(out).read() if os.path.exists(out) else "## GenAI\n"
begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
section = f"{begin}\n{body}\n{end}"
if begin in text:
    text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda m: section, text, flags=re.S)
else:
    heading = f"## CNN models on {tier or cpu} (`bench/isa_compare.sh --section {block}`)"
    text = text.replace("## GenAI", heading + "\n\n" + section + "\n\n## GenAI", 1)
open(out, "w").write(text)
EOF
