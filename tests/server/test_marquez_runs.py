"""Marquez's jobs, runs and events routes (fll.server.runs): the JSON fields
Marquez's UI and marquez-python read, paging, names holding ``://``, ``/`` and
``:``, and marquez-python 0.50.0's own client against a live `fll serve` fed by
openlineage-python's client."""
from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from fll.server import create_app

JOB_NS, JOB = "spark://cluster:7077/prod", "etl/daily:totals"
Q = lambda s: quote(s, safe="")  # noqa: E731


def ev(run_id: str, state: str, time: str, *, job: str = JOB, lineage: bool = True,
       run_facets: dict | None = None, job_facets: dict | None = None) -> dict:
    facets = {"columnLineage": {"fields": {"total": {"inputFields": [
        {"namespace": "postgres://db:5432", "name": "public.orders", "field": "amount"}]}}}} \
        if lineage else {}
    return {"eventType": state, "eventTime": time, "producer": "urn:test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": run_facets or {}},
            "job": {"namespace": JOB_NS, "name": job, "facets": job_facets or {}},
            "inputs": [{"namespace": "postgres://db:5432", "name": "public.orders"}],
            "outputs": [{"namespace": "s3://lake", "name": "totals", "facets": facets}]}


@pytest.fixture
def client(store):
    with TestClient(create_app(store)) as c:
        yield c


@pytest.fixture
def three_runs(client):
    """Three runs of one job an hour apart: COMPLETE, FAIL, and one still running
    (this one without column lineage: a run all the same)."""
    ids = [str(uuid.uuid4()) for _ in range(3)]
    client.post("/api/v1/lineage", json=ev(ids[0], "START", "2024-05-01T08:00:00Z",
                                           run_facets={"nominalTime": {
                                               "nominalStartTime": "2024-05-01T08:00:00Z"}}))
    client.post("/api/v1/lineage", json=ev(ids[0], "COMPLETE", "2024-05-01T08:10:00Z",
                                           job_facets={"documentation": {
                                               "description": "daily totals"},
                                               "sourceCodeLocation": {
                                                   "type": "git", "url": "https://git/x"}}))
    client.post("/api/v1/lineage", json=ev(ids[1], "START", "2024-05-01T09:00:00Z"))
    client.post("/api/v1/lineage", json=ev(ids[1], "FAIL", "2024-05-01T09:03:00Z",
                                           run_facets={"errorMessage": {
                                               "message": "OOM", "programmingLanguage": "py"}}))
    client.post("/api/v1/lineage", json=ev(ids[2], "START", "2024-05-01T10:00:00Z",
                                           lineage=False))
    return ids


RUN_FIELDS = {"id", "createdAt", "updatedAt", "nominalStartTime", "nominalEndTime", "state",
              "startedAt", "endedAt", "durationMs", "args", "jobVersion", "facets"}
JOB_FIELDS = {"id", "type", "name", "createdAt", "updatedAt", "inputs", "outputs", "namespace",
              "location", "description", "latestRun", "latestRuns", "tags", "parentJobName",
              "parentJobUuid", "facets"}


def test_a_job_s_runs_newest_first_with_states_paging_and_total(client, three_runs):
    url = f"/api/v1/namespaces/{Q(JOB_NS)}/jobs/{Q(JOB)}/runs"
    body = client.get(url).json()
    assert body["totalCount"] == 3
    assert [r["id"] for r in body["runs"]] == three_runs[::-1]
    assert [r["state"] for r in body["runs"]] == ["RUNNING", "FAILED", "COMPLETED"]
    assert RUN_FIELDS <= set(body["runs"][0])
    done = body["runs"][2]
    assert (done["startedAt"], done["endedAt"], done["durationMs"]) == (
        "2024-05-01T08:00:00.000Z", "2024-05-01T08:10:00.000Z", 600_000)
    assert done["nominalStartTime"] == "2024-05-01T08:00:00Z"
    assert body["runs"][0]["endedAt"] is None and body["runs"][0]["durationMs"] is None
    page = client.get(url + "?limit=1&offset=1").json()
    assert [r["id"] for r in page["runs"]] == [three_runs[1]] and page["totalCount"] == 3
    assert client.get(url + "?limit=-1").status_code == 400


def test_a_job_with_its_latest_run_datasets_and_facets(client, three_runs):
    body = client.get(f"/api/v1/namespaces/{Q(JOB_NS)}/jobs/{Q(JOB)}").json()
    assert JOB_FIELDS <= set(body)
    assert body["id"] == {"namespace": JOB_NS, "name": JOB} and body["namespace"] == JOB_NS
    assert body["latestRun"]["id"] == three_runs[2]
    assert body["createdAt"] == "2024-05-01T08:00:00.000Z"
    assert body["updatedAt"] == "2024-05-01T10:00:00.000Z"
    assert body["inputs"] == [{"namespace": "postgres://db:5432", "name": "public.orders"}]
    assert body["outputs"] == [{"namespace": "s3://lake", "name": "totals"}]
    lists = [client.get("/api/v1/jobs").json(),
             client.get(f"/api/v1/namespaces/{Q(JOB_NS)}/jobs").json()]
    for listed in lists:
        assert listed["totalCount"] == 1 and listed["jobs"][0]["name"] == JOB
    assert client.get(f"/api/v1/namespaces/{Q('spark://cluster')}/jobs").json() == \
        {"jobs": [], "totalCount": 0}
    # Marquez's filter on the latest run's state (the latest is still running)
    assert client.get("/api/v1/jobs?lastRunStates=RUNNING").json()["totalCount"] == 1
    assert client.get("/api/v1/jobs?lastRunStates=FAILED,COMPLETED").json() == \
        {"jobs": [], "totalCount": 0}
    assert client.get("/api/v1/jobs?lastRunStates=DONE").status_code == 400
    r = client.get(f"/api/v1/namespaces/{Q(JOB_NS)}/jobs/nope")
    assert r.status_code == 404 and "nope" in r.json()["error"]


