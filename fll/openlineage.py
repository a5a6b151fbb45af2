"""OpenLineage in and out: RunEvents with `columnLineage` facets <-> field operations.

Ingest (`run_event_to_lineage`) turns one OpenLineage RunEvent (spec 2-0-x)
into one run's `FieldLineageInfo`: per input dataset a READ of the fields the
facets name, per output field one TRANSFORM whose inputs carry the facet's
transformation tags, per output dataset one WRITE. Construction is
deterministic (inputs sorted, names derived from identities), so the same
facet always gives the same operation set and checksum, and an exported event
re-ingested gives the run back unchanged.

The run cycle. OpenLineage events of one run (START, RUNNING, COMPLETE,
FAIL, ABORT; OTHER) each carry the run's cumulative state, and producers
often send part of the column lineage with START and all of it with
COMPLETE. fll records a run's lineage as the UNION of the column lineage of
all its events, in whatever order they arrive (`union`): an edge named by any
event is kept, with the transformation tags of every event that named it. A
later event that adds nothing answers "already recorded"; nothing an event
said is ever taken back. FAIL and ABORT are terminal like COMPLETE and their
lineage is kept, but apart: a run whose events include a FAIL or ABORT is a
failed run (`fll.store.runs`: the state rule), its lineage moved out of the
default index into the failed-run rows, so field questions leave it out
unless asked (``includeFailed``). The run's start time is the `eventTime` of the first event the
store saw for it (persisted first-writer-wins, so two servers agree). The
union applies only to runs whose operation set OpenLineage ingest built
(`normal_form`); a run recorded through the store API, a pipeline or
`track()` keeps CDAP's rule, and a different operation set for it is a
conflict. The server merges the events of one run one at a time; two
servers merging different additions to one run at the same instant can keep
only one of them (the store replaces a run's set atomically but has no
compare-and-set on it), which the run's next cumulative event restores.

Beside lineage, ingest keeps what events say about datasets
(`dataset_facts`): the SchemaDatasetFacet (field names and types, per run,
time-ranged) and the SymlinksDatasetFacet (other names of the dataset). A
DatasetEvent or JobEvent (spec 2-0-2) records only those.

Export (`facet_from_info`, `export_events`) goes the other way: per output
field the source fields it derives from, with the transformation tags composed
along every path (semantics §5: INDIRECT beats DIRECT; among DIRECT,
AGGREGATION beats TRANSFORMATION beats IDENTITY).

This module must never write to a store and never half-parse an event: any
malformed value is a `BadRequest` naming its JSON path before anything else
happens.
"""
from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
import uuid
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import orjson

from . import __version__
from .codec import operation_to_dict, operations_from_list
from .errors import BadRequest, FllError, InvalidLineageError
from .graph import compose_tags
from .model import (EndPoint, EndPointField, InputField, Operation, ReadOperation, Transformation,
                    TransformOperation, WriteOperation)
from .opset import FieldLineageInfo

__all__ = ["dataset_input_transformations", "run_event_to_lineage", "union", "normal_form", "normal_checksum", "event_kind", "dataset_facts",
           "DatasetFacts", "check_static_event", "static_column_lineage", "export_run_id",
           "schema_owner", "static_owner", "record_facts", "SCHEMA_OWNER_FACET", "RUN_FACET", "check_shape", "facet_from_info", "export_events", "input_transformations",
           "event_run_id", "event_time_ms", "job_of", "PRODUCER", "RUN_EVENT_SCHEMA_URL",
           "COLUMN_LINEAGE_SCHEMA_URL", "PROPERTIES_FACET"]

#: URI identifying fll as the producer of exported events and facets.
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

# subtypes that, per OpenLineage, belong in the facet's top-level `dataset` list
_DATASET_WIDE = frozenset({"FILTER", "JOIN", "GROUP_BY", "SORT"})
_LEGACY_TYPES = {"IDENTITY": Transformation("DIRECT", "IDENTITY"),
                 "MASKED": Transformation("DIRECT", "TRANSFORMATION", masking=True)}


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


