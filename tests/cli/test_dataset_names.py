"""One name per dataset: file datasets by location, ``referenceName`` as an alias.

A store written before file datasets were named by location holds a
pipeline's runs under ``namespace:referenceName``, with the location as an
alias of it. A store written after holds them under the location, with the
reference name as the alias. Both, and a store holding both, must answer
every reader (CLI, CDAP routes, Marquez) under either name, and a tracked job
reading the pipeline's output must reach the pipeline's sources.
"""
from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint, open_store
from fll.model import (EndPointField, InputField, ReadOperation, Transformation,
                       TransformOperation, WriteOperation)
from fll.opset import FieldLineageInfo
from fll.server import create_app

T0 = 1_700_000_000_000
ORDERS, CLEAN, REPORT = "/lake/orders.csv", "/lake/clean", "/lake/report"
OLD_ORDERS, OLD_CLEAN = EndPoint("shop", "Orders File"), EndPoint("shop", "Clean Orders")


def copy(src: EndPoint, dst: EndPoint, fields=("id", "amount")) -> FieldLineageInfo:
    return FieldLineageInfo([
        ReadOperation("read", "Read orders.", src, fields),
        WriteOperation("write", "Write orders.", dst,
                       tuple(InputField("read", f) for f in fields))])


def by_location(path: str, reference: str) -> EndPoint:
    return EndPoint("file", path, {"path": path, "referenceName": reference})


def tracked_report() -> FieldLineageInfo:
    direct = Transformation("DIRECT", "TRANSFORMATION")
    return FieldLineageInfo([
        ReadOperation("read", "scan", EndPoint("file", CLEAN), ("id", "amount")),
        TransformOperation("double", "amount * 2", (InputField("read", "amount"),),
                           ("doubled",), {InputField("read", "amount"): (direct,)}),
        WriteOperation("write", "save", EndPoint("file", REPORT),
                       (InputField("read", "id"), InputField("double", "doubled")))])


def record_old(store) -> None:
    """A run as stores held it before: reference names, locations as their aliases."""
    store.record(copy(OLD_ORDERS, OLD_CLEAN), "old-run", T0, "clean")
    store.record_alias("file", ORDERS, OLD_ORDERS.namespace, OLD_ORDERS.name)
    store.record_alias("file", CLEAN, OLD_CLEAN.namespace, OLD_CLEAN.name)


def record_new(store) -> None:
    """The same pipeline now: locations, reference names as their aliases; and a
    tracked job reading its output by location."""
    store.record(copy(by_location(ORDERS, "Orders File"), by_location(CLEAN, "Clean Orders")),
                 "new-run", T0 + 1000, "clean")
    store.record_alias("shop", "Orders File", "file", ORDERS)
    store.record_alias("shop", "Clean Orders", "file", CLEAN)
    store.record(tracked_report(), "report-run", T0 + 2000, "report")


@pytest.fixture(params=["old", "new", "both"])
def history(request, tmp_path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path}/names.db"
    with open_store(url) as store:
        if request.param in ("old", "both"):
            record_old(store)
        if request.param in ("new", "both"):
            record_new(store)
        if request.param == "old":  # a tracked job that read the location, linked by alias
            store.record(tracked_report(), "report-run", T0 + 2000, "report")
    return url, request.param


def test_turning_an_alias_pair_keeps_one_direction_and_both_names(store):
    record_old(store)
    assert store.resolve_dataset("file", CLEAN) == ("shop", "Clean Orders")
    assert store.record_alias("shop", "Clean Orders", "file", CLEAN) is True
    assert store.resolve_dataset("shop", "Clean Orders") == ("file", CLEAN)
    assert store.resolve_dataset("file", CLEAN) == ("file", CLEAN)  # no circle
    assert store.aliases("file", CLEAN) == [("shop", "Clean Orders")]
    assert store.aliases("shop", "Clean Orders") == []
    # recording it again changes nothing
    assert store.record_alias("shop", "Clean Orders", "file", CLEAN) is False


@pytest.mark.parametrize("name", [f"file:{CLEAN}", "shop:Clean Orders"])
def test_either_name_lists_the_fields_and_every_run_of_the_dataset(history, run_cli, name):
    url, kind = history
    fields = run_cli("fields", name, store=url)
    assert fields.exit_code == 0, fields.output
    assert fields.output.split() == ["amount", "id"]
    runs = run_cli("runs", name, "--format", "json", store=url)
    assert runs.exit_code == 0, runs.output
    wanted = {"old": {"old-run", "report-run"}, "new": {"new-run", "report-run"},
              "both": {"old-run", "new-run", "report-run"}}[kind]
    assert {r["run_id"] for r in json.loads(runs.output)} == wanted