def test_a_run_and_its_run_or_job_facets(client, three_runs):
    run = client.get(f"/api/v1/jobs/runs/{three_runs[1]}").json()
    assert run["state"] == "FAILED" and run["facets"]["errorMessage"]["message"] == "OOM"
    assert run["jobVersion"]["namespace"] == JOB_NS and run["jobVersion"]["name"] == JOB
    facets = client.get(f"/api/v1/jobs/runs/{three_runs[0]}/facets?type=job").json()
    assert facets["runId"] == three_runs[0]
    assert facets["facets"]["documentation"] == {"description": "daily totals"}
    facets = client.get(f"/api/v1/jobs/runs/{three_runs[0]}/facets").json()
    assert "nominalTime" in facets["facets"]
    assert client.get(f"/api/v1/jobs/runs/{three_runs[0]}/facets?type=x").status_code == 400
    assert client.get(f"/api/v1/jobs/runs/{uuid.uuid4()}").status_code == 404


def test_events_in_a_time_range_both_ways_with_paging(client, three_runs):
    body = client.get("/api/v1/events/lineage?after=2024-05-01T08:05:00Z"
                      "&before=2024-05-01T09:30:00Z").json()
    assert body["totalCount"] == 3
    assert [(e["run"]["runId"], e["eventType"]) for e in body["events"]] == [
        (three_runs[1], "FAIL"), (three_runs[1], "START"), (three_runs[0], "COMPLETE")]
    asc = client.get("/api/v1/events/lineage?after=2024-05-01T08:05:00Z"
                     "&before=2024-05-01T09:30:00Z&sortDirection=asc&limit=1&offset=1").json()
    assert asc["totalCount"] == 3 and [e["eventType"] for e in asc["events"]] == ["START"]
    assert client.get("/api/v1/events/lineage").json()["totalCount"] == 5
    assert client.get("/api/v1/events/lineage?sortDirection=up").status_code == 400
    assert client.get("/api/v1/events/lineage?before=yesterday-ish").status_code == 400


# -- marquez-python against a live server ------------------------------------------------

def test_marquez_python_reads_jobs_and_runs_sent_by_the_openlineage_client(tmp_path):
    from marquez_client import MarquezClient
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent
    from openlineage.client.event_v2 import RunState
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    from tests.openlineage.conftest import start_server, stop

    proc, base = start_server(f"sqlite:///{tmp_path}/live.db", token=None)
    try:
        ol = OpenLineageClient(transport=HttpTransport(HttpConfig(url=base,
                                                                  endpoint="api/v1/lineage")))
        ids = [str(uuid.uuid4()) for _ in range(3)]
        for i, (rid, end) in enumerate(zip(ids, [RunState.COMPLETE, RunState.FAIL,
                                                 RunState.ABORT], strict=True)):
            for state, minute in ((RunState.START, 0), (end, 5)):
                ol.emit(RunEvent(eventType=state, eventTime=f"2024-05-0{i + 1}T10:0{minute}:00Z",
                                 run=Run(runId=rid), job=Job(namespace=JOB_NS, name=JOB),
                                 producer="urn:test",
                                 inputs=[InputDataset("postgres://db:5432", "public.orders")],
                                 outputs=[OutputDataset("s3://lake", "totals")]))
        mq = MarquezClient(url=base)
        jobs = mq.list_jobs(JOB_NS)
        assert jobs["totalCount"] == 1 and jobs["jobs"][0]["id"] == {"namespace": JOB_NS,
                                                                     "name": JOB}
        job = mq.get_job(JOB_NS, JOB)
        assert job["latestRun"]["id"] == ids[2] and job["latestRun"]["state"] == "ABORTED"
        runs = mq.list_job_runs(JOB_NS, JOB, limit=2)
        assert runs["totalCount"] == 3
        assert [(r["id"], r["state"]) for r in runs["runs"]] == [(ids[2], "ABORTED"),
                                                                (ids[1], "FAILED")]
        older = mq.list_job_runs(JOB_NS, JOB, limit=2, offset=2)["runs"]
        assert [(r["id"], r["state"]) for r in older] == [(ids[0], "COMPLETED")]
        run = mq.get_job_run(ids[0])
        assert run["startedAt"] == "2024-05-01T10:00:00.000Z"
        assert run["endedAt"] == "2024-05-01T10:05:00.000Z" and run["durationMs"] == 300_000
    finally:
        stop(proc)
