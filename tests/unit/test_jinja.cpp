// Unit tests of the Jinja2 chat-template engine (src/genai/jinja). Byte-for-byte agreement with
// @huggingface/jinja on real chat templates is checked by scripts/check_templates.sh; these pin the
// semantics, the error positions and the resource bounds.
#include <gtest/gtest.h>

#include <string>

#include "genai/jinja/jinja.h"
#include "genai/json.h"
#include "genai/unicode.h"

using nxrt::genai::Json;
using nxrt::genai::parse_json;
using nxrt::genai::jinja::Limits;
using nxrt::genai::jinja::Template;

namespace {

Json ctx(const std::string& json) {
  auto j = parse_json(json);
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? j.value() : Json::object();
}

std::string render(const std::string& tmpl, const std::string& context = "{}", const Limits& limits = {}) {
  auto t = Template::parse(tmpl, "t");
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->render(ctx(context), limits);
  if (!r.ok()) return "RENDER ERROR: " + r.status().message();
  return r.value();
}

std::string error_of(const std::string& tmpl, const std::string& context = "{}", const Limits& limits = {}) {
  auto t = Template::parse(tmpl, "t");
  if (!t.ok()) return t.status().message();
  auto r = t->render(ctx(context), limits);
  return r.ok() ? "no error, rendered: " + r.value() : r.status().message();
}

}  // namespace

TEST(Jinja, TextExpressionsAndComments) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("a{# comment #}b"), "ab");
  EXPECT_EQ(render("{{ 'x' }}{{ name }}!", R"({"name": "World"})"), "xWorld!");
  EXPECT_EQ(render("{{ missing }}|{{ none }}|{{ true }}|{{ 3 }}|{{ 2.0 }}|{{ 0.5 }}"), "||true|3|2.0|0.5");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }}|{{ {'k': 1} }}"), "[1, \"a\", null, true]|{\"k\": 1}");
  // One trailing newline of the template is dropped (keep_trailing_newline=False).
  EXPECT_EQ(render("line\n"), "line");
  EXPECT_EQ(render("line\n\n"), "line\n");
}

TEST(Jinja, WhitespaceControlTrimAndLstripBlocks) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it goes.
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render("a\n    {% if true %}b{% endif %}"), "a\nb");
  // Expression tags keep surrounding whitespace unless '-' asks.
  EXPECT_EQ(render("a  {{ 'b' }}  c"), "a  b  c");
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a \n {%- if true -%} \n b {%- endif %}"), "ab");
  EXPECT_EQ(render("x {#- note -#} y"), "xy");
  // {% generation %} markers are removed.
  EXPECT_EQ(render("A{% generation %}B{% endgeneration %}C"), "ABC");
}

TEST(Jinja, ControlFlow) {
  EXPECT_EQ(render("{% if x > 1 %}big{% elif x == 1 %}one{% else %}small{% endif %}", R"({"x": 1})"), "one");
  EXPECT_EQ(render("{% for i in items %}{{ loop.index }}{{ i }}{% if not loop.last %},{% endif %}{% endfor %}",
                   R"({"items": ["a", "b", "c"]})"),
            "1a,2b,3c");
  EXPECT_EQ(render("{% for i in items %}{{ loop.index0 }}{{ loop.first }}{{ loop.length }} {% endfor %}",
                   R"({"items": [5, 6]})"),
            "0true2 1false2 ");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(6) if i is odd %}{{ i }}{% endfor %}"), "135");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "023");
  EXPECT_EQ(render("{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"a": 1, "b": 2}})"), "a=1;b=2;");
  EXPECT_EQ(render("{% for m in msgs[::-1] %}{{ m }}{% endfor %}", R"({"msgs": [1, 2, 3]})"), "321");
  // Loop-body assignments stay in the loop; namespace attributes carry out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"), "4");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set s %}in{{ 1 + 1 }}{% endset %}[{{ s }}]"), "[in2]");
}

