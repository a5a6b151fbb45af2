"""Reading lineage as a person would: every edge says DIRECT or INDIRECT, hops show
their operations and runs, datasets can be listed and a typo gets a suggestion.

The store holds a tagged aggregate over path-named file datasets (as `track()`
names them): ``total = sum(qty) GROUP BY region WHERE ts > … ORDER BY region``,
then a copy of ``total`` into a report.
"""
from __future__ import annotations

import json

import pytest

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation, TransformOperation,
                 WriteOperation, open_store)
from fll.model import Transformation

from .conftest import T0

ORDERS = EndPoint("file", "/data/lake/orders.csv")
TOTALS = EndPoint("file", "/data/lake/out/region_totals")
REPORT = EndPoint("file", "/data/lake/out/report")
AGG = Transformation("DIRECT", "AGGREGATION", "sum(qty)")
GROUP = Transformation("INDIRECT", "GROUP_BY")
FILTER = Transformation("INDIRECT", "FILTER")
MASK = Transformation("DIRECT", "TRANSFORMATION", "sha2(region)", masking=True)
IDENT = Transformation("DIRECT", "IDENTITY")


def aggregate() -> FieldLineageInfo:
    read = ReadOperation("read", "read orders", ORDERS, ["qty", "region", "ts"])
    qty, region, ts = (InputField("read", f) for f in ("qty", "region", "ts"))
    agg = TransformOperation("aggregate", "sum(qty) by region where ts", [qty, region, ts],
                             ["total"], {qty: (AGG,), region: (GROUP,), ts: (FILTER,)})
    key = TransformOperation("region_key", "sha2(region)", [region], ["region_key"],
                             {region: (MASK,)})
    write = WriteOperation("write", "write totals", TOTALS,
                           [InputField("aggregate", "total"), InputField("region_key",
                                                                         "region_key")])
    return FieldLineageInfo([read, agg, key, write])


def report() -> FieldLineageInfo:
    read = ReadOperation("read", "read totals", TOTALS, ["total"])
    copy = TransformOperation("copy", "total", [InputField("read", "total")], ["total"],
                              {InputField("read", "total"): (IDENT,)})
    return FieldLineageInfo([read, copy, WriteOperation("write", "write report", REPORT,
                                                        [InputField("copy", "total")])])


