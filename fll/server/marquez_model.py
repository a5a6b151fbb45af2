"""Marquez's objects made from what the store keeps: namespaces, sources,
datasets and their versions, jobs and their latest runs.

What a Marquez client (marquez-python, Marquez's web UI) reads, built from
what fll keeps: the datasets runs read or wrote or events reported the schema
of, each recorded run (its program ``job.namespace/job.name``, start time and
operation set), the schemas reported, aliases. Marquez's own column lineage
(``GET /api/v1/column-lineage``) is `fll.server.cdap`'s, answered in front
of the framework with the other hot reads. The routes are in
`fll.server.marquez` (namespaces, sources, datasets, versions),
`fll.server.marquez_lineage` (the job/dataset graph) and
`fll.server.marquez_search` (search, statistics).

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
version is a `MarquezNotFound` (a 404 in fll's one error shape, with
Marquez's message).
"""
from __future__ import annotations

import functools
import uuid
from datetime import datetime, timezone
from typing import Any, NamedTuple

from ..errors import BadRequest, NotFound
from ..govern import dataset_tags as govern_dataset_tags
from ..model import EndPoint, EndPointField
from ..openlineage import PRODUCER, export_run_id, job_of as _program_job
from ..render import edge_kind
from ..rowkeys import MAX_TIME
from ..store.lineage import LineageStore
from ..store.reader import RunInfo
from ..store.runs import events_of, run_models
from ..store.tags import Tags
from . import views
from .field_inputs import set_inputs
from .runs import run_json as model_run_json

ALL_TIME = views.ALL_TIME
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
SCHEMA_FACET_URL = ("https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
                    "#/$defs/SchemaDatasetFacet")
SYMLINKS_FACET_URL = ("https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
                      "#/$defs/SymlinksDatasetFacet")
# the UUID namespaces of dataset and job versions (uuid5: the same every time)
_DATASET_VERSIONS = uuid.UUID("6c0b7d2e-3f7e-5b52-9a55-0c6c0f1d4a11")
_JOB_VERSIONS = uuid.UUID("2f4b3a90-8d1e-5c7a-b0e3-71f4e9a2c6d5")


class MarquezNotFound(NotFound):
    """A namespace, dataset, job or version Marquez would answer 404 for."""


def _dataset_tags(store: LineageStore, ns: str, name: str, *, propagated: bool = False
                  ) -> tuple[list[str], dict[str, list[str]], dict[str, list[dict]]]:
    """(the dataset's own tags, each field's tags, each field's tags that reach
    it through lineage as ``{"name", "origins"}``): the tags put on a field
    first, then those propagated to it (`fll.govern`, over all time, only when
    ``propagated``: a dataset's own paged, not every dataset of a listing)."""
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


def paged(items: list, limit: int, offset: int) -> list:
    if limit < 0 or limit > MAX_LIMIT:
        raise BadRequest(f"limit must be between 0 and {MAX_LIMIT}, got {limit}", "limit")
    if offset < 0:
        raise BadRequest(f"offset must be at least 0, got {offset}", "offset")
    return items[offset:offset + limit]


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


def dataset_facts(store: LineageStore, ns: str, name: str) -> DatasetFacts:
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


def column_lineage_json(facts: DatasetFacts) -> list[dict] | None:
    """Marquez's ``columnLineage`` of the dataset: each field the latest run that
    wrote it gave inputs, with them and their transformations; None when no run
    wrote it."""
    if not facts.writes:
        return None
    latest = facts.writes[0]
    info = facts.store.operation_set(latest.checksum)
    out = []
    for f in sorted(info.destination_fields().get(facts.ep, ())):
        inputs = set_inputs(facts.store, latest.checksum, EndPointField(facts.ep, f))
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
        out["columnLineage"] = column_lineage_json(facts)
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
