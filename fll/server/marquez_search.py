"""Marquez's search (``GET /api/v1/search``, the web UI's ``/api/v2beta``
search, answered from the runs where Marquez asks OpenSearch) and its home
page's statistics (``GET /api/v1/stats/{asset}``).

This module must never write to the store.
"""
from __future__ import annotations

from datetime import datetime, time as dtime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, Query, Request

from ..errors import BadRequest
from ..openlineage import PRODUCER, export_run_id
from ..store.lineage import LineageStore
from ..store.reader import RunInfo
from ..store.runs import events_of, merged_facets, run_models
from ..timerange import now_ms
from . import shared
from .marquez_model import (MAX_LIMIT, SCHEMA_FACET_URL, Catalog, MarquezNotFound,
                            column_lineage_json, iso)
from .paths import segment
from .responses import JSONResponse

DEFAULT_SEARCH_LIMIT = 10
#: hits one beta search answers (Marquez's OpenSearch query asks for 10)
MAX_BETA_HITS = 10
COLUMN_LINEAGE_FACET_URL = ("https://openlineage.io/spec/facets/1-2-0/"
                            "ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet")

router = APIRouter(prefix="/api/v1", tags=["marquez"])
#: Marquez's search of recent events (backed by OpenSearch in Marquez)
beta = APIRouter(prefix="/api/v2beta", tags=["marquez"])


def _day(value: str | None, name: str) -> int | None:
    if not value:
        return None
    try:
        at = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        raise BadRequest(f"{name} must be a date YYYY-MM-DD, got {value!r}", name) from None
    return int(at.timestamp() * 1000)


def search(store: LineageStore, q: str, kind: str | None, sort: str, limit: int,
           namespace: str | None = None, before: str | None = None,
           after: str | None = None) -> dict:
    """Datasets and jobs whose name holds ``q`` (case-insensitive)."""
    if kind is not None and kind.upper() not in ("DATASET", "JOB"):
        raise BadRequest(f"filter must be DATASET or JOB, got {kind!r}", "filter")
    if sort.upper() not in ("NAME", "UPDATE_AT"):
        raise BadRequest(f"sort must be NAME or UPDATE_AT, got {sort!r}", "sort")
    if limit < 0 or limit > MAX_LIMIT:
        raise BadRequest(f"limit must be between 0 and {MAX_LIMIT}, got {limit}", "limit")
    lo, hi = _day(after, "after"), _day(before, "before")
    catalog = Catalog(store)
    low = q.lower()
    found: list[tuple[str, str, str, int]] = []
    if kind is None or kind.upper() == "DATASET":
        found += [("DATASET", ep.namespace, ep.name, f.last_ms or 0)
                  for ep, f in catalog.datasets.items()]
    if kind is None or kind.upper() == "JOB":
        found += [("JOB", j.ns, j.name, j.last_ms) for j in catalog.jobs.values()]
    found = [r for r in found if low in r[2].lower()
             and (namespace is None or r[1] == namespace)
             and (lo is None or r[3] > lo) and (hi is None or r[3] < hi)]
    if sort.upper() == "UPDATE_AT":
        found.sort(key=lambda r: (-r[3], r[2].lower(), r[2], r[1], r[0]))
    else:
        found.sort(key=lambda r: (r[2].lower(), r[2], r[1], r[0]))
    results = [{"type": t, "name": name, "updatedAt": iso(at), "namespace": ns,
                "nodeId": f"{t.lower()}:{ns}:{name}"} for t, ns, name, at in found[:limit]]
    return {"totalCount": len(results), "results": results}


@router.get("/search")
def get_search(request: Request, q: str | None = Query(None),
               filter: str | None = Query(None, description="DATASET|JOB"),  # noqa: A002
               sort: str = Query("NAME", description="NAME|UPDATE_AT"),
               limit: int = Query(DEFAULT_SEARCH_LIMIT),
               namespace: str | None = Query(None),
               before: str | None = Query(None, description="YYYY-MM-DD"),
               after: str | None = Query(None, description="YYYY-MM-DD")) -> JSONResponse:
    if q is None or not q.strip():
        raise BadRequest("q is required (part of a dataset or job name)", "q")
    return JSONResponse(search(shared.reader(request), q, filter, sort, limit, namespace, before,
                               after))


def _hit_state(store: LineageStore, run: RunInfo) -> tuple[str, dict, dict]:
    """(OpenLineage eventType of the run's state, its job facets, its run facets)."""
    model = run_models(store, [run.run_id]).get(run.run_id)
    if model is None:
        return "COMPLETE", {}, {}
    run_facets, job_facets = merged_facets(model, events_of(store, [model]))
    return model.state, job_facets, run_facets


