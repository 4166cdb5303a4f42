// The interpreter on small templates, with the output Python's Jinja gives (as
// transformers configures it: trim_blocks, lstrip_blocks, its own tojson).
#include <gtest/gtest.h>

#include <ctime>
#include <optional>

#include "kvrt/jinja/template.h"

namespace kvrt::jinja {
namespace {

std::string render(const std::string& source, const Json& context = Json::object()) {
  auto tmpl = Template::parse(source);
  if (!tmpl.ok()) return "PARSE ERROR: " + tmpl.status().to_string();
  auto out = tmpl->render(context);
  if (!out.ok()) return "ERROR: " + out.status().to_string();
  return *out;
}

Status render_error(const std::string& source, const Json& context = Json::object()) {
  auto tmpl = Template::parse(source);
  if (!tmpl.ok()) return tmpl.status();
  auto out = tmpl->render(context);
  if (out.ok()) return internal_error("rendered: ", *out);
  return out.status();
}

TEST(JinjaTemplate, TextAndOutput) {
  EXPECT_EQ(render("Hello {{ name }}!", {{"name", "kvrt"}}), "Hello kvrt!");
}

TEST(JinjaTemplate, IfElifElse) {
  const std::string t = "{% if x > 2 %}big{% elif x == 2 %}two{% else %}small{% endif %}";
  EXPECT_EQ(render(t, {{"x", 3}}), "big");
  EXPECT_EQ(render(t, {{"x", 2}}), "two");
  EXPECT_EQ(render(t, {{"x", 1}}), "small");
}

TEST(JinjaTemplate, ForLoopVariables) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};"
                   "{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "1021TrueFalse2;2110FalseTrue2;");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}",
                   {{"xs", {1, 2, 3}}}),
            "-2|1-3|2-|");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}", {{"xs", {1, 2, 3}}}),
            "aba");
}

TEST(JinjaTemplate, ForElseFilterBreakContinue) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }},{% endfor %}"),
            "11,32,53,74,95,");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
                   {{"d", {{"b", 1}, {"a", 2}}}}),
            "b=1;a=2;");
}

TEST(JinjaTemplate, SetInsideLoopDoesNotLeakButNamespaceDoes) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(
      render("{% set ns = namespace(x=1, y='a') %}{% for i in [5, 6] %}{% set ns.x = ns.x + i %}"
             "{% endfor %}{{ ns.x }}{{ ns.y }}"),
      "12a");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}in {{ 1 + 1 }}{% endset %}[{{ block }}]"), "[in 2]");
}

TEST(JinjaTemplate, MacroAndCall) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('a') }} {{ greet('b', punct='?') }}"),
            "Hi a! Hi b?");
  EXPECT_EQ(render("{% macro wrap() %}<{{ caller() }}>{% endmacro %}"
                   "{% call wrap() %}body{% endcall %}"),
            "<body>");
  EXPECT_EQ(render("{% filter upper %}shout {{ 'it' }}{% endfilter %}"), "SHOUT IT");
}

TEST(JinjaTemplate, WhitespaceControlAsTransformersSetsIt) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before.
  EXPECT_EQ(render("{% if true %}\n    yes\n    {% endif %}\nafter"), "    yes\nafter");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a  {{- 'x' -}}  \n b"), "axb");
  EXPECT_EQ(render("line\n  {# comment #}\nnext"), "line\nnext");
  // Output tags are not lstripped, and one trailing newline of the template goes.
  EXPECT_EQ(render("  {{ 'v' }}\n"), "  v");
  EXPECT_EQ(render("x\n\n"), "x\n");
  EXPECT_EQ(render("  {%+ if true %}k{% endif %}"), "  k");
}