@pytest.fixture
def tagged_store(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/tagged.db"
    with open_store(url) as store:
        store.record(aggregate(), "agg-1", T0, "nightly_totals")
        store.record(aggregate(), "agg-2", T0 + 60_000, "nightly_totals")
        store.record(report(), "rep-1", T0 + 120_000, "report")
    return url


TOTAL = "file:/data/lake/out/region_totals:total"


def test_the_tree_tags_every_edge_with_its_kind(run_cli, tagged_store):
    out = run_cli("lineage", TOTAL, store=tagged_store).output
    assert "← file:/data/lake/orders.csv:qty [DIRECT/AGGREGATION]" in out
    assert "← file:/data/lake/orders.csv:region [INDIRECT/GROUP_BY]" in out
    assert "← file:/data/lake/orders.csv:ts [INDIRECT/FILTER]" in out


def test_masking_is_shown_on_the_edge(run_cli, tagged_store):
    out = run_cli("lineage", "file:/data/lake/out/region_totals:region_key",
                  store=tagged_store).output
    assert "← file:/data/lake/orders.csv:region [DIRECT/TRANSFORMATION+masked]" in out


@pytest.mark.parametrize("flags", [["--direct-only"], ["--indirect", "hide"]])
def test_hiding_indirect_edges_leaves_only_what_builds_the_value(run_cli, tagged_store, flags):
    result = run_cli("lineage", TOTAL, "--format", "json", *flags, store=tagged_store)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [e["source"] for e in doc["edges"]] == ["file:/data/lake/orders.csv:qty"]
    assert doc["indirect"] == "hide"


def test_json_edges_carry_kind_and_transformations(run_cli, tagged_store):
    doc = json.loads(run_cli("lineage", TOTAL, "--format", "json", store=tagged_store).output)
    by_source = {e["source"].rsplit(":", 1)[1]: e for e in doc["edges"]}
    assert by_source["qty"]["kind"] == "DIRECT"
    assert by_source["qty"]["transformations"][0]["subtype"] == "AGGREGATION"
    assert by_source["ts"]["kind"] == "INDIRECT"
    assert "operations" not in doc  # only when asked


def test_untagged_edges_say_nothing_rather_than_guess(run_cli, lineage_store):
    doc = json.loads(run_cli("lineage", "myns:another_file:name", "--format", "json",
                             store=lineage_store).output)
    assert doc["edges"] and all(e["kind"] is None and e["transformations"] == []
                                for e in doc["edges"])


def test_dot_draws_indirect_edges_dashed_with_labels(run_cli, tagged_store):
    out = run_cli("lineage", TOTAL, "--format", "dot", store=tagged_store).output
    ts_edge = next(line for line in out.splitlines() if "orders.csv:ts\" ->" in line)
    qty_edge = next(line for line in out.splitlines() if "orders.csv:qty\" ->" in line)
    assert "style=dashed" in ts_edge and 'label="INDIRECT/FILTER"' in ts_edge
    assert "style=dashed" not in qty_edge and 'label="DIRECT/AGGREGATION"' in qty_edge


def test_mermaid_draws_indirect_edges_dotted_with_labels(run_cli, tagged_store):
    out = run_cli("lineage", TOTAL, "--format", "mermaid", store=tagged_store).output
    assert out.count("-.->") == 2
    assert '-->|"DIRECT/AGGREGATION"|' in out
    assert '-.->|"INDIRECT/GROUP_BY"|' in out


def test_ops_and_runs_list_each_hop_newest_run_first(run_cli, tagged_store):
    out = run_cli("lineage", "file:/data/lake/out/report:total", "--ops", "--runs",
                  store=tagged_store).output
    assert "ops:  read → copy → write" in out
    assert "ops:  read → aggregate → write" in out
    runs_line = next(line for line in out.splitlines() if "agg-" in line)
    assert runs_line.index("agg-2") < runs_line.index("agg-1")
    assert "nightly_totals" in runs_line


def test_small_trees_show_runs_by_default_and_ops_only_when_asked(run_cli, tagged_store):
    out = run_cli("lineage", TOTAL, store=tagged_store).output
    assert "runs: agg-2" in out
    assert "ops:" not in out


def test_json_operations_are_keyed_by_destination_field(run_cli, tagged_store):
    doc = json.loads(run_cli("lineage", TOTAL, "--format", "json", "--runs",
                             store=tagged_store).output)
    groups = doc["operations"][TOTAL]
    assert [r["run_id"] for r in groups[0]["runs"]] == ["agg-2", "agg-1"]
    assert [o["name"] for o in groups[0]["operations"]] == ["read", "aggregate", "write"]


def test_datasets_lists_every_dataset_and_filters(run_cli, tagged_store):
    out = run_cli("datasets", store=tagged_store).output.split()
    assert out == ["file:/data/lake/orders.csv", "file:/data/lake/out/region_totals",
                   "file:/data/lake/out/report"]
    only = run_cli("datasets", "--prefix", "/DATA/LAKE/OUT", "--format", "json",
                   store=tagged_store).output
    assert [d["name"] for d in json.loads(only)] == ["/data/lake/out/region_totals",
                                                      "/data/lake/out/report"]
    assert run_cli("datasets", "--namespace", "hdfs", store=tagged_store).output == ""


def test_an_unknown_dataset_suggests_the_closest_names(run_cli, tagged_store):
    result = run_cli("runs", "file:/data/lake/out/region_total", store=tagged_store)
    assert result.exit_code == 1
    assert "did you mean: file:/data/lake/out/region_totals" in result.output


def test_an_unknown_field_suggests_the_closest_names(run_cli, tagged_store):
    result = run_cli("lineage", "file:/data/lake/out/region_totals:totl", store=tagged_store)
    assert result.exit_code == 1
    assert "did you mean: total" in result.output


def test_a_pipeline_whose_local_input_is_missing_is_refused_before_spark(run_cli, tmp_path,
                                                                          monkeypatch):
    import sys

    spec = {"name": "copy", "stages": [
        {"name": "in", "plugin": "csv-source", "properties": {"path": "data/orders.csv"}},
        {"name": "out", "plugin": "csv-sink", "properties": {"path": "out/orders"}}],
        "connections": [["in", "out"]]}
    (tmp_path / "copy.json").write_text(json.dumps(spec))
    monkeypatch.delitem(sys.modules, "pyspark", raising=False)
    result = run_cli("run", str(tmp_path / "copy.json"),
                     store=f"sqlite:///{tmp_path}/fll.db")
    assert result.exit_code != 0
    assert "stage 'in', property 'path'" in result.output
    assert f"{tmp_path}/data/orders.csv does not exist" in result.output
    assert "pyspark" not in sys.modules  # found with the rest of the spec, no session started


@pytest.mark.parametrize("command", [[], ["serve"], ["run"]])
def test_every_help_states_the_same_store_resolution_order(run_cli, command):
    from fll.cli.common import STORE_HELP

    out = " ".join(run_cli(*command, "--help").output.split())
    assert " ".join(STORE_HELP.split()) in out
    assert out.index("$FLL_STORE") < out.index("$FLL_CONFIG") < out.index("fll-data/fll.db")


def test_an_unknown_time_unit_lists_the_units(run_cli, tagged_store):
    result = run_cli("runs", "file:/data/lake/orders.csv", "--start", "now-1y",
                     store=tagged_store)
    assert result.exit_code == 2
    assert "units: s (seconds), m (minutes), h (hours), d (days), w (weeks)" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("switch, expect_filter_columns", [
    ({}, True),                                    # the default: recorded, INDIRECT
    ({"indirectDependencies": False}, False),      # the per-stage switch turns them off
])
def test_sql_and_wrangler_stages_share_one_indirect_policy(spark, tmp_path, run_cli, switch,
                                                            expect_filter_columns):
    from fll.pipeline.runner import run_pipeline

    (tmp_path / "orders.csv").write_text("id,status,amount\n1,paid,5\n2,open,7\n3,paid,1\n")
    spec = {"name": "policy", "namespace": "shop", "stages": [
        {"name": "orders", "plugin": "csv-source",
         "properties": {"path": str(tmp_path / "orders.csv")}},
        {"name": "clean", "plugin": "wrangler", "properties": {
            "recipe": "filter-row-if-matched :status '^open$'", **switch}},
        {"name": "total", "plugin": "sql", "properties": {
            "query": "SELECT id, amount * 2 AS double FROM input WHERE amount > 1", **switch}},
        {"name": "out", "plugin": "csv-sink", "properties": {"path": str(tmp_path / "out")}}],
        "connections": [["orders", "clean"], ["clean", "total"], ["total", "out"]]}
    url = f"sqlite:///{tmp_path}/fll.db"
    run_pipeline(spec, store_url=url, spark=spark, echo=lambda line: None)
    doc = json.loads(run_cli("lineage", "shop:out:double", "--format", "json", "--depth", "1",
                             store=url).output)
    kinds = {e["source"].rsplit(":", 1)[1]: e["kind"] for e in doc["edges"]}
    assert kinds["amount"] == "DIRECT"
    if expect_filter_columns:
        assert kinds["status"] == "INDIRECT"  # the recipe's filter
    else:
        assert set(kinds) == {"amount"}


@pytest.mark.slow
def test_a_tracked_job_reading_a_pipelines_output_is_linked_to_it(spark, tmp_path, run_cli):
    from fll.pipeline.runner import run_pipeline
    from fll.spark import track

    (tmp_path / "orders.csv").write_text("id,amount\n1,5\n2,7\n")
    out = tmp_path / "lake" / "orders_clean"
    spec = {"name": "clean", "namespace": "shop", "stages": [
        {"name": "orders", "plugin": "csv-source",
         "properties": {"path": str(tmp_path / "orders.csv")}},
        {"name": "keep", "plugin": "projection", "properties": {"keep": ["id", "amount"]}},
        {"name": "sink", "plugin": "csv-sink",
         "properties": {"path": str(out), "referenceName": "orders_clean"}}],
        "connections": [["orders", "keep"], ["keep", "sink"]]}
    url = f"sqlite:///{tmp_path}/fll.db"
    run_pipeline(spec, store_url=url, spark=spark, echo=lambda line: None)
    df = spark.read.option("header", True).csv(str(out))
    with track(spark, url, "report", strict=True):
        df.selectExpr("id", "amount * 2 AS doubled").write.mode("overwrite").csv(
            str(tmp_path / "report"))
    doc = json.loads(run_cli("lineage", f"file:{tmp_path}/report:doubled", "--format", "json",
                             store=url).output)
    nodes = {n["id"] for n in doc["nodes"]}
    # one name per dataset: the pipeline's sink is named by its location, as track() names it
    assert f"file:{out}:amount" in nodes
    assert f"file:{tmp_path}/orders.csv:amount" in nodes  # and the walk goes on into the pipeline
    assert not any(n.startswith("shop:") for n in nodes)
    # the referenceName is an alias: it finds the same dataset
    for name in (f"file:{out}", "shop:orders_clean"):
        found = run_cli("fields", name, store=url)
        assert found.exit_code == 0 and found.output.split() == ["amount", "id"], name
    by_reference = json.loads(run_cli("lineage", "shop:orders_clean:amount", "--direction",
                                      "outgoing", "--format", "json", store=url).output)
    assert by_reference["field"]["id"] == f"file:{out}:amount"
    assert f"file:{tmp_path}/report:doubled" in {n["id"] for n in by_reference["nodes"]}
