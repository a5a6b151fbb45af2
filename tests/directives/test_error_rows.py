"""Rows sent to the error output: the recipe's `errors` frame, the pipeline's `errors`
port of a wrangler stage with its lineage, and `fail` stopping the run with its line."""
from __future__ import annotations

import csv
import glob
import os
import re

import pytest

from fll import RecipeError
from fll.directives import Recipe
from fll.errors import PipelineError
from fll.model import EndPointField
from fll.pipeline.runner import label, run_pipeline
from fll.pipeline.spec import SpecError, parse_spec

pytestmark = pytest.mark.spark


def _people(tmp_path) -> str:
    path = tmp_path / "people.csv"
    path.write_text("id,name,age\n1,ann,7\n2,,30\n3,bob,200\n4,cy,40\n", encoding="utf-8")
    return str(path)


def _rows(directory) -> list[dict]:
    out: list[dict] = []
    for path in sorted(glob.glob(os.path.join(directory, "*.csv"))):
        with open(path, encoding="utf-8", newline="") as fh:
            out.extend(csv.DictReader(fh))
    return out


def _spec(tmp_path, recipe: list[str], port: bool = True, **wrangler: object) -> dict:
    conns: list = [["people", "wrangle"], ["wrangle", "good"]]
    stages = [
        {"name": "people", "plugin": "csv-source", "properties": {"path": _people(tmp_path)}},
        {"name": "wrangle", "plugin": "wrangler", "properties": {"recipe": recipe, **wrangler}},
        {"name": "good", "plugin": "csv-sink", "properties": {"path": str(tmp_path / "good")}},
    ]
    if port:
        stages.append({"name": "bad", "plugin": "csv-sink",
                       "properties": {"path": str(tmp_path / "bad")}})
        conns.append({"from": "wrangle", "to": "bad", "port": "errors"})
    return {"name": "errors", "stages": stages, "connections": conns}


RECIPE = ["set-column age cast(age as int)",
          "send-to-error name IS NULL",
          "send-to-error exp:{age > 130} range 'age over 130'",
          "uppercase name"]


def ef(dataset: str, field: str) -> tuple[str, str]:
    """A field as a person names it: the file's referenceName and the field."""
    return dataset, field


def named(fields: frozenset[EndPointField]) -> set[tuple[str, str]]:
    return {(label(f.endpoint), f.field) for f in fields}


def test_the_errors_port_takes_the_sent_rows_to_its_sink(spark, tmp_path):
    result = run_pipeline(_spec(tmp_path, RECIPE), spark=spark, echo=None, record=False)
    assert result.rows_written == {"good": 2, "bad": 2}
    assert sorted(r["name"] for r in _rows(tmp_path / "good")) == ["ANN", "CY"]
    bad = sorted(_rows(tmp_path / "bad"), key=lambda r: r["id"])
    assert [(r["id"], r["errMsg"], r["errCode"], r["errStage"]) for r in bad] == [
        ("2", "name IS NULL (ecode: 1, directive: send-to-error)", "1", "wrangle"),
        ("3", "age over 130 (ecode: 1, directive: send-to-error)", "1", "wrangle")]
    # sent before uppercase: the error rows keep the name as it was at that line
    assert bad[1]["name"] == "bob"


def test_the_errors_port_lineage_is_recorded_like_any_output(spark, tmp_path):
    # the values' own inputs, without the columns that only chose the rows
    spec = _spec(tmp_path, RECIPE, indirectDependencies=False)
    result = run_pipeline(spec, spark=spark, echo=None, record=False)
    assert named(result.incoming("bad", "name")) == {ef("people", "name")}
    assert named(result.incoming("bad", "age")) == {ef("people", "age")}
    assert named(result.incoming("bad", "errMsg")) == {ef("people", "name"), ef("people", "age")}
    assert named(result.incoming("good", "name")) == {ef("people", "name")}


def test_the_columns_that_chose_the_error_rows_are_their_indirect_inputs_by_default(
        spark, tmp_path):
    result = run_pipeline(_spec(tmp_path, RECIPE), spark=spark, echo=None, record=False)
    assert named(result.incoming("bad", "age")) == {ef("people", "age"), ef("people", "name")}
    assert named(result.incoming("good", "id")) == {
        ef("people", "id"), ef("people", "name"), ef("people", "age")}


