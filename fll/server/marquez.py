"""Marquez's read API over the store: namespaces, datasets and their versions,
the job/dataset lineage graph, search and the home page's statistics.

What a Marquez client (marquez-python, Marquez's web UI) reads, built from
what fll keeps: the datasets runs read or wrote or events reported the schema
of, each recorded run (its program ``job.namespace/job.name``, start time and
operation set), the schemas reported, aliases. Marquez's own column lineage
(``GET /api/v1/column-lineage``) stays in `fll.server.app`, answered in front
of the framework with the other hot reads.

How fll's facts become Marquez's objects:

- a namespace is a namespace of a dataset or of a job;
- a job is a run's program (`fll.openlineage.job_of`: ``ns/name``, a program
  without ``/`` is job ``fll:<program>``); its inputs and outputs are those of
  its latest run (Marquez: the current job version's), its version the
  operation set of that run;
- a dataset version is one run that wrote the dataset (a UUID made from the
  dataset and the run, the same every time); a dataset only ever reported by
  schema (an OpenLineage DatasetEvent, a run without column lineage) has one
  version per schema report;
- a job reads the datasets its runs read and writes those they wrote: the
  lineage graph joins jobs through shared datasets, ``depth`` job hops away,
  as Marquez does.

Tags come from the tag store (`fll.store.tags`; those lineage carries, from
`fll.govern`, on a dataset's own page).

This module must never write to the store; an unknown namespace, dataset or
version is a 404 in fll's one error shape, with Marquez's message.
"""
from __future__ import annotations

import functools
import uuid
from datetime import datetime, time as dtime, timedelta, timezone
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import APIRouter, FastAPI, Query, Request

from ..errors import BadRequest, NotFound
from ..govern import dataset_tags as govern_dataset_tags
from ..model import EndPoint, EndPointField
from ..openlineage import PRODUCER, export_run_id, job_of as _program_job
from ..render import edge_kind
from ..rowkeys import MAX_TIME
from ..store.lineage import LineageStore
from ..store.reader import RunInfo
from ..store.runs import events_of, merged_facets, run_models
from ..store.tags import Tags
from ..timerange import now_ms
from . import views
from .runs import run_json as model_run_json
from .paths import segment
from .responses import JSONResponse

ALL_TIME = views.ALL_TIME
DEFAULT_LIMIT = 100
DEFAULT_SEARCH_LIMIT = 10
DEFAULT_DEPTH = 20
MAX_LIMIT = 10_000
SCHEMA_FACET_URL = ("https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
                    "#/$defs/SchemaDatasetFacet")
SYMLINKS_FACET_URL = ("https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
                      "#/$defs/SymlinksDatasetFacet")
# the UUID namespaces of dataset and job versions (uuid5: the same every time)
_DATASET_VERSIONS = uuid.UUID("6c0b7d2e-3f7e-5b52-9a55-0c6c0f1d4a11")
_JOB_VERSIONS = uuid.UUID("2f4b3a90-8d1e-5c7a-b0e3-71f4e9a2c6d5")

router = APIRouter(prefix="/api/v1", tags=["marquez"])
#: Marquez's search of recent events (backed by OpenSearch in Marquez)
beta = APIRouter(prefix="/api/v2beta", tags=["marquez"])


class MarquezNotFound(NotFound):
    """A namespace, dataset, job or version Marquez would answer 404 for."""


def install(app: FastAPI) -> None:
    """Mount the routes. Their errors keep fll's one shape (``{"error", "status"}``,
    design/rest-api.md), with Marquez's messages (``Dataset 'x' not found.``);
    a Marquez client tells a failure by its status."""
    app.include_router(router)
    app.include_router(beta)


def _store(request: Request) -> LineageStore:
    """The store as this request reads it (`fll.store.reads.ReadView`)."""
    return request.app.state.reader()


# -- hooks for the tag store and the run model -------------------------------------

