"""Reading OpenLineage events (spec 2-0-x): the checks every event passes,
which of the spec's three kinds it is (RunEvent, DatasetEvent, JobEvent), its
run id, time and job, and what it says about datasets beside lineage: the
SchemaDatasetFacet (field names and types) and the SymlinksDatasetFacet
(other names of the dataset), `dataset_facts`, kept by `record_facts`.

This module must never half-parse an event: any malformed value is a
`BadRequest` naming its JSON path before anything else happens.
"""
from __future__ import annotations

import os
import uuid
from datetime import datetime, timezone
from typing import Any, Iterable, NamedTuple

from .. import __version__
from ..errors import BadRequest

# who produced an exported event; override with FLL_PRODUCER (any URI)
PRODUCER = os.environ.get("FLL_PRODUCER") or f"urn:fll:{__version__}"
RUN_EVENT_SCHEMA_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
COLUMN_LINEAGE_SCHEMA_URL = \
    "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json"
#: Our own dataset facet carrying `EndPoint.properties`, so they survive a round trip.
PROPERTIES_FACET = "fllProperties"
PROPERTIES_SCHEMA_URL = f"{PRODUCER}/spec/FllPropertiesDatasetFacet.json"
#: Our own run facet: the run's original id, program and operations, so that
#: export → record gives back the same run (same id, program and checksum).
RUN_FACET = "fllRun"
RUN_FACET_SCHEMA_URL = f"{PRODUCER}/spec/FllRunFacet.json"
#: Our own dataset facet on an exported DatasetEvent: who reported the schema
#: (a run id, ``datasetEvent``, ``jobEvent:<ns>/<name>``), kept on the way back.
SCHEMA_OWNER_FACET = "fllSchema"
SCHEMA_OWNER_SCHEMA_URL = f"{PRODUCER}/spec/FllSchemaDatasetFacet.json"
DATASET_EVENT_SCHEMA_URL = \
    "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent"
SCHEMA_SCHEMA_URL = "https://openlineage.io/spec/facets/1-1-1/SchemaDatasetFacet.json"
SYMLINKS_SCHEMA_URL = "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet.json"
# UUID v5 namespace of exported run ids that are no UUID themselves
_RUN_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:fll:run")


# -- small JSON readers that name the path of what is wrong ---------------------

