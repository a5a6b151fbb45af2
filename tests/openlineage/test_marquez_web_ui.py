"""Every GET Marquez's web UI makes, replayed against a live `fll serve` as the
UI builds it (its request helpers, web/src/store/requests/*.ts of the Marquez
repository: path segments through encodeURIComponent, node ids not encoded
again), each answer checked for the fields the UI reads (web/src/types/api.ts,
web/src/types/lineage.ts).

`UI_CALLS` lists them all with who serves them: ``fll.server.marquez`` (this
product's Marquez read API), ``column-lineage`` (`fll.server.app`), ``runs``
(jobs, runs, run facets, raw events: `fll.server.runs`), ``tags``
(`fll.server.governance`) and ``opensearch`` (Marquez's v2beta search, backed
by OpenSearch in Marquez, answered by `fll.server.marquez` from the run
model). Every call is replayed (`SERVED` names them all).

The UI sends no credentials: `fll serve` runs without a token here, as it
would behind the UI (or with ``--token … --public-reads``)."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple
from urllib.parse import quote

import httpx
import pytest

from .conftest import start_server, stop
from .shop_events import DUCK, ORDERS, PG, REPORT, RUN_2, TOTALS, send_shop

#: who serves what: the calls of the servers listed here are replayed
SERVED = {"fll.server.marquez", "column-lineage", "tags", "runs", "opensearch"}


def enc(value: str) -> str:
    """JavaScript's encodeURIComponent."""
    return quote(value, safe="-_.!~*'()")


# -- what the UI reads (web/src/types/api.ts) ----------------------------------------------

def _str(v: Any) -> bool:
    return isinstance(v, str)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def check_namespace(n: dict) -> None:
    assert _str(n["name"]) and _str(n["createdAt"]) and _str(n["updatedAt"])
    assert _str(n["ownerName"]) and _opt_str(n["description"]) and n["isHidden"] is False


def check_field(f: dict) -> None:
    assert _str(f["name"]) and _opt_str(f["type"]) and _opt_str(f["description"])
    assert isinstance(f["tags"], list)


def check_run(r: dict) -> None:
    for key in ("id", "createdAt", "updatedAt", "startedAt"):
        assert _str(r[key]), key
    for key in ("nominalStartTime", "nominalEndTime", "endedAt", "state"):
        assert _opt_str(r[key]), key
    assert r["durationMs"] is None or isinstance(r["durationMs"], int)
    assert set(r["jobVersion"]) >= {"name", "namespace", "version"}
    assert isinstance(r["args"], dict) and isinstance(r["facets"], dict)


def check_dataset(d: dict, *, in_graph: bool = False) -> None:
    assert set(d["id"]) == {"namespace", "name"}
    assert d["type"] in ("DB_TABLE", "STREAM")
    for key in ("name", "physicalName", "createdAt", "updatedAt", "namespace", "sourceName"):
        assert _str(d[key]), key
    for f in d["fields"]:
        check_field(f)
    assert all(_str(t) for t in d["tags"])
    assert _opt_str(d["lastModifiedAt"]) and _opt_str(d["description"])
    assert isinstance(d["facets"], dict)
    if not in_graph:
        assert d["deleted"] is False
        assert d["columnLineage"] is None or all(
            _str(c["name"]) and all({"namespace", "dataset", "field", "transformationDescription",
                                     "transformationType"} <= set(i) for i in c["inputFields"])
            for c in d["columnLineage"])


def check_version(v: dict) -> None:
    assert set(v["id"]) == {"namespace", "name", "version"}
    for key in ("name", "physicalName", "createdAt", "version", "namespace", "sourceName"):
        assert _str(v[key]), key
    for f in v["fields"]:
        check_field(f)
    assert isinstance(v["tags"], list) and _opt_str(v["lifecycleState"])
    assert isinstance(v["facets"], dict)
    if v["createdByRun"] is not None:
        check_run(v["createdByRun"])