def beta_search(store: LineageStore, q: str, kind: str) -> dict:
    """Marquez's ``/api/v2beta/search/{jobs|datasets}``: a hit per job or
    dataset whose name holds ``q`` (case-insensitive), from its latest run,
    with the facets the UI shows (a job's and its run's; a dataset's schema
    and column lineage), and a highlight of the matched name."""
    if not q.strip():
        raise BadRequest("q is required (part of a dataset or job name)", "q")
    catalog = Catalog(store)
    low = q.lower()
    hits: list[dict] = []
    highlights: list[dict] = []
    if kind == "jobs":
        for job in sorted(catalog.jobs.values(), key=lambda j: (-j.last_ms, j.ns, j.name)):
            if low not in job.name.lower():
                continue
            state, job_facets, run_facets = _hit_state(store, job.latest)
            hits.append({"run_id": export_run_id(job.latest.run_id), "name": job.name,
                         "namespace": job.ns, "eventType": state, "type": "BATCH",
                         "facets": job_facets, "runFacets": run_facets})
            highlights.append({"name": [_mark(job.name, low)]})
    else:
        for ep, facts in sorted(catalog.datasets.items(),
                                key=lambda i: (-(i[1].last_ms or 0), i[0])):
            if low not in ep.name.lower():
                continue
            fields = facts.latest_fields()
            facets: dict[str, Any] = {}
            if facts.schemas and fields:
                facets["schema"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET_URL,
                                    "fields": [{"name": n, "type": t, "fields": []}
                                               for n, t in fields]}
            lineage = {c["name"]: {"inputFields": [
                {"namespace": i["namespace"], "name": i["dataset"], "field": i["field"]}
                for i in c["inputFields"]], "transformationDescription":
                c["transformationDescription"], "transformationType": c["transformationType"]}
                for c in column_lineage_json(facts) or []}
            if lineage:
                facets["columnLineage"] = {"_producer": PRODUCER, "fields": lineage,
                                           "_schemaURL": COLUMN_LINEAGE_FACET_URL}
            latest = facts.writes[0] if facts.writes else None
            hits.append({"run_id": export_run_id(latest.run_id) if latest else None,
                         "name": ep.name, "namespace": ep.namespace,
                         "eventType": _hit_state(store, latest)[0] if latest else None,
                         "facets": facets})
            highlights.append({"name": [_mark(ep.name, low)]})
    return {"hits": hits[:MAX_BETA_HITS], "highlights": highlights[:MAX_BETA_HITS]}


def _mark(name: str, low: str) -> str:
    """``name`` with its first match of ``low`` between ``<em>`` tags, as
    OpenSearch highlights."""
    i = name.lower().find(low)
    return name[:i] + "<em>" + name[i:i + len(low)] + "</em>" + name[i + len(low):]


@beta.get("/search/jobs")
def get_beta_search_jobs(request: Request, q: str = Query("")) -> JSONResponse:
    return JSONResponse(beta_search(shared.reader(request), q, "jobs"))


@beta.get("/search/datasets")
def get_beta_search_datasets(request: Request, q: str = Query("")) -> JSONResponse:
    return JSONResponse(beta_search(shared.reader(request), q, "datasets"))


def intervals(period: str, tz: str | None, now: int) -> list[tuple[int, int]]:
    """Marquez's buckets: DAY is the 24 hours up to the current one, WEEK the 7
    days up to today in ``tz`` (UTC when not given); (start, end) ms."""
    p = (period or "").upper()
    if p not in ("DAY", "WEEK"):
        raise BadRequest(f"period must be DAY or WEEK, got {period!r}", "period")
    try:
        zone = ZoneInfo(tz) if tz else timezone.utc
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        raise BadRequest(f"timezone {tz!r} is not a known time zone", "timezone") from None
    local = datetime.fromtimestamp(now / 1000, tz=zone)
    if p == "DAY":
        top = local.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
        return [(int((top - timedelta(hours=h)).timestamp() * 1000),
                 int((top - timedelta(hours=h - 1)).timestamp() * 1000))
                for h in range(23, -1, -1)]
    # calendar days in the zone (one across a clock change is 23 or 25 hours)
    today = local.date()
    days = [today - timedelta(days=d) for d in range(6, -2, -1)]
    edges = [int(datetime.combine(d, dtime(), tzinfo=zone).timestamp() * 1000) for d in days]
    return list(zip(edges[:-1], edges[1:], strict=True))


def stats(store: LineageStore, asset: str, period: str, tz: str | None,
          now: int | None = None) -> list[dict]:
    """Marquez's home-page figures. ``lineage-events``: runs recorded, each
    counted as one START at its start (fll keeps runs, not their events);
    ``jobs``/``datasets``/``sources``: how many existed by the end of each
    interval (first seen: first run or schema; a source is a dataset namespace)."""
    spans = intervals(period, tz, now_ms() if now is None else now)
    catalog = Catalog(store)
    if asset == "lineage-events":
        starts = [r.start_ms for job in catalog.jobs.values() for r in job.runs]
        return [{"startInterval": iso(s), "endInterval": iso(e),
                 "start": sum(1 for t in starts if s <= t < e),
                 "complete": 0, "fail": 0, "abort": 0} for s, e in spans]
    if asset == "jobs":
        born = [j.first_ms for j in catalog.jobs.values()]
    elif asset == "datasets":
        born = [f.first_ms for f in catalog.datasets.values() if f.first_ms is not None]
    elif asset == "sources":
        first: dict[str, int] = {}
        for ep, f in catalog.datasets.items():
            if f.first_ms is not None:
                first[ep.namespace] = min(first.get(ep.namespace, f.first_ms), f.first_ms)
        born = list(first.values())
    else:
        raise MarquezNotFound(f"no such statistic: {asset!r} (lineage-events, jobs, "
                              f"datasets or sources)")
    return [{"startInterval": iso(s), "endInterval": iso(e),
             "count": sum(1 for t in born if t < e)} for s, e in spans]


@router.get("/stats/{asset}")
def get_stats(request: Request, asset: str, period: str | None = Query(None),
              timezone: str | None = Query(None)) -> JSONResponse:  # noqa: A002
    return JSONResponse(stats(shared.reader(request), segment(asset), period or "", timezone))
