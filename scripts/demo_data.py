#!/usr/bin/python3
"""Inputs with known answers for the OCR and VAD examples, and the comparisons against them. Used by
scripts/demo.sh (make demo) and by the example tests (tests/examples/). Needs ImageMagick's `convert`
and the DejaVu fonts for images, `espeak-ng` for speech; the rest is the Python standard library.

  demo_data.py sentences OUT_DIR
      renders each test sentence into its own PNG; writes OUT_DIR/sentences.tsv (file, font, text)
  demo_data.py page OUT_DIR
      renders several lines in different fonts into one slightly rotated image OUT_DIR/page.png;
      writes OUT_DIR/page.tsv (one expected line per row, in reading order)
  demo_data.py speech OUT_DIR
      synthesizes utterances between stretches of silence into OUT_DIR/speech.wav (22050 Hz, espeak-ng's
      rate, so the VAD example resamples); writes OUT_DIR/speech.tsv (known start, end in seconds, text)
  demo_data.py check-text EXPECTED OCR_OUTPUT [--label L]
      EXPECTED: the expected text; OCR_OUTPUT: the ocr example's output (its text column is joined with
      spaces). Prints both and the character error rate; exit 1 unless they are equal.
  demo_data.py check-lines EXPECTED_TSV OCR_OUTPUT
      one expected line per row against the ocr example's lines, in order; exit 1 on any difference.
  demo_data.py check-segments SPEECH_TSV VAD_OUTPUT [--tolerance-ms MS]
      the vad example's segments beside the known intervals; exit 1 unless each known interval has
      exactly one segment, whose start and end are within the tolerance (default 100 ms) of the known
      ones widened by Silero's documented 30 ms speech padding, and no segment falls in silence.
"""
import os
import shutil
import struct
import subprocess
import sys
import wave

# (file stem, font, point size, text): different lengths, fonts and weights.
SENTENCES = [
    ("thanks", "DejaVu-Sans-Mono", 40, "Thank you"),
    ("hours", "DejaVu-Serif-Bold", 40, "Open 24 hours"),
    ("fox", "DejaVu-Serif", 36, "The quick brown fox jumps over the lazy dog"),
]
# Rendered upside down, so the direction classifier has to turn it back.
UPSIDE_DOWN = ("upside_down", "DejaVu-Sans", 40, "Pack my box with five dozen liquor jugs")

PAGE_LINES = [
    ("DejaVu-Sans-Bold", 44, "Invoice 2024-117"),
    ("DejaVu-Serif", 36, "Deliver to: 12 Harbour Street"),
    ("DejaVu-Sans", 36, "Total due 42.50 EUR"),
    ("DejaVu-Sans-Mono", 32, "Thank you"),
]
PAGE_ROTATION_DEGREES = 3

UTTERANCES = [
    "The weather is nice today",
    "Please open the window before you leave the house",
    "Thank you very much",
]
SILENCES_S = [1.0, 1.5, 1.2, 1.0]  # before, between and after the utterances


def need(tool):
    if shutil.which(tool) is None:
        sys.exit(f"demo_data.py: `{tool}` not found (scripts/install_deps.sh installs it)")


def render(text, font, size, out_path, extra=()):
    need("convert")
    subprocess.run(["convert", "-background", "white", "-fill", "black", "-font", font, "-pointsize", str(size),
                    "label:" + text, "-bordercolor", "white", "-border", "40", *extra, out_path], check=True)


