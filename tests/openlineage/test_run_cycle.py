"""The OpenLineage run cycle as fll records it (see fll.openlineage): a run's lineage
is the union of its events, FAIL/ABORT lineage is kept apart (left out of field
questions unless asked: see test_run_states.py), DatasetEvent and JobEvent are
answered 2xx, and two servers given the same run store one run."""
from __future__ import annotations

import threading
import uuid

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint, EndPointField, open_store
from fll.rowkeys import MAX_TIME
from fll.server import create_app

SRC, OUT = EndPoint("postgres://db:5432", "public.orders"), EndPoint("s3://lake", "totals")


def event(run_id: str, state: str, fields: list[str], time: str = "2024-05-01T10:00:00Z",
          schema: list[tuple[str, str]] | None = None) -> dict:
    facets: dict = {"columnLineage": {"fields": {
        f: {"inputFields": [{"namespace": SRC.namespace, "name": SRC.name, "field": f,
                             "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]}]}
        for f in fields}}} if fields else {}
    if schema is not None:
        facets["schema"] = {"fields": [{"name": n, "type": t} for n, t in schema]}
    return {"eventType": state, "eventTime": time, "producer": "urn:test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id}, "job": {"namespace": "shop", "name": "totals"},
            "inputs": [{"namespace": SRC.namespace, "name": SRC.name}],
            "outputs": [{"namespace": OUT.namespace, "name": OUT.name, "facets": facets}]}


@pytest.fixture
def client(store):
    with TestClient(create_app(store)) as c:
        yield c


def _fields(store, start=0, end=MAX_TIME) -> list[str]:
    return store.fields(OUT, start, end)


@pytest.mark.parametrize("terminal", ["COMPLETE", "FAIL", "ABORT"])
def test_every_event_of_a_run_adds_to_its_lineage_whatever_its_type(client, store, terminal):
    rid = str(uuid.uuid4())
    assert client.post("/api/v1/lineage", json=event(rid, "START", ["a"])).status_code == 201
    r = client.post("/api/v1/lineage", json=event(rid, "RUNNING", ["b"]))
    assert r.status_code == 201
    r = client.post("/api/v1/lineage", json=event(rid, terminal, ["a", "c"]))
    assert r.status_code == 201 and r.json()["recorded"] is True
    failed = terminal in ("FAIL", "ABORT")
    # a failed run's lineage is kept, out of the default answers
    assert _fields(store.including_failed()) == ["a", "b", "c"]
    assert _fields(store) == ([] if failed else ["a", "b", "c"])
    assert len(store.including_failed().runs(OUT, 0, MAX_TIME)) == 1
    assert len(store.runs(OUT, 0, MAX_TIME)) == (0 if failed else 1)
    # an event that says nothing new changes nothing
    r = client.post("/api/v1/lineage", json=event(rid, terminal, ["b"]))
    assert r.status_code == 200 and r.json()["recorded"] is False


def test_events_arriving_out_of_order_give_the_same_run(client, store, tmp_path):
    rid = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(rid, "COMPLETE", ["a", "b"],
                                              "2024-05-01T10:05:00Z"))
    client.post("/api/v1/lineage", json=event(rid, "START", ["a"], "2024-05-01T10:00:00Z"))
    with open_store(f"sqlite:///{tmp_path}/other.db") as other:
        with TestClient(create_app(other)) as c2:
            c2.post("/api/v1/lineage", json=event(rid, "START", ["a"], "2024-05-01T10:00:00Z"))
            c2.post("/api/v1/lineage", json=event(rid, "COMPLETE", ["a", "b"],
                                                  "2024-05-01T10:05:00Z"))
        assert other.run(rid).checksum == store.run(rid).checksum


def test_a_dataset_event_records_the_schema_and_answers_201(client, store):
    r = client.post("/api/v1/lineage", json={
        "eventTime": "2024-05-01T10:00:00Z", "producer": "urn:test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
        "dataset": {"namespace": "s3://lake", "name": "raw", "facets": {
            "schema": {"fields": [{"name": "id", "type": "BIGINT"}, {"name": "note"}]}}}})
    assert r.status_code == 201, r.text
    assert r.json() == {"recorded": True, "event": "dataset", "schemas": 1}
    assert store.schema("s3://lake", "raw", 0, MAX_TIME) == {"id": "BIGINT", "note": None}
    r = client.get("/v3/namespaces/s3%3A%2F%2Flake/datasets/raw/lineage/fields"
                   "?start=0&end=now&includeCurrent=true")
    assert r.json() == [{"name": "id", "lineage": False}, {"name": "note", "lineage": False}]


def test_a_job_event_without_datasets_is_acknowledged_saying_nothing_was_recorded(client,
                                                                                  store):
    r = client.post("/api/v1/lineage", json={
        "eventTime": "2024-05-01T10:00:00Z", "producer": "urn:test",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/JobEvent",
        "job": {"namespace": "shop", "name": "totals", "facets": {}}})
    assert r.status_code == 202
    assert r.json()["recorded"] is False and "nothing" in r.json()["reason"]
    assert store.datasets() == []


@pytest.mark.parametrize("body, path", [
    ({"eventTime": "2024-05-01T10:00:00Z", "dataset": {"namespace": "x"}}, "$.dataset.name"),
    ({"eventTime": "2024-05-01T10:00:00Z", "dataset": {"namespace": "x", "name": "y",
      "facets": {"schema": {"fields": [{"type": "INT"}]}}}},
     "$.dataset.facets.schema.fields[0].name"),
    ({"eventTime": "2024-05-01T10:00:00Z", "dataset": {"namespace": "x", "name": "y",
      "facets": {"schema": {"fields": [{"name": "a", "type": "INT"}, "b"]}}}},
     "$.dataset.facets.schema.fields[1]"),
    ({"eventTime": "2024-05-01T10:00:00Z", "dataset": {"namespace": "x", "name": "y",
      "facets": {"schema": {"fields": [{"name": "a"}, {"name": "", "type": "INT"}]}}}},
     "$.dataset.facets.schema.fields[1].name"),
    ({"eventTime": "2024-05-01T10:00:00Z", "dataset": {"namespace": "x", "name": "y",
      "facets": {"schema": {"fields": [{"name": "a", "type": 5}]}}}},
     "$.dataset.facets.schema.fields[0].type"),
    ({"eventTime": "nope", "job": {"namespace": "a", "name": "b"}}, "$.eventTime"),
    ({"eventTime": "2024-05-01T10:00:00Z"}, "$"),
])
def test_a_malformed_dataset_or_job_event_is_refused_naming_the_path(client, store, body, path):
    r = client.post("/api/v1/lineage", json=body)
    assert r.status_code == 422, r.text
    assert path in r.json()["error"]
    assert store.datasets() == []


def test_a_run_s_schema_lists_a_field_without_inputs_and_keeps_time_ranges(client, store):
    rid = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(rid, "COMPLETE", ["a"], "2024-05-01T10:00:00Z",
                                              schema=[("a", "INT"), ("n", "BIGINT")]))
    r = client.get("/v3/namespaces/s3%3A%2F%2Flake/datasets/totals/lineage/fields/n"
                   "?direction=incoming&start=0&end=now")
    assert r.status_code == 200 and r.json()["incoming"] == []
    rid2 = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(rid2, "COMPLETE", ["a"], "2024-06-01T10:00:00Z",
                                              schema=[("a", "VARCHAR")]))
    may, june = 1714557600000, 1717236000000
    assert store.schema(OUT.namespace, OUT.name, 0, may + 1) == {"a": "INT", "n": "BIGINT"}
    assert store.schema(OUT.namespace, OUT.name, 0, june + 1) == {"a": "VARCHAR"}


