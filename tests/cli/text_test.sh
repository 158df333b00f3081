#!/usr/bin/env bash
# Text in, text out on a tiny model folder with a real byte-level BPE tokenizer
# (tools/make_genai_model.py --tokenizer bytelevel): `nxrt generate "text"` prints text whose re-encoding
# equals the generated ids, EOS / --ignore-eos / --stop behave, --chat renders the template `nxrt template`
# prints, `nxrt chat` reuses the KV cache across turns (turn 2 prefills only its new tokens, read from
# /stats), template sources and errors.
#   usage: text_test.sh path/to/nxrt path/to/nxrt_tokenize
set -uo pipefail
nxrt="$(realpath "${1:?usage: text_test.sh path/to/nxrt path/to/nxrt_tokenize}")"
tokenize="$(realpath "${2:?usage: text_test.sh path/to/nxrt path/to/nxrt_tokenize}")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
py=/usr/bin/python3
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
pass=0; fail=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
}
# field FILE.json KEY: the value (JSON text for non-strings); fails when absent, so checks never compare empties.
field() { $py -c "import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if not isinstance(v, str) else v, end='')" "$@"; }
export py
export -f field

m="$work/m"
$py "$root/tools/make_genai_model.py" "$m" --style genai --size tiny --tokenizer bytelevel >/dev/null
eos_ids=$($py -c "import json,sys; e=json.load(open(sys.argv[1]))['model']['eos_token_id']; print(json.dumps(e if isinstance(e, list) else [e]))" "$m/genai_config.json")

# ---- generate: text round trip
"$nxrt" generate "$m" "Hello, world. Say something!" --max-new-tokens 40 --ignore-eos --json >"$work/g.json" 2>"$work/g.err"
check "generate text --json exits 0" test $? -eq 0
$py - "$work/g.json" >"$work/g.text" <<'EOF'
import json, sys
sys.stdout.write(json.load(open(sys.argv[1]))["text"])
EOF
"$tokenize" encode "$m" - <"$work/g.text" >"$work/g.reencoded"
check "re-encoding the printed text gives the generated ids" bash -c \
  "test \"\$(tr -d ' \n' <'$work/g.reencoded')\" = \"\$($py -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[\"tokens\"]).replace(\" \", \"\"))' '$work/g.json')\""
check "prompt_tokens is the tokenized prompt's length" bash -c \
  "test \"\$(field '$work/g.json' prompt_tokens)\" = \"\$(printf '%s' 'Hello, world. Say something!' | '$tokenize' encode '$m' - | $py -c 'import json,sys; print(len(json.load(sys.stdin)))')\""
keys='["create_ms", "decode_step_ms_median", "decode_steps_ms", "decode_tok_s", "kv_capacity", "kv_update", "new_tokens", "opt", "prefill_ms", "prefill_tok_s", "prompt_tokens", "runtime", "share_buffer", "text", "threads", "tokens", "ttft_ms", "warmup"]'
check "--json keeps the generate keys and adds text" test "$($py -c "import json,sys; print(json.dumps(sorted(json.load(open(sys.argv[1])))))" "$work/g.json")" = "$keys"

"$nxrt" generate "$m" "Hello, world. Say something!" --max-new-tokens 40 --ignore-eos >"$work/g.out" 2>"$work/g.err"
check "streamed stdout is the text plus a newline" bash -c "cmp -s '$work/g.out' <(cat '$work/g.text'; echo)"
check "stderr has one summary line (prompt tokens, ttft, prefill and decode tok/s)" bash -c \
  "test \$(wc -l <'$work/g.err') -eq 1 && grep -Eq 'prompt_tokens [0-9]+ .*ttft [0-9.]+ ms  prefill [0-9.]+ tok/s  decode [0-9.]+ tok/s' '$work/g.err'"

# Several prompt texts: one left-padded batch; each reply is the one the prompt gets alone.
"$nxrt" generate "$m" "Hi" --max-new-tokens 12 --ignore-eos --json >"$work/one.json" 2>/dev/null
"$nxrt" generate "$m" "Hello, world. Say something!" "Hi" --max-new-tokens 12 --ignore-eos --json >"$work/two.json" 2>/dev/null
check "two prompt texts run as one batch; the padded row's reply equals the prompt alone" $py - "$work/one.json" "$work/two.json" <<'EOF'
import json, sys
one = json.load(open(sys.argv[1]))["text"]
two = json.load(open(sys.argv[2]))
sys.exit(0 if two["prompts"] == 2 and len(two["texts"]) == 2 and two["texts"][1] == one else 1)
EOF
"$nxrt" generate "$m" "Hello, world. Say something!" "Hi" --max-new-tokens 4 >"$work/two.out" 2>/dev/null
check "batch replies print as [i] lines" bash -c "grep -q '^\\[0\\] ' '$work/two.out' && grep -q '^\\[1\\] ' '$work/two.out'"