def _dataset_tags(store: LineageStore, ns: str, name: str, *, propagated: bool = False
                  ) -> tuple[list[str], dict[str, list[str]], dict[str, list[dict]]]:
    """(the dataset's own tags, each field's tags, each field's tags that reach
    it through lineage as ``{"name", "origins"}``): the tags put on a field
    first, then those propagated to it (`fll.govern`, over all time, only when
    ``propagated``: a dataset's own page, not every dataset of a listing)."""
    if not propagated:
        mine = Tags(store.table).of_dataset(ns, name)
        fields: dict[str, list[str]] = {}
        for a in mine:
            if a.field and a.tag not in fields.setdefault(a.field, []):
                fields[a.field].append(a.tag)
        return sorted({a.tag for a in mine if not a.field}), fields, {}
    found = govern_dataset_tags(store, ns, name, 0, MAX_TIME)
    field_tags: dict[str, list[str]] = {}
    reached: dict[str, list[dict]] = {}
    for f, entry in found["fields"].items():
        field_tags[f] = list(entry["tags"]) + [t["name"] for t in entry["propagatedTags"]
                                              if t["name"] not in entry["tags"]]
        if entry["propagatedTags"]:
            reached[f] = entry["propagatedTags"]
    return list(found["tags"]), field_tags, reached


def _run_model_json(store: LineageStore, run: RunInfo) -> dict:
    """What the run model knows of a run in Marquez's terms (state, end,
    duration, nominal times, facets: `fll.server.runs.run_json`); a run
    recorded through the store API or a pipeline has no run model and is
    complete by definition (they record finished runs only)."""
    model = run_models(store, [run.run_id]).get(run.run_id)
    if model is None:
        return {"state": "COMPLETED"}
    full = model_run_json(model, events_of(store, [model]))
    return {k: full[k] for k in ("state", "endedAt", "durationMs", "nominalStartTime",
                                 "nominalEndTime", "facets", "updatedAt")}


# -- small pieces ------------------------------------------------------------------

def iso(ms: int | None) -> str | None:
    """An ISO-8601 UTC timestamp, as Marquez writes them."""
    if ms is None:
        return None
    at = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dataset_version(ns: str, name: str, owner: str) -> str:
    return str(uuid.uuid5(_DATASET_VERSIONS, f"{ns}\x00{name}\x00{owner}"))


def job_version(ns: str, name: str, checksum: str) -> str:
    return str(uuid.uuid5(_JOB_VERSIONS, f"{ns}\x00{name}\x00{checksum}"))


def job_of(run: RunInfo) -> tuple[str, str]:
    """(job namespace, job name) of a run, as export names it."""
    return _program_job(run.program)


def _page(items: list, limit: int, offset: int) -> list:
    if limit < 0 or limit > MAX_LIMIT:
        raise BadRequest(f"limit must be between 0 and {MAX_LIMIT}, got {limit}", "limit")
    if offset < 0:
        raise BadRequest(f"offset must be at least 0, got {offset}", "offset")
    return items[offset:offset + limit]


# -- what the store knows of one dataset ----------------------------------------------

class Version(NamedTuple):
    """One version of a dataset: a run that wrote it, or a schema report."""

    id: str
    at: int
    run: RunInfo | None
    fields: list[tuple[str, str | None]] | None  # None: not reported, ask the set


