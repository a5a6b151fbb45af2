"""Marquez's own Python client (marquez-python 0.50.0), unchanged, reading a live
`fll serve` (a subprocess on 127.0.0.1, API token) that openlineage-python's
client fed: every read method fll answers, with the values the events gave."""
from __future__ import annotations

import pytest
from marquez_client import MarquezClient
from marquez_client.errors import APIError

from fll.openlineage import export_run_id

from .shop_events import DUCK, ORDERS, PG, REPORT, RUN_1, RUN_2, TOTALS, send_shop


@pytest.fixture(scope="module")
def marquez(live_server) -> MarquezClient:
    send_shop(live_server.url, live_server.token)
    return MarquezClient(url=live_server.url, api_key=live_server.token)


def test_list_and_get_namespaces(marquez):
    names = {n["name"]: n for n in marquez.list_namespaces()["namespaces"]}
    assert {PG, DUCK, "shop"} <= set(names)
    assert names["shop"]["createdAt"] == "2024-05-01T09:00:00.000Z"
    assert names["shop"]["updatedAt"] == "2024-05-02T10:00:00.000Z"
    got = marquez.get_namespace(PG)
    assert got["name"] == PG and got["isHidden"] is False
    assert [n["name"] for n in marquez.list_namespaces(limit=1)["namespaces"]] == [
        sorted(names)[0]]
    with pytest.raises(APIError):
        marquez.get_namespace("no-such-namespace")


def test_list_datasets_of_a_uri_namespace(marquez):
    page = marquez.list_datasets(DUCK)
    assert page["totalCount"] == 2
    assert [d["name"] for d in page["datasets"]] == [TOTALS, REPORT]
    assert [d["name"] for d in marquez.list_datasets(DUCK, limit=1, offset=1)["datasets"]] == [
        REPORT]
    assert [d["name"] for d in marquez.list_datasets(PG)["datasets"]] == [ORDERS]


def test_get_dataset_has_the_latest_schema_and_column_lineage(marquez):
    d = marquez.get_dataset(DUCK, TOTALS)
    assert d["id"] == {"namespace": DUCK, "name": TOTALS} and d["namespace"] == DUCK
    assert [(f["name"], f["type"]) for f in d["fields"]] == [
        ("customer_id", "INTEGER"), ("total", "DECIMAL(18,2)"), ("n_orders", "BIGINT")]
    assert d["lastModifiedAt"] == "2024-05-02T09:00:00.000Z"
    lineage = {c["name"]: c for c in d["columnLineage"]}
    assert [(i["namespace"], i["dataset"], i["field"], i["transformationDescription"])
            for i in lineage["n_orders"]["inputFields"]] == [(PG, ORDERS, "order_id", "count(*)")]
    assert lineage["total"]["inputFields"][0]["transformations"][0]["subtype"] == "AGGREGATION"
    # an input dataset: the schema its readers reported
    orders = marquez.get_dataset(PG, ORDERS)
    assert [(f["name"], f["type"]) for f in orders["fields"]] == [
        ("order_id", "INT"), ("customer_id", "INT"), ("amount", "NUMERIC")]
    # no run wrote it: a version per schema report (the two runs that read it)
    versions = marquez.list_dataset_versions(PG, ORDERS)["versions"]
    assert [v["createdAt"] for v in versions] == ["2024-05-02T09:00:00.000Z",
                                                  "2024-05-01T09:00:00.000Z"]
    assert {v["createdByRun"] for v in versions} == {None}
    assert orders["currentVersion"] == versions[0]["version"]
    with pytest.raises(APIError):
        marquez.get_dataset(DUCK, "main.nothing")


def test_dataset_versions_are_its_writing_runs_newest_first(marquez):
    body = marquez.list_dataset_versions(DUCK, TOTALS)
    assert body["totalCount"] == 2
    new, old = body["versions"]
    assert new["createdByRun"]["id"] == export_run_id(RUN_2) == RUN_2
    assert old["createdByRun"]["id"] == RUN_1
    assert old["createdByRun"]["jobVersion"]["name"] == "customer_totals"
    assert old["createdByRun"]["startedAt"] == "2024-05-01T09:00:00.000Z"
    assert [f["name"] for f in old["fields"]] == ["customer_id", "total"]
    assert [f["name"] for f in new["fields"]] == ["customer_id", "total", "n_orders"]
    assert marquez.get_dataset(DUCK, TOTALS)["currentVersion"] == new["version"]
    assert [v["version"] for v in marquez.list_dataset_versions(
        DUCK, TOTALS, limit=1, offset=1)["versions"]] == [old["version"]]
    assert marquez.get_dataset_version(DUCK, TOTALS, old["version"]) == old
    with pytest.raises(APIError):
        marquez.get_dataset_version(DUCK, TOTALS, RUN_1)  # a run id is not a version


def test_column_lineage_by_dataset_field_and_job(marquez):
    field = marquez.get_column_lineage_by_dataset_field(DUCK, REPORT, "best_total", depth=5)
    ids = {n["id"] for n in field["graph"]}
    assert {f"datasetField:{DUCK}:{REPORT}:best_total", f"datasetField:{DUCK}:{TOTALS}:total",
            f"datasetField:{PG}:{ORDERS}:amount"} <= ids
    version = marquez.list_dataset_versions(DUCK, TOTALS)["versions"][0]["version"]
    by_dataset = marquez.get_column_lineage_by_dataset(DUCK, TOTALS, version=version)
    assert f"datasetField:{PG}:{ORDERS}:order_id" in {n["id"] for n in by_dataset["graph"]}
    by_job = marquez.get_column_lineage_by_job("shop", "weekly_report")
    assert f"datasetField:{DUCK}:{REPORT}:best_total" in {n["id"] for n in by_job["graph"]}


def test_sources_are_the_dataset_namespaces(marquez):
    sources = {s["name"]: s for s in marquez.list_sources()["sources"]}
    assert set(sources) == {PG, DUCK}  # "shop" names jobs only: no source
    assert sources[PG]["type"] == "POSTGRES" and sources[PG]["connectionUrl"] == PG
    assert sources[DUCK]["type"] == "DUCKDB"
    got = marquez.get_source(DUCK)
    assert got == sources[DUCK]
    with pytest.raises(APIError):
        marquez.get_source("nowhere://x")


def test_tags_are_listed(marquez):
    assert isinstance(marquez.list_tags()["tags"], list)