TEST(JinjaTemplate, ExpressionsFollowPython) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"),
            "3 -4 1 2 3.5 1024");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }}"),
            "7 9 a1None abab");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }} {{ 1.0 }} {{ 1e-5 }} {{ 1e16 }} {{ 10 / 4 }}"),
            "0.30000000000000004 1.0 1e-05 1e+16 2.5");
  EXPECT_EQ(render("{{ 'yes' if x else 'no' }}{{ 'a' if false }}|", {{"x", true}}), "yes|");
  EXPECT_EQ(render("{{ x or 'd' }} {{ x and 'y' }} {{ not x }}", {{"x", ""}}), "d  True");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }}"),
            "True False True True");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in d }} {{ 'z' not in d }}",
                   {{"d", {{"k", 1}}}}),
            "True True True True");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }} {{ {'k': 'v'} }} {{ \"it's\" }}"),
            "[1, 'a', None, True] {'k': 'v'} it's");
}

TEST(JinjaTemplate, SubscriptsAndSlices) {
  const Json ctx = {{"m", {"a", "b", "c", "d"}}, {"s", "héllo"}};
  EXPECT_EQ(
      render("{{ m[1:] }} {{ m[::-1] }} {{ m[-1] }} {{ m[1:3] }} {{ m[::2] }} {{ m[-2:] }}", ctx),
      "['b', 'c', 'd'] ['d', 'c', 'b', 'a'] d ['b', 'c'] ['a', 'c'] ['c', 'd']");
  EXPECT_EQ(render("{{ s[1] }} {{ s[1:3] }} {{ s[::-1] }} {{ s | length }}", ctx), "é él olléh 5");
  EXPECT_EQ(render("{{ m[10] is defined }} {{ m.0 }}", ctx), "False a");
}

TEST(JinjaTemplate, TestsOnValues) {
  const Json ctx = {{"s", "x"}, {"n", 1},          {"f", 1.5},    {"b", true},
                    {"l", {1}}, {"d", {{"k", 1}}}, {"z", nullptr}};
  EXPECT_EQ(render("{{ s is string }}{{ n is number }}{{ f is number }}{{ b is boolean }}"
                   "{{ l is sequence }}{{ d is mapping }}{{ z is none }}{{ q is undefined }}"
                   "{{ s is defined }}{{ l is iterable }}{{ b is true }}{{ b is false }}",
                   ctx),
            "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ n is not none }}"
                   "{{ d is string }}{{ s is mapping }}{{ 'a' is equalto 'a' }}",
                   ctx),
            "TrueFalseTrueTrueFalseFalseTrue");
}

TEST(JinjaTemplate, UndefinedBehavesLikeJinjasDefault) {
  EXPECT_EQ(render("[{{ missing }}]{{ missing | length }}{% for x in missing %}x{% endfor %}"
                   "{{ missing | default('d') }}{{ 'y' if not missing }}{{ d.nokey is defined }}",
                   {{"d", Json::object()}}),
            "[]0dyFalse");
  EXPECT_EQ(render("{{ none.attr is defined }}"), "False");
  const Status err = render_error("line one\n{{ missing.attr }}");
  EXPECT_EQ(err.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(err.message().find("line 2"), std::string::npos) << err.message();
  EXPECT_NE(err.message().find("'missing' is undefined"), std::string::npos) << err.message();
  EXPECT_FALSE(render_error("{{ missing + 1 }}").ok());
}

TEST(JinjaTemplate, StringFilters) {
  EXPECT_EQ(render("{{ '  a b  ' | trim }}|{{ 'hello world' | upper }}|{{ 'HeLLo' | lower }}|"
                   "{{ 'hello big-world' | title }}|{{ 'hELLO' | capitalize }}|"
                   "{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'one two  three' | wordcount }}"),
            "a b|HELLO WORLD|hello|Hello Big-World|Hello|bba|3");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"),
            "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ 'x' | safe }}{{ 3 | string }}{{ '42' | int + 1 }}{{ 'x' | int }}"
                   "{{ '2.5' | float }}{{ -3 | abs }}{{ 2.567 | round(2) }}{{ 2.5 | round }}"),
            "x34302.532.572.0");
}