class DatasetFacts:
    """One dataset's runs (writing and reading) and schema reports, each read
    once. The runs may be given (`Catalog` reads every dataset's at once), and
    with them the span of its schema reports; the reports themselves are read
    when first asked for."""

    def __init__(self, store: LineageStore, ep: EndPoint,
                 runs: tuple[list[RunInfo], list[RunInfo]] | None = None,
                 schema_span: tuple[int, int] | None = None):
        self.store = store
        self.ep = ep
        self._schemas: list[tuple[int, str, list[tuple[str, str | None]]]] | None = None
        if runs is None:  # read here, and the schema reports with them
            runs = (store.runs(ep, *ALL_TIME, "incoming"), store.runs(ep, *ALL_TIME, "outgoing"))
            schema_span = (self.schemas[0][0], self.schemas[-1][0]) if self.schemas else None
        self.writes, self.reads = runs  # newest first, as the store answers them
        times = [r.start_ms for r in self.writes + self.reads] + list(schema_span or ())
        self.first_ms = min(times) if times else None
        self.last_ms = max(times) if times else None

    @property
    def schemas(self) -> list[tuple[int, str, list[tuple[str, str | None]]]]:
        """Every schema reported for the dataset: (time, owner, fields), oldest first."""
        if self._schemas is None:
            ep = self.ep
            self._schemas = self.store.schema_history(ep.namespace, ep.name, *ALL_TIME)
        return self._schemas

    @property
    def known(self) -> bool:
        return bool(self.writes or self.reads or self.schemas)

    def versions(self) -> list[Version]:
        """Newest first: one per run that wrote the dataset, with the schema that
        run reported (else the latest reported before it); a dataset no run wrote
        (only read, or described by a DatasetEvent) has one per schema report."""
        ns, name = self.ep.namespace, self.ep.name
        if not self.writes:
            # made by no run (a reader's report, a DatasetEvent): no createdByRun
            return [Version(dataset_version(ns, name, owner), at, None, fields)
                    for at, owner, fields in reversed(self.schemas)]
        by_owner = {owner: fields for _, owner, fields in self.schemas}
        out = []
        for r in self.writes:
            fields = by_owner.get(r.run_id)
            if fields is None:
                before = [f for at, _, f in self.schemas if at <= r.start_ms]
                fields = before[-1] if before else None
            out.append(Version(dataset_version(ns, name, r.run_id), r.start_ms, r, fields))
        return out

    def latest_fields(self) -> list[tuple[str, str | None]]:
        """The latest reported schema, else the fields runs read or wrote (no type)."""
        if self.schemas:
            return self.schemas[-1][2]
        return [(f, None) for f in self.store.fields(self.ep, *ALL_TIME)]

    def version_fields(self, v: Version) -> list[tuple[str, str | None]]:
        if v.fields is not None:
            return v.fields
        if v.run is None:
            return []
        info = self.store.operation_set(v.run.checksum)
        return [(f, None) for f in sorted(info.destination_fields().get(self.ep, ()))]


def _facts(store: LineageStore, ns: str, name: str) -> DatasetFacts:
    """The facts of ``ns:name`` (an alias answers as the dataset it stands for), or 404."""
    ep = views.resolve(store, EndPoint(ns, name))
    facts = DatasetFacts(store, ep)
    if not facts.known:
        raise MarquezNotFound(f"Dataset '{name}' not found.")
    return facts


def _fields_json(fields: list[tuple[str, str | None]], tags: dict[str, list[str]],
                 reached: dict[str, list[dict]] | None = None) -> list[dict]:
    """Marquez's fields; a tag that reaches a field through lineage is in its
    ``tags`` too, and told apart in ``propagatedTags`` (with its origins)."""
    return [{"name": n, "type": t, "tags": list(tags.get(n, [])), "description": None,
             **({"propagatedTags": reached[n]} if reached and n in reached else {})}
            for n, t in fields]


def _facets(store: LineageStore, ep: EndPoint, fields: list[tuple[str, str | None]],
            reported: bool) -> dict:
    """The OpenLineage facets fll can give back: the schema when one was
    reported (``reported``), the names the dataset also goes by (symlinks)."""
    facets: dict[str, Any] = {}
    if reported and fields:
        facets["schema"] = {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET_URL,
                            "fields": [{"name": n, **({"type": t} if t else {})}
                                       for n, t in fields]}
    aliases = store.aliases(ep.namespace, ep.name)
    if aliases:
        facets["symlinks"] = {"_producer": PRODUCER, "_schemaURL": SYMLINKS_FACET_URL,
                              "identifiers": [{"namespace": a, "name": b, "type": "ALIAS"}
                                              for a, b in aliases]}
    return facets