TEST(Jinja, MacrosAndCallBlocks) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(name='Cy') }}"),
            "Hi Ann! Hi Bo? Hi Cy!");
  EXPECT_EQ(render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inner{% endcall %}"), "[inner]");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}"),
            "<1><2>");
  EXPECT_EQ(render("{% macro f() %}{{ varargs | length }}{{ kwargs.k }}{% endmacro %}{{ f(1, 2, k='z') }}"), "2z");
  EXPECT_NE(error_of("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}").find("takes at most 1"), std::string::npos);
}

TEST(Jinja, OperatorsAndTests) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 3 }} {{ 7 / 2 }} {{ -(3) }}"), "7 3 1 8 3.5 -3");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ 2.0 }}|{{ 'n' + 2 }}|{{ [1] + [2] }}"), "a12|n2|[1, 2]");
  EXPECT_EQ(render("{{ 2 in [1, 2] }} {{ 'b' in 'abc' }} {{ 'k' in {'k': 1} }} {{ 3 not in [3] }}"), "true true true false");
  EXPECT_EQ(render("{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ s is string }} {{ d is mapping }} "
                   "{{ l is iterable }} {{ 1.5 is number }} {{ t is true }} {{ f is false }} {{ 3 is odd }}",
                   R"({"x": 0, "n": null, "s": "", "d": {}, "l": [], "t": true, "f": false})"),
            "true true true true true true true true true true");
  EXPECT_EQ(render("{{ x is not none }} {{ 6 is divisibleby 3 }} {{ 2 is in [1, 2] }} {{ 'a' is equalto('a') }}",
                   R"({"x": null})"),
            "false true true true");
  EXPECT_EQ(render("{{ 'y' if c else 'n' }}{{ 'only' if c }}", R"({"c": false})"), "n");
  EXPECT_EQ(render("{{ a and b }}|{{ a or b }}|{{ not a }}", R"({"a": "", "b": "B"})"), "|B|true");
  EXPECT_EQ(render("{{ x == none }}{{ 1 == 1.0 }}{{ 'a' != 'a' }}", R"({"x": null})"), "truetruefalse");
}

TEST(Jinja, MemberAccessAndSlicing) {
  const std::string c = R"({"m": {"role": "user", "list": [10, 20, 30]}, "s": "héllo"})";
  EXPECT_EQ(render("{{ m.role }} {{ m['role'] }} {{ m.list[-1] }} {{ m.list.1 }} {{ m.nope }}|{{ m.nope.deeper }}", c),
            "user user 30 20 |");
  EXPECT_EQ(render("{{ m.list[1:] }} {{ m.list[:1] }} {{ m.list[::2] }} {{ s[1] }} {{ s[1:3] }} {{ s[::-1] }}", c),
            "[20, 30] [10] [10, 30] é él olléh");
  EXPECT_EQ(render("{{ m.get('role') }} {{ m.get('x', 'dflt') }} {{ m.keys() | join(',') }} {{ s.length }}", c),
            "user dflt role,list 5");
}

TEST(Jinja, Filters) {
  const std::string c = R"({"xs": [3, 1, 2], "ms": [{"r": "a", "v": 1}, {"r": "b"}, {"r": "a", "v": 3}], "s": "  Hi There  "})";
  EXPECT_EQ(render("{{ s | trim }}|{{ s | length }}|{{ s | upper }}|{{ s | lower }}|{{ 'ab cd' | title }}|{{ 'ab' | capitalize }}", c),
            "Hi There|12|  HI THERE  |  hi there  |Ab Cd|Ab");
  EXPECT_EQ(render("{{ xs | join('-') }} {{ xs | first }} {{ xs | last }} {{ xs | sort | join }} {{ xs | reverse | list }}", c),
            "3-1-2 3 2 123 [2, 1, 3]");
  EXPECT_EQ(render("{{ ms | selectattr('r', 'equalto', 'a') | map(attribute='v') | join(',') }}", c), "1,3");
  EXPECT_EQ(render("{{ ms | rejectattr('v') | map(attribute='r') | join }}", c), "b");
  EXPECT_EQ(render("{{ ms | map(attribute='v', default=0) | join }}", c), "103");
  EXPECT_EQ(render("{{ none | default('d') }}{{ undefined_x | default('u') }}{{ '' | default('e', true) }}"), "ue");
  EXPECT_EQ(render("{{ '12' | int + 1 }} {{ 'x' | int }} {{ 2.7 | int }} {{ 3 | string }}{{ 'a,b' | replace(',', ';') }}"),
            "13 0 2 3a;b");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ [1, 1, 2] | unique | list }} {{ {'b': 1, 'a': 2} | dictsort }}"), "[1, 2] [[\"a\", 2], [\"b\", 1]]");
}

