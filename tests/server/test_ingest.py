"""POST /api/v1/lineage: OpenLineage RunEvents in, read back through the CDAP and
Marquez endpoints; export and re-ingest; token protection."""
from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import column_lineage_dataset as cl
from openlineage.client.serde import Serde

from fll import EndPoint, open_store
from fll.openlineage import export_events
from fll.rowkeys import MAX_TIME
from fll.server import create_app

from .conftest import v3

RUN_ID = "0190f1c2-7a3b-7cde-8f01-23456789abcd"
ALL = "start=0&end=4000000000"  # fixed, so two answers compare equal


def _tx(type_, subtype, description="", masking=False):
    return cl.Transformation(type=type_, subtype=subtype, description=description,
                             masking=masking)


def ol_event(state=RunState.COMPLETE, time="2024-05-01T10:00:00.000Z", run_id=RUN_ID,
             amount_subtype="AGGREGATION", with_lineage=True) -> dict:
    """An event built with the openlineage-python client models, as a client sends it."""
    orders = "public.orders"
    facet = cl.ColumnLineageDatasetFacet(
        fields={
            "total": cl.Fields(inputFields=[cl.InputField(
                "pg://db:5432", orders, "amount",
                [_tx("DIRECT", amount_subtype, "sum(amount)")])]),
            "customer": cl.Fields(inputFields=[cl.InputField(
                "pg://db:5432", orders, "customer_id", [_tx("DIRECT", "IDENTITY")])]),
            "tax id": cl.Fields(inputFields=[cl.InputField(
                "pg://db:5432", orders, "ssn", [_tx("DIRECT", "TRANSFORMATION", "sha2(ssn)",
                                                    True)])]),
        },
        dataset=[cl.InputField("pg://db:5432", orders, "status",
                               [_tx("INDIRECT", "FILTER", "status = 'paid'")])])
    outputs = [OutputDataset("s3://lake", "marts/customer_totals",
                             facets={"columnLineage": facet} if with_lineage else {})]
    event = RunEvent(eventType=state, eventTime=time, run=Run(runId=run_id),
                     job=Job(namespace="spark", name="etl.totals"),
                     inputs=[InputDataset("pg://db:5432", orders)], outputs=outputs,
                     producer="https://example.com/producer")
    return json.loads(Serde.to_json(event))


@pytest.fixture
def app_client(store):
    with TestClient(create_app(store)) as c:
        yield c


def _field_incoming(c, ns, ds, field):
    return c.get(v3(ns, ds, f"/lineage/fields/{field}?direction=incoming&{ALL}")).json()


def test_an_openlineage_event_is_recorded_and_read_back_with_its_edges(app_client):
    r = app_client.post("/api/v1/lineage", json=ol_event())
    assert r.status_code == 201, r.text
    assert r.json()["recorded"] is True and r.json()["runId"] == RUN_ID
    assert r.json()["program"] == "spark/etl.totals"
    got = _field_incoming(app_client, "s3://lake", "marts/customer_totals", "total")
    # the dataset-wide filter column feeds every field, tagged as only a filter
    tags = got["incoming"][0].pop("transformations")
    assert got["incoming"] == [{"dataset": {"namespace": "pg://db:5432",
                                            "dataset": "public.orders"},
                                "fields": ["amount", "status"]}]
    assert [(t["type"], t["subtype"]) for t in tags["status"]] == [("INDIRECT", "FILTER")]
    assert [(t["type"], t["subtype"]) for t in tags["amount"]] == [("DIRECT", "AGGREGATION")]
    r = app_client.get(v3("s3://lake", "marts/customer_totals", f"/lineage/fields?{ALL}"))
    assert r.json() == ["customer", "tax id", "total"]


def test_an_openlineage_event_keeps_its_transformations_in_the_marquez_graph(app_client):
    app_client.post("/api/v1/lineage", json=ol_event())
    node = "datasetField:s3://lake:marts/customer_totals:tax id"
    r = app_client.get("/api/v1/column-lineage", params={"nodeId": node, "depth": 1})
    assert r.status_code == 200, r.text
    [me] = [n for n in r.json()["graph"] if n["id"] == node]
    inputs = {i["field"]: i["transformations"] for i in me["data"]["inputFields"]}
    assert inputs == {
        "ssn": [{"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "sha2(ssn)",
                 "masking": True}],
        "status": [{"type": "INDIRECT", "subtype": "FILTER", "description": "status = 'paid'",
                    "masking": False}]}
    # as Marquez writes it: every edge of a node starts at the node itself, and an
    # inEdge's destination is the upstream column (what Marquez's web UI walks)
    assert {e["origin"] for e in me["inEdges"]} == {node}
    assert {e["destination"] for e in me["inEdges"]} == {
        "datasetField:pg://db:5432:public.orders:ssn",
        "datasetField:pg://db:5432:public.orders:status"}
    [ssn] = [n for n in r.json()["graph"] if n["data"]["field"] == "ssn"]
    assert ssn["outEdges"] == [{"origin": ssn["id"], "destination": node}]


