"""Marquez's read API (`fll.server.marquez`, `marquez_lineage`, `marquez_search`)
over the seeded store: the HR run and the A → (chain/ab) → B → (chain/bc) → C chain, plus a second run of
chain/ab and a dataset under a URI namespace known only by its schema."""
from __future__ import annotations

import uuid
from datetime import datetime, timezone
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint, FieldLineageInfo, WriteOperation
from fll.errors import BadRequest
from fll.openlineage import export_run_id
from fll.server import create_app
from fll.server import marquez_model as mq
from fll.server import marquez_search as ms

from .fixtures import AB_RUN, ab_info

PG = "postgres://db:5432"
ORDERS = "shop/public:orders"  # a name with '/' and ':' too
AB2_RUN = "run-ab-2"
AB2_MS = 5_000_000


def enc(name: str) -> str:
    return quote(name, safe="")


@pytest.fixture
def api(seeded):
    seeded.record(ab_info(), AB2_RUN, AB2_MS, "chain/ab")
    seeded.record_schema("chain", "B", AB2_RUN, AB2_MS, [("x2", "VARCHAR"), ("y", "INTEGER")])
    seeded.record_schema(PG, ORDERS, "datasetEvent", 7_000_000, [("id", "BIGINT")])
    with TestClient(create_app(seeded)) as c:
        yield c


def get(api, path: str, status: int = 200, **params):
    r = api.get("/api/v1" + path, params=params)
    assert r.status_code == status, r.text
    return r.json()


def test_namespaces_are_those_of_datasets_and_of_jobs(api):
    got = {n["name"]: n for n in get(api, "/namespaces")["namespaces"]}
    # chain: datasets and jobs (chain/ab); fll: the job of a program without '/'
    assert set(got) == {"MyNamespace", "chain", "fll", PG}
    assert got["chain"]["createdAt"] == "1970-01-01T00:33:20.000Z"  # run-ab at 2,000 s
    assert got["chain"]["updatedAt"] == mq.iso(AB2_MS)
    assert got["chain"]["isHidden"] is False and got["chain"]["ownerName"]
    assert get(api, f"/namespaces/{enc(PG)}")["name"] == PG
    assert [n["name"] for n in get(api, "/namespaces", limit=1, offset=1)["namespaces"]] == [
        "chain"]


def test_an_unknown_namespace_or_dataset_is_a_404_with_marquez_s_message(api):
    # fll's one error shape (design/rest-api.md), Marquez's words
    assert get(api, "/namespaces/nowhere", 404) == {
        "error": "Namespace 'nowhere' not found.", "status": 404}
    assert get(api, "/namespaces/nowhere/datasets", 404)["status"] == 404
    assert get(api, "/namespaces/chain/datasets/Z", 404)["error"] == "Dataset 'Z' not found."
    assert get(api, "/namespaces/chain/datasets/Z/versions", 404)["status"] == 404
    missing = str(uuid.uuid4())
    assert get(api, f"/namespaces/chain/datasets/B/versions/{missing}", 404)["error"] == (
        f"Dataset version '{missing}' not found.")


def test_datasets_are_paged_by_name_with_the_total(api):
    page = get(api, "/namespaces/chain/datasets", limit=2, offset=1)
    assert page["totalCount"] == 3
    assert [d["name"] for d in page["datasets"]] == ["B", "C"]
    assert get(api, "/namespaces/chain/datasets", limit=0)["datasets"] == []
    assert "offset" in get(api, "/namespaces/chain/datasets", 400, offset=-1)["error"]
    # a namespace with jobs only has no datasets, and exists
    assert get(api, "/namespaces/fll/datasets") == {"totalCount": 0, "datasets": []}


