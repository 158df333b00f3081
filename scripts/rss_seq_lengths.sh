#!/usr/bin/env bash
# The 200-sequence-length RSS test: one process runs a small transformer-style encoder
# (tools/make_seqlen_model.py: x float[1, seq, 256], 2 blocks of LayerNorm + 4-head attention with
# Softmax(QK^T) + MLP) at 200 distinct sequence lengths (1..200 shuffled with a seed) and prints VmRSS /
# VmHWM after each run (tools/rss_driver, public API only). Verdict: RSS after run 20 vs after run 200
# within max(5%, 4 MB). Exit status of the driver (0 PASS, 1 FAIL, 2 error).
#   usage: scripts/rss_seq_lengths.sh [BUILD_DIR] [driver options: --threads T --seed S --lengths N ...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
[ $# -gt 0 ] && shift
export CCACHE_BASEDIR="$root"
[ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNXRT_WERROR=ON >/dev/null
ninja -C "$build" -j"${JOBS:-2}" nxrt_rss_driver >/dev/null
work="$build/rss-seqlen"
mkdir -p "$work"
model="$work/seqlen_encoder.onnx"
if [ ! -f "$model" ] || [ "$root/tools/make_seqlen_model.py" -nt "$model" ]; then
  /usr/bin/python3 "$root/tools/make_seqlen_model.py" "$model" --blocks 2 --seed 0
fi
"$build/nxrt_rss_driver" "$model" --lengths 200 --min 1 --max 200 --seed 1 --check-at 20 "$@"