TEST(Jinja, ToJsonFollowsTransformers) {
  const std::string c = R"({"t": {"name": "f", "args": {"b": 1, "a": [true, null, 1.5, "é\n\"q\""]}}})";
  EXPECT_EQ(render("{{ t | tojson }}", c), R"({"name": "f", "args": {"b": 1, "a": [true, null, 1.5, "é\n\"q\""]}})");
  EXPECT_EQ(render("{{ t.args | tojson(indent=2) }}", c),
            "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null,\n    1.5,\n    \"é\\n\\\"q\\\"\"\n  ]\n}");
  EXPECT_EQ(render("{{ t.args | tojson(sort_keys=true, separators=(',', ':')) }}", c), R"({"a":[true,null,1.5,"é\n\"q\""],"b":1})");
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
  EXPECT_EQ(render("{{ x | tojson }}"), "null");
}

TEST(Jinja, StringMethods) {
  EXPECT_EQ(render("{{ ' a '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\n\n a\n'.lstrip('\n') }}|{{ 'ab\n\n'.rstrip('\n') }}"),
            "a|a| a\n|ab");
  EXPECT_EQ(render("{{ 'a</think>b'.split('</think>')[-1] }}|{{ 'a b  c'.split() | length }}|{{ 'a,b,c'.split(',', 1) }}"),
            "b|3|[\"a\", \"b,c\"]");
  EXPECT_EQ(render("{{ 'tool_x'.startswith('tool') }}{{ 'a.txt'.endswith(('.md', '.txt')) }}{{ 'aaa'.replace('a', 'b', 2) }}"),
            "truetruebba");
  if (nxrt::genai::tokenizer_libs_available()) {  // non-ASCII case mapping needs ICU (CaseMappingFollowsTheBuildOption)
    EXPECT_EQ(render("{{ 'straße'.upper() }}|{{ 'ÀÉ'.lower() }}"), "STRASSE|àé");
  }
}

TEST(Jinja, GlobalsRaiseExceptionAndStrftime) {
  EXPECT_EQ(error_of("{{ raise_exception('Roles must alternate') }}"), "t:1:4: raise_exception: Roles must alternate");
  const std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
  EXPECT_EQ(render("{{ strftime_now('%%') }}"), "%");
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 7, 2) | join }}"), "[0, 1, 2] 135");
  // Steps near the int64 range end the sequence instead of overflowing.
  EXPECT_EQ(render("{{ range(9223372036854775806, 9223372036854775807, 2) | list }}"), "[9223372036854775806]");
  EXPECT_EQ(render("{{ [1, 2, 3][1::9223372036854775807] }}|{{ 'abc'[-1::-9223372036854775807] }}"), "[2]|c");
}

TEST(Jinja, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("ok\n{{ 1 + }}"), "t:2:8: expected an expression (found '}}')");
  EXPECT_NE(error_of("{% if x %}\nunclosed").find("t:1:1: 'if' is not closed"), std::string::npos);
  EXPECT_NE(error_of("a\n  {% frobnicate %}").find("t:2:6: unknown statement 'frobnicate'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("t:1:4: string literal is not closed"), std::string::npos);
  EXPECT_NE(error_of("{# never closed").find("t:1:1: comment"), std::string::npos);
  EXPECT_NE(error_of("{{ a ? b }}").find("t:1:6: unexpected character '?'"), std::string::npos);
  EXPECT_NE(error_of("x\n\n   {{ 'é' + é }}").find("t:3:13: unexpected character 'é'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' \\ }}").find("t:1:8"), std::string::npos);
}

TEST(Jinja, RenderErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("line1\n{{ 1 + none }}"), "t:2:6: '+' on a none value ('none')");
  EXPECT_EQ(error_of("{{ x < 'a' }}", R"({"x": [1]})"), "t:1:6: operator '<' is not defined between list and string");
  EXPECT_EQ(error_of("{{ 5 | upper }}"), "t:1:8: filter 'upper' cannot be applied to a integer");
  EXPECT_EQ(error_of("{{ 1 is frob }}"), "t:1:6: unknown test 'frob'");
  EXPECT_EQ(error_of("{{ f() }}"), "t:1:4: cannot call a undefined (not a function)");
  EXPECT_EQ(error_of("{% for x in 3 %}{% endfor %}"), "t:1:13: cannot loop over a integer");
}