def test_a_dataset_has_its_latest_schema_version_and_column_lineage(api):
    b = get(api, "/namespaces/chain/datasets/B")
    assert b["id"] == {"namespace": "chain", "name": "B"} and b["type"] == "DB_TABLE"
    assert b["fields"] == [{"name": "x2", "type": "VARCHAR", "tags": [], "description": None},
                           {"name": "y", "type": "INTEGER", "tags": [], "description": None}]
    assert b["facets"]["schema"]["fields"] == [{"name": "x2", "type": "VARCHAR"},
                                               {"name": "y", "type": "INTEGER"}]
    assert b["lastModifiedAt"] == mq.iso(AB2_MS)
    assert b["currentVersion"] == mq.dataset_version("chain", "B", AB2_RUN)
    assert b["sourceName"] == "chain" and b["deleted"] is False and b["tags"] == []
    x2 = next(c for c in b["columnLineage"] if c["name"] == "x2")
    assert [(i["dataset"], i["field"], i["transformationType"])
            for i in x2["inputFields"]] == [("A", "x", "DIRECT"), ("A", "y", "INDIRECT")]
    assert x2["inputFields"][0]["transformationDescription"] == "upper(x)"
    # A is only read: fields from lineage (no type), no version, no schema facet
    a = get(api, "/namespaces/chain/datasets/A")
    assert [f["name"] for f in a["fields"]] == ["x", "y"] and a["fields"][0]["type"] is None
    assert a["currentVersion"] is None and a["columnLineage"] is None and a["facets"] == {}


def test_uri_namespaces_and_names_with_slashes_and_colons(api):
    d = get(api, f"/namespaces/{enc(PG)}/datasets/{enc(ORDERS)}")
    assert d["name"] == ORDERS and d["namespace"] == PG
    assert d["fields"][0] == {"name": "id", "type": "BIGINT", "tags": [], "description": None}
    # known by a schema only: one version, made by no run
    versions = get(api, f"/namespaces/{enc(PG)}/datasets/{enc(ORDERS)}/versions")["versions"]
    assert len(versions) == 1 and versions[0]["createdByRun"] is None
    assert versions[0]["version"] == d["currentVersion"]
    assert get(api, f"/namespaces/{enc(PG)}/datasets")["datasets"][0]["name"] == ORDERS


def test_versions_are_the_runs_that_wrote_the_dataset_newest_first(api):
    body = get(api, "/namespaces/chain/datasets/B/versions")
    assert body["totalCount"] == 2
    new, old = body["versions"]
    assert new["version"] == mq.dataset_version("chain", "B", AB2_RUN)
    assert old["version"] == mq.dataset_version("chain", "B", AB_RUN)
    assert new["createdAt"] == mq.iso(AB2_MS)
    # the run's own schema; the older run reported none: the fields it wrote, untyped
    assert [(f["name"], f["type"]) for f in new["fields"]] == [("x2", "VARCHAR"), ("y", "INTEGER")]
    assert [(f["name"], f["type"]) for f in old["fields"]] == [("x2", None), ("y", None)]
    run = new["createdByRun"]
    assert run["id"] == export_run_id(AB2_RUN)  # as export names it: a UUID
    assert run["jobVersion"]["namespace"] == "chain" and run["jobVersion"]["name"] == "ab"
    # recorded through the store API (no run model): a finished run
    assert run["startedAt"] == mq.iso(AB2_MS) and run["state"] == "COMPLETED"
    assert [v["version"] for v in get(api, "/namespaces/chain/datasets/B/versions",
                                      limit=1, offset=1)["versions"]] == [old["version"]]
    one = get(api, f"/namespaces/chain/datasets/B/versions/{old['version']}")
    assert one == old
    # the same ids every time
    assert get(api, "/namespaces/chain/datasets/B/versions") == body


def _graph(api, node: str, **params) -> dict:
    return {n["id"]: n for n in get(api, "/lineage", nodeId=node, **params)["graph"]}


def test_the_lineage_graph_joins_jobs_through_their_datasets(api):
    g = _graph(api, "dataset:chain:C")
    assert set(g) == {"job:chain:ab", "job:chain:bc", "dataset:chain:A", "dataset:chain:B",
                      "dataset:chain:C"}
    ab = g["job:chain:ab"]
    assert ab["type"] == "JOB" and ab["data"]["type"] == "BATCH"
    assert ab["data"]["inputs"] == [{"namespace": "chain", "name": "A"}]
    assert ab["data"]["outputs"] == [{"namespace": "chain", "name": "B"}]
    assert ab["data"]["latestRun"]["startedAt"] == mq.iso(AB2_MS)
    assert ab["inEdges"] == [{"origin": "dataset:chain:A", "destination": "job:chain:ab"}]
    assert ab["outEdges"] == [{"origin": "job:chain:ab", "destination": "dataset:chain:B"}]
    b = g["dataset:chain:B"]
    assert b["type"] == "DATASET" and b["data"]["name"] == "B"
    assert b["inEdges"] == [{"origin": "job:chain:ab", "destination": "dataset:chain:B"}]
    assert b["outEdges"] == [{"origin": "dataset:chain:B", "destination": "job:chain:bc"}]
    assert g["dataset:chain:A"]["inEdges"] == [] and g["dataset:chain:C"]["outEdges"] == []