def check_job(j: dict) -> None:
    assert set(j["id"]) == {"namespace", "name"} and j["type"] in ("BATCH", "STREAM", "SERVICE")
    for key in ("name", "createdAt", "updatedAt", "namespace"):
        assert _str(j[key]), key
    assert all(set(i) == {"namespace", "name"} for i in j["inputs"] + j["outputs"])
    assert _opt_str(j["location"]) and _opt_str(j["description"])
    assert j["latestRun"] is None or check_run(j["latestRun"]) is None
    assert "parentJobName" in j and "parentJobUuid" in j


def check_graph(body: dict) -> None:
    ids = {n["id"] for n in body["graph"]}
    for node in body["graph"]:
        assert node["type"] in ("JOB", "DATASET")
        if node["type"] == "JOB":
            check_job(node["data"])
            assert _str(node["data"]["simpleName"])
        else:
            check_dataset(node["data"], in_graph=True)
        for edge in node["inEdges"] + node["outEdges"]:
            assert {edge["origin"], edge["destination"]} <= ids


# -- the calls ------------------------------------------------------------------------------

class Call(NamedTuple):
    source: str       # web/src/store/requests/<source>
    function: str     # the UI's request function
    url: str          # as the UI builds it, with this test's values
    served_by: str
    check: Callable[[Any], None]


def _namespaces(b: dict) -> None:
    assert {PG, DUCK, "shop"} <= {n["name"] for n in b["namespaces"]}
    for n in b["namespaces"]:
        check_namespace(n)


def _datasets(b: dict) -> None:
    assert b["totalCount"] == 2 and [d["name"] for d in b["datasets"]] == [TOTALS, REPORT]
    for d in b["datasets"]:
        check_dataset(d)


def _versions(b: dict) -> None:
    assert b["totalCount"] == 2 and b["versions"][0]["createdByRun"]["id"] == RUN_2
    for v in b["versions"]:
        check_version(v)


def _dataset(d: dict) -> None:
    check_dataset(d)
    assert [f["name"] for f in d["fields"]] == ["customer_id", "total", "n_orders"]
    assert d["columnLineage"] and d["currentVersion"]


def _interval(b: list) -> None:
    assert len(b) in (7, 24)
    for i in b:
        assert _str(i["startInterval"]) and _str(i["endInterval"]) and isinstance(i["count"], int)


def _lineage_metric(b: list) -> None:
    assert len(b) in (7, 24)
    for i in b:
        assert {"startInterval", "endInterval", "fail", "start", "complete", "abort"} <= set(i)


def _graph_of_totals(b: dict) -> None:
    check_graph(b)
    assert {"job:shop:customer_totals", "job:shop:weekly_report", f"dataset:{PG}:{ORDERS}",
            f"dataset:{DUCK}:{TOTALS}", f"dataset:{DUCK}:{REPORT}"} == {
        n["id"] for n in b["graph"]}


def _graph_of_report_job(b: dict) -> None:
    check_graph(b)
    job = next(n for n in b["graph"] if n["id"] == "job:shop:weekly_report")
    assert job["data"]["inputs"] == [{"namespace": DUCK, "name": TOTALS}]
    assert job["outEdges"] == [{"origin": "job:shop:weekly_report",
                                "destination": f"dataset:{DUCK}:{REPORT}"}]


def _column_graph(b: dict) -> None:
    ids = {n["id"] for n in b["graph"]}
    assert f"datasetField:{PG}:{ORDERS}:amount" in ids
    assert f"datasetField:{DUCK}:{REPORT}:best_total" in ids  # withDownstream=true
    for n in b["graph"]:
        assert {"namespace", "dataset", "field", "fieldType", "inputFields"} <= set(n["data"])


def _search(b: dict) -> None:
    assert b["totalCount"] == len(b["results"]) >= 2
    for r in b["results"]:
        assert {"name", "namespace", "nodeId", "type", "updatedAt"} <= set(r)
        assert r["type"] in ("JOB", "DATASET") and r["nodeId"].startswith(r["type"].lower())


