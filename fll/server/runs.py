"""Marquez's read routes for jobs, runs and events, in Marquez's JSON shapes.

Answered from the run model (`fll.store.runs`): every OpenLineage RunEvent
received, with or without column lineage. Names are path segments that may
hold ``/``, ``:`` or ``://`` when URL-encoded, as Marquez's clients send them
(`fll.server.paths`). Paging: ``limit`` (default 100) and ``offset``, and a
``totalCount`` beside each list. Times are ISO 8601 (UTC, milliseconds).
"""
from __future__ import annotations

import time

from fastapi import APIRouter, Query, Request

from ..errors import BadRequest, NotFound
from ..openlineage import _iso
from ..store import runs as rm
from ..store.lineage import LineageStore
from ..timerange import now_ms, parse_time
from . import shared
from .paths import segment
from .responses import JSONResponse

router = APIRouter(tags=["marquez"])

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000


def _page(limit: int, offset: int) -> tuple[int, int]:
    if not 0 <= limit <= MAX_LIMIT:
        raise BadRequest(f"limit must be between 0 and {MAX_LIMIT}, got {limit}", "limit")
    if offset < 0:
        raise BadRequest(f"offset must be at least 0, got {offset}", "offset")
    return limit, offset


def _time(value: str | None, name: str, default: int) -> int:
    return parse_time(value, name, default=default)


def iso(ms: int | None) -> str | None:
    """ISO 8601 in UTC with milliseconds, as `fll.openlineage` writes times."""
    if ms is None:
        return None
    if not 0 <= ms < 253402300800000:  # outside years 1970-9999: the general form
        return _iso(ms)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def run_json(m: rm.RunModel, events: dict[bytes, dict]) -> dict:
    """A run as Marquez's ``Run`` (and the OpenLineage eventType of its state
    under ``fllState``)."""
    run_facets, _ = rm.merged_facets(m, events)
    nominal = run_facets.get("nominalTime")
    if not isinstance(nominal, dict):
        nominal = {}
    state, ended = rm.final_state(m.transitions)
    started = m.started_ms
    times = [t.at_ms for t in m.transitions]
    created = min(times + ([m.start_ms] if m.start_ms is not None else []), default=None)
    return {
        "id": m.run_id,
        "createdAt": iso(created),
        "updatedAt": iso(max(times, default=created)),
        "nominalStartTime": nominal.get("nominalStartTime"),
        "nominalEndTime": nominal.get("nominalEndTime"),
        "state": rm.MARQUEZ_STATES[state],
        "fllState": state,
        "startedAt": iso(started),
        "endedAt": iso(ended),
        "durationMs": (ended - started) if ended is not None and started is not None
        and ended >= started else None,
        "args": {},
        "jobVersion": {"namespace": m.job_namespace, "name": m.job_name, "version": None},
        "inputDatasetVersions": [],
        "outputDatasetVersions": [],
        "context": {},
        "facets": run_facets,
    }


def _runs_json(store: LineageStore, run_ids: list[str],
               starts: dict[str, int] | None = None) -> list[dict]:
    models = rm.run_models(store, run_ids, starts)
    events = rm.events_of(store, models.values())
    return [run_json(models[r], events) for r in run_ids if r in models]


def job_json(store: LineageStore, namespace: str, name: str) -> dict | None:
    """A job as Marquez's ``Job``, from its latest run; None when unknown."""
    latest = rm.job_run_ids(store.table, namespace, name, limit=1)
    if not latest:
        return None
    models = rm.run_models(store, latest)
    m = models.get(latest[0])
    events = rm.events_of(store, models.values())
    run = run_json(m, events) if m is not None else None
    _, job_facets = rm.merged_facets(m, events) if m is not None else ({}, {})
    ins, outs = rm.datasets_of(m, events) if m is not None else ([], [])
    location = (job_facets.get("sourceCodeLocation") or {}).get("url") \
        if isinstance(job_facets.get("sourceCodeLocation"), dict) else None
    description = (job_facets.get("documentation") or {}).get("description") \
        if isinstance(job_facets.get("documentation"), dict) else None
    job_type = (job_facets.get("jobType") or {}).get("processingType") \
        if isinstance(job_facets.get("jobType"), dict) else None
    return {
        "id": {"namespace": namespace, "name": name},
        "type": job_type or "BATCH",
        "name": name,
        "simpleName": name.rsplit(".", 1)[-1],
        "parentJobName": None,
        "parentJobUuid": None,
        "createdAt": iso(rm.first_run_start(store.table, namespace, name)),
        "updatedAt": run["updatedAt"] if run else None,
        "namespace": namespace,
        "inputs": [{"namespace": ns, "name": n} for ns, n in ins],
        "outputs": [{"namespace": ns, "name": n} for ns, n in outs],
        "location": location,
        "context": {},
        "description": description,
        "latestRun": run,
        "latestRuns": [run] if run else [],
        "facets": job_facets,
        "currentVersion": None,
        "tags": [],
    }


def _jobs(store: LineageStore, namespace: str | None, limit: int, offset: int,
          last_run_states: str | None = None) -> dict:
    limit, offset = _page(limit, offset)
    names = rm.jobs(store.table, namespace)
    if last_run_states:
        # Marquez's filter on each job's latest run: a run model read per job
        wanted = {s.strip().upper() for s in last_run_states.split(",") if s.strip()}
        unknown = wanted - set(rm.MARQUEZ_STATES.values())
        if unknown:
            raise BadRequest(f"lastRunStates: unknown state(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(set(rm.MARQUEZ_STATES.values())))})",
                             "lastRunStates")
        names = [(ns, n) for ns, n in names if _last_state(store, ns, n) in wanted]
    jobs = [j for j in (job_json(store, ns, n) for ns, n in names[offset:offset + limit]) if j]
    return {"jobs": jobs, "totalCount": len(names)}