def test_two_servers_given_the_same_run_at_once_store_one_run(tmp_path):
    """START to one server and COMPLETE to another on the same store, at once,
    over many runs: each run has one start time and one set of index rows."""
    url = f"sqlite:///{tmp_path}/shared.db"
    with open_store(url) as s1, open_store(url) as s2, \
            TestClient(create_app(s1)) as c1, TestClient(create_app(s2)) as c2:
        run_ids = [str(uuid.uuid4()) for _ in range(60)]
        for rid in run_ids:
            barrier = threading.Barrier(2)
            answers: list[int] = []

            def send(client, body, barrier=barrier, answers=answers):
                barrier.wait()
                answers.append(client.post("/api/v1/lineage", json=body).status_code)

            threads = [threading.Thread(target=send, args=(c1, event(
                           rid, "START", ["a"], "2024-05-01T10:00:00Z"))),
                       threading.Thread(target=send, args=(c2, event(
                           rid, "COMPLETE", ["a"], "2024-05-01T10:07:00Z")))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(answers) in ([200, 201], [201, 201]), answers
        runs = s1.runs(OUT, 0, MAX_TIME)
        assert sorted(r.run_id for r in runs) == sorted(run_ids)  # no run twice
        for r in runs:
            assert r.start_ms == s1.run(r.run_id).start_ms
            assert r.start_ms in (1714557600000, 1714558020000)


def test_concurrent_events_of_one_run_on_one_server_lose_nothing(store):
    with TestClient(create_app(store)) as c:
        for _ in range(30):
            rid = str(uuid.uuid4())
            barrier = threading.Barrier(3)

            def send(fields, rid=rid, barrier=barrier):
                barrier.wait()
                c.post("/api/v1/lineage", json=event(rid, "RUNNING", fields))

            threads = [threading.Thread(target=send, args=(f,)) for f in (["a"], ["b"], ["c"])]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            info = store.operation_set(store.run(rid).checksum)
            assert sorted(info.destination_fields()[OUT]) == ["a", "b", "c"]
            assert EndPointField(SRC, "c") in store.incoming(EndPointField(OUT, "c"), 0,
                                                              MAX_TIME)