def _column_lineage(facts: DatasetFacts) -> list[dict] | None:
    """Marquez's ``columnLineage`` of the dataset: each field the latest run that
    wrote it gave inputs, with them and their transformations; None when no run
    wrote it."""
    if not facts.writes:
        return None
    latest = facts.writes[0]
    info = facts.store.operation_set(latest.checksum)
    out = []
    for f in sorted(info.destination_fields().get(facts.ep, ())):
        inputs = views.set_inputs(facts.store, latest.checksum, EndPointField(facts.ep, f))
        if not inputs:
            continue
        rows = []
        for src, tags in sorted(inputs.items(), key=lambda kv: (
                kv[0].endpoint.namespace, kv[0].endpoint.name, kv[0].field)):
            described = "; ".join(t.description for t in tags if t.description)
            rows.append({"namespace": src.endpoint.namespace, "dataset": src.endpoint.name,
                         "field": src.field,
                         "transformationDescription": described or None,
                         "transformationType": edge_kind(tags) or None,
                         "transformations": [t.to_dict() for t in tags]})
        kinds = {r["transformationType"] for r in rows} - {None}
        out.append({"name": f, "inputFields": rows, "transformationDescription": None,
                    "transformationType": ("DIRECT" if "DIRECT" in kinds
                                           else "INDIRECT" if kinds else None)})
    return out


def dataset_json(facts: DatasetFacts, *, column_lineage: bool = True,
                 propagated: bool = False) -> dict:
    """Marquez's Dataset (a DB_TABLE) from what the store knows of it; with
    ``propagated``, the tags lineage carries to its fields too."""
    ep, store = facts.ep, facts.store
    tags, field_tags, reached = _dataset_tags(store, ep.namespace, ep.name,
                                              propagated=propagated)
    fields = facts.latest_fields()
    versions = facts.versions()
    out = {
        "id": {"namespace": ep.namespace, "name": ep.name},
        "type": "DB_TABLE",
        "name": ep.name,
        "physicalName": ep.name,
        "createdAt": iso(facts.first_ms),
        "updatedAt": iso(facts.last_ms),
        "namespace": ep.namespace,
        # Marquez names an OpenLineage dataset's source after its namespace
        "sourceName": ep.namespace,
        "fields": _fields_json(fields, field_tags, reached),
        "tags": tags,
        "lastModifiedAt": iso(facts.writes[0].start_ms) if facts.writes else None,
        "lastLifecycleState": None,
        "description": None,
        "facets": _facets(store, ep, fields, bool(facts.schemas)),
        "currentVersion": versions[0].id if versions else None,
        "deleted": False,
    }
    if column_lineage:
        out["columnLineage"] = _column_lineage(facts)
    return out


def run_json(store: LineageStore, run: RunInfo) -> dict:
    """Marquez's Run of a dataset version: its id, start and job version from
    its run row, its state, end and facets from the run model."""
    ns, name = job_of(run)
    at = iso(run.start_ms)
    return {"id": export_run_id(run.run_id), "createdAt": at, "updatedAt": at,
            "nominalStartTime": None, "nominalEndTime": None,
            "state": None, "startedAt": at, "endedAt": None,
            "durationMs": None, "args": {},
            "jobVersion": {"namespace": ns, "name": name,
                           "version": job_version(ns, name, run.checksum)},
            "inputDatasetVersions": [], "outputDatasetVersions": [], "context": {},
            "facets": {}, **_run_model_json(store, run)}