@pytest.mark.parametrize("name", [f"file:{REPORT}:doubled"])
def test_a_tracked_job_reaches_the_pipelines_sources_whatever_the_history(history, run_cli,
                                                                            name):
    url, kind = history
    doc = json.loads(run_cli("lineage", name, "--depth", "3", "--format", "json",
                             store=url).output)
    nodes = {n["id"] for n in doc["nodes"]}
    # one node per dataset: the name runs are now recorded under (the location, once
    # the alias pair is turned; the old reference name in an old store)
    clean = f"file:{CLEAN}:amount" if kind != "old" else "shop:Clean Orders:amount"
    orders = f"file:{ORDERS}:amount" if kind != "old" else "shop:Orders File:amount"
    assert {clean, orders} <= nodes
    assert len([n for n in nodes if n.endswith(":amount")]) == 2


def _rest(url: str):
    return TestClient(create_app(url))


def v3(ns: str, ds: str, rest: str = "") -> str:
    return f"/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(ds, safe='')}{rest}"


@pytest.mark.parametrize("ns,ds", [("file", CLEAN), ("shop", "Clean Orders")])
def test_cdap_routes_answer_under_either_name(history, ns, ds):
    url, kind = history
    with _rest(url) as client:
        r = client.get(v3(ns, ds, "/lineage/fields/amount"),
                       params={"direction": "both", "start": 0, "end": "now", "level": 2})
        assert r.status_code == 200, r.text
        body = r.json()
        sources = {(g["dataset"]["namespace"], g["dataset"]["dataset"])
                   for g in body["incoming"]}
        users = {(g["dataset"]["namespace"], g["dataset"]["dataset"])
                 for g in body["outgoing"]}
        assert len(sources) == 1 and sources <= {("file", ORDERS), ("shop", "Orders File")}
        assert users == {("file", REPORT)}
        fields = client.get(v3(ns, ds, "/lineage/fields"), params={"start": 0, "end": "now"})
        assert fields.status_code == 200 and fields.json() == ["amount", "id"]


@pytest.mark.parametrize("node", [f"datasetField:file:{CLEAN}:amount",
                                  "datasetField:shop:Clean Orders:amount"])
def test_the_marquez_route_resolves_a_reference_name(history, node):
    url, kind = history
    with _rest(url) as client:
        r = client.get("/api/v1/column-lineage",
                       params={"nodeId": node, "depth": 2, "withDownstream": "true"})
        assert r.status_code == 200, r.text
        ids = {n["id"] for n in r.json()["graph"]}
    where = f"file:{CLEAN}" if kind != "old" else "shop:Clean Orders"
    assert f"datasetField:{where}:amount" in ids
    assert f"datasetField:file:{REPORT}:doubled" in ids
    assert len([i for i in ids if i.endswith(":amount")]) == 2  # itself and its source


def test_a_reference_name_that_is_no_alias_is_not_found(history, run_cli):
    url, _ = history
    result = run_cli("fields", "shop:Clean Ordrs", store=url)
    assert result.exit_code == 1 and "did you mean" in result.output


def test_reading_the_report_never_asks_for_aliases_when_names_agree(tmp_path):
    """The hot path: with every producer naming files by location, the tracked
    job's source is the pipeline's sink by name, before any alias is read."""
    url = f"sqlite:///{tmp_path}/plain.db"
    with open_store(url) as store:
        record_new(store)
        clean = EndPointField(EndPoint("file", CLEAN), "amount")
        assert store.outgoing(clean, 0, T0 + 10_000) == {
            EndPointField(EndPoint("file", REPORT), "doubled")}
        assert store.incoming(clean, 0, T0 + 10_000) == {
            EndPointField(EndPoint("file", ORDERS), "amount")}


def test_a_dataset_known_only_by_its_reported_schema_is_listed(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path}/schemas.db"
    with open_store(url) as store:
        record_new(store)
        # an OpenLineage DatasetEvent: a schema, no run read or wrote it
        store.record_schema("postgres://db:5432", "shop.customers", "ev-1", T0,
                            [("id", "bigint"), ("email", None)])
    listed = run_cli("datasets", store=url)
    assert listed.exit_code == 0
    assert "postgres://db:5432:shop.customers" in listed.output.splitlines()
    # a file dataset shows the reference name it also answers to
    assert f"file:{CLEAN}  (also shop:Clean Orders)" in listed.output.splitlines()
    with _rest(url) as client:
        body = client.get("/api/v1/datasets").json()
    assert {"namespace": "postgres://db:5432", "name": "shop.customers"} in body["datasets"]
    assert len(body["datasets"]) == 4  # each dataset once


