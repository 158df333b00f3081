#!/usr/bin/env bash
# LLM speed on this machine: nxrt vs ORT vs llama.cpp on the same int4 weights, with each decode speed
# as a share of the weight-read limit (bytes one decode step reads / the read bandwidth measured in the
# same round). Every round runs, at each thread count, one fresh process of each runtime in turn
# (nxrt generate, ort generate, llama.cpp through ../shared/tools/llamacpp's bench_llamacpp.sh, then
# nxrt_read_bandwidth over a buffer the size of a decode step's reads); the table takes medians over
# rounds and compares the greedy tokens. Results go to docs/PERF.md between
# <!-- genai-<kind>-<model>[-kvf16][-ws16][-p<prompt-len>]:begin --> and <!-- ...:end -->: tables per machine kind
# (kind: the kernel tier `nxrt info` reports, "amx", "avx512" or "avx2": an AMX machine's table and an
# AVX-512-only machine's, e.g. a Zen 5, each keep their own block) and model folder.
#
#   bench/llm_compare.sh [--model DIR] [--gguf FILE] [--threads 1,2] [--rounds 3] [--prompt-len 512]
#                        [--new 32] [--llamacpp DIR] [--ort PATH] [--kv-dtype float32|float16]
#                        [--weight-scales model|float16] [--report-only]
#
# Without --model it builds the Qwen2.5-0.5B-shape int4 folder (tools/make_genai_model.py) under
# build/genai-bench/. Without --gguf it converts the folder with genai_to_gguf.py (Q4_0: the same codes,
# scales as fp16). --llamacpp: a set-up copy of ../shared/tools/llamacpp (default ~/.cache/nxrt-llamacpp;
# run its setup.sh first). --kv-dtype: nxrt's KV cache (`nxrt generate --kv-dtype`; default float32, the
# model's; llama.cpp keeps its default f16 cache, ORT the model's float32). --weight-scales: nxrt's
# MatMulNBits block scales (`nxrt generate --weight-scales`; default model: as the folder has them;
# float16: rounded to float16 values and packed in 2 bytes, as llama.cpp's Q4_0 holds them). Raw JSON lines:
# build/perf/llm-<model>.jsonl.
set -euo pipefail
# Temporary files (the GGUF conversion's folder, the runs' stderr) go when the script ends, however it ends.
tmp="" errf=""
trap 'rm -rf "$tmp" "$errf"' EXIT
root="$(cd "$(dirname "$0")/.." && pwd)"
model="" gguf="" threads="1,2" rounds=3 plen=512 newt=32 report_only=0 kvdt=float32 wscales=model
llamacpp="${XDG_CACHE_HOME:-$HOME/.cache}/nxrt-llamacpp"
ort="${ORT:-$root/build/ort-tool/ort}"
nxrt="$root/build/nxrt" bw="$root/build/nxrt_read_bandwidth"
lat="$root/build/nxrt_core_latency"
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --gguf) gguf="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --prompt-len) plen="$2"; shift 2 ;;
    --new) newt="$2"; shift 2 ;;
    --llamacpp) llamacpp="$2"; shift 2 ;;
    --ort) ort="$2"; shift 2 ;;
    --kv-dtype) kvdt="$2"; shift 2 ;;
    --weight-scales) wscales="$2"; shift 2 ;;
    --report-only) report_only=1; shift ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
  esac
done
for f in "$nxrt" "$bw"; do [ -x "$f" ] || { echo "llm_compare: $f missing (ninja -C build nxrt_cli nxrt_read_bandwidth)" >&2; exit 1; }; done
[ -x "$ort" ] || { echo "llm_compare: no ORT tool at $ort (copy ../shared/tools/ort there and run its setup.sh, or --ort)" >&2; exit 1; }
[ -x "$llamacpp/bench_llamacpp.sh" ] || { echo "llm_compare: no set-up llama.cpp tools in $llamacpp (--llamacpp)" >&2; exit 1; }
if [ -z "$model" ]; then
  model="$root/build/genai-bench/qwen2.5-0.5b-genai"
  [ -f "$model/genai_config.json" ] || /usr/bin/python3 "$root/tools/make_genai_model.py" "$model" --style genai --size qwen2.5-0.5b >/dev/null