# EOS: the default run is the --ignore-eos run cut after its first EOS id.
"$nxrt" generate "$m" "Hello, world. Say something!" --max-new-tokens 40 --json >"$work/e.json" 2>/dev/null
check "EOS stops text generation (unless --ignore-eos)" $py - "$work/g.json" "$work/e.json" "$eos_ids" <<'EOF'
import json, sys
full = json.load(open(sys.argv[1]))["tokens"]
got = json.load(open(sys.argv[2]))["tokens"]
eos = set(json.loads(sys.argv[3]))
cut = next((i + 1 for i, t in enumerate(full) if t in eos), len(full))
sys.exit(0 if got == full[:cut] else 1)
EOF

# --stop: the text before the first occurrence of a piece of the full reply; the stop string is not printed.
stop=$($py -c "import sys; t=open(sys.argv[1]).read(); print(t[len(t)//2:len(t)//2+3], end='')" "$work/g.text")
"$nxrt" generate "$m" "Hello, world. Say something!" --max-new-tokens 40 --ignore-eos --stop "$stop" --json >"$work/s.json" 2>/dev/null
check "--stop ends before the stop string" $py - "$work/g.text" "$work/s.json" "$stop" <<'EOF'
import json, sys
full = open(sys.argv[1]).read()
got = json.load(open(sys.argv[2]))["text"]
sys.exit(0 if got == full[:full.find(sys.argv[3])] else 1)
EOF

# Prompt sources agree.
printf '%s' "Hello, world. Say something!" >"$work/prompt.txt"
"$nxrt" generate "$m" --prompt-file "$work/prompt.txt" --max-new-tokens 40 --ignore-eos --json >"$work/f.json" 2>/dev/null
"$nxrt" generate "$m" - --max-new-tokens 40 --ignore-eos --json <"$work/prompt.txt" >"$work/i.json" 2>/dev/null
check "--prompt-file and stdin give the same tokens as the argument" bash -c \
  "t=\$(field '$work/g.json' tokens) && test -n \"\$t\" && test \"\$(field '$work/f.json' tokens)\" = \"\$t\" && test \"\$(field '$work/i.json' tokens)\" = \"\$t\""

# --chat: the prompt is the chat template `nxrt template` renders.
cat >"$work/ctx.json" <<'EOF'
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}], "add_generation_prompt": true}
EOF
"$nxrt" template "$m" --context "$work/ctx.json" >"$work/rendered.txt"
check "nxrt template renders the folder's ChatML template" bash -c \
  "printf '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n' | cmp -s - '$work/rendered.txt'"
"$nxrt" generate "$m" "Hi there" --chat --system "Be brief." --max-new-tokens 4 --json >"$work/c.json" 2>/dev/null
check "--chat prompt_tokens = tokens of the rendered template" bash -c \
  "test \"\$(field '$work/c.json' prompt_tokens)\" = \"\$('$tokenize' encode '$m' - <'$work/rendered.txt' | $py -c 'import json,sys; print(len(json.load(sys.stdin)))')\""

# ---- nxrt chat: prefix reuse across turns, read from /stats.
printf 'Hello there\n/stats\nHow are you?\n/stats\n/system You are terse.\nThird turn\n/stats\n/reset\nAfter reset\n/stats\n/bogus\n/exit\nnever read\n' |
  "$nxrt" chat "$m" --max-new-tokens 6 >"$work/chat.out" 2>"$work/chat.err"
