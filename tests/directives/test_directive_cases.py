"""Every directive on a real (shared) Spark session, driven by fixture files.

cases.yaml: recipe, input rows, expected rows, labels and incoming summary.
wrangler_cases*.yaml: Wrangler's documented and tested behaviour, the same way (labels and
incoming optional), the output's Spark types (types, optional), plus refused recipes
(error), recipes a bad value stops when they run (run_error) and error-output rows
(errors_out); one
file per group of directives, so a directive's cases sit together.
labels.txt: one line per case — input columns | recipe | labels per step.
Every case's field operations must say what its labels say (`assert_operations_agree`).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fll import EndPoint, RecipeError
from fll.directives import Recipe

from .test_labels_agree_with_lineage import assert_operations_agree

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "directives"
CASES = [case for path in [FIXTURES / "cases.yaml", *sorted(FIXTURES.glob("wrangler_cases*.yaml"))]
         for case in yaml.safe_load(path.read_text()) or []]
SRC, DST = EndPoint("ns", "src"), EndPoint("ns", "dst")


def _text(value):
    return None if value is None else str(value)


def _label_text(step) -> str:
    return " ".join(f"{c}={k}" for c, k in step.labels.items())


def _rows_match(actual: list[list], expected: list[list]) -> bool:
    def fits(a, e):
        return len(a) == len(e) and all(ev == "*" and av is not None or av == ev
                                        for av, ev in zip(a, e, strict=True))
    remaining = list(actual)
    for e in expected:
        hit = next((a for a in remaining if fits(a, e)), None)
        if hit is None:
            return False
        remaining.remove(hit)
    return not remaining


@pytest.mark.spark
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_directive_case_gives_the_expected_rows_labels_and_lineage(spark, case):
    df = spark.createDataFrame(case["rows"], case["schema"])
    if "error" in case:
        with pytest.raises(RecipeError) as info:
            Recipe.parse(case["recipe"]).compile(df)
        assert case["error"] in str(info.value)
        assert info.value.line is not None and info.value.expected
        return
    compiled = Recipe.parse(case["recipe"]).compile(df)
    if "run_error" in case:     # the recipe compiles; a bad value stops the run
        # every action on the recipe's frame raises the one line a user is shown
        for action in (lambda d: d.collect(),
                       lambda d: d.write.format("noop").mode("overwrite").save()):
            with pytest.raises(RecipeError) as stopped:
                action(compiled.dataframe)
            err = stopped.value
            assert case["run_error"] in str(err) and err.line is not None, str(err)
            assert compiled.run_error(err) is err
        return

    assert list(compiled.dataframe.columns) == case["columns"]
    if "types" in case:
        assert [f.dataType.simpleString() for f in compiled.dataframe.schema] == case["types"]
    actual = [[_text(v) for v in row] for row in compiled.dataframe.collect()]
    expected = [[_text(v) for v in row] for row in case["rows_out"]]
    assert _rows_match(actual, expected), f"rows {actual} != {expected}"

    if "errors_out" in case:
        assert compiled.errors is not None
        got = [[_text(v) for v in row] for row in compiled.errors.collect()]
        want = [[_text(v) for v in row] for row in case["errors_out"]]
        assert _rows_match(got, want), f"error rows {got} != {want}"
    else:   # a parser that may send rows to error has an output that stays empty
        assert compiled.errors is None or compiled.errors.count() == 0

    if "labels" in case:
        assert [_label_text(s) for s in compiled.steps] == case["labels"]
    assert_operations_agree(compiled)      # labels and operations agree, for every case
    if "incoming" not in case:
        return
    incoming = compiled.to_lineage(SRC, DST).incoming_summary()
    got = {f.field: sorted(s.field for s in srcs) for f, srcs in incoming.items() if srcs}
    want = {k: sorted(v) for k, v in case["incoming"].items()}
    assert got == want


def _label_lines():
    for n, line in enumerate((FIXTURES / "labels.txt").read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        columns, recipe, labels = (p.strip() for p in line.split(" | "))
        yield pytest.param(columns.split(","), recipe, [x.strip() for x in labels.split(";")],
                           id=f"line{n}:{recipe[:40]}")


@pytest.mark.spark
@pytest.mark.parametrize("columns,recipe,labels", list(_label_lines()))
def test_recipe_labels_each_step_as_the_fixture_says(spark, columns, recipe, labels):
    df = spark.createDataFrame([tuple("v" for _ in columns)], ", ".join(
        f"`{c}` string" for c in columns))
    steps = Recipe.parse(recipe).labels(df)
    assert [_label_text(s) or "-" for s in steps] == labels