# -- remembering what the same JSON always builds -------------------------------

# Producers send the same column lineage run after run (a daily job, START and
# COMPLETE of one run), and building an operation set from it is most of an
# ingest's CPU. Building is a pure function of the JSON it reads, so its result
# is kept under that JSON's canonical bytes (sorted keys): the same bytes can
# only ever build the same set. Only successes are kept; an event that fails
# is checked afresh each time, so its error is the same as ever.
_MEMO_ENTRIES = 1024
_MEMO_MAX_KEY = 64 * 1024  # a wide event is built each time, not kept


class _Memo:
    """A bounded map of canonical JSON bytes to what they build; thread-safe."""

    def __init__(self, size: int = _MEMO_ENTRIES):
        self._data: dict[bytes, Any] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, value: Any, build: Callable[[], Any]) -> Any:
        key = _canonical(value)
        if key is None:
            return build()
        hit = self._data.get(key, _MISS)
        if hit is not _MISS:
            return hit
        built = build()
        with self._lock:
            if len(self._data) >= self._size:
                del self._data[next(iter(self._data))]  # the oldest
            self._data[key] = built
        return built


_MISS = object()


def _canonical(value: Any) -> bytes | None:
    """The value's JSON with sorted keys, or None when that could stand for
    another value too: orjson writes NaN and infinities as null (only the
    standard library's parser makes them) and refuses integers beyond 64 bits."""
    try:
        key = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if len(key) > _MEMO_MAX_KEY or b"null" in key:
        return None
    return key


# (inputs, outputs) -> the operation set their column lineage builds (None: none)
_BUILT = _Memo()
# an fllRun facet's operations -> (that set, the checksum of its normal form),
# or None when they are not an operation set fll can read
_ORIGINAL = _Memo()
# checksum of a set -> checksum of its normal form (a pure function of the set)
_NORMAL: dict[str, str] = {}
# checksum of a set `_build` made -> the column lineage and properties it was
# built from (its normal form), so merging a run's next event reads no operations
_SOURCES: dict[str, tuple[dict, dict]] = {}
_SOURCE_EDGES = 4096  # the widest lineage kept there, in input fields


# -- ingest --------------------------------------------------------------------

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


def _transformation(value: Any, path: str) -> Transformation:
    t = _obj(value, path)
    try:
        return Transformation(
            type=_str(t.get("type"), f"{path}.type"),
            subtype=_opt(t, "subtype", lambda v, p: _str(v, p, empty=True), path, ""),
            description=_opt(t, "description", lambda v, p: _str(v, p, empty=True), path, ""),
            masking=_opt(t, "masking", _bool, path, False))
    except InvalidLineageError as e:
        raise BadRequest(f"{path}: {e}", path) from None


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"{path} must be a boolean, got {_kind(value)}", path)
    return value


def _input_ref(value: Any, path: str) -> tuple[EndPointField, tuple[Transformation, ...] | None]:
    d = _obj(value, path)
    ep = _endpoint(d.get("namespace"), d.get("name"), path, {})
    fld = _str(d.get("field"), f"{path}.field")
    tags = None
    if d.get("transformations") is not None:
        tags = tuple(_transformation(t, f"{path}.transformations[{i}]")
                     for i, t in enumerate(_arr(d["transformations"], f"{path}.transformations")))
    return EndPointField(ep, fld), tags


def _endpoint(namespace: Any, name: Any, path: str, properties: Mapping[str, str]) -> EndPoint:
    ns = _str(namespace, f"{path}.namespace")
    nm = _str(name, f"{path}.name")
    return EndPoint(ns, nm, properties)


def _properties(dataset: dict, path: str) -> dict[str, str]:
    facets = dataset.get("facets")
    if not isinstance(facets, dict) or not isinstance(facets.get(PROPERTIES_FACET), dict):
        return {}
    fpath = f"{path}.facets.{PROPERTIES_FACET}.properties"
    props = _obj(facets[PROPERTIES_FACET].get("properties", {}), fpath)
    return {k: _str(v, f"{fpath}.{k}", empty=True) for k, v in props.items()}


