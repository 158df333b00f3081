#!/usr/bin/env bash
# The nxrt CLI contract: run / bench / test / info, exit codes and one-line errors.
set -uo pipefail
nxrt="$(realpath "${1:?usage: cli_test.sh path/to/nxrt}")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
pass=0; fail=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
}

/usr/bin/python3 "$root/tools/make_demo_model.py" "$work/cnn" >/dev/null
m="$work/cnn/model.onnx"; in0="$work/cnn/test_data_set_0/input_0.pb"

# run: writes output_K.pb, which nxrt test's comparison accepts against the reference
"$nxrt" run "$m" --input "$in0" --output-dir "$work/out" 2>"$work/err"; rc=$?
check "run exits 0" test "$rc" -eq 0
check "run writes output_0.pb" test -s "$work/out/output_0.pb"
mkdir -p "$work/cmp/test_data_set_0"; cp "$m" "$work/cmp/"; cp "$in0" "$work/cmp/test_data_set_0/"
cp "$work/out/output_0.pb" "$work/cmp/test_data_set_0/output_0.pb"
check "run output equals itself through test" bash -c "'$nxrt' test '$work/cmp' | tail -1 | grep -qx '1 passed, 0 failed'"
check "run output matches numpy reference" bash -c "'$nxrt' test '$work/cnn' | tail -1 | grep -qx '1 passed, 0 failed'"
out=$("$nxrt" run "$m" --input "$in0")
check "run without --output-dir lists outputs" grep -q "^output_0 probs float32\[1,10\]" <<<"$out"

# errors: one line on stderr, non-zero exit
"$nxrt" run "$work/missing.onnx" 2>"$work/err"; rc=$?
check "missing model exits 1" test "$rc" -eq 1
check "missing model: one line" test "$(wc -l < "$work/err")" -eq 1
check "missing model: names the file" grep -q "missing.onnx" "$work/err"
head -c 100 "$m" > "$work/trunc.onnx"
"$nxrt" run "$work/trunc.onnx" 2>"$work/err"; rc=$?
check "truncated model exits 1" test "$rc" -eq 1
check "truncated model: says offset" grep -q -i "offset\|byte" "$work/err"
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = sys.argv[1]
g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="weird", domain="com.example")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
onnx.save(m, w + "/unsupported.onnx")
open(w + "/int_input.pb", "wb").write(numpy_helper.from_array(np.zeros((1, 3, 32, 32), np.int32), "image").SerializeToString())
PY
"$nxrt" run "$work/unsupported.onnx" 2>"$work/err"; rc=$?
check "unsupported op exits 1" test "$rc" -eq 1
check "unsupported op: names node, domain, op, opset" grep -q "weird.*com.example::Frobnicate.*opset 1" "$work/err"
"$nxrt" run "$m" --input "$work/int_input.pb" 2>"$work/err"; rc=$?
check "wrong dtype exits 1" test "$rc" -eq 1
check "wrong dtype: names input and dtypes" grep -q "image.*float32.*int32" "$work/err"
"$nxrt" frob 2>/dev/null; rc=$?
check "usage error exits 2" test "$rc" -eq 2

# bench: one JSON line with the contract's keys
out=$("$nxrt" bench "$m" --runs 3 --warmup 1 --dim batch=2)
for k in create_ms first_run_ms median_ms p10_ms p90_ms runs threads peak_rss_mb; do
  check "bench prints $k" grep -q "\"$k\":" <<<"$out"
done
check "bench is one line" test "$(wc -l <<<"$out")" -eq 1

# info
out=$("$nxrt" info "$m")
check "info lists ops" grep -q "Conv *2" <<<"$out"
check "info lists inputs" grep -q "image: tensor(float32)\[batch,3,32,32\]" <<<"$out"
check "info names the CPU and its tier" grep -q "^cpu: .* tier " <<<"$out"
check "info names the kernels' tier" grep -q "^kernel tier: " <<<"$out"
out=$(NXRT_ISA=scalar "$nxrt" info)
check "info without a model prints the CPU" grep -q "^cpu: " <<<"$out"
check "NXRT_ISA caps the kernel tier" grep -q "^kernel tier: scalar" <<<"$out"
check "a bad NXRT_ISA is an error" bash -c '! NXRT_ISA=sse9 "$1" info >/dev/null 2>&1' _ "$nxrt"

# trace: one complete event per executed node, valid JSON
# --opt disabled: the optimizer would fuse nodes, and this counts the file's nodes.
NXRT_TRACE="$work/trace.json" "$nxrt" run "$m" --input "$in0" --opt disabled >/dev/null
check "trace is valid JSON with one span per node" /usr/bin/python3 - "$work/trace.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
nodes = [e for e in t["traceEvents"] if e.get("cat") == "node"]
assert len(nodes) == 10 and all(e["ph"] == "X" and "dur" in e for e in nodes), len(nodes)
assert {e["name"] for e in t["traceEvents"] if e.get("cat") == "session"} >= {"load", "plan", "first run"}
PY

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
