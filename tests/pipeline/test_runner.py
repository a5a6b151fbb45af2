"""End to end on the shared local Spark: the demo pipeline, failures, plugins, the CLI."""
from __future__ import annotations

import csv
import glob
import json
import os

import pytest

from fll import open_store
from fll.errors import InvalidLineageError, PipelineError
from fll.model import DROPPED, EndPoint, EndPointField
from fll.pipeline.runner import label, run_pipeline
from fll.pipeline.spec import parse_spec

pytestmark = pytest.mark.spark

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
PIPELINES = os.path.join(ROOT, "conf", "pipelines")
DATA = os.path.join(ROOT, "conf", "data")


def demo(tmp_path, **changes) -> dict:
    with open(os.path.join(PIPELINES, "employee.json"), encoding="utf-8") as fh:
        spec = json.load(fh)
    sink = next(s for s in spec["stages"] if s["name"] == "Employee Data Writer")
    sink["properties"]["path"] = str(tmp_path / "employee-data")
    for stage, props in changes.items():
        next(s for s in spec["stages"] if s["name"] == stage)["properties"].update(props)
    return spec


def read_csv(directory) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(os.path.join(directory, "*.csv"))):
        with open(path, encoding="utf-8", newline="") as fh:
            rows.extend(csv.DictReader(fh))
    return rows


def ef(dataset, field, ns="default"):
    return EndPointField(EndPoint(ns, dataset), field)


def at(path, field):
    """A field of a file dataset, named by its location as OpenLineage names files."""
    return EndPointField(EndPoint("file", os.path.normpath(str(path))), field)


def named(fields):
    """Fields as (dataset as a person names it, field): the referenceName of a file."""
    return {(label(f.endpoint), f.field) for f in fields}


def drops(result, dataset, field):
    [key] = [k for k in result.info.outgoing_summary()
             if (label(k.endpoint), k.field) == (dataset, field)]
    return result.info.outgoing_summary()[key]


def test_the_demo_pipeline_records_employee_id_lineage_as_cdap_describes(spark, tmp_path):
    url = f"sqlite:///{tmp_path}/fll.db"
    lines: list[str] = []
    result = run_pipeline(parse_spec(demo(tmp_path), base_dir=PIPELINES), store_url=url,
                          run_id="run-1", spark=spark, echo=lines.append)
    assert result.rows_written == {"Employee Data Writer": 3}
    assert result.recorded
    text = "\n".join(lines)
    assert "[7/7] sink" in text and "3 row(s) written" in text
    assert "Employee Data.ID <- HR File.body, Person File.body" in text

    with open_store(url) as store:
        run = store.run("run-1")
        assert run is not None and run.program == "employee"
        window = (run.start_ms, run.start_ms + 1)
        # file datasets are named by location (as track() and OpenLineage name them)
        out, persons, hr = tmp_path / "employee-data", f"{DATA}/persons.csv", f"{DATA}/hr.csv"
        assert store.incoming(at(out, "ID"), *window) == {at(persons, "body"), at(hr, "body")}
        assert store.incoming(at(out, "ContactDetails"), *window) == {at(persons, "body")}
        # and their referenceName is an alias of the location
        assert store.resolve_dataset("default", "Employee Data") == ("file", str(out))
        assert store.aliases("file", persons) == [("default", "Person File")]
        [group] = store.operations(at(out, "ID"), *window)
        assert [r.run_id for r in group.runs] == ["run-1"]
        names = {op.name for op in group.operations}
        assert names == {
            "Person File Reader.READ", "Person File Parser.PARSE.SSN",
            "HR File Reader.READ", "HR File Parser.PARSE.SSN",
            "HR File Parser.PARSE.Employee_Name", "HR File Parser.PARSE.Dept_Name",
            "Employee Joiner.join.SSN", "Employee Joiner.select.Employee_Name",
            "Employee Joiner.select.Dept_Name", "Field Normalizer.GenerateID",
            "Employee Data Writer.WRITE"}
        # the seed: operations on Salary and Start_Date are not part of ID's lineage
        for op in group.operations:
            touched = set(getattr(op, "outputs", ())) | {i.name for i in op.inputs}
            assert not touched & {"Salary", "Start_Date"}, op.name
        generate = next(op for op in group.operations if op.name.endswith("GenerateID"))
        assert [i.name for i in generate.inputs] == ["Employee_Name", "Dept_Name", "SSN"]
        assert generate.description == "Generate unique Employee Id"

    assert read_csv(tmp_path / "employee-data") == [
        {"ID": "ENG-AL-6789", "Name": "Ada Lovelace", "Department": "ENGINEERING",
         "ContactDetails": "ada@example.com / 555-0101", "JoiningDate": "2017-03-01"},
        {"ID": "RES-AT-7890", "Name": "Alan Turing", "Department": "RESEARCH",
         "ContactDetails": "alan@example.com / 555-0102", "JoiningDate": "2016-11-15"},
        {"ID": "OPE-GH-8901", "Name": "Grace Hopper", "Department": "OPERATIONS",
         "ContactDetails": "grace@example.com / 555-0103", "JoiningDate": "2015-07-04"},
    ]