def _merge_tags(a: tuple[Transformation, ...], b: tuple[Transformation, ...]
                ) -> tuple[Transformation, ...]:
    return tuple(dict.fromkeys(a + b))


_Lineage = dict[EndPoint, dict[str, dict[EndPointField, tuple[Transformation, ...]]]]


def _event_lineage(ev: dict) -> tuple[_Lineage, dict[EndPoint, dict[str, str]]]:
    """The column lineage an event states: destination -> field -> source -> tags,
    and the properties of every dataset it names."""
    props: dict[EndPoint, dict[str, str]] = {}
    for side in ("inputs", "outputs"):
        for i, ds in enumerate(_list_or_none(ev.get(side), f"$.{side}")):
            p = f"$.{side}[{i}]"
            d = _obj(ds, p)
            ep = _endpoint(d.get("namespace"), d.get("name"), p, {})
            props.setdefault(ep, {}).update(_properties(d, p))

    lineage: _Lineage = {}
    for i, ds in enumerate(_list_or_none(ev.get("outputs"), "$.outputs")):
        p = f"$.outputs[{i}]"
        d = _obj(ds, p)
        facets = d.get("facets")
        if facets is None:
            continue
        facets = _obj(facets, f"{p}.facets")
        if facets.get("columnLineage") is None:
            continue
        fp = f"{p}.facets.columnLineage"
        facet = _obj(facets["columnLineage"], fp)
        dest = _endpoint(d.get("namespace"), d.get("name"), p, {})
        fields = _obj(facet.get("fields"), f"{fp}.fields")
        wide: dict[EndPointField, tuple[Transformation, ...]] = {}
        for j, ref in enumerate(_list_or_none(facet.get("dataset"), f"{fp}.dataset")):
            src, tags = _input_ref(ref, f"{fp}.dataset[{j}]")
            wide[src] = _merge_tags(wide.get(src, ()), tags or ())
        per_field = lineage.setdefault(dest, {})
        for out_name, spec in fields.items():
            sp = f"{fp}.fields.{out_name}"
            spec = _obj(spec, sp)
            legacy: tuple[Transformation, ...] = ()
            if spec.get("transformationType") is not None:
                legacy_type = _str(spec["transformationType"], f"{sp}.transformationType")
                if legacy_type.upper() in _LEGACY_TYPES:
                    legacy = (_LEGACY_TYPES[legacy_type.upper()],)
            inputs = per_field.setdefault(out_name, {})
            for k, ref in enumerate(_arr(spec.get("inputFields"), f"{sp}.inputFields")):
                src, tags = _input_ref(ref, f"{sp}.inputFields[{k}]")
                inputs[src] = _merge_tags(inputs.get(src, ()),
                                          tags if tags is not None else legacy)
            for src, tags in wide.items():
                inputs[src] = _merge_tags(inputs.get(src, ()), tags)
    return lineage, props


def _job_program(ev: dict) -> str:
    job = _obj(ev.get("job"), "$.job")
    return f"{_str(job.get('namespace'), '$.job.namespace')}/{_str(job.get('name'), '$.job.name')}"


def run_event_to_lineage(event: Any) -> tuple[FieldLineageInfo, str, int, str]:
    """One RunEvent → (operations, run id, start ms, program ``job.namespace/job.name``).

    The start time returned is this event's ``eventTime``; a caller that has
    seen an earlier event for the run uses that one instead. An event fll
    exported itself carries the `fllRun` run facet: when it agrees with the
    event (same job, same run id once mapped, operations giving exactly the
    event's column lineage), the run's original id, program and operations are
    restored, so export → record reproduces the run and its checksum. Raises
    `BadRequest` (malformed JSON shape, naming its path such as
    ``$.outputs[0].facets.columnLineage.fields.id.inputFields[1].field``) or
    `InvalidLineageError` (no output carries column lineage, or the result
    breaks a model rule).
    """
    ev = _obj(event, "$")
    run_id = event_run_id(ev)
    start_ms = event_time_ms(ev)
    program = _job_program(ev)
    if ev.get("eventType") is not None:
        _str(ev["eventType"], "$.eventType")
    info = _BUILT.get([ev.get("inputs"), ev.get("outputs")], lambda: _lineage_info(ev))
    if info is None:
        raise InvalidLineageError(
            "the event has no output with a columnLineage facet "
            "($.outputs[*].facets.columnLineage): nothing to record")
    original = _original_run(ev, info)
    if original is not None:
        return original[0], original[1], start_ms, original[2]
    return info, run_id, start_ms, program