def version_json(facts: DatasetFacts, v: Version) -> dict:
    ep, store = facts.ep, facts.store
    tags, field_tags, _ = _dataset_tags(store, ep.namespace, ep.name)
    fields = facts.version_fields(v)
    return {
        "id": {"namespace": ep.namespace, "name": ep.name, "version": v.id},
        "type": "DB_TABLE",
        "name": ep.name,
        "physicalName": ep.name,
        "createdAt": iso(v.at),
        "version": v.id,
        "namespace": ep.namespace,
        "sourceName": ep.namespace,
        "fields": _fields_json(fields, field_tags),
        "tags": tags,
        "lastModifiedAt": iso(v.at) if v.run is not None else None,
        "lifecycleState": None,
        "description": None,
        "createdByRun": run_json(store, v.run) if v.run is not None else None,
        "facets": _facets(store, ep, fields, v.fields is not None),
    }


# -- the whole store: datasets, jobs, namespaces -----------------------------------------

class Job:
    """A job: the runs of one program."""

    def __init__(self, ns: str, name: str):
        self.ns, self.name = ns, name
        self.runs: list[RunInfo] = []
        self.run_ids: set[str] = set()

    @functools.cached_property
    def latest(self) -> RunInfo:
        """The newest run (asked once the catalog is complete)."""
        return min(self.runs, key=lambda r: (-r.start_ms, r.run_id))

    @property
    def first_ms(self) -> int:
        return min(r.start_ms for r in self.runs)

    @property
    def last_ms(self) -> int:
        return max(r.start_ms for r in self.runs)


class Catalog:
    """Every dataset's facts and every job, with each run's inputs and outputs
    (from which datasets list it as reader or writer: no operation set is read).
    Three scans of the store's indexes and a multi-get of the run rows
    (`LineageStore.all_runs`, `schema_spans`), not a few per dataset."""

    def __init__(self, store: LineageStore):
        self.store = store
        self.datasets: dict[EndPoint, DatasetFacts] = {}
        self.jobs: dict[tuple[str, str], Job] = {}
        self.inputs: dict[str, set[EndPoint]] = {}
        self.outputs: dict[str, set[EndPoint]] = {}
        self._by_program: dict[str | None, Job] = {}
        runs = store.all_runs()
        spans = store.schema_spans()
        for ep in sorted(set(runs) | set(spans)):
            facts = self.datasets[ep] = DatasetFacts(store, ep, runs.get(ep, ([], [])),
                                                     spans.get(ep))
            for r in facts.writes:
                self.outputs.setdefault(r.run_id, set()).add(ep)
                self._job(r)
            for r in facts.reads:
                self.inputs.setdefault(r.run_id, set()).add(ep)
                self._job(r)

    def _job(self, run: RunInfo) -> None:
        job = self._by_program.get(run.program)
        if job is None:  # a program's job, named once (a job has many runs)
            key = job_of(run)
            job = self.jobs.get(key)
            if job is None:
                job = self.jobs[key] = Job(*key)
            self._by_program[run.program] = job
        if run.run_id not in job.run_ids:  # a run reading and writing is listed twice
            job.run_ids.add(run.run_id)
            job.runs.append(run)

    def io(self, job: Job) -> tuple[list[EndPoint], list[EndPoint]]:
        """(inputs, outputs) of the job's latest run, sorted."""
        rid = job.latest.run_id
        return sorted(self.inputs.get(rid, ())), sorted(self.outputs.get(rid, ()))

    def namespaces(self) -> dict[str, tuple[int | None, int | None]]:
        """Each namespace with (first, last) time anything in it was seen."""
        spans: dict[str, list[int]] = {}
        for ep, facts in self.datasets.items():
            span = spans.setdefault(ep.namespace, [])
            span += [t for t in (facts.first_ms, facts.last_ms) if t is not None]
        for (ns, _), job in self.jobs.items():
            spans.setdefault(ns, []).extend((job.first_ms, job.last_ms))
        return {ns: (min(t) if t else None, max(t) if t else None)
                for ns, t in sorted(spans.items())}