FAILING = '''
def boom(df):
    raise RuntimeError("normalizer exploded")
'''


def test_a_failing_stage_leaves_no_lineage_for_the_run(spark, tmp_path, monkeypatch):
    (tmp_path / "failing_udfs.py").write_text(FAILING)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = demo(tmp_path, **{"Field Normalizer": {"function": "failing_udfs:boom"}})
    url = f"sqlite:///{tmp_path}/fll.db"
    with pytest.raises(PipelineError, match="stage 'Field Normalizer' .*normalizer exploded"):
        run_pipeline(parse_spec(spec, base_dir=PIPELINES), store_url=url, run_id="bad-run",
                     spark=spark, echo=None)
    with open_store(url) as store:
        assert store.run("bad-run") is None
        assert store.datasets() == []
    assert not (tmp_path / "employee-data").exists()


def test_lineage_that_does_not_add_up_fails_before_any_data_is_written(spark, tmp_path):
    ops = [{"name": "GenerateID", "inputs": ["Employee_Name", "Badge"], "outputs": ["ID"]}]
    spec = demo(tmp_path, **{"Field Normalizer": {"operations": ops}})
    url = f"sqlite:///{tmp_path}/fll.db"
    with pytest.raises(InvalidLineageError, match="'Field Normalizer.GenerateID'.*'Badge'"):
        run_pipeline(parse_spec(spec, base_dir=PIPELINES), store_url=url, spark=spark,
                     echo=None)
    assert not (tmp_path / "employee-data").exists()
    with open_store(url) as store:
        assert store.datasets() == []