def test_an_errors_port_needs_a_recipe_that_sends_rows():
    spec = {"name": "e", "stages": [
        {"name": "src", "plugin": "csv-source", "properties": {"path": "x.csv"}},
        {"name": "w", "plugin": "wrangler", "properties": {"recipe": "uppercase :a"}},
        {"name": "out", "plugin": "csv-sink", "properties": {"path": "o"}},
        {"name": "err", "plugin": "csv-sink", "properties": {"path": "e"}}],
        "connections": [["src", "w"], ["w", "out"], {"from": "w", "to": "err", "port": "errors"}]}
    with pytest.raises(SpecError, match="no send-to-error line"):
        parse_spec(spec)
    spec["connections"][2]["port"] = "rejects"
    with pytest.raises(SpecError, match="unknown port 'rejects'"):
        parse_spec(spec)
    spec["connections"][2] = {"from": "src", "to": "err", "port": "errors"}
    with pytest.raises(SpecError, match="has no 'errors' port"):
        parse_spec(spec)


def test_text_that_is_not_json_goes_to_the_errors_port_not_into_null_columns(spark, tmp_path):
    spec = _spec(tmp_path, ["set-column name case when id = '4' then '{\"a\": 1}' else name end",
                            "parse-as-json name"])
    parse_spec(spec)   # a parser that sends rows to error is enough for an errors port
    run_pipeline(spec, spark=spark, echo=None, record=False)
    assert [(r["id"], r["name_a"]) for r in _rows(tmp_path / "good")] == [("4", "1")]
    bad = _rows(tmp_path / "bad")
    assert sorted(r["id"] for r in bad) == ["1", "3"]     # id 2 has no name: dropped
    assert all(r["errMsg"].startswith("malformed JSON in column 'name'")
               and r["errMsg"].endswith(" (ecode: 1, directive: parse-as-json)")
               and r["errCode"] == "1" and r["errStage"] == "wrangle" for r in bad)


def test_fail_stops_the_pipeline_naming_the_line_and_the_row(spark, tmp_path):
    spec = _spec(tmp_path, ["uppercase name", "fail cast(age as int) > 100"], port=False)
    with pytest.raises(PipelineError) as info:
        run_pipeline(spec, spark=spark, echo=None, record=False)
    text = str(info.value)
    assert "stage 'wrangle', recipe line 2: fail: condition" in text
    # the whole row, though the check in the job carries only the condition's column
    assert '"id":"3"' in text and '"name":"BOB"' in text and '"age":"200"' in text
    assert "\n" not in text and "at org.apache" not in text
    assert not glob.glob(str(tmp_path / "good" / "*.csv"))


def test_a_failing_expression_names_its_recipe_line(spark):
    df = spark.createDataFrame([("1",), ("x",)], "a string")
    # text * 1 is JEXL's type mismatch ("x" + 1 would be "x1": JEXL concatenates)
    compiled = Recipe.parse("uppercase a\nset-column n a * 1").compile(df)
    with pytest.raises(Exception) as info:
        compiled.dataframe.collect()
    err = compiled.run_error(info.value)
    assert isinstance(err, RecipeError)
    assert err.line == 2 and err.directive == "set-column n a * 1"
    assert "'X'" in str(err) and "\n" not in str(err) and "SQLSTATE" not in str(err)


def test_set_type_bytes_gives_utf8_text_and_big_endian_integers(spark):
    df = spark.createDataFrame([(-1, "é", 258)], "i int, s string, l long")
    row = Recipe.parse("set-type i bytes; set-type s bytes; set-type l bytes").apply(df).first()
    assert bytes(row.i) == b"\xff\xff\xff\xff"
    assert bytes(row.s) == "é".encode()
    assert bytes(row.l) == (258).to_bytes(8, "big")


def test_hash_with_encode_false_gives_the_raw_digest_bytes(spark):
    import hashlib

    df = spark.createDataFrame([("a",)], "a string")
    row = Recipe.parse("hash a SHA-256 false").apply(df).first()
    assert bytes(row.a) == hashlib.sha256(b"a").digest()


def test_fail_does_not_keep_alive_a_column_the_recipe_drops_later(spark):
    # the check inside the job names only the condition's columns, so Spark can prune
    # `m` and push the check down to the source: a full-row message would pin every column
    df = spark.createDataFrame([("a", "b", 1)], "x string, y string, n int")
    compiled = Recipe.parse("merge x y m '-'\nfail n < 0\ndrop m").compile(df)
    plan = compiled.dataframe._jdf.queryExecution().optimizedPlan().toString()
    assert not re.search(r"AS m\b", plan), plan
    assert [tuple(r) for r in compiled.dataframe.collect()] == [("a", "b", 1)]


def test_run_error_of_fail_shows_the_whole_first_failing_row(spark):
    df = spark.createDataFrame([("a", 1), ("b", -2)], "x string, n int")
    compiled = Recipe.parse("uppercase x\nfail n < 0").compile(df)
    with pytest.raises(RecipeError) as info:     # collect() itself raises the recipe's error
        compiled.dataframe.collect()
    err = info.value
    assert err.line == 2 and err.directive == "fail n < 0"
    assert str(err) == ("""line 2: fail: condition 'n < 0' is true for row {"x":"B","n":-2}""")