def test_depth_counts_job_hops_and_a_job_node_starts_from_the_job(api):
    # C's writer is bc; depth 0: bc alone with its datasets
    assert set(_graph(api, "dataset:chain:C", depth=0)) == {
        "job:chain:bc", "dataset:chain:B", "dataset:chain:C"}
    assert set(_graph(api, "job:chain:ab", depth=0)) == {
        "job:chain:ab", "dataset:chain:A", "dataset:chain:B"}
    assert "job:chain:bc" in _graph(api, "job:chain:ab", depth=1)
    # the HR graph is apart from the chain
    hr = _graph(api, "job:fll:hr-pipeline")
    assert {k for k in hr if k.startswith("job:")} == {"job:fll:hr-pipeline"}
    assert "dataset:MyNamespace:Employee Data" in hr


def test_version_node_ids_are_understood(api):
    version = mq.dataset_version("chain", "B", AB_RUN)
    assert set(_graph(api, f"dataset:chain:B#{version}", depth=0)) == {
        "job:chain:ab", "dataset:chain:A", "dataset:chain:B"}
    job_version = mq.job_version("chain", "bc", "whatever")
    assert "job:chain:bc" in _graph(api, f"job:chain:bc#{job_version}", depth=0)


def test_a_dataset_no_job_touches_is_a_graph_of_itself(api):
    g = _graph(api, f"dataset:{PG}:{ORDERS}")
    assert list(g) == [f"dataset:{PG}:{ORDERS}"]
    assert g[f"dataset:{PG}:{ORDERS}"]["inEdges"] == []


def test_lineage_errors(api):
    assert get(api, "/lineage", 400)["error"] == "nodeId is required"
    assert get(api, "/lineage", 404, nodeId="dataset:chain:Z")["status"] == 404
    assert get(api, "/lineage", 404, nodeId="job:chain:zz")["status"] == 404
    assert "nodeId" in get(api, "/lineage", 400, nodeId="run:1234")["error"]
    assert "depth" in get(api, "/lineage", 400, nodeId="job:chain:ab", depth=-1)["error"]


def test_ingest_still_answers_post_beside_the_get(api):
    event = {"eventType": "COMPLETE", "eventTime": "2024-01-01T00:00:00Z",
             "producer": "https://example.com/p", "schemaURL":
             "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": str(uuid.uuid4())}, "job": {"namespace": "shop", "name": "j"},
             "inputs": [], "outputs": [{"namespace": "shop", "name": "t", "facets": {
                 "schema": {"_producer": "https://example.com/p",
                            "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                                          "SchemaDatasetFacet.json",
                            "fields": [{"name": "a", "type": "INT"}]}}}]}
    r = api.post("/api/v1/lineage", json=event)
    assert r.status_code == 201, r.text
    assert get(api, "/namespaces/shop/datasets/t")["fields"][0]["type"] == "INT"


def test_search_matches_names_filters_and_sorts(api):
    body = get(api, "/search", q="b")
    assert body["totalCount"] == len(body["results"])
    assert [(r["type"], r["name"]) for r in body["results"]] == [
        ("JOB", "ab"), ("DATASET", "B"), ("JOB", "bc"), ("DATASET", ORDERS)]
    assert body["results"][1] == {"type": "DATASET", "name": "B", "namespace": "chain",
                                  "updatedAt": mq.iso(AB2_MS), "nodeId": "dataset:chain:B"}
    assert [r["name"] for r in get(api, "/search", q="B", filter="DATASET")["results"]] == [
        "B", ORDERS]
    assert [r["name"] for r in get(api, "/search", q="b", filter="JOB")["results"]] == [
        "ab", "bc"]
    newest = get(api, "/search", q="b", sort="UPDATE_AT")["results"]
    assert [r["name"] for r in newest] == [ORDERS, "ab", "B", "bc"]  # ab and B at 5,000 s
    assert len(get(api, "/search", q="e", limit=2)["results"]) == 2
    assert [r["name"] for r in get(api, "/search", q="e", namespace="fll")["results"]] == [
        "hr-pipeline"]
    assert get(api, "/search", q="b", before="1970-01-01")["results"] == []
    assert get(api, "/search", 400)["error"].startswith("q is required")
    assert "filter" in get(api, "/search", 400, q="b", filter="RUN")["error"]