TEST(Jinja, UntrustedTemplatesAreBounded) {
  Limits small;
  small.max_steps = 100000;
  EXPECT_NE(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "{}", small)
                .find("steps"),
            std::string::npos);
  // Doubling a string runs into the size limit, not out of memory.
  Limits bytes;
  bytes.max_output_bytes = 1 << 20;
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "{}",
                     bytes)
                .find("limit"),
            std::string::npos);
  EXPECT_NE(error_of("{{ range(100000000) | length }}").find("exceeds the limit"), std::string::npos);
  // Unbounded recursion through a macro.
  EXPECT_NE(error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}").find("recursion deeper"), std::string::npos);
  // Deep nesting in the source is a parse error, not a stack overflow.
  std::string deep(5000, '(');
  EXPECT_NE(error_of("{{ " + deep + "1" + std::string(5000, ')') + " }}").find("nests deeper"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_NE(error_of(ifs).find("nests deeper"), std::string::npos);
  EXPECT_NE(error_of("{% break %}").find("outside a loop"), std::string::npos);
  // Long operator and member chains nest the tree too: bounded at parse time, fine below the bound.
  std::string sum = "1", members = "x";
  for (int i = 1; i < 200; ++i) sum += " + 1";
  EXPECT_EQ(render("{{ " + sum + " }}"), "200");
  for (int i = 1; i < 5000; ++i) members += ".a";
  EXPECT_NE(error_of("{{ " + members + " }}").find("nests deeper"), std::string::npos);
  std::string elifs = "{% if false %}";
  for (int i = 0; i < 5000; ++i) elifs += "{% elif false %}";
  EXPECT_NE(error_of(elifs + "{% endif %}").find("nests deeper"), std::string::npos);
  // Values built in a loop cannot nest without bound (their destruction would recurse as deep).
  EXPECT_NE(error_of("{% set x = [] %}{% for i in range(5000) %}{% set x = [x] %}{% endfor %}").find("nests deeper"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}")
                .find("nests deeper"),
            std::string::npos);
  // A namespace that refers to itself renders, and is released afterwards (LeakSanitizer checks).
  EXPECT_EQ(render("{% set ns = namespace(n=1) %}{% set ns.me = ns %}{{ ns.me.me.n }}"), "1");
}

// Case mapping of non-ASCII text needs ICU (NXRT_WITH_TOKENIZER_LIBS); ASCII never does.
TEST(Jinja, CaseMappingFollowsTheBuildOption) {
  EXPECT_EQ(render("{{ 'abc'.upper() }}|{{ 'ABC' | lower }}|{{ 'ab cd' | title }}|{{ 'ab' is lower }}"), "ABC|abc|Ab Cd|true");
  if (nxrt::genai::tokenizer_libs_available()) {
    EXPECT_EQ(render("{{ '\u00e9t\u00e9'.upper() }}|{{ '\u00c9' | lower }}|{{ '\u00e9a' | capitalize }}"),
              "\u00c9T\u00c9|\u00e9|\u00c9a");
  } else {
    EXPECT_EQ(error_of("{{ '\u00e9t\u00e9'.upper() }}"),
              "t:1:9: upper-case mapping of non-ASCII text needs ICU: nxrt was built without PCRE2/ICU "
              "(NXRT_WITH_TOKENIZER_LIBS=OFF)");
  }
}
