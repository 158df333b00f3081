#!/usr/bin/env bash
# The 200-sequence-length RSS test: one process runs a small transformer-style encoder
# (tools/make_seqlen_model.py: x float[1, seq, 256], 2 blocks of LayerNorm + 4-head attention with
# Softmax(QK^T) + MLP) at 200 distinct sequence lengths (1..200 shuffled with a seed) and prints VmRSS /
# VmHWM after each run (tools/rss_driver, public API only). Verdict: RSS after run 20 vs after run 200
# within max(5%, 4 MB). Then the shape-churn test: the same encoder with a symbolic batch axis, 10,000
# runs in one process, each at a random sequence length in 1..200 and batch in 1..4; verdict: the peak
# RSS over runs 5,001..10,000 vs the peak over runs 1,000..5,000 within max(5%, 4 MB). Then the same churn
# with 4 threads sharing the runs on the one session (--concurrent 4): each run context keeps its last
# run's blocks, so the peak is what four contexts at large shapes hold at once; the first half must be
# long enough for every context to have held the largest shapes (10,000 runs are). Exit status: 0 when
# all PASS, else the first failing driver's (1 FAIL, 2 error).
#   usage: scripts/rss_seq_lengths.sh [BUILD_DIR] [driver options: --threads T --seed S ...]
#   RSS_CHURN_RUNS=N changes the churn run count (0 skips both churn tests);
#   RSS_CHURN_CONCURRENT=C the concurrent churn's thread count (default 4; 0 skips it).
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
runs="${RSS_CHURN_RUNS:-10000}"
[ "$runs" -gt 0 ] || exit 0
churn_model="$work/seqlen_encoder_batch.onnx"
if [ ! -f "$churn_model" ] || [ "$root/tools/make_seqlen_model.py" -nt "$churn_model" ]; then
  /usr/bin/python3 "$root/tools/make_seqlen_model.py" "$churn_model" --blocks 2 --seed 0 --dynamic-batch
fi
echo
"$build/nxrt_rss_driver" "$churn_model" --runs "$runs" --min 1 --max 200 --batch-max 4 --seed 2 \
  --check-at $((runs / 10 > 0 ? runs / 10 : 1)) --every $((runs / 20 > 0 ? runs / 20 : 1)) "$@"
concurrent="${RSS_CHURN_CONCURRENT:-4}"
[ "$concurrent" -gt 0 ] || exit 0
echo
"$build/nxrt_rss_driver" "$churn_model" --runs "$runs" --min 1 --max 200 --batch-max 4 --seed 2 \
  --check-at $((runs / 10 > 0 ? runs / 10 : 1)) --every $((runs / 20 > 0 ? runs / 20 : 1)) --concurrent "$concurrent" "$@"