def _lineage_info(ev: dict) -> FieldLineageInfo | None:
    """The operation set an event's column lineage builds; None when it has none."""
    lineage, props = _event_lineage(ev)
    return _build(lineage, props) if lineage else None


def _original_run(ev: dict, info: FieldLineageInfo) -> tuple[FieldLineageInfo, str, str] | None:
    """(operations, run id, program) of the `fllRun` facet when it agrees with ``ev``."""
    facets = ev["run"].get("facets")
    facet = facets.get(RUN_FACET) if isinstance(facets, dict) else None
    if not isinstance(facet, dict):
        return None
    rid, program, ops = event_run_id(ev), facet.get("program"), facet.get("operations")
    if not isinstance(program, str) or job_of(program) != (ev["job"]["namespace"],
                                                            ev["job"]["name"]):
        return None
    if ops is None:
        return info, rid, program  # the facets alone give the operations back
    found = _ORIGINAL.get(ops, lambda: _facet_operations(ops))
    # the facet is trusted only as far as the column lineage it must reproduce
    if found is None or found[1] != info.checksum:
        return None
    return found[0], rid, program


def _facet_operations(ops: Any) -> tuple[FieldLineageInfo, str] | None:
    """(the operation set an fllRun facet lists, its normal form's checksum), or
    None when the facet is not fll's own (then the event's lineage stands)."""
    try:
        original = FieldLineageInfo(operations_from_list(ops))
        return original, normal_checksum(original)
    except (FllError, TypeError, ValueError, KeyError, AttributeError):
        return None


def normal_checksum(info: FieldLineageInfo) -> str:
    """``normal_form(info).checksum``, remembered per set (a set ingest built is
    its own normal form, known without building it again)."""
    found = _NORMAL.get(info.checksum)
    if found is None:
        found = normal_form(info).checksum
        if len(_NORMAL) >= _MEMO_ENTRIES * 16:
            _NORMAL.clear()
        _NORMAL[info.checksum] = found
    return found


def normal_form(info: FieldLineageInfo) -> FieldLineageInfo:
    """The operation set ingest builds from ``info``'s own column-lineage facets:
    equal to ``info`` exactly when ``info`` came from OpenLineage facets."""
    lineage, props = _info_lineage(info)
    return _build(lineage, props)


def _info_lineage(info: FieldLineageInfo) -> tuple[_Lineage, dict[EndPoint, dict[str, str]]]:
    return _event_lineage(_plain_event(info, 0))


def union(prior: FieldLineageInfo, event: Any) -> FieldLineageInfo | None:
    """The operation set of a run whose recorded set is ``prior`` after ``event``
    (a later RunEvent of the same run): the union of both column lineages, with
    the transformation tags of an edge merged. None when ``prior`` is not an
    operation set OpenLineage ingest made (a run recorded through the store API
    or a pipeline keeps CDAP's rule: one run, one operation set)."""
    if normal_checksum(prior) != prior.checksum:
        return None
    known = _SOURCES.get(prior.checksum)
    if known is not None:  # built here: its lineage, copied where it is merged into
        lineage = {d: {n: dict(i) for n, i in per.items()} for d, per in known[0].items()}
        props = {ep: dict(p) for ep, p in known[1].items()}
    else:
        lineage, props = _info_lineage(prior)
    ev = _obj(event, "$")
    mine_info = _BUILT.get([ev.get("inputs"), ev.get("outputs")], lambda: _lineage_info(ev))
    built = _SOURCES.get(mine_info.checksum) if mine_info is not None else None
    more, more_props = built if built is not None else _event_lineage(ev)
    for dest, per_field in more.items():
        mine = lineage.setdefault(dest, {})
        for name, inputs in per_field.items():
            have = mine.setdefault(name, {})
            for src, tags in inputs.items():
                have[src] = _merge_tags(have.get(src, ()), tags)
    for ep, p in more_props.items():
        props.setdefault(ep, {}).update(p)
    if mine_info is not None and (lineage, props) == (more, more_props):
        return mine_info  # the event says all the prior set did: its own set is the union
    return _build(lineage, props)


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
        fp = f"{sp}.fields[{i}]"
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