def _people(tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("id,first,last,age\n1,Ada,Lovelace,36\n2,Alan,Turing,41\n")
    return str(path)


def test_projection_then_json_and_parquet_sinks(spark, tmp_path):
    spec = {
        "name": "people", "stages": [
            {"name": "people", "plugin": "csv-source", "properties": {"path": _people(tmp_path)}},
            {"name": "project", "plugin": "projection",
             "properties": {"drop": ["age"], "rename": {"first": "given", "last": "family"}}},
            {"name": "as json", "plugin": "json-sink",
             "properties": {"path": str(tmp_path / "j"), "referenceName": "people_json"}},
            {"name": "as parquet", "plugin": "parquet-sink",
             "properties": {"path": str(tmp_path / "p"), "referenceName": "people_parquet"}},
        ],
        "connections": [["people", "project"], ["project", "as json"],
                        ["project", "as parquet"]]}
    result = run_pipeline(spec, spark=spark, echo=None, record=False)
    assert result.rows_written == {"as json": 2, "as parquet": 2}
    assert named(result.incoming("people_parquet", "given")) == {("people", "first")}
    assert named(result.incoming("people_json", "family")) == {("people", "last")}
    assert drops(result, "people", "age") == {DROPPED}
    assert sorted(spark.read.parquet(str(tmp_path / "p")).columns) == ["family", "given", "id"]
    rows = spark.read.json(str(tmp_path / "j")).orderBy("id").collect()
    assert [(r["given"], r["family"]) for r in rows] == [("Ada", "Lovelace"), ("Alan", "Turing")]


def test_sql_transform_records_column_lineage_or_warns_all_to_all(spark, tmp_path):
    spec = {
        "name": "sql", "stages": [
            {"name": "people", "plugin": "csv-source", "properties": {"path": _people(tmp_path)}},
            {"name": "select", "plugin": "sql", "properties": {
                "query": "SELECT id, concat(first, ' ', last) AS name FROM input"}},
            {"name": "out", "plugin": "csv-sink", "properties": {"path": str(tmp_path / "o")}},
        ],
        "connections": [["people", "select"], ["select", "out"]]}
    lines: list[str] = []
    result = run_pipeline(spec, spark=spark, echo=lines.append, record=False)
    assert result.rows_written == {"out": 2}
    name_sources = result.incoming("out", "name")
    if any("warning" in line for line in lines):  # no plan capture: all-to-all, loudly
        assert named(name_sources) == {("people", f) for f in ("id", "first", "last", "age")}
    else:
        assert named(name_sources) == {("people", "first"), ("people", "last")}
        assert named(result.incoming("out", "id")) == {("people", "id")}


def test_sql_errors_name_the_stage_and_query(spark, tmp_path):
    spec = {
        "name": "sql", "stages": [
            {"name": "people", "plugin": "csv-source", "properties": {"path": _people(tmp_path)}},
            {"name": "select", "plugin": "sql", "properties": {"query": "SELECT nope FROM input"}},
            {"name": "out", "plugin": "csv-sink", "properties": {"path": str(tmp_path / "o")}},
        ],
        "connections": [["people", "select"], ["select", "out"]]}
    with pytest.raises(PipelineError, match="stage 'select', property 'query'"):
        run_pipeline(spec, spark=spark, echo=None, record=False)


def test_fll_run_command_runs_a_spec_file_into_a_store(spark, tmp_path):
    from click.testing import CliRunner

    from fll.pipeline.cli import run

    path = tmp_path / "employee.json"
    spec = demo(tmp_path)
    for st in spec["stages"]:
        if st["plugin"] == "text-source":
            st["properties"]["path"] = os.path.join(DATA, os.path.basename(
                st["properties"]["path"]))
    path.write_text(json.dumps(spec))
    url = f"sqlite:///{tmp_path}/cli.db"
    out = CliRunner().invoke(run, [str(path), "--store", url, "--run-id", "cli-run"])
    assert out.exit_code == 0, out.output
    assert "Employee Data.ID <- HR File.body, Person File.body" in out.output
    with open_store(url) as store:
        assert store.run("cli-run").program == "employee"
    bad = CliRunner().invoke(run, [str(tmp_path / "missing.json")])
    # bad input to `fll run` exits 2, as it does for every fll command
    assert bad.exit_code == 2 and "cannot read pipeline spec" in bad.output


def test_wrangler_transform_records_the_recipe_field_operations(spark, tmp_path):
    spec = {
        "name": "wrangle", "stages": [
            {"name": "people", "plugin": "csv-source", "properties": {"path": _people(tmp_path)}},
            {"name": "wrangle", "plugin": "wrangler", "properties": {"recipe": [
                "swap :first :last", "uppercase :last", "merge :first :last :full ' '",
                "drop :age"]}},
            {"name": "out", "plugin": "csv-sink", "properties": {"path": str(tmp_path / "o")}},
        ],
        "connections": [["people", "wrangle"], ["wrangle", "out"]]}
    result = run_pipeline(spec, spark=spark, echo=None, record=False)
    assert named(result.incoming("out", "last")) == {("people", "first")}  # swapped, then upper
    assert named(result.incoming("out", "full")) == {("people", "first"), ("people", "last")}
    assert named(result.incoming("out", "id")) == {("people", "id")}
    assert drops(result, "people", "age") == {DROPPED}
    rows = read_csv(tmp_path / "o")
    assert [(r["first"], r["last"], r["full"]) for r in rows] == [
        ("Lovelace", "ADA", "Lovelace ADA"), ("Turing", "ALAN", "Turing ALAN")]


def test_a_bad_recipe_line_is_rejected_before_spark_starts():
    spec = {
        "name": "wrangle", "stages": [
            {"name": "src", "plugin": "csv-source", "properties": {"path": "x.csv"}},
            {"name": "wrangle", "plugin": "wrangler",
             "properties": {"recipe": "uppercase :a\nfrobnicate :b"}},
            {"name": "out", "plugin": "csv-sink", "properties": {"path": "o"}},
        ],
        "connections": [["src", "wrangle"], ["wrangle", "out"]]}
    from fll.pipeline.spec import SpecError

    with pytest.raises(SpecError, match="stage 'wrangle', property 'recipe': line 2") as info:
        parse_spec(spec)
    assert info.value.property == "recipe"


def test_the_shipped_customers_pipeline_records_recipe_and_sql_lineage(spark, tmp_path):
    with open(os.path.join(PIPELINES, "customers.json"), encoding="utf-8") as fh:
        spec = json.load(fh)
    for stage in spec["stages"]:
        if stage["plugin"].endswith("-sink"):
            stage["properties"]["path"] = str(tmp_path / stage["name"].replace(" ", "-"))
    url = f"sqlite:///{tmp_path}/fll.db"
    result = run_pipeline(parse_spec(spec, base_dir=PIPELINES), store_url=url, run_id="c-1",
                          spark=spark, echo=lambda line: None)
    # the recipe drops the row without a customer_id; three countries remain
    assert result.rows_written == {"Customers Writer": 5, "Country Counts Writer": 3}
    counts = {r["country"]: r["customers"] for r in read_csv(tmp_path / "Country-Counts-Writer")}
    assert counts == {"UK": "2", "US": "2", "UNKNOWN": "1"}
    with open_store(url) as store:
        window = (result.start_time_ms, result.start_time_ms + 1)
        customers = tmp_path / "Customers-Writer"
        assert store.incoming(at(customers, "email_domain"), *window) == {
            at(f"{DATA}/customers.csv", "body")}
        [group] = store.operations(at(tmp_path / "Country-Counts-Writer", "customers"), *window)
        ops = {op.name: op for op in group.operations}
        [(inp, tags)] = list(ops["Count per Country.sql.customers"].transformations.items())
        assert inp.name == "customer_id"
        assert [(t.type, t.subtype, t.masking) for t in tags] == [
            ("DIRECT", "AGGREGATION", True)]  # count() masks, per OpenLineage
        # the GROUP BY column is recorded too (the default), as INDIRECT, in a step of its own
        rows = ops["Count per Country.sql.customers.rows"].transformations
        grouped = {i.name: t for i, t in rows.items() if i.name != "customers"}
        assert grouped and all(t.type == "INDIRECT" for ts in grouped.values() for t in ts)
        names = list(ops)
        assert names[0] == "Customers File Reader.READ"
        assert names[-3:] == ["Count per Country.sql.customers",
                              "Count per Country.sql.customers.rows", "Country Counts Writer.WRITE"]
        assert "Clean Customers.1.parse-as-csv.customer_id" in names
