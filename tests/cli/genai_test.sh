#!/usr/bin/env bash
# `nxrt generate` contract on a seeded tiny model (onnx style: ai.onnx ops only): greedy tokens equal the
# numpy reference's, the logits each token was chosen from (prefill + every decode step, --dump-logits) match
# the reference's step_logits.npy to 1e-3 of the row's max |logit| (tools/compare_logits.py), --json has
# ort generate's keys, errors exit 1 (one line) and usage errors 2.
# With the ORT tool set up in build/ort-tool (scripts/setup_ort_tool.sh; or $ORT), also checks ORT's tokens and key set.
set -uo pipefail
nxrt="$(realpath "${1:?usage: genai_test.sh path/to/nxrt}")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
py=/usr/bin/python3
ort="${ORT:-$root/build/ort-tool/ort}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
pass=0; fail=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
}

$py "$root/tools/make_genai_model.py" "$work/m" --style onnx --size tiny >/dev/null
$py "$root/tools/genai_reference.py" "$work/m" "$work/ref" --prompt-len 16 --max-new-tokens 24 >/dev/null
ref=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/ref/tokens.json")

"$nxrt" generate "$work/m" --prompt-len 16 --max-new-tokens 24 --json --dump-logits "$work/logits.npy" >"$work/out.json" 2>"$work/err"; rc=$?
check "generate exits 0" test "$rc" -eq 0
got=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/out.json" 2>/dev/null)
check "greedy tokens equal the numpy reference" test "$got" = "$ref"
check "logits of the prefill and 23 decode steps match the reference (1e-3)" \
  $py "$root/tools/compare_logits.py" "$work/logits.npy" "$work/ref/step_logits.npy" --min-rows 24
check "DequantizeLinear + MatMul fused into MatMulNBits" bash -c \
  "NXRT_OPT_STATS=1 '$nxrt' generate '$work/m' --max-new-tokens 1 2>&1 >/dev/null | grep -q 'fused_dq_matmul=[1-9]'"
"$nxrt" generate "$work/m" --prompt-len 16 --max-new-tokens 24 --opt disabled --dump-logits "$work/logits0.npy" >/dev/null 2>&1
check "unoptimized graph (DequantizeLinear + MatMul): logits match the reference (1e-3)" \
  $py "$root/tools/compare_logits.py" "$work/logits0.npy" "$work/ref/step_logits.npy" --min-rows 24
keys='["create_ms", "decode_step_ms_median", "decode_steps_ms", "decode_tok_s", "kv_capacity", "kv_update", "new_tokens", "opt", "prefill_ms", "prefill_tok_s", "prompt_tokens", "runtime", "share_buffer", "threads", "tokens", "ttft_ms", "warmup"]'
gotkeys=$($py -c "import json,sys; print(json.dumps(sorted(json.load(open(sys.argv[1])))))" "$work/out.json" 2>/dev/null)
check "--json has ort generate's keys (and nxrt's decode_steps_ms)" test "$gotkeys" = "$keys"
check "decode_steps_ms: one time per decode step, their median the reported one" $py -c "
import json, statistics, sys
d = json.load(open(sys.argv[1]))
s = d['decode_steps_ms']
assert len(s) == d['new_tokens'] - 1 and all(t > 0 for t in s), s
assert abs(statistics.median(s) - d['decode_step_ms_median']) <= 0.01, (statistics.median(s), d['decode_step_ms_median'])
" "$work/out.json"
check "nxrt test passes the reference data sets" bash -c "'$nxrt' test '$work/ref' | tail -1 | grep -qx '1 passed, 0 failed'"

# Captured replay: the schedule of the static-cache decoder, and the same tokens with replay off.
"$nxrt" info --capture "$work/m" >"$work/cap.txt" 2>&1; rc=$?
check "info --capture exits 0" test "$rc" -eq 0
check "info --capture pins the fixed-capacity KV values" grep -q '^pinned KV values: past_key_values.0.key' "$work/cap.txt"
check "info --capture prints segments and seams with reasons" bash -c \
  "grep -q '^segment 1: steps 0-' '$work/cap.txt' && grep -q '^seam step [0-9]*: .*touches growing symbol' '$work/cap.txt'"
