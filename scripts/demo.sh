#!/usr/bin/env bash
# make demo: generate a small CNN with a numpy reference output, then inspect, run, check and
# benchmark it with nxrt.
set -euo pipefail
nxrt="${1:?usage: demo.sh path/to/nxrt}"
root="$(cd "$(dirname "$0")/.." && pwd)"
demo="$root/build/demo/tiny_cnn"
/usr/bin/python3 "$root/tools/make_demo_model.py" "$demo"
echo; echo "== nxrt info"; "$nxrt" info "$demo/model.onnx"
echo; echo "== nxrt run"
"$nxrt" run "$demo/model.onnx" --input "$demo/test_data_set_0/input_0.pb" --output-dir "$root/build/demo/out"
"$nxrt" run "$demo/model.onnx" --input "$demo/test_data_set_0/input_0.pb"
echo; echo "== nxrt test (against the numpy reference)"; "$nxrt" test "$demo"
echo; echo "== nxrt bench"; "$nxrt" bench "$demo/model.onnx" --runs 20