fi
if [ -z "$gguf" ]; then
  gguf="$model.gguf"
  if [ ! -f "$gguf" ]; then
    # genai_to_gguf.py finds the projections by node name, "/model.layers.N/<attn|mlp>/<proj>/MatMulNBits";
    # make_genai_model.py names them "model.layers.N.<attn|mlp>.<proj>/MatMulNBits": convert a renamed copy.
    tmp="$(mktemp -d)"
    /usr/bin/python3 - "$model" "$tmp" <<'PY'
import onnx, os, sys
src, dst = sys.argv[1], sys.argv[2]
m = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
for n in m.graph.node:
    if n.op_type == "MatMulNBits" and n.name.startswith("model.layers."):
        p = n.name[: -len("/MatMulNBits")].split(".")  # model layers N attn q_proj
        n.name = "/model.layers." + p[2] + "/" + "/".join(p[3:]) + "/MatMulNBits"
onnx.save(m, os.path.join(dst, "model.onnx"))
for f in os.listdir(src):
    if f != "model.onnx":
        os.symlink(os.path.abspath(os.path.join(src, f)), os.path.join(dst, f))
PY
    /usr/bin/python3 "$llamacpp/genai_to_gguf.py" "$tmp" "$gguf" \
      --tokenizer "$llamacpp/tokenizer-qwen3/package/models/tokenizer.json" >&2
  fi