def _search_datasets(b: dict) -> None:
    _search(b)
    assert {r["type"] for r in b["results"]} == {"DATASET"}


# the checks of calls served elsewhere, from the UI's types: ready for when they are served
def _tags(b: dict) -> None:
    assert all(_str(t["name"]) and "description" in t for t in b["tags"])


def _events(b: dict) -> None:
    assert isinstance(b["totalCount"], int)
    for e in b["events"]:
        assert {"eventType", "eventTime", "producer", "schemaURL", "run", "job", "inputs",
                "outputs"} <= set(e)


def _facets(b: dict) -> None:
    assert _str(b["runId"]) and isinstance(b["facets"], dict)


def _jobs(b: dict) -> None:
    assert isinstance(b["totalCount"], int)
    for j in b["jobs"]:
        check_job(j)


def _runs(b: dict) -> None:
    for r in b["runs"]:
        check_run(r)


TOTALS_NODE = f"dataset:{enc(DUCK)}:{enc(TOTALS)}"
def _open_search_jobs(b: dict) -> None:
    # what the search bar's job results read (OpenSearchResultJobs)
    assert len(b["hits"]) == len(b["highlights"]) >= 1
    hit = {h["name"]: h for h in b["hits"]}["customer_totals"]
    assert hit["namespace"] == "shop" and hit["eventType"] == "COMPLETE"
    assert _str(hit["run_id"]) and isinstance(hit["runFacets"], dict)
    assert isinstance(hit.get("facets", {}), dict)
    assert all("<em>" in h["name"][0] for h in b["highlights"])


def _open_search_datasets(b: dict) -> None:
    # OpenSearchResultDatasets: the schema and column lineage facets
    hit = {h["name"]: h for h in b["hits"]}[TOTALS]
    assert hit["namespace"] == DUCK and _str(hit["run_id"])
    assert [f["name"] for f in hit["facets"]["schema"]["fields"]]
    lineage = hit["facets"]["columnLineage"]["fields"]
    assert all(_str(i["namespace"]) and _str(i["field"])
               for f in lineage.values() for i in f["inputFields"])


