#!/usr/bin/env bash
# How often the OCR example reads a rendered line exactly: 12 sentence/font pairs, each rendered at 3
# point sizes (36, 40, 44) and 4 white margins (20 to 50 px) with ImageMagick; prints the misses and the
# count. Extra arguments go to the ocr example (e.g. --unclip-ratio 2).
#   usage: scripts/ocr_sweep.sh path/to/ocr MODELS_DIR [ocr options...]
set -uo pipefail
ocr="${1:?usage: ocr_sweep.sh path/to/ocr MODELS_DIR [ocr options...]}"
models="${2:?usage: ocr_sweep.sh path/to/ocr MODELS_DIR [ocr options...]}"
shift 2
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
exact=0 total=0
while IFS='|' read -r font text; do
  for size in 36 40 44; do
    for margin in 20 30 40 50; do
      convert -background white -fill black -font "$font" -pointsize "$size" "label:$text" \
        -bordercolor white -border "$margin" "$work/line.png" || exit 1
      got="$("$ocr" "$work/line.png" --models "$models" "$@" | cut -f1 | paste -sd' ')"
      total=$((total + 1))
      if [ "$got" == "$text" ]; then exact=$((exact + 1)); else echo "$font $size/$margin: '$text' -> '$got'"; fi
    done
  done
done <<'LINES'
DejaVu-Serif|Hello world
DejaVu-Sans|Hello world
DejaVu-Sans-Mono|Reading text from images
DejaVu-Serif|The quick brown fox jumps over the lazy dog
DejaVu-Sans-Bold|Call 555-0199 before 9 pm
DejaVu-Sans|Pack my box with five dozen liquor jugs
DejaVu-Sans-Bold|Invoice 2024-117
DejaVu-Serif|Deliver to: 12 Harbour Street
DejaVu-Sans|Total due 42.50 EUR
DejaVu-Sans-Mono|Thank you
DejaVu-Serif-Bold|Open 24 hours
DejaVu-Sans|Meeting at 10:30 in room B
LINES
echo "exact: $exact of $total"
