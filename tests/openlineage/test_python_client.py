"""openlineage-python's own `OpenLineageClient` with `HttpTransport` and api-key auth,
posting to a live `fll serve`, unchanged: START then COMPLETE with growing column
lineage, a DatasetEvent and a JobEvent; the answers read back through REST and
the CLI, with URI namespaces (which hold ':' and '/')."""
from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (DatasetEvent, InputDataset, Job, JobEvent,
                                         OutputDataset, Run, RunEvent, RunState, StaticDataset)
from openlineage.client.facet_v2 import column_lineage_dataset as cl
from openlineage.client.facet_v2 import schema_dataset, symlinks_dataset
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport
from requests import HTTPError

from fll.cli import main

PG = "postgres://db.internal:5432"
DUCK = "duckdb:///data/shop.duckdb"
ORDERS, TOTALS = "shop.public.orders", "main.customer_totals"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
RUN_ID = str(uuid.uuid4())


def client_for(url: str, api_key: str, compression: str | None = None) -> OpenLineageClient:
    config = HttpConfig(url=url, endpoint="api/v1/lineage",
                        auth=ApiKeyTokenProvider({"apiKey": api_key}))
    if compression:
        config = HttpConfig.from_dict({"url": url, "endpoint": "api/v1/lineage",
                                       "auth": {"type": "api_key", "apiKey": api_key},
                                       "compression": compression})
    return OpenLineageClient(transport=HttpTransport(config))


def _in(field: str, subtype: str, description: str = "") -> cl.InputField:
    return cl.InputField(PG, ORDERS, field,
                         [cl.Transformation(type="DIRECT", subtype=subtype,
                                            description=description, masking=False)])


SCHEMA = schema_dataset.SchemaDatasetFacet(fields=[
    schema_dataset.SchemaDatasetFacetFields(name="customer_id", type="INTEGER"),
    schema_dataset.SchemaDatasetFacetFields(name="total", type="DECIMAL(18,2)"),
    schema_dataset.SchemaDatasetFacetFields(name="n_orders", type="BIGINT")])


def run_event(state: RunState, fields: dict, time: str) -> RunEvent:
    facet = cl.ColumnLineageDatasetFacet(fields=fields, dataset=[cl.InputField(
        PG, ORDERS, "status", [cl.Transformation(type="INDIRECT", subtype="FILTER",
                                                 description="status = 'paid'")])])
    return RunEvent(eventType=state, eventTime=time, run=Run(runId=RUN_ID),
                    job=Job(namespace="shop", name="customer_totals"), producer=PRODUCER,
                    inputs=[InputDataset(PG, ORDERS)],
                    outputs=[OutputDataset(DUCK, TOTALS, facets={"columnLineage": facet,
                                                                 "schema": SCHEMA})])


@pytest.fixture(scope="module")
def emitted(live_server):
    """The events a producer sends over one run, through the real client."""
    client = client_for(live_server.url, live_server.token)
    client.emit(run_event(RunState.START, {
        "customer_id": cl.Fields(inputFields=[_in("customer_id", "IDENTITY")])},
        "2024-05-01T09:00:00Z"))
    client.emit(run_event(RunState.COMPLETE, {
        "customer_id": cl.Fields(inputFields=[_in("customer_id", "IDENTITY")]),
        "total": cl.Fields(inputFields=[_in("amount", "AGGREGATION", "sum(amount)")])},
        "2024-05-01T09:05:00Z"))
    client.emit(DatasetEvent(eventTime="2024-05-01T10:00:00Z", producer=PRODUCER,
                             dataset=StaticDataset(PG, ORDERS, facets={
                                 "schema": schema_dataset.SchemaDatasetFacet(fields=[
                                     schema_dataset.SchemaDatasetFacetFields("order_id", "INT"),
                                     schema_dataset.SchemaDatasetFacetFields("amount",
                                                                             "NUMERIC")]),
                                 "symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[
                                     symlinks_dataset.Identifier("warehouse", "orders",
                                                                 "TABLE")])})))
    client.emit(JobEvent(eventTime="2024-05-01T10:00:00Z", producer=PRODUCER,
                         job=Job(namespace="shop", name="customer_totals")))
    return live_server


def _get(server, path: str, **params) -> httpx.Response:
    return httpx.get(server.url + path, params=params, timeout=10,
                     headers={"Authorization": f"Bearer {server.token}"})  # reads need it too


def v3(ns: str, ds: str, rest: str) -> str:
    return f"/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(ds, safe='')}{rest}"