"$nxrt" info --capture >/dev/null 2>&1; rc=$?
check "info --capture without a folder is a usage error (2)" test "$rc" -eq 2
got0=$(NXRT_CAPTURE=0 "$nxrt" generate "$work/m" --prompt-len 16 --max-new-tokens 24 --json 2>/dev/null |
  $py -c "import json,sys; print(json.load(sys.stdin)['tokens'])" 2>/dev/null)
check "NXRT_CAPTURE=0: the same greedy tokens" test "$got0" = "$ref"

# The onnxruntime-genai style (com.microsoft GroupQueryAttention, MatMulNBits, SkipSimplifiedLayerNorm),
# built with accuracy_level 0 so float arithmetic is comparable with the float64 reference.
$py "$root/tools/make_genai_model.py" "$work/g" --style genai --size tiny --accuracy-level 0 >/dev/null
$py "$root/tools/genai_reference.py" "$work/g" "$work/gref" --prompt-len 16 --max-new-tokens 32 >/dev/null
gref=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/gref/tokens.json")
"$nxrt" generate "$work/g" --prompt-len 16 --max-new-tokens 32 --json --dump-logits "$work/glogits.npy" >"$work/g.json" 2>"$work/gerr"; rc=$?
check "genai style: generate exits 0" test "$rc" -eq 0
ggot=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/g.json" 2>/dev/null)
check "genai style: 32 greedy tokens equal the numpy reference" test "$ggot" = "$gref"
gkv=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['kv_update'])" "$work/g.json" 2>/dev/null)
check "genai style: KV cache updated in place" test "$gkv" = "in-place"
check "genai style: logits of the prefill and 31 decode steps match the reference (1e-3)" \
  $py "$root/tools/compare_logits.py" "$work/glogits.npy" "$work/gref/step_logits.npy" --min-rows 32
check "genai style: prefill and decode logits match the reference" bash -c "'$nxrt' test '$work/gref' | tail -1 | grep -qx '1 passed, 0 failed'"
# --kv-dtype float16: the GroupQueryAttention cache in float16; logits within 5e-3 of the row's max |logit|
# (measured ~5e-4: the cached rows' rounding), the same 32 greedy tokens; a bad value is a usage error.
"$nxrt" generate "$work/g" --prompt-len 16 --max-new-tokens 32 --kv-dtype float16 --json --dump-logits "$work/g16.npy" >"$work/g16.json" 2>/dev/null
g16=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/g16.json" 2>/dev/null)
check "genai style, float16 KV cache: same 32 greedy tokens as the reference" test "$g16" = "$gref"
check "genai style, float16 KV cache: logits within 5e-3 of the reference" \
  $py "$root/tools/compare_logits.py" "$work/g16.npy" "$work/gref/step_logits.npy" --min-rows 32 --tol 5e-3
"$nxrt" generate "$work/g" --max-new-tokens 2 --kv-dtype int8 >/dev/null 2>&1; rc=$?
check "--kv-dtype int8 is a usage error (2)" test "$rc" -eq 2
# The embedding as GatherBlockQuantized over the tied lm_head's int4 weights (no float32 table) holds the
# same values: same tokens as the float-table folder. With float16-valued scales the packed MatMulNBits
# records keep scales in fp16 (exactly): the reference still matches.
$py "$root/tools/make_genai_model.py" "$work/gq" --style genai --size tiny --accuracy-level 0 --quantized-embedding >/dev/null
"$nxrt" generate "$work/gq" --prompt-len 16 --max-new-tokens 32 --json >"$work/gq.json" 2>/dev/null
gqgot=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/gq.json" 2>/dev/null)
check "genai style, quantized embedding: same 32 tokens as the float32 table" test "$gqgot" = "$gref"
$py "$root/tools/make_genai_model.py" "$work/gh" --style genai --size tiny --accuracy-level 0 --fp16-scales --quantized-embedding >/dev/null
$py "$root/tools/genai_reference.py" "$work/gh" "$work/ghref" --prompt-len 16 --max-new-tokens 32 >/dev/null
"$nxrt" generate "$work/gh" --prompt-len 16 --max-new-tokens 32 --dump-logits "$work/ghlogits.npy" >/dev/null 2>&1
check "genai style, fp16 scales: logits match the reference (1e-3)" \
  $py "$root/tools/compare_logits.py" "$work/ghlogits.npy" "$work/ghref/step_logits.npy" --min-rows 32

