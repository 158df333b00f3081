#!/usr/bin/env bash
# Decoder export styles x batches and beam search. For every style tools/make_genai_model.py writes (model
# builder GQA with and without past_present_share_buffer, float16 GQA, ai.onnx static cache with and
# without a shared buffer, Hugging Face optimum plain ops with / without position_ids and as a merged
# If decoder, an LFM2-like hybrid with convolution states, ORT's GPT-2 with combined past_%d):
#   - greedy, two prompts of different lengths as one left-padded batch: `nxrt generate` equals
#     tools/genai_reference.py's float64 run token for token (each row continues its own prompt);
#   - beam search, 4 beams, every hypothesis returned: equal to the reference's onnxruntime-genai beam search;
#   - ORT (`ort generate`, batch 1 greedy, where it can run the folder; set up in build/ort-tool or $ORT):
#     each prompt alone gives nxrt's row.
# Then onnxruntime-genai's own folders (../shared/models/genai-og, or $GENAI_OG): the GPT-2's batch-2 greedy
# and batch-3 beam search tokens its tests expect, the Qwen GQA float16 folder against ORT (alone and as a
# padded row), the LFM2 hybrid against a numpy forward of its graph.
# One line per check with the token counts; exit 1 on any difference.
set -uo pipefail
nxrt="$(realpath "${1:?usage: genai_batch_test.sh path/to/nxrt}")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
py=/usr/bin/python3
ort="${ORT:-$root/build/ort-tool/ort}"
og="${GENAI_OG:-$root/../shared/models/genai-og}"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
pass=0; fail=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
}
# jq-like helpers in Python: the sequences of a JSON line; generated-token agreement of two sequence lists.
seqs() { $py -c 'import json,sys; print(json.dumps(json.loads(sys.stdin.read().splitlines()[-1])["sequences"]))'; }
agree() {  # agree WIDTH A B -> "same/total" over the tokens after the padded prompt
  $py - "$@" <<'EOF'
import json, sys
w, a, b = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
same = total = 0
for ra, rb in zip(a, b):
    for x, y in zip(ra[w:], rb[w:]):
        same += x == y
    total += max(len(ra), len(rb)) - w
total += sum(len(r) - w for r in (a[len(b):] if len(a) > len(b) else b[len(a):]))
print(f"{same}/{total}")
EOF
}
full() { [ "${1%/*}" = "${1#*/}" ]; }  # "n/n"

P0="5,17,300,42,9,11"
P1="7,8,9"
W=6     # padded prompt width
NEW=12  # new tokens per row
styles=("genai" "genai --no-share-buffer" "genai --dtype fp16" "onnx" "onnx --no-share-buffer" "optimum"
        "optimum --no-position-ids" "optimum --merged" "hybrid" "gpt2")