def test_the_complete_event_adds_what_the_start_did_not_know(emitted):
    r = _get(emitted, v3(DUCK, TOTALS, "/lineage/fields/total"), direction="incoming",
             start=0, end="now")
    assert r.status_code == 200, r.text
    [edge] = r.json()["incoming"]
    assert (edge["dataset"], edge["fields"]) == ({"namespace": PG, "dataset": ORDERS},
                                                 ["amount", "status"])
    # status came only with COMPLETE, and keeps the kind that event gave it
    assert [(t["type"], t["subtype"]) for t in edge["transformations"]["status"]] == [
        ("INDIRECT", "FILTER")]
    assert [(t["type"], t["subtype"]) for t in edge["transformations"]["amount"]] == [
        ("DIRECT", "AGGREGATION")]
    ops = _get(emitted, v3(DUCK, TOTALS, "/lineage/fields/total/operations"), start=0,
               end="now").json()
    [prog] = ops["incoming"][0]["programs"]
    # one run, starting at the START event's time, with its state
    assert prog == {"program": "shop/customer_totals", "run": RUN_ID,
                    "lastExecutedTimeInSeconds": 1714554000, "state": "COMPLETE"}


def test_a_schema_field_without_inputs_is_listed_with_its_type(emitted):
    r = _get(emitted, v3(DUCK, TOTALS, "/lineage/fields"), start=0, end="now",
             includeCurrent="true")
    assert r.json() == [{"name": "customer_id", "lineage": True},
                        {"name": "n_orders", "lineage": False},
                        {"name": "total", "lineage": True}]
    graph = _get(emitted, "/api/v1/column-lineage", nodeId=f"dataset:{DUCK}:{TOTALS}").json()
    types = {n["data"]["field"]: n["data"]["fieldType"] for n in graph["graph"]
             if n["data"]["dataset"] == TOTALS}
    assert types == {"customer_id": "INTEGER", "n_orders": "BIGINT", "total": "DECIMAL(18,2)"}
    # the DatasetEvent's schema types the input side
    amount = [n for n in graph["graph"] if n["data"]["field"] == "amount"]
    assert amount[0]["data"]["fieldType"] == "NUMERIC"


def test_the_marquez_graph_of_the_job_walks_to_its_inputs(emitted):
    graph = _get(emitted, "/api/v1/column-lineage", nodeId="job:shop:customer_totals").json()
    nodes = {n["id"]: n for n in graph["graph"]}
    total = nodes[f"datasetField:{DUCK}:{TOTALS}:total"]
    assert {e["destination"] for e in total["inEdges"]} == {
        f"datasetField:{PG}:{ORDERS}:amount", f"datasetField:{PG}:{ORDERS}:status"}
    assert all(e["origin"] == total["id"] for e in total["inEdges"])


def test_a_dataset_event_symlink_makes_the_other_name_resolve(emitted):
    result = CliRunner().invoke(
        main, ["--store", emitted.store_url, "fields", "warehouse:orders", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert {"order_id", "amount"} <= set(json.loads(result.stdout))


@pytest.mark.parametrize("args", [
    ["lineage", f"{DUCK}:{TOTALS}:total"],
    ["lineage", "--namespace", DUCK, "--dataset", TOTALS, "--field", "total"],
])
def test_the_cli_names_uri_namespaces_compactly_or_whole(emitted, args):
    result = CliRunner().invoke(
        main, ["--store", emitted.store_url, *args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    graph = json.loads(result.stdout)
    text = json.dumps(graph)
    assert "amount" in text and PG in text and "customer_id" not in text


@pytest.mark.parametrize("args", [
    ["runs", f"{DUCK}:{TOTALS}"], ["runs", "--namespace", DUCK, "--dataset", TOTALS],
    ["fields", f"{DUCK}:{TOTALS}"], ["export", f"{DUCK}:{TOTALS}", "--format", "openlineage"],
])
def test_runs_fields_and_export_take_uri_namespaces(emitted, args):
    result = CliRunner().invoke(main, ["--store", emitted.store_url, *args])
    assert result.exit_code == 0, result.stderr
    assert RUN_ID in result.stdout or "n_orders" in result.stdout


def test_a_wrong_api_key_makes_the_client_raise_and_records_nothing(emitted):
    bad = client_for(emitted.url, "not-the-token")
    other = run_event(RunState.COMPLETE, {"x": cl.Fields(inputFields=[_in("x", "IDENTITY")])},
                      "2024-05-02T00:00:00Z")
    other.run = Run(runId=str(uuid.uuid4()))
    with pytest.raises(HTTPError) as raised:
        bad.emit(other)
    assert raised.value.response.status_code == 401
    assert _get(emitted, "/api/v1/column-lineage",
                nodeId=f"datasetField:{DUCK}:{TOTALS}:x").status_code == 404


def test_a_gzip_compressing_client_is_understood(emitted):
    gz = client_for(emitted.url, emitted.token, compression="gzip")
    event = run_event(RunState.COMPLETE, {
        "customer_id": cl.Fields(inputFields=[_in("customer_id", "IDENTITY")])},
        "2024-05-03T00:00:00Z")
    event.run = Run(runId=str(uuid.uuid4()))
    event.outputs = [OutputDataset(DUCK, "main.gz_totals",
                                   facets=event.outputs[0].facets)]
    gz.emit(event)
    r = _get(emitted, v3(DUCK, "main.gz_totals", "/lineage/fields"), start=0, end="now")
    assert r.json() == ["customer_id"]
