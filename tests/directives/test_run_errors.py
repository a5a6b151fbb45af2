"""Run-time checks: a literal message inside the job, the failing value named afterwards.

A value-carrying message would be generated into every row's code and, with enough
checks in one fused stage, push its method past what HotSpot compiles; so the job
raises a literal and `CompiledRecipe.run_error` finds the value with one small job.
"""
from __future__ import annotations

import re

import pytest

from fll import RecipeError
from fll.directives import Recipe
from fll.directives.frame import plain_frame

# every directive with a run-time check, each on its own column
GUARDED = """
cut-character :c :c2 1-2
url-encode :u
url-decode :v
split-url :w
decode hex :h
quantize :n :q 0:5=LOW
hash :s MD5 true
filter-row-if-matched :s 'zz.*'
parse-as-fixed-length :f 1,1
set-type :d decimal 1 'UNNECESSARY'
fail d < 0
"""
SCHEMA = "c string, u string, v string, w string, h string, n string, f string, s string, d string"
GOOD = ("ab", "a b", "a+b", "http://x.org/p?q=1", "6869", "1", "ab", "ab", "1.5")


def _raise_error_arguments(df) -> list[str]:
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    found = []
    for m in re.finditer(r"raise_error\(", plan):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(plan[i], 0)
            i += 1
        found.append(plan[m.end():i - 1])
    return found


@pytest.mark.spark
def test_no_check_inside_the_job_builds_its_message_from_the_row(spark):
    df = spark.createDataFrame([GOOD], SCHEMA)
    compiled = Recipe.parse(GUARDED).compile(df)
    args = _raise_error_arguments(compiled.dataframe)
    assert len(args) >= 10
    # a literal message is folded to one string constant: no concat, no column reference
    for arg in args:
        assert "concat(" not in arg and not re.search(r"#\d+", arg), arg
    assert [tuple(r) for r in compiled.dataframe.select("s", "q").collect()] == [
        ("187ef4436122d1cc2f40dc2b92f0eba0".rjust(64, "0"), "LOW")]


BAD = [  # column, bad value, words of the error the user is shown
    ("c", None, "line 2: cut-character: Column 'c' has null value"),
    ("v", "a%zzb", "line 4: url-decode: malformed url escape in a%zzb"),
    ("w", "x.org/p", "line 5: split-url: Malformed url 'x.org/p' found in column 'w'."),
    ("h", "6z69", "line 6: decode: Failed to decode hex value '6z69'. Illegal hexadecimal"),
    ("n", "ten", "line 7: quantize: Column 'n' has invalid type. It should be of type "
                 "'String', 'Float' or 'Double'. Found 'ten'."),
    ("d", "1.25", "line 11: set-type: rounding necessary (rounding mode UNNECESSARY): 1.25"),
    ("d", "-1", "line 12: fail: condition 'd < 0' is true for row {"),
]


@pytest.mark.spark
@pytest.mark.parametrize("column,value,says", BAD, ids=[b[2].split(":")[1] for b in BAD])
def test_a_failed_run_names_the_line_the_directive_and_the_value(spark, column, value, says):
    bad = tuple(value if c.split()[0] == column else g
                for c, g in zip(SCHEMA.split(", "), GOOD, strict=True))
    df = spark.createDataFrame([GOOD, bad], SCHEMA)
    compiled = Recipe.parse(GUARDED).compile(df)
    with pytest.raises(RecipeError) as stopped:       # collect() itself names the line
        compiled.dataframe.collect()
    assert "\u2983fll\u2984" in str(stopped.value.__cause__)   # one of the recipe's checks
    err = stopped.value
    assert compiled.run_error(stopped.value.__cause__).reason == err.reason
    assert says in str(err) and "\n" not in str(err)
    assert err.directive is not None and err.directive.split()[0] == says.split(": ")[1]


@pytest.mark.spark
def test_the_literal_message_stays_when_the_value_cannot_be_read_again(spark):
    # the row that failed is gone when run_error looks (a source that changed between
    # the run and the probe): the error still names line and directive, without a value
    df = spark.createDataFrame([("a%zz",)], "u string")
    compiled = Recipe.parse("url-decode :u").compile(df)
    with pytest.raises(Exception) as stopped:     # Spark's own failure, not yet worded
        plain_frame(compiled.dataframe).collect()
    compiled.probes = {line: tuple(p.__class__(p.reason, lambda: df.where("false").select("u"))
                                   for p in probes) for line, probes in compiled.probes.items()}
    err = compiled.run_error(stopped.value)
    assert str(err) == "line 1: url-decode: malformed url escape"