for st in "${styles[@]}"; do
  name="${st// /_}"; name="${name//-/}"
  m="$work/$name"
  # genai style at accuracy_level 0: float arithmetic comparable with the float64 reference
  $py "$root/tools/make_genai_model.py" "$m" --style $st --accuracy-level 0 >/dev/null || { fail=$((fail + 1)); echo "FAIL $st: model"; continue; }
  ref_g=$($py "$root/tools/genai_reference.py" "$m" "$work/r" --batch "$P0;$P1" --max-new-tokens $NEW | seqs)
  got_g=$("$nxrt" generate "$m" --prompt-ids $P0 --prompt-ids $P1 --max-new-tokens $NEW --json 2>"$work/err" | seqs)
  ref_b=$($py "$root/tools/genai_reference.py" "$m" "$work/r" --batch "$P0;$P1" --max-new-tokens $NEW --num-beams 4 \
            --num-return-sequences 4 | seqs)
  got_b=$("$nxrt" generate "$m" --prompt-ids $P0 --prompt-ids $P1 --max-new-tokens $NEW --num-beams 4 \
            --num-return-sequences 4 --json 2>>"$work/err" | seqs)
  ag=$(agree $W "$ref_g" "$got_g" 2>/dev/null || echo "0/?")
  ab=$(agree $W "$ref_b" "$got_b" 2>/dev/null || echo "0/?")
  check "$st: greedy batch 2 (left-padded) equals the reference ($ag)" full "$ag"
  check "$st: beam 4 x 2 prompts equals the reference ($ab)" full "$ab"
  line="$(printf '%-26s greedy batch-2 %s  beam-4 %s' "$st" "$ag" "$ab")"
  if [ -x "$ort" ]; then
    # ORT's own MatMulNBits fusion of the onnx style's DequantizeLinear + MatMul quantizes activations to
    # int8 (a different arithmetic): compare that style unfused.
    oopt=all; case "$st" in onnx*) oopt=basic ;; esac
    osame=0; ototal=0; oran=1
    for r in 0 1; do
      p=$P0; [ $r = 1 ] && p=$P1
      if out=$("$ort" generate "$m" --prompt-ids $p --max-new-tokens $NEW --opt $oopt 2>/dev/null); then
        res=$($py -c 'import json,sys; o=json.loads(sys.argv[1]); g=json.loads(sys.argv[2])[int(sys.argv[3])][int(sys.argv[4]):]
print(sum(a==b for a,b in zip(o["tokens"],g)), len(g))' "$out" "$got_g" $r $W)
        osame=$((osame + ${res% *})); ototal=$((ototal + ${res#* }))
      else
        oran=0
      fi
    done
    if [ $oran = 1 ]; then
      check "$st: ORT batch-1 rows equal nxrt's batch rows ($osame/$ototal)" test "$osame" -eq "$ototal"
      line="$line  ORT rows $osame/$ototal"
    else
      line="$line  ORT cannot run it"
    fi
  fi
  echo "$line"
done

# ---- command line: text output, usage errors
m="$work/genai"
out=$("$nxrt" generate "$m" --prompt-ids $P0 --prompt-ids $P1 --max-new-tokens 3 2>/dev/null)
check "several prompts print one 'sequence i:' line per row, padding included" \
  bash -c "grep -q '^sequence 0: $P0,' <<<'$out' && grep -q '^sequence 1: 0,0,0,$P1,' <<<'$out'"
"$nxrt" generate "$m" --prompt-ids 1,2 --num-beams 2 --num-return-sequences 3 >/dev/null 2>&1
check "--num-return-sequences above --num-beams is a usage error (exit 2)" test $? -eq 2
"$nxrt" generate "$m" --prompt-ids 1,2 --prompt-ids 3 --dump-logits "$work/x.npy" >/dev/null 2>&1
check "--dump-logits with several prompts is a usage error (exit 2)" test $? -eq 2
"$nxrt" generate "$m" --prompt-ids 1,2 --num-beams 2 --do-sample >/dev/null 2>&1
check "--do-sample with --num-beams is a usage error (exit 2)" test $? -eq 2
"$nxrt" generate "$work/gpt2" --prompt-ids 1,2 --prompt-ids 3 --max-new-tokens 2 2>/dev/null >/dev/null
check "a folder with a pad_token_id pads a shorter prompt (gpt2 style)" test $? -eq 0

# ---- onnxruntime-genai's own test folders
if [ -d "$og/tiny-random-gpt2-fp32" ]; then
  g="$og/tiny-random-gpt2-fp32"
  got=$("$nxrt" generate "$g" --prompt-ids 0,0,0,52 --prompt-ids 0,0,195,731 --max-new-tokens 6 --stop-at-eos --json | seqs)
  want='[[0, 0, 0, 52, 204, 204, 204, 204, 204, 204], [0, 0, 195, 731, 731, 114, 114, 114, 114, 114]]'
  a=$(agree 4 "$want" "$got")
  check "genai-og gpt2: greedy batch 2 equals onnxruntime-genai's expected tokens ($a)" full "$a"
  got=$("$nxrt" generate "$g" --prompt-ids 0,0,0,0,0,52,195,731,321,301,734,620 \
        --prompt-ids 41,554,74,622,206,222,75,223,221,198,224,572 --prompt-ids 0,0,0,52,328,219,328,206,288,227,896,328 \
        --num-beams 4 --max-new-tokens 8 --json | seqs)
  want='[[0,0,0,0,0,52,195,731,321,301,734,620,131,131,131,181,638,638,638,638],[41,554,74,622,206,222,75,223,221,198,224,572,292,292,292,292,292,292,292,292],[0,0,0,52,328,219,328,206,288,227,896,328,328,669,669,669,669,669,669,669]]'
  b=$(agree 12 "$want" "$got")
  check "genai-og gpt2: beam 4 x 3 prompts equals onnxruntime-genai's expected tokens ($b)" full "$b"
  echo "genai-og tiny-random-gpt2-fp32  greedy batch-2 $a  beam-4 x 3 $b (onnxruntime-genai's expected tokens)"
fi
if [ -d "$og/tiny-qwen35-cuda" ]; then
  q="$og/tiny-qwen35-cuda"
  alone=$("$nxrt" generate "$q" --prompt-ids 10,20,30,40 --max-new-tokens 6 --json | $py -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
  row=$("$nxrt" generate "$q" --prompt-ids 10,20,30,40 --prompt-ids 1,2,3,4,5,6 --max-new-tokens 6 --json | seqs | \
        $py -c 'import json,sys; print(json.load(sys.stdin)[0][6:])')
  check "genai-og qwen35 (GQA float16): a left-padded batch row equals the prompt alone" test "$alone" = "$row"
  line="genai-og tiny-qwen35-cuda  padded batch row = alone: $([ "$alone" = "$row" ] && echo yes || echo no)"
  if [ -x "$ort" ]; then
    o=$("$ort" generate "$q" --prompt-ids 10,20,30,40 --max-new-tokens 6 2>/dev/null | $py -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
    check "genai-og qwen35: ORT's greedy tokens equal nxrt's" test "$o" = "$alone"
    line="$line  ORT $([ "$o" = "$alone" ] && echo 6/6 || echo "differs: $o vs $alone")"
  fi
  echo "$line"
fi
if [ -d "$og/tiny-random-lfm2-fp32" ]; then
  l="$og/tiny-random-lfm2-fp32"
  # Its graph: logits = embed[token] @ lm_head (the conv states pass through): greedy from the initializers.
  want=$($py - "$l/decoder.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
seqs = []
for prompt in ([0, 0, 195, 731], [5, 6, 7]):
    seq = list(prompt)
    for _ in range(6):
        seq.append(int(np.argmax(w["embed_weight"][seq[-1]] @ w["lm_head_weight"])))
    seqs.append(seq[len(prompt):])
print(seqs)
EOF
)
  got=$("$nxrt" generate "$l" --prompt-ids 0,0,195,731 --prompt-ids 5,6,7 --max-new-tokens 6 --json | seqs | \
        $py -c 'import json,sys; s=json.load(sys.stdin); print([r[4:] for r in s])')
  check "genai-og lfm2: batch 2 equals the numpy forward of its graph" test "$got" = "$want"
  echo "genai-og tiny-random-lfm2-fp32  greedy batch-2 = numpy forward: $([ "$got" = "$want" ] && echo 12/12 || echo "no: $got vs $want")"
fi

echo "genai batch cli: $pass passed, $fail failed"
test "$fail" -eq 0