def cmd_sentences(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for stem, font, size, text in SENTENCES + [UPSIDE_DOWN]:
        path = os.path.join(out_dir, stem + ".png")
        render(text, font, size, path, ["-rotate", "180"] if stem == UPSIDE_DOWN[0] else [])
        rows.append(f"{path}\t{font}\t{text}\n")
    with open(os.path.join(out_dir, "sentences.tsv"), "w") as f:
        f.writelines(rows)


def cmd_page(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    parts = []
    for i, (font, size, text) in enumerate(PAGE_LINES):
        part = os.path.join(out_dir, f"page_line{i}.png")
        subprocess.run(["convert", "-background", "white", "-fill", "black", "-font", font, "-pointsize", str(size),
                        "label:" + text, "-bordercolor", "white", "-border", "12", part], check=True)
        parts.append(part)
    page = os.path.join(out_dir, "page.png")
    # +repage drops the virtual canvas that -append and -rotate leave behind (it would crop the result).
    subprocess.run(["convert", *parts, "-background", "white", "-gravity", "West", "-append", "+repage",
                    "-bordercolor", "white", "-border", "40", "-rotate", str(PAGE_ROTATION_DEGREES), "+repage",
                    page], check=True)
    for part in parts:
        os.remove(part)
    with open(os.path.join(out_dir, "page.tsv"), "w") as f:
        f.writelines(text + "\n" for _, _, text in PAGE_LINES)


def read_pcm16(path):
    with wave.open(path) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            sys.exit(f"demo_data.py: {path}: expected 16-bit mono from espeak-ng")
        n = w.getnframes()
        return w.getframerate(), list(struct.unpack(f"<{n}h", w.readframes(n)))


def cmd_speech(out_dir):
    need("espeak-ng")
    os.makedirs(out_dir, exist_ok=True)
    rate, samples, known = None, [], []
    for i, text in enumerate(UTTERANCES):
        clip_path = os.path.join(out_dir, f"utterance{i}.wav")
        subprocess.run(["espeak-ng", "-w", clip_path, text], check=True)
        clip_rate, clip = read_pcm16(clip_path)
        os.remove(clip_path)
        if rate is None:
            rate = clip_rate
        samples.extend([0] * int(SILENCES_S[i] * rate))
        # The known interval: from the first to the last sample louder than 1% of full scale (espeak-ng's
        # clips carry a little silence of their own at both ends).
        loud = [k for k, v in enumerate(clip) if abs(v) > 327]
        known.append(((len(samples) + loud[0]) / rate, (len(samples) + loud[-1] + 1) / rate, text))
        samples.extend(clip)
    samples.extend([0] * int(SILENCES_S[-1] * rate))
    with wave.open(os.path.join(out_dir, "speech.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(struct.pack(f"<{len(samples)}h", *samples))
    with open(os.path.join(out_dir, "speech.tsv"), "w") as f:
        f.writelines(f"{a:.3f}\t{b:.3f}\t{t}\n" for a, b, t in known)


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def ocr_texts(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[0] for line in f if line.strip()]


def cmd_check_text(expected, ocr_output, label=""):
    got = " ".join(ocr_texts(ocr_output))
    cer = edit_distance(expected, got) / max(len(expected), 1)
    print(f"{label}rendered:   {expected}")
    print(f"{' ' * len(label)}recognized: {got}    (CER {cer:.3f})")
    return 0 if got == expected else 1


def cmd_check_lines(expected_tsv, ocr_output):
    with open(expected_tsv, encoding="utf-8") as f:
        expected = [line.rstrip("\n") for line in f if line.strip()]
    got = ocr_texts(ocr_output)
    print(f"{'rendered':<34} {'recognized':<34} CER")
    errors = 0
    for i in range(max(len(expected), len(got))):
        e = expected[i] if i < len(expected) else ""
        g = got[i] if i < len(got) else ""
        errors += edit_distance(e, g)
        print(f"{e:<34} {g:<34} {edit_distance(e, g) / max(len(e), 1):.3f}")
    return 0 if errors == 0 and len(expected) == len(got) else 1


def cmd_check_segments(speech_tsv, vad_output, tolerance_ms=100.0, pad_ms=30.0):
    """Silero widens every segment by speech_pad_ms (30 ms) on purpose, so a perfect detector prints the
    known interval widened by that much; the tolerance applies to the difference from that."""
    with open(speech_tsv) as f:
        known = [(float(a), float(b), t) for a, b, t in (line.rstrip("\n").split("\t") for line in f if line.strip())]
    with open(vad_output) as f:
        found = [tuple(map(float, line.split()[:2])) for line in f if line.strip()]
    pad = pad_ms / 1000
    print(f"{'known speech (s)':<19} {'VAD segment (s)':<19} {'start, end vs known +-30 ms pad':<33} text")
    ok = len(found) == len(known)
    for a, b, text in known:
        overlapping = [s for s in found if s[0] < b and s[1] > a]
        if len(overlapping) != 1:
            ok = False
            print(f"{a:7.3f} - {b:7.3f}   {len(overlapping)} segments overlap{'':<21} {text}")
            continue
        s, e = overlapping[0]
        ds, de = (s - (a - pad)) * 1000, (e - (b + pad)) * 1000
        ok = ok and abs(ds) <= tolerance_ms and abs(de) <= tolerance_ms
        print(f"{a:7.3f} - {b:7.3f}   {s:7.3f} - {e:7.3f}   {ds:+5.0f} ms, {de:+5.0f} ms{'':<17} {text}")
    extra = [s for s in found if not any(s[0] < b and s[1] > a for a, b, _ in known)]
    for s, e in extra:
        print(f"{'(silence)':<19} {s:7.3f} - {e:7.3f}   false alarm")
    print(f"{'within' if ok and not extra else 'NOT within'} {tolerance_ms:.0f} ms")
    return 0 if ok and not extra else 1


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, args = argv[1], argv[2:]
    tolerance = 100.0
    label = ""
    if "--tolerance-ms" in args:
        i = args.index("--tolerance-ms")
        tolerance = float(args[i + 1])
        del args[i:i + 2]
    if "--label" in args:
        i = args.index("--label")
        label = args[i + 1]
        del args[i:i + 2]
    if cmd == "sentences" and len(args) == 1:
        return cmd_sentences(args[0])
    if cmd == "page" and len(args) == 1:
        return cmd_page(args[0])
    if cmd == "speech" and len(args) == 1:
        return cmd_speech(args[0])
    if cmd == "check-text" and len(args) == 2:
        return cmd_check_text(args[0], args[1], label)
    if cmd == "check-lines" and len(args) == 2:
        return cmd_check_lines(args[0], args[1])
    if cmd == "check-segments" and len(args) == 2:
        return cmd_check_segments(args[0], args[1], tolerance)
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