def _obj(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise BadRequest(f"{path} must be a JSON object, got {_kind(value)}", path)
    return value


def _arr(value: Any, path: str) -> list:
    if not isinstance(value, list):
        raise BadRequest(f"{path} must be a JSON array, got {_kind(value)}", path)
    return value


def _str(value: Any, path: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{path} must be a string, got {_kind(value)}", path)
    if not empty and not value:
        raise BadRequest(f"{path} must not be empty", path)
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _list_or_none(value: Any, path: str) -> list:
    return [] if value is None else _arr(value, path)


def _opt(d: dict, key: str, reader, path: str, default: Any) -> Any:
    return reader(d[key], f"{path}.{key}") if d.get(key) is not None else default


# -- run events ---------------------------------------------------------------

def event_time_ms(event: Any) -> int:
    """`eventTime` of a RunEvent as epoch milliseconds (UTC if no offset is given)."""
    text = _str(_obj(event, "$").get("eventTime"), "$.eventTime")
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadRequest(f"$.eventTime={text!r} is not an ISO 8601 date-time",
                         "$.eventTime") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    ms = int(dt.timestamp() * 1000)
    if ms < 0:
        raise BadRequest(f"$.eventTime={text!r} is before 1970", "$.eventTime")
    return ms


def check_shape(event: Any) -> None:
    """The checks every event must pass, even one without column lineage."""
    ev = _obj(event, "$")
    event_run_id(ev)
    event_time_ms(ev)
    job = _obj(ev.get("job"), "$.job")
    _str(job.get("namespace"), "$.job.namespace")
    _str(job.get("name"), "$.job.name")
    for side in ("inputs", "outputs"):
        for i, ds in enumerate(_list_or_none(ev.get(side), f"$.{side}")):
            d = _obj(ds, f"$.{side}[{i}]")
            _str(d.get("namespace"), f"$.{side}[{i}].namespace")
            _str(d.get("name"), f"$.{side}[{i}].name")
            if d.get("facets") is not None:
                _obj(d["facets"], f"$.{side}[{i}].facets")


def event_run_id(event: Any) -> str:
    """The run id of a RunEvent: `run.runId`, or the original id fll exported
    it from, when the `fllRun` facet names one that maps to `run.runId`."""
    ev = _obj(event, "$")
    if ev.get("run") is None:
        raise BadRequest("$.run is missing: a RunEvent (as its schemaURL or eventType says) "
                         "must carry run.runId", "$.run")
    run = _obj(ev["run"], "$.run")
    rid = _str(run.get("runId"), "$.run.runId")
    facets = run.get("facets")
    facet = facets.get(RUN_FACET) if isinstance(facets, dict) else None
    original = facet.get("runId") if isinstance(facet, dict) else None
    if isinstance(original, str) and original and export_run_id(original) == rid:
        return original
    return rid


def _job_program(ev: dict) -> str:
    job = _obj(ev.get("job"), "$.job")
    return f"{_str(job.get('namespace'), '$.job.namespace')}/{_str(job.get('name'), '$.job.name')}"


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def export_run_id(run_id: str) -> str:
    """The OpenLineage run id of a run: itself when it is a UUID (the spec's
    format, which clients check), else the UUID v5 of it, the same every time."""
    try:
        return str(uuid.UUID(run_id)) if len(run_id) == 36 else _uuid5(run_id)
    except ValueError:
        return _uuid5(run_id)


def _uuid5(run_id: str) -> str:
    return str(uuid.uuid5(_RUN_ID_NAMESPACE, run_id))


def job_of(program: str | None) -> tuple[str, str]:
    """(job namespace, job name) of a program: ``ns/name`` split at the first
    ``/``; a program without one (a `track()` job) goes to namespace ``fll``."""
    ns, _, name = (program or "").partition("/")
    if not ns or not name:
        return "fll", program or "unknown"
    return ns, name


# -- DatasetEvent, JobEvent, schemas and symlinks ---------------------------------

_KINDS = {"RunEvent": "run", "DatasetEvent": "dataset", "JobEvent": "job"}


def event_kind(event: Any) -> str:
    """``run``, ``dataset`` or ``job``: which of the spec's three events this is,
    told apart as Marquez does: by the last segment of ``schemaURL``
    (``…/OpenLineage.json#/$defs/RunEvent``, ``…#/definitions/JobEvent`` in
    older specs), so an event that says it is a RunEvent is checked as one
    (no ``run``: 422 naming ``$.run``) and never taken for another kind.
    Without a ``schemaURL`` naming a kind, by what only each kind has
    (2-0-2): ``eventType`` or ``run`` a RunEvent, else ``dataset`` a
    DatasetEvent, else ``job`` a JobEvent."""
    ev = _obj(event, "$")
    url = ev.get("schemaURL")
    if url is not None:
        kind = _KINDS.get(_str(url, "$.schemaURL").rstrip("/").rsplit("/", 1)[-1])
        if kind is not None:
            return kind
    if "eventType" in ev or "run" in ev:
        return "run"
    if "dataset" in ev:
        return "dataset"
    if "job" in ev:
        return "job"
    raise BadRequest("$ is no OpenLineage event: it has none of run (RunEvent), "
                     "dataset (DatasetEvent) or job (JobEvent)", "$")


def _schema_fields(d: dict, path: str) -> list[tuple[str, str | None]] | None:
    facets = d.get("facets")
    if not isinstance(facets, dict) or facets.get("schema") is None:
        return None
    sp = f"{path}.facets.schema"
    schema = _obj(facets["schema"], sp)
    out: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for i, f in enumerate(_list_or_none(schema.get("fields"), f"{sp}.fields")):
        if isinstance(f, dict):  # the usual field, checked without building its path
            name, ftype = f.get("name"), f.get("type")
            if isinstance(name, str) and name and (ftype is None or isinstance(ftype, str)):
                if name not in seen:
                    seen.add(name)
                    out.append((name, ftype))
                continue
        fp = f"{sp}.fields[{i}]"  # the checks that say what is wrong, and where
        f = _obj(f, fp)
        name = _str(f.get("name"), f"{fp}.name")
        ftype = _opt(f, "type", lambda v, p: _str(v, p, empty=True), fp, None)
        if name not in seen:
            seen.add(name)
            out.append((name, ftype))
    return out


def _symlinks(d: dict, path: str) -> list[tuple[str, str]]:
    facets = d.get("facets")
    if not isinstance(facets, dict) or facets.get("symlinks") is None:
        return []
    sp = f"{path}.facets.symlinks"
    facet = _obj(facets["symlinks"], sp)
    out = []
    for i, ident in enumerate(_list_or_none(facet.get("identifiers"), f"{sp}.identifiers")):
        ip = f"{sp}.identifiers[{i}]"
        ident = _obj(ident, ip)
        out.append((_str(ident.get("namespace"), f"{ip}.namespace"),
                    _str(ident.get("name"), f"{ip}.name")))
    return out


class DatasetFacts(NamedTuple):
    """What an event says about one dataset that fll keeps beside lineage."""
    namespace: str
    name: str
    schema: list[tuple[str, str | None]] | None   # SchemaDatasetFacet: (field, type)
    symlinks: list[tuple[str, str]]               # SymlinksDatasetFacet: other names


def dataset_facts(event: Any, kind: str | None = None) -> list[DatasetFacts]:
    """Schemas and symlinks of every dataset an event of any kind names
    (``dataset`` of a DatasetEvent, ``inputs``/``outputs`` otherwise), validated.
    ``kind``: the event's `event_kind`, when the caller knows it."""
    ev = _obj(event, "$")
    found: list[tuple[dict, str]] = []
    if (kind or event_kind(ev)) == "dataset":
        found.append((_obj(ev.get("dataset"), "$.dataset"), "$.dataset"))
    for side in ("inputs", "outputs"):
        for i, ds in enumerate(_list_or_none(ev.get(side), f"$.{side}")):
            found.append((_obj(ds, f"$.{side}[{i}]"), f"$.{side}[{i}]"))
    out = []
    for d, path in found:
        ns = _str(d.get("namespace"), f"{path}.namespace")
        name = _str(d.get("name"), f"{path}.name")
        if d.get("facets") is not None:
            _obj(d["facets"], f"{path}.facets")
        out.append(DatasetFacts(ns, name, _schema_fields(d, path), _symlinks(d, path)))
    return out


def check_static_event(event: Any, kind: str | None = None) -> None:
    """The checks a DatasetEvent or JobEvent must pass (a JobEvent needs ``job``,
    a DatasetEvent ``dataset``)."""
    ev = _obj(event, "$")
    kind = kind or event_kind(ev)
    event_time_ms(ev)
    if kind == "job" or "job" in ev:
        _job_program(ev)
    dataset_facts(ev, kind)


def static_column_lineage(event: Any, kind: str | None = None) -> list[str]:
    """The JSON paths of the ``columnLineage`` facets a DatasetEvent or JobEvent
    carries: the job's declared (static) lineage, which fll does not keep
    (column lineage is kept per run), so the answer names each of them."""
    ev = _obj(event, "$")
    found: list[tuple[Any, str]] = []
    if (kind or event_kind(ev)) == "dataset":
        found.append((ev.get("dataset"), "$.dataset"))
    for side in ("inputs", "outputs"):
        for i, ds in enumerate(_list_or_none(ev.get(side), f"$.{side}")):
            found.append((ds, f"$.{side}[{i}]"))
    return [f"{path}.facets.columnLineage" for d, path in found
            if isinstance(d, dict) and isinstance(d.get("facets"), dict)
            and d["facets"].get("columnLineage") is not None]


def record_facts(store: Any, facts: Iterable["DatasetFacts"], owner: str, at: int
                 ) -> tuple[int, int]:
    """Store the schemas and symlinks of the datasets an event names, its schemas
    under ``owner`` (a run id, or `static_owner`) at ``at``: (schemas, aliases)
    written. What `fll serve` and `fll record` both keep of an event."""
    facts = list(facts)
    schemas = record_schemas(store, facts, owner, at)
    aliases = 0
    for f in facts:
        for alias_ns, alias_name in f.symlinks:
            store.record_alias(alias_ns, alias_name, f.namespace, f.name)
            aliases += 1
    return schemas, aliases


def record_schemas(store: Any, facts: Iterable["DatasetFacts"], owner: str, at: int) -> int:
    """Store the schemas these datasets' facets report, in one store call
    (`Datasets.record_schemas`): how many."""
    schemas = [(f.namespace, f.name, f.schema) for f in facts if f.schema is not None]
    if schemas:  # the facet parser made the fields (name, type) pairs
        store.record_schemas(schemas, owner, at, checked=True)
    return len(schemas)


def static_owner(event: dict, kind: str) -> str:
    """Under which owner a checked DatasetEvent's or JobEvent's schemas are kept:
    ``datasetEvent``, or ``jobEvent:<job namespace>/<job name>``."""
    if kind == "job":
        return f"jobEvent:{event['job']['namespace']}/{event['job']['name']}"
    return f"{kind}Event"


def schema_owner(event: Any, kind: str) -> str | None:
    """The owner a DatasetEvent fll exported gives its schema (`SCHEMA_OWNER_FACET`),
    so recording it back keeps the schema where it was; None for any other event."""
    if kind != "dataset":
        return None
    dataset = _obj(event, "$").get("dataset")
    facets = dataset.get("facets") if isinstance(dataset, dict) else None
    facet = facets.get(SCHEMA_OWNER_FACET) if isinstance(facets, dict) else None
    owner = facet.get("owner") if isinstance(facet, dict) else None
    return owner if isinstance(owner, str) and owner else None