def _build(lineage: dict[EndPoint, dict[str, dict[EndPointField, tuple[Transformation, ...]]]],
           props: dict[EndPoint, dict[str, str]]) -> FieldLineageInfo:
    reads: dict[EndPoint, set[str]] = {}
    for per_field in lineage.values():
        for inputs in per_field.values():
            for src in inputs:
                reads.setdefault(src.endpoint, set()).add(src.field)
    ops: list[Operation] = []
    read_name = {ep: f"read:{ep.namespace}:{ep.name}" for ep in reads}
    for ep in sorted(reads):
        ops.append(ReadOperation(read_name[ep], f"read {ep.namespace}:{ep.name}",
                                 EndPoint(ep.namespace, ep.name, props.get(ep)),
                                 tuple(sorted(reads[ep]))))
    for dest in sorted(lineage):
        writes: list[InputField] = []
        for out_name in sorted(lineage[dest]):
            inputs = lineage[dest][out_name]
            name = f"transform:{dest.namespace}:{dest.name}:{out_name}"
            ins = [InputField(read_name[s.endpoint], s.field) for s in sorted(inputs)]
            tags = {InputField(read_name[s.endpoint], s.field): t
                    for s, t in inputs.items() if t}
            ops.append(TransformOperation(name, f"columnLineage of {out_name}", tuple(ins),
                                          (out_name,), tags))
            writes.append(InputField(name, out_name))
        ops.append(WriteOperation(f"write:{dest.namespace}:{dest.name}",
                                  f"write {dest.namespace}:{dest.name}",
                                  EndPoint(dest.namespace, dest.name, props.get(dest)),
                                  tuple(writes)))
    info = FieldLineageInfo(ops)
    if sum(len(i) for per in lineage.values() for i in per.values()) <= _SOURCE_EDGES:
        # (a wide set is merged the slow way: kept, a thousand of them would be large)
        if len(_SOURCES) >= _MEMO_ENTRIES:
            _SOURCES.clear()
        _SOURCES[info.checksum] = (lineage, props)  # never changed after: copied to merge
    _NORMAL[info.checksum] = info.checksum  # built from facets: its own normal form
    return info


# -- transformation tags of one operation set, composed from its operations ----
#
# What export and `fll.testing` need from the operations themselves; a reader
# answers from the tags stored with each set (`fll.summaries.Summaries`), composed
# by the same rule (`fll.graph.compose_tags`).

def input_transformations(info: FieldLineageInfo, destination: EndPointField
                          ) -> dict[EndPointField, list[Transformation]]:
    """Per source field of ``destination`` (in this operation set), the distinct
    transformation tags composed along every path from its READ; ``[]`` when no
    step on any path was tagged. Linear in the graph: one pass over the field's operations."""
    return _input_transformations(info, info.incoming_operations(destination),
                                  destination.endpoint, {destination.field}
                                  ).get(destination.field, {})


def dataset_input_transformations(info: FieldLineageInfo, endpoint: EndPoint
                                  ) -> dict[str, dict[EndPointField, list[Transformation]]]:
    """`input_transformations` of every field this set writes to ``endpoint``, in
    one pass over the set: linear in its size, however wide the dataset."""
    written = info.destination_fields().get(endpoint, frozenset())
    return _input_transformations(info, info.operations, endpoint, set(written))


