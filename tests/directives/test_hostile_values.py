"""Every directive case run again on null, empty and malformed values.

Each recipe of the case files (the ones that compile) runs on rows made from its
input schema: every column null; every text column empty (arrays empty, other
types null); every text column malformed text (a NUL, unbalanced brackets, a lone
``%``, non-ASCII, a bad escape). A recipe may stop such a run, but only with its
one-line `RecipeError` naming the line, as a deliberate check does: a Python
worker that crashes (a UDF raising on a value it did not expect) is a bug.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fll import RecipeError
from fll.directives import DEFAULT_REGISTRY, Outcome, Recipe, labels

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "directives"
_FILES = [FIXTURES / "cases.yaml", FIXTURES / "more_cases.yaml",
          *sorted(FIXTURES.glob("wrangler_cases*.yaml"))]
_SEEN: set[tuple[str, str]] = set()
CASES = []
for _path in _FILES:
    for _case in yaml.safe_load(_path.read_text()) or []:
        key = (_case["schema"], _case["recipe"])
        if "error" in _case or key in _SEEN:
            continue
        _SEEN.add(key)
        CASES.append(_case)

MALFORMED = "\x00{[<%zz\\q \u00e9\u20ac\ufffd \"'"
#: What a crashed or raising Python worker leaves in Spark's exception text.
WORKER_FAILURE = ("PythonException", "Python worker", "Traceback (most recent call last)")


def _variants(schema) -> dict[str, list]:
    def value(field, kind):
        name = field.dataType.typeName()
        if kind == "null":
            return None
        if name == "string":
            return "" if kind == "empty" else MALFORMED
        if name == "array" and kind == "empty":
            return []
        return None
    return {kind: [tuple(value(f, kind) for f in schema.fields)]
            for kind in ("null", "empty", "malformed")}


def _check(spark, case, kind: str, rows: list, registry=None) -> bool:
    """Run the recipe on ``rows``: True when it ran through, False when it stopped with
    its own one-line error; anything else fails the test."""
    df = spark.createDataFrame(rows, case["schema"])
    try:
        compiled = Recipe.parse(case["recipe"], registry).compile(df)
        compiled.dataframe.collect()
        if compiled.errors is not None:
            compiled.errors.collect()
    except RecipeError as err:
        cause = f"{err}\n{err.__cause__!r}\n{err.__cause__}" if err.__cause__ else str(err)
        crashed = [w for w in WORKER_FAILURE if w in cause]
        if crashed:
            pytest.fail(f"{kind} values crash a Python worker: {cause[:2000]}")
        assert "\n" not in str(err).strip(), f"{kind} values: not one line: {err}"
        return False
    except Exception as exc:   # noqa: BLE001 - anything but the recipe's error is a bug
        pytest.fail(f"{kind} values: {type(exc).__name__} instead of a RecipeError: "
                    f"{str(exc)[:2000]}")
    return True


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_null_empty_and_malformed_values_never_crash_a_worker(spark, case):
    schema = spark.createDataFrame([], case["schema"]).schema
    variants = _variants(schema)
    # one job for all three rows; when the recipe stops on one of them, the others
    # run alone so that no row goes unchecked
    if not _check(spark, case, "null, empty or malformed", sum(variants.values(), [])):
        for kind, rows in variants.items():
            _check(spark, case, kind, rows)


@pytest.mark.spark
def test_a_worker_crash_is_caught_not_taken_for_the_recipes_error(spark):
    """The check above can fail: a directive whose Python UDF raises on null is caught."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    registry = DEFAULT_REGISTRY.copy()
    length = F.udf(lambda text: len(text), IntegerType())   # raises on None

    def careless(step, df, args):
        return Outcome(df.withColumn("n", length(step.col(args.column))),
                       labels.read(args.column) + labels.add("n"))
    registry.register("careless-length <column:column>", careless)
    case = {"schema": "a string", "recipe": "careless-length a"}
    assert _check(spark, case, "text", [("x",)], registry)
    with pytest.raises(pytest.fail.Exception, match="crash a Python worker"):
        _check(spark, case, "null", [(None,)], registry)