def job_json(catalog: Catalog, job: Job) -> dict:
    """Marquez's Job (as its lineage graph gives it: LineageJob)."""
    inputs, outputs = catalog.io(job)
    latest = job.latest
    return {"id": {"namespace": job.ns, "name": job.name}, "type": "BATCH",
            "name": job.name, "simpleName": job.name,
            "createdAt": iso(job.first_ms), "updatedAt": iso(job.last_ms),
            "namespace": job.ns,
            "inputs": [{"namespace": e.namespace, "name": e.name} for e in inputs],
            "outputs": [{"namespace": e.namespace, "name": e.name} for e in outputs],
            "location": None, "description": None,
            "currentVersion": job_version(job.ns, job.name, latest.checksum),
            "latestRun": run_json(catalog.store, latest),
            "parentJobName": None, "parentJobUuid": None}


def namespace_json(name: str, span: tuple[int | None, int | None]) -> dict:
    return {"name": name, "createdAt": iso(span[0]), "updatedAt": iso(span[1]),
            "ownerName": "anonymous", "description": None, "isHidden": False}


# -- namespaces and datasets ----------------------------------------------------------------

@router.get("/namespaces")
def list_namespaces(request: Request, limit: int = Query(DEFAULT_LIMIT),
                    offset: int = Query(0)) -> JSONResponse:
    """Every namespace of a dataset or of a job (a run's program)."""
    spans = Catalog(_store(request)).namespaces()
    page = _page(list(spans.items()), limit, offset)
    return JSONResponse({"namespaces": [namespace_json(n, s) for n, s in page]})


def source_spans(catalog: Catalog) -> dict[str, tuple[int | None, int | None]]:
    """Marquez's sources as fll knows them: one per dataset namespace (an
    OpenLineage namespace names the system a dataset lives in), with the
    first and last time a dataset of it was seen."""
    spans: dict[str, list[int]] = {}
    for ep, facts in catalog.datasets.items():
        spans.setdefault(ep.namespace, []).extend(
            t for t in (facts.first_ms, facts.last_ms) if t is not None)
    return {ns: (min(t) if t else None, max(t) if t else None)
            for ns, t in sorted(spans.items())}


def source_json(name: str, span: tuple[int | None, int | None]) -> dict:
    """A Source: its type is the namespace's URI scheme upper-cased
    (``postgres://db:5432`` → ``POSTGRES``), else ``UNKNOWN``."""
    scheme = name.split("://", 1)[0] if "://" in name else ""
    return {"type": scheme.upper() or "UNKNOWN", "name": name, "createdAt": iso(span[0]),
            "updatedAt": iso(span[1]), "connectionUrl": name, "description": None}


@router.get("/sources")
def list_sources(request: Request, limit: int = Query(DEFAULT_LIMIT),
                 offset: int = Query(0)) -> JSONResponse:
    """Every dataset namespace, as Marquez's sources."""
    spans = source_spans(Catalog(_store(request)))
    return JSONResponse({"sources": [source_json(n, s) for n, s in
                                     _page(list(spans.items()), limit, offset)]})


@router.get("/sources/{source}")
def get_source(request: Request, source: str) -> JSONResponse:
    name = segment(source)
    spans = source_spans(Catalog(_store(request)))
    if name not in spans:
        raise MarquezNotFound(f"Source '{name}' not found.")
    return JSONResponse(source_json(name, spans[name]))


def _namespace_span(store: LineageStore, ns: str) -> tuple[int | None, int | None]:
    spans = Catalog(store).namespaces()
    if ns not in spans:
        raise MarquezNotFound(f"Namespace '{ns}' not found.")
    return spans[ns]


@router.get("/namespaces/{ns}")
def get_namespace(request: Request, ns: str) -> JSONResponse:
    ns = segment(ns)
    return JSONResponse(namespace_json(ns, _namespace_span(_store(request), ns)))