def _input_transformations(info: FieldLineageInfo, operations: Iterable[Operation],
                           endpoint: EndPoint, fields: set[str]
                           ) -> dict[str, dict[EndPointField, list[Transformation]]]:
    """`input_transformations` of several fields of ``endpoint`` in one pass over
    ``operations`` (topological order, every producer of the fields included), so a
    facet of n fields costs one pass, not n."""
    by_name = {op.name: op for op in info.operations}
    # operations come in topological order, so one forward pass sees every
    # producer before its consumers (no recursion, no path listing)
    per_op: dict[str, dict[EndPointField, set[tuple[Transformation, ...]]]] = {}

    def of_input(inp: InputField) -> dict[EndPointField, set[tuple[Transformation, ...]]]:
        origin = by_name[inp.origin]
        if isinstance(origin, ReadOperation):
            return {EndPointField(EndPoint(origin.source.namespace, origin.source.name),
                                  inp.name): {()}}
        return per_op.get(inp.origin, {})

    result: dict[str, dict[EndPointField, set[tuple[Transformation, ...]]]] = {}
    for op in operations:
        if isinstance(op, TransformOperation):
            acc: dict[EndPointField, set[tuple[Transformation, ...]]] = {}
            for inp in op.inputs:
                step = op.transformations.get(inp, ())
                for src, paths in of_input(inp).items():
                    acc.setdefault(src, set()).update(compose_tags(p, step) for p in paths)
            per_op[op.name] = acc
        elif isinstance(op, WriteOperation) and op.destination == endpoint:
            for inp in op.inputs:
                if inp.name in fields:
                    into = result.setdefault(inp.name, {})
                    for src, paths in of_input(inp).items():
                        into.setdefault(src, set()).update(paths)
    return {name: {src: _flatten(paths) for src, paths in per.items()}
            for name, per in result.items()}


def _flatten(paths: Iterable[tuple[Transformation, ...]]) -> list[Transformation]:
    tags: dict[Transformation, None] = {}
    for p in sorted(paths, key=lambda p: [(t.type, t.subtype, t.description, t.masking)
                                          for t in p]):
        tags.update(dict.fromkeys(p))
    return list(tags)


# -- export --------------------------------------------------------------------

def _input_field_json(src: EndPointField, tags: list[Transformation]) -> dict:
    return {"namespace": src.endpoint.namespace, "name": src.endpoint.name, "field": src.field,
            "transformations": [t.to_dict() for t in tags]}


def facet_from_info(info: FieldLineageInfo, destination: EndPoint) -> dict:
    """The `ColumnLineageDatasetFacet` (1-2-0) of ``destination`` in this operation set.

    An input every output field depends on with the same tags, all of them
    dataset-wide (FILTER, JOIN, GROUP_BY, SORT), goes to the facet's `dataset`
    list, as OpenLineage puts it; ingest spreads it back over every field.
    """
    written = info.destination_fields().get(destination)
    if written is None:
        raise InvalidLineageError(f"the operation set does not write {destination}")
    # one pass for every field (per-field passes made a wide set's export quadratic)
    found = _input_transformations(info, info.operations, destination, set(written))
    per_field = {name: found.get(name, {}) for name in sorted(written)}
    wide: dict[EndPointField, list[Transformation]] = {}
    if per_field:
        first = next(iter(per_field.values()))
        for src, tags in first.items():
            if tags and all(t.type == "INDIRECT" and t.subtype in _DATASET_WIDE for t in tags) \
                    and all(f.get(src) == tags for f in per_field.values()):
                wide[src] = tags
    fields = {}
    for name, inputs in per_field.items():
        fields[name] = {"inputFields": [_input_field_json(s, inputs[s])
                                        for s in sorted(inputs) if s not in wide]}
    facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": COLUMN_LINEAGE_SCHEMA_URL,
                             "fields": fields}
    if wide:
        facet["dataset"] = [_input_field_json(s, wide[s]) for s in sorted(wide)]
    return facet


