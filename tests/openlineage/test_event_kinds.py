"""Which OpenLineage event a body is, and what fll answers for the edge cases of
issue 31, built with openlineage-python's own event classes (serialized by its
`Serde`, as its HttpTransport sends them):

- the kind comes from ``schemaURL`` first, as Marquez tells events apart: an
  event that says it is a RunEvent and has no ``run`` is a malformed RunEvent
  (422 naming ``$.run``), not a JobEvent acknowledged with 202;
- a JobEvent's (or DatasetEvent's) static column lineage is never dropped
  without a word: the answer names each facet under ``notKept``, with why;
- a START that carries only a schema records the schema and answers 201.
"""
from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient
from openlineage.client.event_v2 import (DatasetEvent, InputDataset, Job, JobEvent,
                                         OutputDataset, Run, RunEvent, RunState, StaticDataset)
from openlineage.client.facet_v2 import column_lineage_dataset as cl
from openlineage.client.facet_v2 import schema_dataset
from openlineage.client.serde import Serde

from fll.openlineage import event_kind
from fll.rowkeys import MAX_TIME
from fll.server import create_app

PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"
PG, DUCK = "postgres://db:5432", "duckdb:///shop.duckdb"
SCHEMA = schema_dataset.SchemaDatasetFacet(fields=[
    schema_dataset.SchemaDatasetFacetFields(name="customer_id", type="INTEGER"),
    schema_dataset.SchemaDatasetFacetFields(name="n_orders", type="BIGINT")])
LINEAGE = cl.ColumnLineageDatasetFacet(fields={"customer_id": cl.Fields(inputFields=[
    cl.InputField(PG, "orders", "customer_id",
                  [cl.Transformation(type="DIRECT", subtype="IDENTITY")])])})


@pytest.fixture
def client(store):
    with TestClient(create_app(store)) as c:
        yield c


def body(event) -> dict:
    return Serde.to_dict(event)


def run_event(state: RunState = RunState.COMPLETE, facets: dict | None = None) -> RunEvent:
    return RunEvent(eventType=state, eventTime="2024-05-01T10:00:00Z",
                    run=Run(runId=str(uuid.uuid4())), job=Job(namespace="shop", name="totals"),
                    producer=PRODUCER, inputs=[InputDataset(PG, "orders")],
                    outputs=[OutputDataset(DUCK, "totals", facets=facets or {})])


def job_event(facets: dict) -> JobEvent:
    return JobEvent(eventTime="2024-05-01T10:00:00Z", job=Job(namespace="shop", name="totals"),
                    producer=PRODUCER, inputs=[InputDataset(PG, "orders")],
                    outputs=[OutputDataset(DUCK, "totals", facets=facets)])


def test_the_kind_is_what_the_schema_url_says_else_what_only_that_kind_has():
    run = body(run_event())
    assert event_kind(run) == "run"
    assert event_kind(body(job_event({}))) == "job"
    assert event_kind(body(DatasetEvent(eventTime="2024-05-01T10:00:00Z", producer=PRODUCER,
                                        dataset=StaticDataset(PG, "orders")))) == "dataset"
    no_run = {k: v for k, v in run.items() if k != "run"}
    assert event_kind(no_run) == "run"  # its schemaURL says RunEvent: never a JobEvent
    older = {**no_run, "schemaURL": "https://openlineage.io/spec/1-0-5/OpenLineage.json"
                                    "#/definitions/RunEvent"}
    assert event_kind(older) == "run"
    # without a schemaURL naming a kind: eventType or run only a RunEvent has
    bare = {k: v for k, v in no_run.items() if k != "schemaURL"}
    assert event_kind(bare) == "run"
    assert event_kind({k: v for k, v in bare.items() if k != "eventType"}) == "job"


def test_a_run_event_without_run_is_a_malformed_run_event_naming_run(client, store):
    event = body(run_event(facets={"columnLineage": LINEAGE}))
    del event["run"]
    r = client.post("/api/v1/lineage", json=event)
    assert r.status_code == 422, r.text
    assert r.json() == {"error": "invalid OpenLineage event: $.run is missing: a RunEvent (as "
                                 "its schemaURL or eventType says) must carry run.runId",
                        "status": 422}
    assert store.datasets(with_schemas=True) == []


@pytest.mark.parametrize("kind, missing", [("JobEvent", "job"), ("DatasetEvent", "dataset")])
def test_an_event_whose_schema_url_names_a_kind_must_have_what_that_kind_needs(
        client, store, kind, missing):
    event = body(job_event({}))
    del event["job"]
    event["schemaURL"] = event["schemaURL"].rsplit("/", 1)[0] + "/" + kind
    r = client.post("/api/v1/lineage", json=event)
    assert r.status_code == 422, r.text
    assert f"$.{missing}" in r.json()["error"]


def test_a_job_event_s_static_column_lineage_is_named_as_not_kept(client, store):
    """202 and why: the event is valid against the spec (no 4xx), but fll keeps
    column lineage per run, so nothing of it is recorded, and the answer says so."""
    r = client.post("/api/v1/lineage", json=body(job_event({"columnLineage": LINEAGE})))
    assert r.status_code == 202, r.text
    answer = r.json()
    assert answer["recorded"] is False and answer["event"] == "job"
    [not_kept] = answer["notKept"]
    assert not_kept["path"] == "$.outputs[0].facets.columnLineage"
    assert "declared (static) column lineage" in not_kept["reason"]
    assert "RunEvents" in not_kept["reason"]
    assert "notKept" in answer["reason"]
    assert store.datasets(with_schemas=True) == []


def test_a_job_event_with_a_schema_and_column_lineage_keeps_the_schema_and_names_the_rest(
        client, store):
    r = client.post("/api/v1/lineage", json=body(job_event({"columnLineage": LINEAGE,
                                                            "schema": SCHEMA})))
    assert r.status_code == 201, r.text
    assert r.json()["recorded"] is True and r.json()["schemas"] == 1
    assert [n["path"] for n in r.json()["notKept"]] == ["$.outputs[0].facets.columnLineage"]
    assert store.schema(DUCK, "totals", 0, MAX_TIME) == {"customer_id": "INTEGER",
                                                          "n_orders": "BIGINT"}
    assert store.datasets() == []  # no run lineage was made of it


def test_a_start_carrying_only_a_schema_records_it_and_answers_201(client, store):
    event = run_event(RunState.START, facets={"schema": SCHEMA})
    r = client.post("/api/v1/lineage", json=body(event))
    assert r.status_code == 201, r.text
    assert r.json()["recorded"] is True and r.json()["schemas"] == 1
    assert store.schema(DUCK, "totals", 0, MAX_TIME) == {"customer_id": "INTEGER",
                                                          "n_orders": "BIGINT"}
    # nothing to keep at all: still 202, saying why
    r = client.post("/api/v1/lineage", json=body(run_event(RunState.START)))
    assert r.status_code == 202 and r.json()["recorded"] is False
