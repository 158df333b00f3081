#!/usr/bin/env bash
# Load test of `nxrt serve` (bench/serve_load.mjs): starts the server on a free loopback port over
# MODEL_DIR with --max-batch 64 and --no-prefix-reuse (every level sends the same prompts: cached
# prefixes would make the later levels' prefills one token long), runs the fixed request list at 1, 4, 16 and 64 concurrent streaming
# greedy clients with the official OpenAI npm client (installed into NPM_DIR by `npm ci`), prints the
# markdown table, stops the server. Bounded: the request list is fixed.
#   usage: bench/serve_load.sh path/to/nxrt MODEL_DIR NPM_DIR [REQUESTS=64] [MAX_TOKENS=32] [THREADS=2]
set -euo pipefail
nxrt="$(realpath "${1:?usage: serve_load.sh path/to/nxrt MODEL_DIR NPM_DIR}")"
model="${2:?model dir}"; npm_dir="${3:?npm dir}"
requests="${4:-64}"; max_tokens="${5:-32}"; threads="${6:-2}"
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$npm_dir"
if ! cmp -s "$root/tests/serve/package-lock.json" "$npm_dir/package-lock.json" || [ ! -d "$npm_dir/node_modules/openai" ]; then
  cp "$root/tests/serve/package.json" "$root/tests/serve/package-lock.json" "$npm_dir/"
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
cp "$root/bench/serve_load.mjs" "$npm_dir/"
log="$(mktemp)"
"$nxrt" serve "$model" --port 0 --max-batch 64 --max-queue 64 --ctx 256 --threads "$threads" --no-prefix-reuse 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's/.*listening on http:\/\/[0-9.]*:\([0-9]*\).*/\1/p' "$log")"
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
[ -n "$port" ] || { cat "$log"; exit 1; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores visible, --threads $threads)"
node "$npm_dir/serve_load.mjs" "http://127.0.0.1:$port" "$requests" "$max_tokens"
