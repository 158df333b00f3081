# Conformance suites: name -> root folder. Sourced by the conformance scripts.
# ../shared is beside the repository (NXRT_SHARED overrides it).
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${NXRT_SHARED:-$repo_root/../shared}"
declare -A SUITE_ROOT=(
  [onnx123]="$shared/onnx-tests"
  [light]="$shared/models/light"
  [onnx112]="/usr/share/libonnx-testdata/data"
)
SUITES=(onnx123 light onnx112)