NOW = int(datetime(2026, 3, 29, 12, 30, tzinfo=timezone.utc).timestamp() * 1000)


def test_stats_intervals_follow_marquez():
    day = ms.intervals("DAY", None, NOW)
    assert len(day) == 24 and day[-1][0] == NOW - 30 * 60_000
    assert all(e - s == 3_600_000 for s, e in day)
    week = ms.intervals("WEEK", "Europe/Berlin", NOW)
    assert len(week) == 7
    # 29 March 2026 is the clock change in Berlin: a day of 23 hours
    assert week[-1][1] - week[-1][0] == 23 * 3_600_000
    assert datetime.fromtimestamp(week[-1][0] / 1000, tz=timezone.utc).hour == 23  # 00:00 CET
    with pytest.raises(BadRequest, match="period"):
        ms.intervals("MONTH", None, NOW)
    for zone in ("Mars/Olympus", "a" * 5000, "/etc/passwd"):
        with pytest.raises(BadRequest, match="timezone"):
            ms.intervals("WEEK", zone, NOW)


def test_stats_count_runs_and_what_existed(seeded):
    # runs at 2,000 s and 3,000 s: put the clock just after, so DAY's buckets hold them
    now = 3_000_000 + 1_800_000
    events = ms.stats(seeded, "lineage-events", "DAY", None, now)
    assert sum(b["start"] for b in events) == 2 and {b["complete"] for b in events} == {0}
    jobs = ms.stats(seeded, "jobs", "DAY", None, now)
    assert jobs[-1]["count"] == 2  # chain/ab, chain/bc (the HR run is in 2017)
    assert jobs[-1]["startInterval"] == mq.iso(3_600_000)
    assert ms.stats(seeded, "datasets", "DAY", None, now)[-1]["count"] == 3
    assert ms.stats(seeded, "sources", "DAY", None, now)[-1]["count"] == 1
    later = ms.stats(seeded, "datasets", "WEEK", "UTC", 1_600_000_000_000)
    assert {b["count"] for b in later} == {6}


def test_stats_routes(api):
    body = get(api, "/stats/lineage-events", period="WEEK", timezone="UTC")
    assert len(body) == 7 and set(body[0]) == {"startInterval", "endInterval", "start",
                                               "complete", "fail", "abort"}
    assert len(get(api, "/stats/jobs", period="DAY")) == 24
    assert get(api, "/stats/sources", period="DAY")[-1]["count"] == 3  # chain, MyNamespace, PG
    assert "period" in get(api, "/stats/jobs", 400)["error"]
    assert get(api, "/stats/runs", 404, period="DAY")["status"] == 404


def test_column_lineage_understands_version_node_ids(api):
    version = mq.dataset_version("chain", "B", AB_RUN)
    for node in (f"datasetField:chain:B:x2#{version}", f"dataset:chain:B#{version}",
                 f"job:chain:ab#{mq.job_version('chain', 'ab', 'c')}"):
        graph = get(api, "/column-lineage", nodeId=node, depth=1)["graph"]
        assert "datasetField:chain:A:x" in {n["id"] for n in graph}, node
    # what follows '#' must be a version (a UUID): else it is part of the name
    assert get(api, "/column-lineage", 404, nodeId="dataset:chain:B#v1")["status"] == 404


def test_a_dataset_its_job_no_longer_writes_is_a_graph_of_itself(seeded):
    # chain/ab's newest run writes D, not B: B's writer no longer shares lineage with it
    info = ab_info()
    moved = FieldLineageInfo([op if op.name != "writeB" else WriteOperation(
        op.name, op.description, EndPoint("chain", "D"), op.inputs) for op in info.operations])
    seeded.record(moved, "run-ab-3", 9_000_000, "chain/ab")
    with TestClient(create_app(seeded)) as c:
        g = {n["id"] for n in c.get("/api/v1/lineage",
                                    params={"nodeId": "dataset:chain:B"}).json()["graph"]}
        assert g == {"dataset:chain:B"}
        g = {n["id"] for n in c.get("/api/v1/lineage",
                                    params={"nodeId": "dataset:chain:D"}).json()["graph"]}
        assert {"job:chain:ab", "dataset:chain:A", "dataset:chain:D"} <= g