def test_the_start_time_is_the_first_event_seen_for_the_run(app_client):
    r = app_client.post("/api/v1/lineage", json=ol_event(RunState.START, with_lineage=False,
                                                         time="2024-05-01T09:00:00Z"))
    assert r.status_code == 202 and r.json()["recorded"] is False
    r = app_client.post("/api/v1/lineage", json=ol_event(time="2024-05-01T09:30:00Z"))
    assert r.status_code == 201
    ops = app_client.get(v3("s3://lake", "marts/customer_totals",
                            f"/lineage/fields/total/operations?{ALL}")).json()
    [prog] = ops["incoming"][0]["programs"]
    assert prog == {"program": "spark/etl.totals", "run": RUN_ID,
                    "lastExecutedTimeInSeconds": 1714554000,  # 09:00:00Z
                    "state": "COMPLETE"}


def test_the_same_event_twice_is_recorded_once(app_client, store):
    assert app_client.post("/api/v1/lineage", json=ol_event()).status_code == 201
    r = app_client.post("/api/v1/lineage", json=ol_event(time="2024-05-02T00:00:00Z"))
    assert r.status_code == 200 and r.json()["recorded"] is False
    assert len(store.runs(store.datasets()[1], 0, MAX_TIME)) == 1


def test_a_later_event_of_a_run_adds_its_lineage_to_the_run(app_client, store):
    start = ol_event(RunState.START, time="2024-05-01T09:00:00Z")
    # START knows only `customer`; COMPLETE knows every field
    start["outputs"][0]["facets"]["columnLineage"]["fields"] = {
        "customer": start["outputs"][0]["facets"]["columnLineage"]["fields"]["customer"]}
    assert app_client.post("/api/v1/lineage", json=start).status_code == 201
    assert app_client.get(v3("s3://lake", "marts/customer_totals",
                             f"/lineage/fields?{ALL}")).json() == ["customer"]
    r = app_client.post("/api/v1/lineage", json=ol_event(time="2024-05-01T09:30:00Z"))
    assert r.status_code == 201 and r.json()["recorded"] is True
    assert app_client.get(v3("s3://lake", "marts/customer_totals",
                             f"/lineage/fields?{ALL}")).json() == ["customer", "tax id", "total"]
    [run] = store.runs(EndPoint("s3://lake", "marts/customer_totals"), 0, MAX_TIME)
    assert run.start_ms == 1714554000000  # the START's time, kept
    # the START again says nothing new
    assert app_client.post("/api/v1/lineage", json=start).status_code == 200


def test_a_later_event_with_other_tags_keeps_the_tags_of_both(app_client, store):
    app_client.post("/api/v1/lineage", json=ol_event())
    r = app_client.post("/api/v1/lineage", json=ol_event(amount_subtype="TRANSFORMATION"))
    assert r.status_code == 201, r.text
    node = "datasetField:s3://lake:marts/customer_totals:total"
    graph = app_client.get("/api/v1/column-lineage", params={"nodeId": node, "depth": 1}).json()
    [me] = [n for n in graph["graph"] if n["id"] == node]
    [amount] = [i for i in me["data"]["inputFields"] if i["field"] == "amount"]
    assert [t["subtype"] for t in amount["transformations"]] == ["AGGREGATION", "TRANSFORMATION"]


def test_a_run_recorded_through_the_store_api_with_other_operations_stays_a_conflict(
        app_client, store):
    from .fixtures import ab_info
    store.record(ab_info(), RUN_ID, 1_000, "chain/ab")
    before = store.run(RUN_ID)
    r = app_client.post("/api/v1/lineage", json=ol_event())
    assert r.status_code == 409 and r.json()["status"] == 409
    assert store.run(RUN_ID) == before
    assert not store.exists(EndPoint("s3://lake", "marts/customer_totals"))


@pytest.mark.parametrize("mutate, path", [
    (lambda e: e["run"].pop("runId"), "$.run.runId"),
    (lambda e: e.pop("eventTime"), "$.eventTime"),
    (lambda e: e.update(eventTime="yesterday"), "$.eventTime"),
    (lambda e: e["job"].pop("name"), "$.job.name"),
    (lambda e: e["outputs"][0]["facets"]["columnLineage"]["fields"]["total"]["inputFields"][0]
     .pop("field"), "$.outputs[0].facets.columnLineage.fields.total.inputFields[0].field"),
    (lambda e: e["outputs"][0]["facets"]["columnLineage"]["fields"]["total"]["inputFields"][0]
     ["transformations"][0].update(type="SIDEWAYS"),
     "$.outputs[0].facets.columnLineage.fields.total.inputFields[0].transformations[0]"),
    (lambda e: e["outputs"][0]["facets"]["columnLineage"].update(fields=[]),
     "$.outputs[0].facets.columnLineage.fields"),
    (lambda e: e.update(outputs={}), "$.outputs"),
])
def test_an_invalid_event_is_refused_naming_the_json_path(app_client, store, mutate, path):
    event = ol_event()
    mutate(event)
    r = app_client.post("/api/v1/lineage", json=event)
    assert r.status_code == 422, r.text
    assert path in r.json()["error"]
    assert store.datasets() == []  # nothing half-written