def _dataset_json(ep: EndPoint, facets: dict | None = None) -> dict:
    out: dict[str, Any] = {"namespace": ep.namespace, "name": ep.name}
    all_facets = dict(facets or {})
    if ep.properties:
        all_facets[PROPERTIES_FACET] = {"_producer": PRODUCER, "_schemaURL": PROPERTIES_SCHEMA_URL,
                                        "properties": dict(ep.properties)}
    if all_facets:
        out["facets"] = all_facets
    return out


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


def info_to_event(info: FieldLineageInfo, run_id: str, start_ms: int,
                  program: str | None, model: Any = None) -> dict:
    """One RunEvent describing a whole recorded run, at its start. Its `fllRun`
    run facet keeps the original run id and program, and the operations when
    the column-lineage facets alone would not give them back (a run that did
    not come from OpenLineage), so a round trip restores the run exactly.
    ``model``: the run's `fll.store.runs.RunModel` with its merged facets, when
    the store keeps one: the event then has the run's final state as its type,
    its end time in `fllRun` (``endTime``) and its run and job facets; else
    it is a COMPLETE event (a run recorded through the store API)."""
    event = _plain_event(info, start_ms)
    facet: dict[str, Any] = {"_producer": PRODUCER, "_schemaURL": RUN_FACET_SCHEMA_URL,
                             "runId": run_id,
                             "program": program if program else "/".join(job_of(program))}
    # only a set whose operations are named as ingest names them can be normal:
    # the exact (linear, but not free) check is for those alone
    if not _ingest_named(info) or _normal(info, event) != info:
        facet["operations"] = [operation_to_dict(op) for op in info.operations]
    ns, name = job_of(program)
    event["job"] = {"namespace": ns, "name": name}
    event["run"] = {"runId": export_run_id(run_id), "facets": {RUN_FACET: facet}}
    if model is not None:
        state, run_facets, job_facets = model
        event["eventType"] = state.state
        if state.end_ms is not None:
            facet["endTime"] = _iso(state.end_ms)
        event["run"]["facets"] = {**{k: v for k, v in run_facets.items() if k != RUN_FACET},
                                  RUN_FACET: facet}
        if job_facets:
            event["job"]["facets"] = job_facets
    return event


def exported_end_ms(event: Any, run_id: str) -> int | None:
    """The end time an event fll exported gives its run (`fllRun`'s
    ``endTime``, see `info_to_event`), or None: on import the run's final
    state is kept at that time, its start at the event's time."""
    try:
        facet = event["run"]["facets"][RUN_FACET]
        if facet.get("runId") != run_id or not isinstance(facet.get("endTime"), str):
            return None
        return event_time_ms({"eventTime": facet["endTime"]})
    except (KeyError, TypeError, AttributeError, BadRequest):
        return None


def _ingest_named(info: FieldLineageInfo) -> bool:
    return all(op.name.startswith(("read:", "transform:", "write:")) for op in info.operations)


def _plain_event(info: FieldLineageInfo, start_ms: int) -> dict:
    """The event of ``info`` without run and job: what its lineage reads as."""
    return {
        "eventType": "COMPLETE",
        "eventTime": _iso(start_ms),
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT_SCHEMA_URL,
        "inputs": [_dataset_json(ep) for ep in sorted(info.sources)],
        "outputs": [_dataset_json(ep, {"columnLineage": facet_from_info(info, ep)})
                    for ep in sorted(info.destinations)],
    }


def _normal(info: FieldLineageInfo, event: dict) -> FieldLineageInfo:
    lineage, props = _event_lineage(event)
    return _build(lineage, props)