def test_stats_counts_runs_whose_start_only_was_claimed_apart(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path}/stats.db"
    with open_store(url) as store:
        record_new(store)  # two complete runs
        store.claim_run_start("started-never-completed", T0 + 5000)
    stats = json.loads(run_cli("stats", "--format", "json", store=url).stdout)
    assert stats["runs"] == 2 and stats["started_only_runs"] == 1
    text = run_cli("stats", store=url).stdout
    assert "runs            2" in text and "started only    1" in text


@pytest.mark.parametrize("ns,ds", [("file", CLEAN), ("shop", "Clean Orders")])
def test_operations_and_a_dataset_node_cover_the_runs_under_both_names(history, ns, ds):
    url, kind = history
    with _rest(url) as client:
        r = client.get(v3(ns, ds, "/lineage/fields/amount/operations"),
                       params={"direction": "incoming", "start": 0, "end": "now"})
        assert r.status_code == 200, r.text
        runs = {p["run"] for g in r.json()["incoming"] for p in g["programs"]}
        node = client.get("/api/v1/column-lineage",
                          params={"nodeId": f"dataset:{ns}:{ds}", "depth": 1})
        assert node.status_code == 200, node.text
    assert runs == {"old": {"old-run"}, "new": {"new-run"}, "both": {"old-run", "new-run"}}[kind]
    roots = {n["data"]["field"] for n in node.json()["graph"]
             if n["data"]["dataset"] in (CLEAN, "Clean Orders")}
    assert roots == {"id", "amount"}


def test_an_old_run_sent_again_is_already_recorded_not_a_conflict(tmp_path, run_cli):
    """The store never rewrites a recorded set's names, so the old payload (an
    export made before the rename, a spooled event) keeps its checksum."""
    url = f"sqlite:///{tmp_path}/again.db"
    with open_store(url) as store:
        record_old(store)
        record_new(store)  # turns the alias pairs round
        assert store.record(copy(OLD_ORDERS, OLD_CLEAN), "old-run", T0, "clean") is False
        assert store.run("old-run").checksum == copy(OLD_ORDERS, OLD_CLEAN).checksum
    # an export by either name holds the runs under both, each as it was recorded,
    # so recording the export back changes nothing
    for fmt in ("json", "openlineage"):
        exported = run_cli("export", "shop:Clean Orders", "--format", fmt, store=url)
        assert exported.exit_code == 0, exported.output
        (tmp_path / f"export.{fmt}").write_text(exported.output)
        docs = json.loads(exported.output)
        if fmt == "openlineage":  # two RunEvents, and a DatasetEvent naming the alias
            assert len([d for d in docs if "run" in d]) == 2
            [alias] = [d for d in docs if "dataset" in d]
            assert alias["dataset"]["facets"]["symlinks"]["identifiers"] == [
                {"namespace": "shop", "name": "Clean Orders", "type": "DATASET"}]
        else:
            assert len(docs) == 3
    docs = json.loads((tmp_path / "export.json").read_text())
    assert {d["run_id"] for d in docs} == {"old-run", "new-run", "report-run"}
    again = run_cli("record", str(tmp_path / "export.json"), store=url)
    assert again.exit_code == 0 and "recorded 0 new run(s), 3 already present" in again.output


def test_the_lineage_of_a_field_says_which_other_name_its_dataset_has(tmp_path, run_cli):
    url = f"sqlite:///{tmp_path}/tree.db"
    with open_store(url) as store:
        record_new(store)
    tree = run_cli("lineage", "shop:Clean Orders:amount", store=url)
    assert tree.exit_code == 0, tree.output
    first, second = tree.output.splitlines()[:2]
    assert first == "(its dataset is also named shop:Clean Orders)"
    assert second.startswith(f"file:{CLEAN}:amount  (incoming")
    doc = json.loads(run_cli("lineage", f"file:{CLEAN}:amount", "--format", "json",
                             store=url).output)
    assert doc["aliases"] == ["shop:Clean Orders"]
    plain = json.loads(run_cli("lineage", f"file:{REPORT}:doubled", "--format", "json",
                               store=url).output)
    assert "aliases" not in plain  # a dataset with one name keeps the plain shape
