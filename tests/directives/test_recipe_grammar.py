"""Wrangler's argument forms, read without Spark: escapes, rest-of-line values, exp:{…}
and prop:{…} blocks, sed expressions, type-directed optional arguments, Java regex."""
from __future__ import annotations

import pytest

from fll import RecipeError
from fll.directives import Recipe
from fll.directives.lexer import split_statements, unescape_text
from fll.directives.parser import check_regex, parse_sed


def _args(text: str):
    return Recipe.parse(text).steps[0].args


def _err(text: str) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        Recipe.parse(text)
    return info.value


@pytest.mark.parametrize("written,value", [
    (r"\t", "\t"), (r"\n", "\n"), (r"\r", "\r"), (r"\b", "\b"), (r"\f", "\f"),
    (r"\u000A", "\n"), (r"\u00e9", "é"), (r"\001", "\x01"), (r"\\", "\\"),
    (r"\'", "'"), (r'\"', '"'), (r"\d", r"\d"), ("plain", "plain")])
def test_text_arguments_decode_java_escapes(written, value):
    assert unescape_text(written) == value


@pytest.mark.parametrize("recipe,name,value", [
    ("fill-null-or-empty :c not available", "value", "not available"),
    ("fill-null-or-empty :c 'not available'", "value", "not available"),
    ("format-date :d MM/dd/yyyy HH:mm", "format", "MM/dd/yyyy HH:mm"),
    ("merge :a :b :c '\\u000A'", "delimiter", "\n"),
    ("parse-as-csv :body \\t", "delimiter", "\t"),
    ("split-to-rows :a [ ,]+ x", "regex", "[ ,]+ x"),
    ("fill-null-or-empty :c it's", "value", "it's"),
])
def test_an_argument_is_read_as_wrangler_reads_it(recipe, name, value):
    assert getattr(_args(recipe), name) == value


def test_exp_and_prop_blocks_are_single_arguments():
    a = _args('filter-row exp:{ a > 1 AND b = "}" } false')
    assert a.condition == 'a > 1 AND b = "}"' and a.remove_when is False
    a = _args("set-type :c decimal prop:{precision=10}")
    assert a.scale is None and a.rounding_mode is None and a.precision == {"precision": 10}
    a = _args("set-type :c decimal 2 'HALF_UP' prop:{precision=10}")
    assert (a.scale, a.rounding_mode, a.precision) == (2, "HALF_UP", {"precision": 10})
    a = _args("send-to-error exp:{age > 130} age_range 'too old'")
    assert (a.condition, a.metric, a.message) == ("age > 130", "age_range", "too old")


def test_blocks_and_comments_are_tokenized_with_their_positions():
    st = split_statements("// a comment\nuppercase :a ; filter-row exp:{x > 1} true # done")
    assert [(s.line, s.name) for s in st] == [(2, "uppercase"), (2, "filter-row")]
    assert st[1].tokens[0].kind == "exp" and st[1].tokens[0].column == 27


@pytest.mark.parametrize("text,pattern,replacement,global_,ignore_case", [
    ('s/"//g', '"', "", True, False),
    ("s/hello/world/I", "hello", "world", False, True),
    ("s/(a)(b)/\\2\\1/", "(a)(b)", "$2$1", False, False),
    ("s/x/[&]/g", "x", "[$0]", True, False),
    ("s/x/\\&/g", "x", "\\&", True, False),
    ("s|/usr/local|/opt|", "/usr/local", "/opt", False, False),
    ("s/\\/usr/\\/opt/g", "/usr", "/opt", True, False),
])
def test_sed_expressions(text, pattern, replacement, global_, ignore_case):
    sed = parse_sed(text)
    assert (sed.pattern, sed.replacement, sed.global_, sed.ignore_case) == (
        pattern, replacement, global_, ignore_case)


@pytest.mark.parametrize("text,reason", [
    ("s/a/b/q", "unknown sed flag"), ("s/a/b/2", "occurrence numbers"),
    ("x/a/b/", "starts with s"), ("s/a/b", "needs three"), ("s//b/", "empty"),
    ("s/(/b/", "bad regex")])
def test_bad_sed_expressions_say_why(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_sed(text)


@pytest.mark.parametrize("pattern", [
    r"(?<year>\d{4})", r"a(?i)b", r"\d++", r"(?>a|b)", r"\p{Alpha}+", r"[a-z&&[^e]]",
    r"\Qa.b\E", r"(?s).*"])
def test_java_only_regex_syntax_is_accepted_without_a_jvm(pattern):
    assert check_regex(pattern) is None


@pytest.mark.parametrize("pattern", ["(unclosed", "a{2,1}", "*a", "[z-a]"])
def test_invalid_regexes_are_refused(pattern):
    assert check_regex(pattern) is not None


@pytest.mark.parametrize("recipe,fragment", [
    ("set-type :a decimal 2 HALF_SIDEWAYS", "not a Java rounding mode"),
    ("set-type :a varchar", "unsupported type"),
    ("filter-rows-on sometimes :a", "must be one of"),
    ("filter-by-regex matched :a 'x'", "must be one of"),
    ("hash :a WHIRLPOOL", "not available here"),
    ("fill-null-or-empty :a ''", "cannot be empty"),
    ("send-to-error", "missing argument <condition>"),
    ("filter-row exp:{a > 1", "unterminated"),
    ("set-type :a decimal prop:{precision}", "key=value"),
    ("change-column-case 12", "is not a word"),
])
def test_recipes_wrangler_refuses_name_line_column_directive_and_usage(recipe, fragment):
    e = _err("uppercase :x\n" + recipe)
    assert fragment in str(e)
    assert e.line == 2 and e.column is not None and e.expected


@pytest.mark.spark
def test_the_jvm_checks_regexes_when_a_spark_session_is_active(spark):
    from fll.directives import parser

    parser._REGEX_CACHE.clear()
    assert parser._java_pattern_class() is not None
    assert check_regex(r"(?<name>x)\k<name>") is None
    reason = check_regex("(?<1x>a)")
    assert reason is not None and "group" in reason.lower()