fi
info="$("$nxrt" info "$model/model.onnx" | grep -E '^(cpu|kernel tier): ')"
tier="$(sed -n 's/^kernel tier: \([a-z0-9]*\).*/\1/p' <<<"$info")"
case "$tier" in amx) kind=amx cols=32 ;; avx512) kind=avx512 cols=32 ;; *) kind=avx2 cols=16 ;; esac
maxlen=$((plen + newt))
llctx=$(( maxlen > 1024 ? (maxlen + 255) / 256 * 256 : 1024 ))  # llama.cpp's context: its default 1024, or the run's length
bytes="$(/usr/bin/python3 "$root/bench/llm_bytes_per_token.py" "$model" --cols "$cols" --position $((plen + newt / 2)) --kv-dtype "$kvdt" --weight-scales "$wscales")"
mb=$(/usr/bin/python3 -c "import json,sys; print(max(64, json.loads(sys.argv[1])['bytes_per_token'] // 1000000))" "$bytes")
case "$kvdt" in float32) kvtag="" ;; float16) kvtag="-kvf16" ;; *) echo "llm_compare: --kv-dtype takes float32 or float16" >&2; exit 2 ;; esac
case "$wscales" in model) wstag="" ;; float16) wstag="-ws16" ;; *) echo "llm_compare: --weight-scales takes model or float16" >&2; exit 2 ;; esac
# A prompt length other than the default keeps its own raw file and table (-p<len>), as the dtypes do.
ptag=""; [ "$plen" = 512 ] || ptag="-p$plen"
raw="$root/build/perf/llm-$(basename "$model")$kvtag$wstag$ptag.jsonl"
mkdir -p "$(dirname "$raw")"
if [ "$report_only" = 0 ]; then
  : >"$raw"
  errf="$(mktemp)" failed=0
  start_load="$(cut -d' ' -f1-3 /proc/loadavg)"
  for r in $(seq 1 "$rounds"); do
    for t in ${threads//,/ }; do
      for who in nxrt ort llamacpp bandwidth latency; do
        [ "$who" != latency ] || { [ "$t" -gt 1 ] && [ -x "$lat" ]; } || continue  # where the host placed two of the vCPUs now
        # A run that fails is recorded as null (its cells read nan in the report) and named here with the
        # end of its stderr, rather than ending the script without a word (set -e on the substitution).
        rc=0
        case "$who" in
          latency) line=$("$lat" --rounds 3 2>"$errf" | tail -1) || rc=$? ;;
          nxrt) line=$("$nxrt" generate "$model" --prompt-len "$plen" --max-new-tokens "$newt" --max-length "$maxlen" \
                       --threads "$t" --kv-dtype "$kvdt" --weight-scales "$wscales" --warmup 1 --json 2>"$errf" | tail -1) || rc=$? ;;
          ort) line=$("$ort" generate "$model" --prompt-len "$plen" --max-new-tokens "$newt" --max-length "$maxlen" \
                      --threads "$t" --warmup 1 2>"$errf" | tail -1) || rc=$? ;;
          llamacpp) line=$("$llamacpp/bench_llamacpp.sh" "$gguf" --threads "$t" --rounds 1 --warmup 1 \
                           --prompt-len "$plen" --new-tokens "$newt" --ctx "$llctx" 2>"$errf" | tail -1) || rc=$? ;;
          bandwidth) line=$("$bw" --mb "$mb" --threads "$t" --rounds 10 2>"$errf") || rc=$? ;;
        esac
        if [ "$rc" != 0 ] || [ -z "$line" ]; then
          echo "llm_compare: $who at $t thread(s), round $r failed (exit $rc); its stderr ends:" >&2
          tail -n 5 "$errf" | sed 's/^/  /' >&2
          [ "$who" != llamacpp ] || echo "  (llama.cpp: has $llamacpp/setup.sh been run?)" >&2
          failed=$((failed + 1))
          line="null"
        fi
        echo "{\"who\":\"$who\",\"threads\":$t,\"round\":$r,\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"result\":$line}" >>"$raw"
        echo "$who threads=$t round=$r: $line" | cut -c1-200
      done
    done
  done
  [ "$failed" = 0 ] || echo "llm_compare: $failed run(s) failed (above); the table shows nan for them" >&2
  end_load="$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "{\"who\":\"meta\",\"start_load\":\"$start_load\",\"end_load\":\"$end_load\",\"bytes\":$bytes}" >>"$raw"
fi
/usr/bin/python3 - "$raw" "$root/docs/PERF.md" "$model" "$gguf" "$plen" "$newt" "$kind" "$info" "$bytes" <<'PY'
import json, os, re, statistics, sys
raw, perf, model, gguf, plen, newt, kind, info, bytes_json = sys.argv[1:10]
rows = [json.loads(l) for l in open(raw) if l.strip()]
meta = next((r for r in rows if r["who"] == "meta"), {})
by = {}
for r in rows:
    if r["who"] != "meta" and r["result"] is not None:
        by.setdefault((r["threads"], r["who"]), []).append(r["result"])
med = lambda xs: statistics.median(xs) if xs else float("nan")
def prefix(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k
b = json.loads(bytes_json)
cpu = info.splitlines()[0].removeprefix("cpu: ")
tier_line = info.splitlines()[1] if len(info.splitlines()) > 1 else ""
title = {"amx": "AMX machine", "avx512": "AVX-512 machine (no AMX)", "avx2": "AVX2-only machine"}[kind]
kv_note = ", nxrt with a float16 KV cache (`--kv-dtype float16`)" if b.get("kv_dtype") == "float16" else ""
if plen != "512":
    kv_note = f", prompt {plen} tokens" + kv_note
if b.get("weight_scales") == "float16":
    kv_note += ", nxrt with float16 weight scales (`--weight-scales float16`)"
out = [f"### {title}, `{os.path.basename(model)}`{kv_note}: nxrt vs ORT vs llama.cpp (`bench/llm_compare.sh`)", "",
       f"**CPU:** {cpu}; nxrt {tier_line}. Load average at the start {meta.get('start_load', '?')}, at the end "
       f"{meta.get('end_load', '?')} (the machine is shared; every round alternates the runtimes).", "",
       f"Model: `{os.path.basename(model)}` (tools/make_genai_model.py, Qwen2.5-0.5B shape, int4 MatMulNBits block 32 "
       f"accuracy_level 4, GroupQueryAttention with one shared past/present buffer), llama.cpp on `{os.path.basename(gguf)}` "
       f"(genai_to_gguf.py: the same 4-bit codes as Q4_0, scales rounded to fp16, embedding fp32). Prompt {plen} seeded "
       f"ids, {newt} new tokens, greedy, one warm-up generation per process; medians over rounds.", "",
       f"Weight-read limit: a decode step reads {b['bytes_per_token'] / 1e6:.1f} MB with nxrt's packing "
       f"({b['weights'] / 1e6:.1f} MB of MatMulNBits records, {b['kv'] / 1e6:.1f} MB of {b.get('kv_dtype', 'float32')} KV cache "
       f"(nxrt generate --kv-dtype {b.get('kv_dtype', 'float32')}; llama.cpp: its default f16 cache) at position "
       f"{b['position']}, {b['other'] / 1e6:.2f} MB other); limit = read bandwidth (nxrt_read_bandwidth over a buffer "
       f"that size on 2 MB pages, same round and thread count; each of its rounds the fastest of plain loads, loads "
       f"behind a 4 KB non-temporal prefetch, and loads behind an 8 KB one plus one prefetch per 4 KB page 32 KB ahead) "
       f"/ those bytes.", "",
       "| threads | nxrt prefill tok/s | ORT | llama.cpp | nxrt/llama.cpp | nxrt decode tok/s | ORT | llama.cpp | nxrt/llama.cpp | read GB/s | nxrt decode % of limit (of the medians; per round: median, range) | tokens equal nxrt/ORT, nxrt/llama.cpp |",
       "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for t in sorted({k[0] for k in by}):
    n, o, l, w = (by.get((t, k), []) for k in ("nxrt", "ort", "llamacpp", "bandwidth"))
    if not n:
        continue
    npf, opf, lpf = (med([x["prefill_tok_s"] for x in v]) for v in (n, o, l))
    ndc, odc, ldc = (med([x["decode_tok_s"] for x in v if x.get("decode_tok_s")]) for v in (n, o, l))
    gbps = med([x["gbps_median"] for x in w])
    limit = gbps * 1e9 / b["bytes_per_token"]
    eq_o = min(prefix(x["tokens"], o[0]["tokens"]) for x in n) if o else 0
    eq_l = min(prefix(x["tokens"], l[0]["tokens"]) for x in n) if l else 0
    # Each round's decode against that round's bandwidth (the anchor measured beside it), as well.
    bw_round = {r["round"]: r["result"]["gbps_median"] for r in rows
                if r["who"] == "bandwidth" and r["threads"] == t and r["result"]}
    per_round = sorted(100 * r["result"]["decode_tok_s"] * b["bytes_per_token"] / (bw_round[r["round"]] * 1e9)
                       for r in rows if r["who"] == "nxrt" and r["threads"] == t and r["result"]
                       and r["result"].get("decode_tok_s") and r["round"] in bw_round)
    paired = (f"; per round {med(per_round):.0f}% ({per_round[0]:.0f}-{per_round[-1]:.0f})" if per_round else "")
    out.append(f"| {t} | {npf:.1f} | {opf:.1f} | {lpf:.1f} | {npf / lpf:.2f} | {ndc:.1f} | {odc:.1f} | {ldc:.1f} | "
               f"{ndc / ldc:.2f} | {gbps:.1f} | {100 * ndc / limit:.0f}% (limit {limit:.1f}){paired} | {eq_o} / {eq_l} of {newt} |")
lat = sorted(r["result"]["round_trip_ns_median"] for r in rows
             if r["who"] == "latency" and r["result"] and r["result"].get("round_trip_ns_median"))
if lat:
    out += ["", f"Core-to-core round trip before the 2-thread runs (`nxrt_core_latency`, where the host placed the two "
                f"vCPUs; 2-thread speed and read bandwidth move with it): {lat[0]:.0f}-{lat[-1]:.0f} ns."]
out += ["", "Rounds: " + ", ".join(f"{k[1]}@{k[0]}: {len(v)}" for k, v in sorted(by.items())) +
        f". Raw lines: {os.path.relpath(raw, os.path.dirname(os.path.dirname(perf)))}. Reproduce: `bench/llm_compare.sh` (see its header)."]
text = open(perf).read()
# A float16-cache run keeps its own block beside the float32 one.
tag = (f"genai-{kind}-{os.path.basename(model)}" + ("-kvf16" if b.get("kv_dtype") == "float16" else "")
       + ("-ws16" if b.get("weight_scales") == "float16" else "") + ("" if plen == "512" else f"-p{plen}"))
begin, end = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
block = begin + "\n" + "\n".join(out) + "\n" + end
if begin in text:
    text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
else:  # after the last GenAI block
    # max() of one int is a TypeError: the list form also serves a file with no genai-* block yet.
    last = max([text.rfind("<!-- genai:end -->")] + [m.start() for m in re.finditer(r"<!-- genai-[^>]*:end -->", text)])
    stop = text.index("-->", last) + 3
    text = text[:stop] + "\n\n" + block + text[stop:]
open(perf, "w").write(text)
print("\n".join(out))
PY