out=$("$nxrt" generate "$work/m" --prompt-ids 5,6,7 --max-new-tokens 3)
check "text output lists prompt and tokens" bash -c "grep -q '^prompt: 5,6,7$' <<<'$out' && grep -q '^tokens: [0-9]*,[0-9]*,[0-9]*$' <<<'$out'"

"$nxrt" generate "$work/missing" 2>"$work/err"; rc=$?
check "missing folder exits 1 with one line" bash -c "test $rc -eq 1 && test \$(wc -l < '$work/err') -eq 1 && grep -q genai_config.json '$work/err'"
"$nxrt" generate "$work/m" --max-length 4096 2>"$work/err"; rc=$?
check "context overflow exits 1" bash -c "test $rc -eq 1 && grep -q 'context_length 2048' '$work/err'"
"$nxrt" generate "$work/m" --prompt-ids 1,99999 2>"$work/err"; rc=$?
check "token outside the vocabulary exits 2" test "$rc" -eq 2
"$nxrt" generate "$work/m" --max-new-tokens 2 --dump-logits "$work/missing/x.npy" >/dev/null 2>"$work/err"; rc=$?
check "--dump-logits to an unwritable path exits 1 and names it" bash -c "test $rc -eq 1 && grep -q 'missing/x.npy' '$work/err'"
"$nxrt" generate "$work/m" --bogus 2>"$work/err"; rc=$?
check "unknown option exits 2" test "$rc" -eq 2
sed 's/present\.%d\.key/presentX.%d.key/' "$work/m/genai_config.json" >"$work/cfg.json"
mkdir -p "$work/bad" && ln "$work/m/model.onnx" "$work/bad/model.onnx" && ln "$work/m/model.onnx.data" "$work/bad/model.onnx.data"
cp "$work/cfg.json" "$work/bad/genai_config.json"
"$nxrt" generate "$work/bad" 2>"$work/err"; rc=$?
check "unknown IO name exits 1 and names it" bash -c "test $rc -eq 1 && grep -q \"presentX.0.key\" '$work/err'"

if [ -x "$ort" ]; then
  "$ort" generate "$work/m" --prompt-len 16 --max-new-tokens 24 >"$work/ort.json" 2>/dev/null
  otoks=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/ort.json" 2>/dev/null)
  check "ORT's tokens equal the reference" test "$otoks" = "$ref"
  okeys=$($py -c "import json,sys; print(json.dumps(sorted(json.load(open(sys.argv[1])))))" "$work/ort.json" 2>/dev/null)
  check "ORT's key set is the same (but for nxrt's own decode_steps_ms)" test "$okeys" = "${keys/\"decode_steps_ms\", /}"
  # 32 greedy tokens side by side on the onnxruntime-genai style: at accuracy_level 0 against the
  # reference, and at accuracy_level 4 (both runtimes quantize activations to int8) against nxrt.
  "$ort" generate "$work/g" --prompt-len 16 --max-new-tokens 32 >"$work/ortg.json" 2>/dev/null
  ogt=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/ortg.json" 2>/dev/null)
  check "ORT's 32 tokens on the genai style equal the reference" test "$ogt" = "$gref"
  $py "$root/tools/make_genai_model.py" "$work/g4" --style genai --size tiny >/dev/null
  "$ort" generate "$work/g4" --prompt-len 16 --max-new-tokens 32 >"$work/ortg4.json" 2>/dev/null
  "$nxrt" generate "$work/g4" --prompt-len 16 --max-new-tokens 32 --json >"$work/g4.json" 2>/dev/null
  o4=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/ortg4.json" 2>/dev/null)
  n4=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens'])" "$work/g4.json" 2>/dev/null)
  check "accuracy_level 4: nxrt's 32 tokens equal ORT's" bash -c "test -n '$n4' && test '$n4' = '$o4'"
fi

echo "genai cli: $pass passed, $fail failed"
test "$fail" -eq 0