TEST(JinjaTemplate, ListFilters) {
  const Json ctx = {{"xs", {3, 1, 2, 1}},
                    {"msgs",
                     {{{"role", "user"}, {"c", "a"}},
                      {{"role", "bot"}, {"c", "b"}},
                      {{"role", "user"}, {"c", "c"}}}}};
  EXPECT_EQ(render("{{ xs | first }}{{ xs | last }}{{ xs | length }}{{ xs | sort }}"
                   "{{ xs | unique | list }}{{ xs | reverse | list }}{{ xs | join('-') }}"
                   "{{ xs | sum }}{{ xs | max }}{{ xs | min }}",
                   ctx),
            "314[1, 1, 2, 3][3, 1, 2][1, 2, 1, 3]3-1-2-1731");
  EXPECT_EQ(render("{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }}"
                   "{{ msgs | rejectattr('role', 'equalto', 'user') | list | length }}"
                   "{{ xs | select('odd') | list }}{{ xs | reject('odd') | list }}"
                   "{{ ['a', 'B'] | map('upper') | list }}",
                   ctx),
            "ac1[3, 1, 1][2]['A', 'B']");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | items | list }}{{ {'b': 1, 'a': 2} | dictsort }}"),
            "[['b', 1], ['a', 2]][['a', 2], ['b', 1]]");
}

TEST(JinjaTemplate, TojsonMatchesTransformers) {
  const Json ctx = {{"t", Json::parse(R"({"name": "f", "n": 1, "x": 0.5, "ok": true,
                                          "none": null, "list": [1, "é"], "empty": {}})")}};
  EXPECT_EQ(render("{{ t | tojson }}", ctx),
            R"({"name": "f", "n": 1, "x": 0.5, "ok": true, "none": null, "list": [1, "é"], )"
            R"("empty": {}})");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': {}} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(render("{{ 'q\"\\\\\n\t\u0001' | tojson }}"), R"("q\"\\\n\t\u0001")");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
}

TEST(JinjaTemplate, StringAndDictMethods) {
  EXPECT_EQ(render("{{ s.startswith('<a') }}{{ s.endswith(('x', '>')) }}{{ s.strip('<>') }}"
                   "{{ '  p  '.lstrip() }}|{{ 'x\n\n'.rstrip('\n') }}|{{ 'a,b,,c'.split(',') }}"
                   "{{ ' a  b '.split() }}{{ s.replace('a', 'A') }}{{ 'ab'.upper() }}"
                   "{{ 'hello world'.title() }}{{ '-'.join(['x', 'y']) }}",
                   {{"s", "<abc>"}}),
            "TrueTrueabcp  |x|['a', 'b', '', 'c']['a', 'b']<Abc>ABHello Worldx-y");
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d.get('z') }}{{ d.keys() | list }}"
                   "{{ d.values() | list }}",
                   {{"d", {{"a", 1}}}}),
            "1noNone['a'][1]");
  EXPECT_EQ(
      render("{{ c.split('</think>')[-1].lstrip('\\n') }}", {{"c", "<think>r</think>\n\nanswer"}}),
      "answer");
}

TEST(JinjaTemplate, LiteralsAndBuiltins) {
  EXPECT_EQ(render("{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ dict(a=1) }}"
                   "{{ [1, [2, 3]][1][0] }}{{ {'k': {'n': 'v'}}['k'].n }}{{ 'ab' 'cd' }}"
                   "{{ '\\u00e9\\x41' }}"),
            "[0, 1, 2][1, 3, 5]{'a': 1}2vabcdéA");
  char year[8];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(year, sizeof(year), "%Y", &local);
  EXPECT_EQ(render("{{ strftime_now('%Y') }}"), year);
}

TEST(JinjaTemplate, RaiseExceptionReportsTheMessage) {
  const Status err = render_error("ok\n{{ raise_exception('Roles must alternate!') }}");
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(raised_message(err), std::optional<std::string>("Roles must alternate!"));
  EXPECT_EQ(raised_message(invalid_argument("other")), std::nullopt);
}

