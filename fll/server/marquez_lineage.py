"""Marquez's job/dataset lineage graph (``GET /api/v1/lineage``): jobs joined
through the datasets they share, ``depth`` job hops around a dataset or a job.

This module must never write to the store; an unknown node is a 404 with
Marquez's message.
"""
from __future__ import annotations

from fastapi import APIRouter, Query, Request

from ..errors import BadRequest, NotFound
from ..model import EndPoint
from ..store.lineage import LineageStore
from . import shared
from .column_graph import parse_node_id, unversioned
from .marquez_model import Catalog, Job, MarquezNotFound, dataset_json, job_json, job_of
from .responses import JSONResponse

DEFAULT_DEPTH = 20

router = APIRouter(prefix="/api/v1", tags=["marquez"])


def _splits(rest: str) -> list[tuple[str, str]]:
    """Every (namespace, name) ``rest`` can be split into at a colon."""
    return [(rest[:i], rest[i + 1:]) for i, c in enumerate(rest)
            if c == ":" and 0 < i < len(rest) - 1]


def _find_job(catalog: Catalog, node_id: str) -> Job | None:
    for candidate in unversioned(node_id):
        for key in _splits(candidate.partition(":")[2]):
            if key in catalog.jobs:
                return catalog.jobs[key]
    return None


def _find_dataset(catalog: Catalog, node_id: str) -> EndPoint | None:
    try:
        ep, _ = parse_node_id(catalog.store, node_id)
    except NotFound:
        return None
    return ep if ep in catalog.datasets else None


def lineage(store: LineageStore, node_id: str, depth: int) -> dict:
    """Marquez's job/dataset graph around ``node_id`` (``dataset:<ns>:<name>`` or
    ``job:<ns>:<name>``, either with ``#<version>``): from the job (for a
    dataset, the latest job that wrote it, else the latest that read it), every
    job sharing a dataset with one already in, ``depth`` hops away, with the
    datasets they read and write. A dataset no job touches is a graph of itself."""
    kind = node_id.partition(":")[0]
    if kind not in ("dataset", "job"):
        raise BadRequest(f"nodeId must look like dataset:<namespace>:<name> or "
                         f"job:<namespace>:<name>, got {node_id!r}", "nodeId")
    catalog = Catalog(store)
    start: Job | None
    if kind == "job":
        start = _find_job(catalog, node_id)
        if start is None:
            raise MarquezNotFound(f"Job node '{node_id}' not found.")
        orphan = None
    else:
        orphan = _find_dataset(catalog, node_id)
        if orphan is None:
            raise MarquezNotFound(f"Dataset node '{node_id}' not found.")
        facts = catalog.datasets[orphan]
        runs = facts.writes or facts.reads  # Marquez: a job writing it first
        start = catalog.jobs[job_of(runs[0])] if runs else None
    if start is None:
        assert orphan is not None
        return {"graph": [_dataset_node(catalog, orphan, [], [])]}
    users: dict[EndPoint, set[tuple[str, str]]] = {}
    for key, job in catalog.jobs.items():
        ins, outs = catalog.io(job)
        for ep in ins + outs:
            users.setdefault(ep, set()).add(key)
    jobs = {(start.ns, start.name)}
    frontier = [start]
    for _ in range(depth):
        nxt = []
        for job in frontier:
            ins, outs = catalog.io(job)
            for ep in ins + outs:
                for key in sorted(users.get(ep, ())):
                    if key not in jobs:
                        jobs.add(key)
                        nxt.append(catalog.jobs[key])
        frontier = nxt
        if not frontier:
            break
    writers: dict[EndPoint, list[str]] = {}
    readers: dict[EndPoint, list[str]] = {}
    nodes = []
    for key in sorted(jobs):
        job = catalog.jobs[key]
        jid = _job_node(job.ns, job.name)
        ins, outs = catalog.io(job)
        for ep in ins:
            readers.setdefault(ep, []).append(jid)
        for ep in outs:
            writers.setdefault(ep, []).append(jid)
        nodes.append({"id": jid, "type": "JOB", "data": job_json(catalog, job),
                      "inEdges": [{"origin": _dataset_node_id(ep), "destination": jid}
                                  for ep in ins],
                      "outEdges": [{"origin": jid, "destination": _dataset_node_id(ep)}
                                   for ep in outs]})
    if orphan is not None and orphan not in writers and orphan not in readers:
        # the job's latest run no longer touches the dataset: Marquez answers
        # the dataset alone then
        return {"graph": [_dataset_node(catalog, orphan, [], [])]}
    for ep in sorted(set(writers) | set(readers)):
        nodes.append(_dataset_node(catalog, ep, writers.get(ep, []), readers.get(ep, [])))
    return {"graph": sorted(nodes, key=lambda n: n["id"])}


def _job_node(ns: str, name: str) -> str:
    return f"job:{ns}:{name}"


def _dataset_node_id(ep: EndPoint) -> str:
    return f"dataset:{ep.namespace}:{ep.name}"


def _dataset_node(catalog: Catalog, ep: EndPoint, writers: list[str], readers: list[str]
                  ) -> dict:
    did = _dataset_node_id(ep)
    data = dataset_json(catalog.datasets[ep], column_lineage=False)
    return {"id": did, "type": "DATASET", "data": data,
            "inEdges": [{"origin": j, "destination": did} for j in writers],
            "outEdges": [{"origin": did, "destination": j} for j in readers]}


@router.get("/lineage")
def get_lineage(request: Request,
                nodeId: str | None = Query(None, description=(  # noqa: N803
                    "dataset:<ns>:<name> or job:<ns>:<name>, optionally #<version>")),
                depth: int = Query(DEFAULT_DEPTH, description="job hops")) -> JSONResponse:
    if not nodeId:
        raise BadRequest("nodeId is required", "nodeId")
    cap = shared.max_level(request)
    if not 0 <= depth <= cap:
        raise BadRequest(f"depth must be between 0 and {cap}, got {depth}", "depth")
    return JSONResponse(lineage(shared.reader(request), nodeId, depth))
