#!/usr/bin/env bash
# Checks the com.microsoft contrib kernels against ONNX Runtime: tools/make_contrib_cases.py writes
# small one-node models (several attribute combinations per op), then tools/compare_ort.py runs each
# through `nxrt run` and `ort run` on the same seeded inputs and compares every output within
# rtol 1e-3 / atol 1e-4 (float16 cases: rtol 1e-2 / atol 1e-3; the QLinear* ops' 8-bit outputs: within one
# step).
#   scripts/check_contrib_ort.sh [path/to/nxrt] [path/to/ort]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nxrt="$(realpath "${1:-$root/build/nxrt}")"
ort="${2:-${NXRT_ORT:-$("$root/scripts/setup_ort_tool.sh" "$root/build/ort-tool")}}" || { echo "check_contrib_ort: the ORT tool could not be set up" >&2; exit 2; }
work="$root/build/contrib-cases"
rm -rf "$work" && mkdir -p "$work"
/usr/bin/python3 "$root/tools/make_contrib_cases.py" "$work" || exit 2
pass=0
fail=0
failed=()
for m in "$work"/*.onnx; do
  tol=(--rtol 1e-3 --atol 1e-4)
  case "$(basename "$m")" in
    *fp16*) tol=(--rtol 1e-2 --atol 1e-3) ;;
    # 8-bit outputs: ORT's vector kernels round some of these in fixed point, a step apart at ties.
    qlinear*|qgemm_u8_out*|qgemm_s8_out*) tol=(--rtol 0 --atol 1) ;;
  esac
  if /usr/bin/python3 "$root/tools/compare_ort.py" --nxrt "$nxrt" --ort "$ort" "${tol[@]}" "$m"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    failed+=("$(basename "$m" .onnx)")
  fi
done
echo "contrib ops vs ORT: $pass matched, $fail failed${failed[*]:+ (${failed[*]})}"
[ "$fail" -eq 0 ]