def test_an_event_without_column_lineage_records_nothing(app_client, store):
    r = app_client.post("/api/v1/lineage", json=ol_event(with_lineage=False))
    assert r.status_code == 202
    assert store.datasets() == []


# -- export and re-ingest -----------------------------------------------------------

def _answers(c, endpoints):
    out = {}
    for ns, ds in endpoints:
        fields = c.get(v3(ns, ds, f"/lineage/fields?{ALL}")).json()
        out[(ns, ds, "fields")] = fields
        out[(ns, ds, "all")] = c.get(v3(ns, ds, f"/lineage/allfieldlineage?{ALL}")).json()
        out[(ns, ds, "props")] = c.get(v3(ns, ds, f"/properties?{ALL}")).json()
        for f in fields:
            out[(ns, ds, f)] = c.get(v3(ns, ds, f"/lineage/fields/{f}?direction=both&level=5"
                                                f"&{ALL}")).json()
            out[(ns, ds, f, "graph")] = c.get("/api/v1/column-lineage", params={
                "nodeId": f"datasetField:{ns}:{ds}:{f}", "withDownstream": "true"}).json()
    return out


def _reingest(events, tmp_path, name):
    fresh = open_store(f"sqlite:///{tmp_path}/{name}.db")
    c = TestClient(create_app(fresh))
    for e in events:
        r = c.post("/api/v1/lineage", json=e)
        assert r.status_code == 201, r.text
    return fresh, c


def test_an_ingested_run_exported_and_reingested_gives_identical_answers(app_client, store,
                                                                         tmp_path):
    app_client.post("/api/v1/lineage", json=ol_event())
    endpoints = [(e.namespace, e.name) for e in store.datasets()]
    dest = [e for e in store.datasets() if e.name == "marts/customer_totals"][0]
    events = export_events(store, dest, 0, MAX_TIME)
    assert len(events) == 1
    fresh, c = _reingest(events, tmp_path, "fresh")
    assert _answers(c, endpoints) == _answers(app_client, endpoints)
    # the very same operation set: operations answers match too
    assert fresh.run(RUN_ID) == store.run(RUN_ID)


def test_the_seed_example_exported_and_reingested_gives_identical_lineage(seeded, tmp_path):
    from .fixtures import EMPLOYEE, C, B
    events = []
    for ep in (EMPLOYEE, B, C):
        events += export_events(seeded, ep, 0, MAX_TIME)
    # run ids that are no UUID go out as their UUID v5, the original in the fllRun facet
    ids = [e["run"]["runId"] for e in events]
    assert [str(uuid.UUID(i)) for i in ids] == ids and len(set(ids)) == 3
    assert [e["run"]["facets"]["fllRun"]["runId"] for e in events] == [
        "run-hr-1", "run-ab", "run-bc"]
    fresh, c = _reingest(events, tmp_path, "fresh-seed")
    endpoints = [(e.namespace, e.name) for e in seeded.datasets()]
    with TestClient(create_app(seeded)) as original:
        assert _answers(c, endpoints) == _answers(original, endpoints)
    # exact: the same run id, program, start and operation set (checksum)
    for run_id in ("run-hr-1", "run-ab", "run-bc"):
        assert fresh.run(run_id) == seeded.run(run_id)


def test_an_export_sent_back_to_the_store_it_came_from_changes_nothing(seeded):
    from .fixtures import EMPLOYEE
    [event] = export_events(seeded, EMPLOYEE, 0, MAX_TIME)
    before = seeded.run("run-hr-1")
    with TestClient(create_app(seeded)) as c:
        r = c.post("/api/v1/lineage", json=event)
    assert r.status_code == 200, r.text
    assert r.json()["program"] == "hr-pipeline" and r.json()["runId"] == "run-hr-1"
    assert seeded.run("run-hr-1") == before


@pytest.mark.parametrize("facet", [
    {"runId": "other", "program": "spark/etl.totals", "operations": []},
    {"program": "spark/etl.totals", "operations": [{"type": "READ", "name": 5}]},
    {"program": "spark/etl.totals", "operations": "nope"},
    {"program": ["x"], "operations": [None, 1, "a"]},
    "not an object",
])
def test_a_forged_fll_run_facet_is_ignored(app_client, store, facet):
    event = ol_event()
    event["run"]["facets"] = {"fllRun": facet}
    r = app_client.post("/api/v1/lineage", json=event)
    assert r.status_code == 201 and r.json()["runId"] == RUN_ID


# -- token --------------------------------------------------------------------------

def test_writes_need_the_bearer_token_when_one_is_set(store):
    c = TestClient(create_app(store, token="s3cret-token"))
    r = c.post("/api/v1/lineage", json=ol_event())
    assert r.status_code == 401 and r.json() == {
        "error": "a valid bearer token is required to write lineage", "status": 401}
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = c.post("/api/v1/lineage", json=ol_event(), headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert store.datasets() == []
    r = c.post("/api/v1/lineage", json=ol_event(),
               headers={"Authorization": "Bearer s3cret-token"})
    assert r.status_code == 201
    assert c.get("/api/v1/datasets").status_code == 401  # reads need it too
    assert c.get("/api/v1/datasets",
                 headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
