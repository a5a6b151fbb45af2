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

from fll.directives import Recipe
from fll.errors import RecipeError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "directives"
CASES = yaml.safe_load((FIXTURES / "more_cases.yaml").read_text())
ERRORS = yaml.safe_load((FIXTURES / "more_errors.yaml").read_text())


def _text(value):
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(value)
    return str(value)


def _label_text(step) -> str:
    return " ".join(f"{c}={k}" for c, k in step.labels.items())


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_directive_gives_the_rows_types_and_labels_wrangler_gives(spark, case):
    df = spark.createDataFrame(case["rows"], case["schema"])
    compiled = Recipe.parse(case["recipe"]).compile(df)
    out = compiled.dataframe

    assert list(out.columns) == case["columns"]
    actual = [[_text(v) for v in row] for row in out.collect()]
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
        Recipe.parse(case["recipe"]).compile(df).dataframe.collect()
    text = str(info.value)
    if case.get("when", "parse") in ("parse", "compile"):
        assert isinstance(info.value, RecipeError)
        assert "\n" not in text
    for word in case["says"]:
        assert word in text, f"{word!r} not in {text!r}"
