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

/usr/bin/python3 "$root/tools/make_toy_cnn.py" "$work/cnn" >/dev/null
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
for k in create_ms first_run_ms median_ms p10_ms p90_ms runs threads cpu_median_ms peak_rss_mb; do
  check "bench prints $k" grep -q "\"$k\":" <<<"$out"
done
cpu_ms=$(sed -n 's/.*"cpu_median_ms":\([0-9.]*\).*/\1/p' <<<"$out")
check "bench cpu_median_ms is a positive time" awk -v v="$cpu_ms" 'BEGIN { exit !(v > 0) }'
check "bench is one line" test "$(wc -l <<<"$out")" -eq 1

# info
out=$("$nxrt" info "$m")
check "info lists ops" grep -q "Conv *2" <<<"$out"
check "info lists inputs" grep -q "image: tensor(float32)\[batch,3,32,32\]" <<<"$out"
check "info names the cpu and the kernels' ISA tier" grep -Eq "^cpu: .*tier (scalar|avx2|avx512|amx)$" <<<"$out"
check "info names the tier the kernels use" grep -Eq "^kernel tier: (scalar|avx2|avx512|amx)" <<<"$out"
out=$(NXRT_ISA=scalar "$nxrt" info "$m")
check "NXRT_ISA caps the kernel tier info prints" grep -q "^kernel tier: scalar (capped by isa=scalar)" <<<"$out"
check "a bad NXRT_ISA is an info error" bash -c '! NXRT_ISA=sse9 "$1" info "$2" >/dev/null 2>&1' _ "$nxrt" "$m"
out=$(NXRT_ISA=avx2 "$nxrt" info)
check "info without a model names the cpu and the tier" grep -Eq "^cpu: .*tier (scalar|avx2|avx512|amx)$" <<<"$out"
check "info without a model honours NXRT_ISA" grep -Eq "^kernel tier: (scalar|avx2( \(capped by isa=avx2\))?)$" <<<"$out"
out=$("$nxrt" info --ops)
check "info --ops lists ai.onnx Conv" grep -Eq "^ai.onnx +Conv +opset [0-9]+-" <<<"$out"
check "info --ops lists com.microsoft MatMulNBits" grep -Eq "^com.microsoft +MatMulNBits " <<<"$out"
check "info --ops lists the nxrt domain's fused ops" grep -Eq "^nxrt +FusedConv " <<<"$out"
check "info --ops: Add may run in place" grep -Eq "^ai.onnx +Add .*in-place input 0" <<<"$out"
check "info --ops counts kernels" grep -Eq "^[0-9]{3,} kernels$" <<<"$out"
"$nxrt" info --overrides > "$work/overrides.txt"
check "info --overrides lists reference" grep -q '^reference=0|1$' "$work/overrides.txt"
check "info --overrides lists isa" grep -q '^isa=scalar|avx2|avx512|amx$' "$work/overrides.txt"

# log level and kernel overrides from the environment
NXRT_LOG=info "$nxrt" run "$m" --input "$in0" >/dev/null 2>"$work/err"; rc=$?
check "NXRT_LOG=info: one session line on stderr" bash -c "test $rc -eq 0 && grep -q '^nxrt \[info\] session created in .* ms: .* nodes' '$work/err'"
"$nxrt" run "$m" --input "$in0" >/dev/null 2>"$work/err"
check "default log level is quiet" test ! -s "$work/err"
NXRT_LOG=loud "$nxrt" run "$m" --input "$in0" >/dev/null 2>"$work/err"; rc=$?
check "bad NXRT_LOG is an error naming it" bash -c "test $rc -eq 1 && grep -q 'NXRT_LOG=loud' '$work/err'"
NXRT_KERNEL_OVERRIDES=path=fast "$nxrt" run "$m" --input "$in0" >/dev/null 2>"$work/err"; rc=$?
check "unknown kernel override is an error naming it" bash -c "test $rc -eq 1 && grep -q \"unknown kernel override 'path'\" '$work/err'"
# The keyword-spotting CNN (20 small convs with LeakyRelu, FusedConv taking the activation into its
# store) at every tier, fused and unfused, against its numpy reference.
/usr/bin/python3 "$root/tools/make_kws_cnn.py" "$work/kws" >/dev/null
for tier in scalar avx2 avx512 amx; do
  check "NXRT_ISA=$tier: output still matches the reference" bash -c "NXRT_ISA=$tier '$nxrt' test '$work/cnn' | tail -1 | grep -qx '1 passed, 0 failed'"
  for opt in all disabled; do
    check "NXRT_ISA=$tier --opt $opt: keyword-spotting CNN matches its reference" \
      bash -c "NXRT_ISA=$tier '$nxrt' test '$work/kws' --opt $opt | tail -1 | grep -qx '1 passed, 0 failed'"
  done
done

# The log-mel front end (STFT as a one-channel Conv with a 512-tap kernel and stride 160, power, mel
# MatMul, Log) at every tier, fused and unfused, against its float64 numpy DFT.
/usr/bin/python3 "$root/tools/make_mel_frontend.py" "$work/mel" >/dev/null
for tier in scalar avx2 avx512 amx; do
  for opt in all disabled; do
    check "NXRT_ISA=$tier --opt $opt: log-mel front end matches its reference" \
      bash -c "NXRT_ISA=$tier '$nxrt' test '$work/mel' --opt $opt | tail -1 | grep -qx '1 passed, 0 failed'"
  done
done

# --disable PASS: that optimizer pass does not run (an unknown name is an error naming it)
"$nxrt" run "$m" --input "$in0" --disable fuse_activation --output-dir "$work/dis" >/dev/null; rc=$?
check "--disable fuse_activation runs" test "$rc" -eq 0
check "--disable: the fused run matches the unfused output" bash -c "cp '$work/dis/output_0.pb' '$work/cmp/test_data_set_0/output_0.pb' && '$nxrt' test '$work/cmp' | tail -1 | grep -qx '1 passed, 0 failed'"
rc=0; "$nxrt" bench "$m" --input "$in0" --runs 1 --disable no_such_pass >/dev/null 2>"$work/err" || rc=$?
check "--disable of no pass: exit 1 naming it" bash -c "test $rc -eq 1 && grep -q \"'no_such_pass' is no optimizer pass\" '$work/err'"

# trace: one complete event per executed node, valid JSON
# --opt disabled: the optimizer would fuse nodes, and this counts the file's nodes.
NXRT_TRACE="$work/trace.json" "$nxrt" run "$m" --input "$in0" --opt disabled >/dev/null
check "trace is valid JSON with one span per node (with its pool counts)" /usr/bin/python3 - "$work/trace.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
nodes = [e for e in t["traceEvents"] if e.get("cat") == "node"]
assert len(nodes) == 10 and all(e["ph"] == "X" and "dur" in e for e in nodes), len(nodes)
assert all(isinstance(e["args"].get(k), int) and e["args"][k] >= 0 for e in nodes for k in ("loops_split", "worker_wakes"))
assert {e["name"] for e in t["traceEvents"] if e.get("cat") == "session"} >= {"load", "plan", "first run"}
PY

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