check "chat exits 0 on a piped session" test $? -eq 0
check "chat answers 4 turns, 4 summary lines on stderr" bash -c "test \$(grep -c '^prompt_tokens' '$work/chat.err') -eq 4"
check "turn 2 prefills only its new tokens (the rest comes from the KV cache)" $py - "$work/chat.out" <<'EOF'
import re, sys
stats = [dict(re.findall(r"(\w+) (\S+)", l)) for l in open(sys.argv[1]) if l.startswith("turns ")]
s1, s2, s3, s4 = stats
cache1 = int(s1["cache_tokens"])            # prompt 1 + reply 1 (its last token not yet run)
p2, f2 = int(s2["last_prompt_tokens"]), int(s2["last_prefilled"])
ok = f2 == p2 - cache1 + 1 and f2 < p2 and int(s2["last_reused"]) == cache1 - 1
# /system changes the very start of the prompt: turn 3 cannot reuse past the first differing token.
ok = ok and int(s3["last_prefilled"]) > int(s3["last_prompt_tokens"]) - int(s2["cache_tokens"])
# after /reset nothing is reused.
ok = ok and s4["last_prefilled"] == s4["last_prompt_tokens"] and s4["turns"] == "4"
sys.exit(0 if ok else 1)
EOF
check "chat: /system, /reset and unknown commands answer" bash -c \
  "grep -q '(system prompt set)' '$work/chat.out' && grep -q '(conversation reset)' '$work/chat.out' && grep -q 'unknown command /bogus' '$work/chat.out'"

# ---- template sources
mkdir -p "$work/t1" && cp "$m/tokenizer.json" "$m/genai_config.json" "$work/t1/"
ln "$m/model.onnx" "$work/t1/model.onnx" && ln "$m/model.onnx.data" "$work/t1/model.onnx.data"
$py -c "import json,sys; c=json.load(open(sys.argv[1])); del c['chat_template']; json.dump(c, open(sys.argv[2], 'w'))" \
  "$m/tokenizer_config.json" "$work/t1/tokenizer_config.json"
"$nxrt" generate "$work/t1" "hi" --chat 2>"$work/err"; rc=$?
check "no chat template: exit 1 naming the files looked at" bash -c \
  "test $rc -eq 1 && grep -q 'chat_template.jinja' '$work/err' && grep -q 'tokenizer_config.json' '$work/err'"
printf '{{ bos_token }}[jinja file]{%% for m in messages %%}{{ m.content }}{%% endfor %%}\n' >"$work/t1/chat_template.jinja"
check "chat_template.jinja is used (special tokens from tokenizer_config.json)" bash -c \
  "test \"\$('$nxrt' template '$work/t1' --context '$work/ctx.json')\" = '[jinja file]Be brief.Hi there'"
$py - "$m/tokenizer_config.json" "$work/t2" <<'EOF'
import json, os, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = [{"name": "default", "template": "default:{{ messages|length }}"},
                      {"name": "tool_use", "template": "tools:{{ tools|map(attribute='name')|join(',') }}"}]
os.makedirs(sys.argv[2], exist_ok=True)
json.dump(c, open(os.path.join(sys.argv[2], "tokenizer_config.json"), "w"))
EOF
echo '{"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "a"}, {"name": "b"}]}' >"$work/tools.json"
check "named templates: tool_use when tools are given, else default" bash -c \
  "test \"\$('$nxrt' template '$work/t2' --context '$work/tools.json')\" = 'tools:a,b' && test \"\$('$nxrt' template '$work/t2' --context '$work/ctx.json')\" = 'default:2'"
printf 'line one\n{%% if messages %%}\n  {{ messages[0].role ~ }}\n{%% endif %%}\n' >"$work/bad.jinja"
"$nxrt" template "$work/bad.jinja" --context "$work/ctx.json" >/dev/null 2>"$work/err"; rc=$?
check "template syntax error: exit 1 with file:line:column" bash -c "test $rc -eq 1 && grep -q 'bad.jinja:3:' '$work/err'"
printf '{{ raise_exception("no system role") }}' >"$work/raise.jinja"
"$nxrt" template "$work/raise.jinja" --context "$work/ctx.json" >/dev/null 2>"$work/err"; rc=$?
check "raise_exception: exit 1 with its message" bash -c "test $rc -eq 1 && grep -q 'no system role' '$work/err'"
printf '{%% for i in range(100000) %%}{%% for j in range(100000) %%}{%% endfor %%}{%% endfor %%}' >"$work/hang.jinja"
timeout 60 "$nxrt" template "$work/hang.jinja" --context "$work/ctx.json" >/dev/null 2>"$work/err"; rc=$?
check "a runaway loop stops with an error, not a hang" bash -c "test $rc -eq 1 && grep -q 'steps' '$work/err'"
"$nxrt" generate "$m" "x" --prompt-ids 1,2 2>/dev/null; rc=$?
check "text prompt with --prompt-ids is a usage error" test "$rc" -eq 2

echo "text cli: $pass passed, $fail failed"
test "$fail" -eq 0