UI_CALLS = [
    Call("namespaces.ts", "getNamespaces", "/api/v1/namespaces", "fll.server.marquez",
         _namespaces),
    Call("datasets.ts", "getDatasets", f"/api/v1/namespaces/{enc(DUCK)}/datasets?limit=20"
         "&offset=0", "fll.server.marquez", _datasets),
    Call("datasets.ts", "getDatasetVersions", f"/api/v1/namespaces/{enc(DUCK)}/datasets/"
         f"{enc(TOTALS)}/versions?limit=10&offset=0", "fll.server.marquez", _versions),
    Call("datasets.ts", "getDataset", f"/api/v1/namespaces/{enc(DUCK)}/datasets/{enc(TOTALS)}",
         "fll.server.marquez", _dataset),
    *[Call("intervalMetrics.ts", "getIntervalMetrics",
           f"/api/v1/stats/{asset}?period={period}&timezone=Europe/Berlin",
           "fll.server.marquez", _interval)
      for asset in ("jobs", "datasets", "sources") for period in ("DAY", "WEEK")],
    *[Call("lineageMetrics.ts", "getLineageMetrics",
           f"/api/v1/stats/lineage-events?period={period}&timezone=Europe/Berlin",
           "fll.server.marquez", _lineage_metric) for period in ("DAY", "WEEK")],
    Call("lineage.ts", "getLineage", f"/api/v1/lineage?nodeId={TOTALS_NODE}&depth=5",
         "fll.server.marquez", _graph_of_totals),
    Call("lineage.ts", "getLineage", "/api/v1/lineage?nodeId=job:shop:weekly_report&depth=0",
         "fll.server.marquez", _graph_of_report_job),
    Call("columnlineage.ts", "getColumnLineage", f"/api/v1/column-lineage?nodeId="
         f"{TOTALS_NODE}&depth=5&withDownstream=true", "column-lineage", _column_graph),
    Call("search.ts", "getSearch", "/api/v1/search?q=total&sort=NAME&limit=100",
         "fll.server.marquez", _search),
    Call("search.ts", "getSearch", "/api/v1/search?q=main&sort=UPDATE_AT&limit=100"
         "&filter=DATASET", "fll.server.marquez", _search_datasets),
    # served elsewhere: enable by adding their server to SERVED
    Call("tags.ts", "getTags", "/api/v1/tags", "tags", _tags),
    Call("events.ts", "getEvents", "/api/v1/events/lineage?limit=100&before=&after=&offset=0"
         "&sortDirection=desc", "runs", _events),
    Call("facets.ts", "getRunFacets", f"/api/v1/jobs/runs/{RUN_2}/facets?type=run", "runs",
         _facets),
    Call("facets.ts", "getJobFacets", f"/api/v1/jobs/runs/{RUN_2}/facets?type=job", "runs",
         _facets),
    Call("jobs.ts", "getJobs", "/api/v1/jobs?limit=25&offset=0", "runs", _jobs),
    Call("jobs.ts", "getJobs", "/api/v1/namespaces/shop/jobs?limit=25&offset=0"
         "&lastRunStates=COMPLETED", "runs", _jobs),
    Call("jobs.ts", "getRuns", "/api/v1/namespaces/shop/jobs/customer_totals/runs?limit=10"
         "&offset=0", "runs", _runs),
    Call("jobs.ts", "getJob", "/api/v1/namespaces/shop/jobs/customer_totals", "runs", check_job),
    # Marquez's search of recent events (OpenSearch in Marquez): answered from the run model
    Call("search.ts", "getOpenSearchJobs", "/api/v2beta/search/jobs?q=total", "opensearch",
         _open_search_jobs),
    Call("search.ts", "getOpenSearchDatasets", "/api/v2beta/search/datasets?q=total",
         "opensearch", _open_search_datasets),
]


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    proc, base = start_server(f"sqlite:///{tmp_path_factory.mktemp('ui')}/ui.db", token=None)
    try:
        send_shop(base, "unused")
        yield base
    finally:
        stop(proc)


@pytest.mark.parametrize("call", [c for c in UI_CALLS if c.served_by in SERVED],
                         ids=lambda c: f"{c.function}:{c.url.split('?')[0]}")
def test_the_ui_call_is_answered_with_what_the_ui_reads(ui_server, call):
    # the URL is sent as the browser sends it: not encoded again
    r = httpx.get(ui_server + call.url, timeout=30)
    assert r.status_code == 200, r.text
    call.check(r.json())


def test_the_call_list_names_every_request_helper_of_the_ui():
    # the UI's GET helpers (the other helpers send PUT, POST or DELETE)
    assert {c.function for c in UI_CALLS} == {
        "getNamespaces", "getDatasets", "getDatasetVersions", "getDataset",
        "getIntervalMetrics", "getLineageMetrics", "getLineage", "getColumnLineage",
        "getSearch", "getOpenSearchJobs", "getOpenSearchDatasets", "getTags", "getEvents",
        "getRunFacets", "getJobFacets", "getJobs", "getRuns", "getJob"}
    assert {c.served_by for c in UI_CALLS} == {"fll.server.marquez", "column-lineage", "runs",
                                              "tags", "opensearch"}


def test_a_missing_dataset_fails_the_ui_s_fetch_with_a_json_body(ui_server):
    # the UI shows a failed fetch from its JSON body (parseResponse)
    r = httpx.get(f"{ui_server}/api/v1/namespaces/{enc(DUCK)}/datasets/{enc('main.none')}")
    assert r.status_code == 404 and r.json()["error"] == "Dataset 'main.none' not found."