def export_events(store, endpoint: EndPoint, start_ms: int, end_ms: int) -> list[dict]:
    """What the store knows of ``endpoint`` in ``[start_ms, end_ms)`` as OpenLineage
    events, so that recording them into an empty store answers as the store does:

    - a RunEvent for every run that wrote it, failed runs included, oldest
      first, each describing the whole run (all its outputs), its type the
      run's final state, with its end time and facets (`info_to_event`),
      every dataset of it with the SchemaDatasetFacet the run reported for
      it, if any;
    - a DatasetEvent for every schema of ``endpoint`` that no such run reported
      (one from a DatasetEvent or JobEvent, or a RunEvent without column
      lineage), at its time, its owner kept in the `SCHEMA_OWNER_FACET`;
    - a DatasetEvent with the SymlinksDatasetFacet of its aliases, if it has any.
    """
    from .store import runs as run_model
    events = []
    # every run, failed ones included: an export keeps each run's real state
    runs = sorted(store.including_failed().runs(endpoint, start_ms, end_ms, "incoming"),
                  key=lambda r: (r.start_ms, r.run_id))
    models = run_model.run_models(store, [r.run_id for r in runs])
    raw = run_model.events_of(store, models.values())
    for run in runs:
        info = store.operation_set(run.checksum)
        m = models.get(run.run_id)
        event = info_to_event(info, run.run_id, run.start_ms, run.program,
                              None if m is None else (m, *run_model.merged_facets(m, raw)))
        for ds in event["inputs"] + event["outputs"]:
            fields = _schema_at(store, ds["namespace"], ds["name"], run.start_ms, run.run_id)
            if fields is not None:
                ds.setdefault("facets", {})["schema"] = _schema_facet(fields)
        events.append(event)
    told = {(r.start_ms, r.run_id) for r in runs}
    for at, owner, fields in store.schema_history(endpoint.namespace, endpoint.name,
                                         start_ms, end_ms):
        if (at, owner) in told:
            continue
        events.append(_dataset_event(endpoint, at, {
            "schema": _schema_facet(fields),
            SCHEMA_OWNER_FACET: {"_producer": PRODUCER, "_schemaURL": SCHEMA_OWNER_SCHEMA_URL,
                                 "owner": owner}}))
    aliases = store.aliases(endpoint.namespace, endpoint.name)
    if aliases:
        events.append(_dataset_event(endpoint, max(start_ms, 0), {"symlinks": {
            "_producer": PRODUCER, "_schemaURL": SYMLINKS_SCHEMA_URL,
            "identifiers": [{"namespace": ns, "name": name, "type": "DATASET"}
                            for ns, name in aliases]}}))
    return events


def _dataset_event(endpoint: EndPoint, at: int, facets: dict) -> dict:
    return {"eventTime": _iso(at), "producer": PRODUCER, "schemaURL": DATASET_EVENT_SCHEMA_URL,
            "dataset": {"namespace": endpoint.namespace, "name": endpoint.name,
                        "facets": facets}}


def _schema_facet(fields: list[tuple[str, str | None]]) -> dict:
    return {"_producer": PRODUCER, "_schemaURL": SCHEMA_SCHEMA_URL,
            "fields": [{"name": n} if t is None else {"name": n, "type": t} for n, t in fields]}


def _schema_at(store, namespace: str, name: str, at: int,
               owner: str) -> list[tuple[str, str | None]] | None:
    """The schema ``owner`` (a run id) reported for the dataset at ``at``, if it
    is the one the store answers for that millisecond, else None."""
    found = store.schema_history(namespace, name, at, at + 1)
    return found[0][2] if found and found[0][1] == owner else None


def record_facts(store: Any, facts: Iterable["DatasetFacts"], owner: str, at: int
                 ) -> tuple[int, int]:
    """Store the schemas and symlinks of the datasets an event names, its schemas
    under ``owner`` (a run id, or `static_owner`) at ``at``: (schemas, aliases)
    written. What `fll serve` and `fll record` both keep of an event."""
    schemas = aliases = 0
    for f in facts:
        if f.schema is not None:
            store.record_schema(f.namespace, f.name, owner, at, f.schema)
            schemas += 1
        for alias_ns, alias_name in f.symlinks:
            store.record_alias(alias_ns, alias_name, f.namespace, f.name)
            aliases += 1
    return schemas, aliases


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
