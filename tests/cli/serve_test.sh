#!/usr/bin/env bash
# `nxrt serve` driven by the official OpenAI npm client (tests/serve/serve_test.mjs) on a tiny model
# folder with a real byte-level tokenizer and ChatML template (tools/make_genai_model.py). The client is
# installed with `npm ci` from tests/serve/package-lock.json into NPM_DIR (the build folder). Exits 77
# (skipped) only when node or npm is absent.
#   usage: serve_test.sh path/to/nxrt NPM_DIR
set -uo pipefail
nxrt="$(realpath "${1:?usage: serve_test.sh path/to/nxrt NPM_DIR}")"
npm_dir="${2:?usage: serve_test.sh path/to/nxrt NPM_DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are needed to run the OpenAI client against nxrt serve"
  exit 77
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/tools/make_genai_model.py" "$work/m" --style genai --size tiny --tokenizer bytelevel >/dev/null || exit 1
mkdir -p "$npm_dir"
if ! cmp -s "$root/tests/serve/package-lock.json" "$npm_dir/package-lock.json" || [ ! -d "$npm_dir/node_modules/openai" ]; then
  cp "$root/tests/serve/package.json" "$root/tests/serve/package-lock.json" "$npm_dir/"
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error) || { echo "error: npm ci failed in $npm_dir"; exit 1; }
fi
# Usage errors exit 2 naming the problem.
for args in "" "--port 70000 M" "M --max-batch 0" "M --bogus 1" "M --kv-dtype int8"; do
  # shellcheck disable=SC2086
  "$nxrt" serve $args >/dev/null 2>"$work/usage.err"
  rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q "^error: " "$work/usage.err"; then
    echo "FAIL nxrt serve $args: exit $rc (want 2), stderr: $(head -1 "$work/usage.err")"
    exit 1
  fi
done
# A folder the server cannot batch (an optimum export: rows aligned on one sequence axis) ends it: exit 1
# with the reason on stderr.
/usr/bin/python3 "$root/tools/make_genai_model.py" "$work/opt" --style optimum --size tiny --tokenizer bytelevel >/dev/null || exit 1
timeout 60 "$nxrt" serve "$work/opt" --port 0 >"$work/opt.out" 2>"$work/opt.err"
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q "does not keep rows at their own lengths" "$work/opt.err"; then
  echo "FAIL serve of an optimum folder: exit $rc, stderr: $(cat "$work/opt.err")"
  exit 1
fi
# Node resolves `openai` from the script's folder upwards: run a copy beside node_modules.
cp "$root/tests/serve/serve_test.mjs" "$npm_dir/"
node "$npm_dir/serve_test.mjs" "$nxrt" "$work/m"
