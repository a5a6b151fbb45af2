"""The directives added beside the first built-ins, driven by fixture files.

more_cases.yaml: recipe, input rows, expected rows, column types and labels,
taken from Wrangler's documentation examples and tests.
more_errors.yaml: recipes Wrangler refuses (at parse time or when a row is bad)
and the words the one-line error must contain.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pyspark.sql import functions as F

from fll.directives import Recipe, quote
from fll.errors import RecipeError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "directives"
CASES = yaml.safe_load((FIXTURES / "more_cases.yaml").read_text())
ERRORS = yaml.safe_load((FIXTURES / "more_errors.yaml").read_text())


def _text(value):
    return None if value is None else str(value)


def _label_text(step) -> str:
    return " ".join(f"{c}={k}" for c, k in step.labels.items())


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_directive_gives_the_rows_types_and_labels_wrangler_gives(spark, case):
    df = spark.createDataFrame(case["rows"], case["schema"])
    compiled = Recipe.parse(case["recipe"]).compile(df)
    out = compiled.dataframe

    assert list(out.columns) == case["columns"]
    # Spark renders every value as text (timestamps in the session zone, UTC here)
    as_text = out.select([F.col(quote(c)).cast("string") for c in out.columns])
    actual = [list(row) for row in as_text.collect()]
    expected = [[_text(v) for v in row] for row in case["rows_out"]]
    assert actual == expected
    for column, type_name in case.get("types", {}).items():
        assert out.schema[column].dataType.simpleString() == type_name, column
    if "labels" in case:
        assert [_label_text(s) for s in compiled.steps] == case["labels"]


@pytest.mark.spark
@pytest.mark.parametrize("case", ERRORS, ids=[c["name"] for c in ERRORS])
def test_bad_recipe_or_value_fails_with_one_line_naming_the_directive(spark, case):
    df = spark.createDataFrame(case["rows"], case["schema"])
    with pytest.raises(Exception) as info:
        compiled = Recipe.parse(case["recipe"]).compile(df)
        compiled.dataframe.collect()
    error: BaseException = info.value
    if case.get("when", "parse") in ("parse", "compile"):
        assert isinstance(error, RecipeError)
    elif not isinstance(error, RecipeError):  # (parse-xml-to-json's sample job names it)
        error = compiled.run_error(error)      # a bad row stopped the job: the user's line
    assert isinstance(error, RecipeError) and error.line is not None
    text = str(error)
    assert "\n" not in text
    for word in case["says"]:
        assert word in text, f"{word!r} not in {text!r}"


BAD_ROWS = [
    ("parse-as-datetime :a 'yyyy-MM-dd'", "a string", [["2020-01-02"], ["02/01/2020"]],
     "not in expected format yyyy-MM-dd", 2),
    ("parse-as-simple-date :a 'MM/dd/yyyy'", "a string", [["01/02/2020"], ["2020-01-02"]],
     "Failed to parse '2020-01-02' with pattern 'MM/dd/yyyy' (ecode: 1, directive: "
     "parse-as-simple-date)", 1),
    ("parse-timestamp :a", "a string", [["1000"], ["12.5"]],
     "Must be of type 'Long' or 'String' representing long", 2),
]
BAD_ROWS += [
    ("parse-as-currency :a :b", "a string", [["$1.50"], ["1234.56"]],
     'Unparseable number: "1234.56" (ecode: 1, directive: parse-as-currency)', 1),
    ("parse-as-fixed-length :a 2,3", "a string", [["abcde"], ["abc"]],
     "Expected at least 5 characters but found 3", 2),
    ("parse-as-bytesize :a", "a string", [["1KB"], ["12 parsecs"]], "is not a byte size", 1),
    ("parse-as-timeduration :a", "a string", [["1s"], ["soon"]], "is not a time duration", 1),
    ("parse-as-json :a", "a string", [['{"x": 1}'], ['{"x": ']],
     "malformed JSON in column 'a': {\"x\":  (ecode: 1, directive: parse-as-json)", 1),
]


@pytest.mark.spark
@pytest.mark.parametrize("recipe,schema,rows,message,code", BAD_ROWS,
                         ids=[r[0].split()[0] for r in BAD_ROWS])
def test_a_value_wrangler_sends_to_the_error_collector_leaves_the_output(
        spark, recipe, schema, rows, message, code):
    df = spark.createDataFrame(rows, schema)
    compiled = Recipe.parse(recipe).compile(df)
    if getattr(compiled, "errors", None) is not None:   # the engine has an error output
        assert compiled.dataframe.count() == 1
        (err,) = compiled.errors.collect()
        assert err["a"] == rows[1][0] and message in err["errMsg"] and err["errCode"] == code
    else:                                               # no error output: the run stops
        with pytest.raises(Exception) as info:
            compiled.dataframe.collect()
        assert "line 1" in str(info.value) and message in str(info.value)


@pytest.mark.spark
def test_mask_shuffle_draws_the_same_random_characters_as_java(spark):
    from fll.directives.families.masking import mask_shuffle_value

    jvm_random = spark._jvm.java.util.Random(0)
    cons, vowels, digits = "bcdfghjklmnpqrstvwxz", "aeiouy", "0123456789"
    text = "Root-1234 abc"
    expected = []
    for ch in text:
        low = ch.lower()
        cls = next((c for c in (cons, vowels, digits) if low in c), None)
        if cls is None:
            expected.append(ch)
            continue
        pick = cls[jvm_random.nextInt(len(cls))]
        expected.append(pick.upper() if ch != low else pick)
    assert mask_shuffle_value(text) == "".join(expected)

    df = spark.createDataFrame([[text], [text]], "a string")
    compiled = Recipe.parse("mask-shuffle a").compile(df)
    rows = [r["a"] for r in compiled.dataframe.collect()]
    assert rows == ["".join(expected), "".join(expected)]
    assert [dict(s.labels) for s in compiled.steps] == [{"a": "MODIFY"}]