@router.get("/namespaces/{ns}/datasets")
def list_datasets(request: Request, ns: str, limit: int = Query(DEFAULT_LIMIT),
                  offset: int = Query(0)) -> JSONResponse:
    """The namespace's datasets by name, paged (``totalCount``: all of them)."""
    ns = segment(ns)
    catalog = Catalog(_store(request))
    eps = [ep for ep in catalog.datasets if ep.namespace == ns]
    if not eps and ns not in catalog.namespaces():  # a namespace of jobs only: no datasets
        raise MarquezNotFound(f"Namespace '{ns}' not found.")
    page = _page(sorted(eps, key=lambda e: e.name), limit, offset)
    return JSONResponse({"totalCount": len(eps),
                         "datasets": [dataset_json(catalog.datasets[ep]) for ep in page]})


@router.get("/namespaces/{ns}/datasets/{ds}")
def get_dataset(request: Request, ns: str, ds: str) -> JSONResponse:
    return JSONResponse(dataset_json(_facts(_store(request), segment(ns), segment(ds)),
                                     propagated=True))


@router.get("/namespaces/{ns}/datasets/{ds}/versions")
def list_dataset_versions(request: Request, ns: str, ds: str,
                          limit: int = Query(DEFAULT_LIMIT),
                          offset: int = Query(0)) -> JSONResponse:
    """One version per run that wrote the dataset, newest first, paged."""
    facts = _facts(_store(request), segment(ns), segment(ds))
    versions = facts.versions()
    return JSONResponse({"totalCount": len(versions),
                         "versions": [version_json(facts, v)
                                      for v in _page(versions, limit, offset)]})


@router.get("/namespaces/{ns}/datasets/{ds}/versions/{version}")
def get_dataset_version(request: Request, ns: str, ds: str, version: str) -> JSONResponse:
    facts = _facts(_store(request), segment(ns), segment(ds))
    wanted = segment(version)
    for v in facts.versions():
        if v.id == wanted:
            return JSONResponse(version_json(facts, v))
    raise MarquezNotFound(f"Dataset version '{wanted}' not found.")


# -- the lineage graph -----------------------------------------------------------------------

def _splits(rest: str) -> list[tuple[str, str]]:
    """Every (namespace, name) ``rest`` can be split into at a colon."""
    return [(rest[:i], rest[i + 1:]) for i, c in enumerate(rest)
            if c == ":" and 0 < i < len(rest) - 1]


def _find_job(catalog: Catalog, node_id: str) -> Job | None:
    for candidate in views.unversioned(node_id):
        for key in _splits(candidate.partition(":")[2]):
            if key in catalog.jobs:
                return catalog.jobs[key]
    return None


def _find_dataset(catalog: Catalog, node_id: str) -> EndPoint | None:
    try:
        ep, _ = views.parse_node_id(catalog.store, node_id)
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
    cap = getattr(request.app.state, "max_level", 100)
    if not 0 <= depth <= cap:
        raise BadRequest(f"depth must be between 0 and {cap}, got {depth}", "depth")
    return JSONResponse(lineage(_store(request), nodeId, depth))


# -- search and statistics ---------------------------------------------------------------

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
    return JSONResponse(search(_store(request), q, filter, sort, limit, namespace, before,
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
                for c in _column_lineage(facts) or []}
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


#: hits one beta search answers (Marquez's OpenSearch query asks for 10)
MAX_BETA_HITS = 10
COLUMN_LINEAGE_FACET_URL = ("https://openlineage.io/spec/facets/1-2-0/"
                            "ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet")


def _mark(name: str, low: str) -> str:
    """``name`` with its first match of ``low`` between ``<em>`` tags, as
    OpenSearch highlights."""
    i = name.lower().find(low)
    return name[:i] + "<em>" + name[i:i + len(low)] + "</em>" + name[i + len(low):]


@beta.get("/search/jobs")
def get_beta_search_jobs(request: Request, q: str = Query("")) -> JSONResponse:
    return JSONResponse(beta_search(_store(request), q, "jobs"))


@beta.get("/search/datasets")
def get_beta_search_datasets(request: Request, q: str = Query("")) -> JSONResponse:
    return JSONResponse(beta_search(_store(request), q, "datasets"))


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
    return JSONResponse(stats(_store(request), segment(asset), period or "", timezone))