TEST(JinjaTemplate, UnsupportedConstructsNameThemselvesAndTheirLine) {
  Status err = render_error("a\n\n{% include 'x.jinja' %}");
  EXPECT_EQ(err.code(), ErrorCode::kNotSupported);
  EXPECT_NE(err.message().find("line 3"), std::string::npos) << err.message();
  EXPECT_NE(err.message().find("'include'"), std::string::npos) << err.message();
  err = render_error("a\n{{ x | frobnicate }}", {{"x", 1}});
  EXPECT_EQ(err.code(), ErrorCode::kNotSupported);
  EXPECT_NE(err.message().find("line 2"), std::string::npos) << err.message();
  EXPECT_NE(err.message().find("frobnicate"), std::string::npos) << err.message();
  err = render_error("{{ x is prime }}");
  EXPECT_EQ(err.code(), ErrorCode::kNotSupported);
  err = render_error("{% set l = [] %}{% set _ = l.append(1) %}");
  EXPECT_EQ(err.code(), ErrorCode::kNotSupported);
  EXPECT_NE(err.message().find("append"), std::string::npos) << err.message();
}

TEST(JinjaTemplate, MalformedTemplatesFailToParse) {
  for (const char* source : {"{% if x %}", "{{ x ", "{% for %}", "{{ (1 }}", "{% endif %}",
                             "{{ 'open }}", "{# never closed"}) {
    auto tmpl = Template::parse(source);
    EXPECT_FALSE(tmpl.ok()) << source;
    if (!tmpl.ok()) {
      EXPECT_EQ(tmpl.status().code(), ErrorCode::kInvalidArgument) << source;
      EXPECT_EQ(tmpl.status().message().rfind("line ", 0), 0u) << tmpl.status().message();
    }
  }
}

// Where @huggingface/jinja differs from Python's Jinja (docs/chat-templates.md), kvrt
// follows Python; these are the outputs Python's Jinja gives.
TEST(JinjaTemplate, DivergencesFromHuggingFaceJinjaFollowPython) {
  const Json parts = Json::parse(R"([{"type": "text", "text": "Hi"}])");
  const Status err = render_error("{{ 'user: ' + content }}", {{"content", parts}});
  EXPECT_NE(err.message().find("unsupported operand type(s) for +: 'str' and 'list'"),
            std::string::npos)
      << err.message();
  EXPECT_EQ(render("{{ content | trim }}", {{"content", parts}}),
            "[{'type': 'text', 'text': 'Hi'}]");
  EXPECT_EQ(render("[{{ '   Two   '.lstrip('\\n') }}]"), "[   Two   ]");
  EXPECT_EQ(render("{{ '\\n\\nx\\n'.lstrip('\\n') }}"), "x\n");
}

TEST(JinjaTemplate, OutputIsNeverPartial) {
  auto tmpl = Template::parse("lots of text {{ raise_exception('stop') }} more");
  ASSERT_TRUE(tmpl.ok());
  auto out = tmpl->render(Json::object());
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace kvrt::jinja

namespace kvrt::jinja {
namespace {

// Found by fuzz/template_fuzzer.cpp: an error quoting a key with a line break in it
// was two lines. Every kvrt error is one line: control characters are escaped.
TEST(JinjaTemplate, ErrorQuotingALineBreakIsOneLine) {
  const Status status =
      render_error("{{ 'a' + message['r \"me\\n<tole'] }}", {{"message", Json::object()}});
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << status.to_string();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("r \"me\\n<tole"), std::string::npos) << status.message();
  const Status parse = render_error("{{ 'a\nb' + }}");
  EXPECT_EQ(parse.message().find('\n'), std::string::npos) << parse.message();
}

}  // namespace
}  // namespace kvrt::jinja
