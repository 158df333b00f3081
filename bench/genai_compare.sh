#!/usr/bin/env bash
# GenAI speed, nxrt vs ORT, side by side on the same model folder: `nxrt generate` and
# `ort generate` (../shared/tools/ort) alternate A B A B at each thread count, each printing its JSON
# line (same keys, same definitions). Medians over rounds go into docs/PERF.md between
# <!-- genai:begin --> and <!-- genai:end -->.
#
#   bench/genai_compare.sh [--model DIR] [--prompt-len 512] [--new 32] [--threads 1,2] [--rounds 2]
# Without --model it builds the Qwen2.5-0.5B-shape int4 folder (tools/make_genai_model.py, seeded
# random weights, ~850 MB) under build/genai-bench/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="" plen=512 newt=32 threads="1,2" rounds=2 report_only=0
nxrt="$root/build/nxrt"
ort="${ORT:-}"
[ -z "$ort" ] && ort="${NXRT_ORT:-$("$root/scripts/setup_ort_tool.sh" "$root/build/ort-tool" || true)}"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --prompt-len) plen="$2"; shift 2 ;;
    --new) newt="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    *) echo "usage: $0 [--model DIR] [--prompt-len N] [--new N] [--threads 1,2] [--rounds R]" >&2; exit 2 ;;
  esac
done
[ -x "$ort" ] || { echo "genai_compare: no ORT tool (set ORT=path/to/ort; see ../shared/tools/ort/README.md)" >&2; exit 1; }
if [ -z "$model" ]; then
  model="$root/build/genai-bench/qwen2.5-0.5b-genai"
  [ -f "$model/genai_config.json" ] || /usr/bin/python3 "$root/tools/make_genai_model.py" "$model" --style genai --size qwen2.5-0.5b >/dev/null
fi
maxlen=$((plen + newt))
raw="$root/build/perf/genai.jsonl"
mkdir -p "$(dirname "$raw")"
[ "$report_only" = 1 ] || : >"$raw"
for t in ${threads//,/ }; do
  [ "$report_only" = 1 ] && break
  for r in $(seq 1 "$rounds"); do
    for who in nxrt ort; do
      bin="$nxrt" json="--json"; [ "$who" = ort ] && bin="$ort" json=""  # ort generate always prints JSON
      line=$("$bin" generate "$model" --prompt-len "$plen" --max-new-tokens "$newt" --max-length "$maxlen" \
             --threads "$t" $json 2>/dev/null | tail -1)
      echo "{\"who\":\"$who\",\"threads\":$t,\"round\":$r,\"result\":$line}" >>"$raw"
      echo "$who threads=$t round=$r: $line" | cut -c1-220
    done
  done
done
/usr/bin/python3 - "$raw" "$root/docs/PERF.md" "$model" "$plen" "$newt" <<'PY'
import json, re, statistics, sys
raw, perf, model, plen, newt = sys.argv[1:6]
rows = [json.loads(l) for l in open(raw) if l.strip()]
by = {}
for r in rows:
    by.setdefault((r["threads"], r["who"]), []).append(r["result"])
def med(xs, k):
    v = [x[k] for x in xs if x.get(k) is not None]
    return statistics.median(v) if v else float("nan")
import os
out = [f"Model: `{os.path.basename(os.path.normpath(model))}` (tools/make_genai_model.py; Qwen2.5-0.5B shape, int4 MatMulNBits block 32, accuracy_level 4, GroupQueryAttention "
       f"with past/present sharing one buffer); prompt {plen} tokens (seeded ids), {newt} new tokens, greedy, "
       f"max_length {int(plen) + int(newt)}. Medians over rounds, nxrt and ORT alternated in one run.", "",
       "| threads | nxrt prefill tok/s | ORT prefill tok/s | ratio | nxrt decode tok/s | ORT decode tok/s | ratio | nxrt TTFT ms | ORT TTFT ms | leading tokens equal |",
       "|---|---|---|---|---|---|---|---|---|---|"]
for t in sorted({k[0] for k in by}):
    n, o = by.get((t, "nxrt"), []), by.get((t, "ort"), [])
    if not n or not o:
        continue
    npf, opf, ndc, odc = med(n, "prefill_tok_s"), med(o, "prefill_tok_s"), med(n, "decode_tok_s"), med(o, "decode_tok_s")
    def prefix(a, b):
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        return k
    eq = min(prefix(x["tokens"], o[0]["tokens"]) for x in n)
    out.append(f"| {t} | {npf:.1f} | {opf:.1f} | {npf / opf:.2f} | {ndc:.1f} | {odc:.1f} | {ndc / odc:.2f} | "
               f"{med(n, 'ttft_ms'):.0f} | {med(o, 'ttft_ms'):.0f} | {eq} of {len(o[0]['tokens'])} |")
out += ["", "Both quantize activations to int8 (accuracy_level 4) on random weights, so greedy paths split "
        "once a top-2 margin falls below the rounding differences; with accuracy_level 0 the tokens match "
        "the float64 reference (tests/cli/genai_test.sh).",
        "", "ratio = nxrt / ORT (> 1: nxrt faster). ORT's decode includes its Node binding copying the KV cache "
        "back every step (see ../shared/tools/ort/README.md); nxrt updates the bound cache in place."]
text = open(perf).read()
text = re.sub(r"<!-- genai:begin -->.*?<!-- genai:end -->", "<!-- genai:begin -->\n" + "\n".join(out) + "\n<!-- genai:end -->",
              text, flags=re.S)
open(perf, "w").write(text)
print("\n".join(out))
PY