def _last_state(store: LineageStore, namespace: str, name: str) -> str | None:
    latest = rm.job_run_ids(store.table, namespace, name, limit=1)
    m = rm.run_model(store, latest[0]) if latest else None
    return None if m is None else rm.MARQUEZ_STATES[m.state]


_STATES_HELP = "only jobs whose latest run is in one of these states, e.g. FAILED,ABORTED"


@router.get("/api/v1/jobs")
def list_all_jobs(request: Request, limit: int = Query(DEFAULT_LIMIT),
                  offset: int = Query(0),
                  lastRunStates: str | None = Query(None, description=_STATES_HELP)  # noqa: N803
                  ) -> JSONResponse:
    """Every job that sent a RunEvent, by namespace and name."""
    return JSONResponse(_jobs(shared.store(request), None, limit, offset, lastRunStates))


@router.get("/api/v1/namespaces/{ns}/jobs")
def list_jobs(request: Request, ns: str, limit: int = Query(DEFAULT_LIMIT),
              offset: int = Query(0),
              lastRunStates: str | None = Query(None, description=_STATES_HELP)  # noqa: N803
              ) -> JSONResponse:
    """The jobs of one namespace (one key range)."""
    return JSONResponse(_jobs(shared.store(request), segment(ns), limit, offset, lastRunStates))


@router.get("/api/v1/namespaces/{ns}/jobs/{job}")
def get_job(request: Request, ns: str, job: str) -> JSONResponse:
    namespace, name = segment(ns), segment(job)
    found = job_json(shared.store(request), namespace, name)
    if found is None:
        raise NotFound(f"job {namespace}:{name} is unknown (no RunEvent named it)")
    return JSONResponse(found)


@router.get("/api/v1/namespaces/{ns}/jobs/{job}/runs")
def list_job_runs(request: Request, ns: str, job: str, limit: int = Query(DEFAULT_LIMIT),
                  offset: int = Query(0)) -> JSONResponse:
    """The runs of a job, newest first (by start), each with its state."""
    limit, offset = _page(limit, offset)
    return JSONResponse(job_runs_json(shared.store(request), segment(ns), segment(job), limit,
                                      offset))


def job_runs_json(store: LineageStore, namespace: str, name: str, limit: int,
                  offset: int) -> dict:
    """A page of a job's runs, newest first, and how many it has: one scan of
    the page's ``J|`` rows (their keys hold the starts), one multi-get of the
    runs' ``n|`` rows, one of their events; the count, a scan of the job's
    ``J|`` keys."""
    runs = rm.job_runs(store.table, namespace, name, limit=limit, offset=offset)
    if not runs and not rm.job_runs(store.table, namespace, name, limit=1):
        raise NotFound(f"job {namespace}:{name} is unknown (no RunEvent named it)")
    return {"runs": _runs_json(store, [r for r, _ in runs], dict(runs)),
            "totalCount": rm.count_job_runs(store.table, namespace, name)}


@router.get("/api/v1/jobs/runs/{run_id}")
def get_run(request: Request, run_id: str) -> JSONResponse:
    rid = segment(run_id)
    found = _runs_json(shared.store(request), [rid])
    if not found:
        raise NotFound(f"run {rid} is unknown (no RunEvent named it)")
    return JSONResponse(found[0])


@router.get("/api/v1/jobs/runs/{run_id}/facets")
def get_run_facets(request: Request, run_id: str,
                   type: str = Query("run", description="run|job")) -> JSONResponse:  # noqa: A002
    """The run's run facets (``type=run``) or job facets (``type=job``), merged
    over its events in eventTime order."""
    rid = segment(run_id)
    if type not in ("run", "job"):
        raise BadRequest(f"type must be run or job, got {type!r}", "type")
    store = shared.store(request)
    m = rm.run_model(store, rid)
    if m is None:
        raise NotFound(f"run {rid} is unknown (no RunEvent named it)")
    run_facets, job_facets = rm.merged_facets(m, rm.events_of(store, [m]))
    return JSONResponse({"runId": rid, "facets": run_facets if type == "run" else job_facets})


@router.get("/api/v1/events/lineage")
def lineage_events(request: Request, before: str | None = Query(None),
                   after: str | None = Query(None), limit: int = Query(DEFAULT_LIMIT),
                   offset: int = Query(0), sortDirection: str = Query(  # noqa: N803
                       "desc", description="desc (newest first) or asc")) -> JSONResponse:
    """The OpenLineage RunEvents received with ``after <= eventTime < before``
    (ISO 8601, epoch seconds or now-1h), as received."""
    limit, offset = _page(limit, offset)
    if sortDirection not in ("desc", "asc"):
        raise BadRequest(f"sortDirection must be desc or asc, got {sortDirection!r}",
                         "sortDirection")
    now = now_ms()
    hi = _time(before, "before", now + 1)
    lo = _time(after, "after", 0)
    events, total = rm.events(shared.store(request), lo, hi, limit, offset,
                              descending=sortDirection == "desc")
    return JSONResponse({"events": events, "totalCount": total})
