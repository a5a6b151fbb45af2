"""A run's operation set from its OpenLineage RunEvents.

`run_event_to_lineage` turns one RunEvent into one run's `FieldLineageInfo`
(built from its column lineage facets, `fll.openlineage.facets`), or gives
back the run an event fll exported itself (its ``fllRun`` run facet).

The run cycle. OpenLineage events of one run (START, RUNNING, COMPLETE,
FAIL, ABORT; OTHER) each carry the run's cumulative state, and producers
often send part of the column lineage with START and all of it with
COMPLETE. fll records a run's lineage as the UNION of the column lineage of
all its events, in whatever order they arrive (`union`): an edge named by any
event is kept, with the transformation tags of every event that named it. A
later event that adds nothing answers "already recorded"; nothing an event
said is ever taken back. The union applies only to runs whose operation set
OpenLineage ingest built (`normal_form`); a run recorded through the store
API, a pipeline or `track()` keeps CDAP's rule, and a different operation
set for it is a conflict.

This module must never write to a store.
"""
from __future__ import annotations

from typing import Any, Callable

import orjson

from ..codec import operations_from_list
from ..errors import FllError, InvalidLineageError
from ..model import EndPoint
from ..opset import DeferredSet, FieldLineageInfo
from .events import RUN_FACET, _obj, _str, _job_program, event_run_id, event_time_ms, job_of
from .facets import (_NORMAL, _NORMAL_ENTRIES, _SOURCES, _build, _event_lineage,
                     _info_lineage, _merge_tags, normal_form)
from .memo import DEFAULT_MEMO_BYTES, MISS, Memo, canonical

# -- remembering what the same JSON always builds -------------------------------

# Producers send the same column lineage run after run (a daily job, START and
# COMPLETE of one run), and building an operation set from it is most of an
# ingest's CPU. Building is a pure function of the JSON it reads, so what it
# gave is kept under that JSON's bytes, by their SHA-256 digest
# (`fll.openlineage.memo`): the same bytes can only ever build the same set. What is kept is the set's
# checksum (and destinations), not the set: the next event with that JSON
# gets a `DeferredSet`, which a run of a set the store already holds records
# by its checksum alone, and which builds itself from its own event only if
# asked for its operations. A warehouse sends thousands of distinct lineages
# a day, each set tens of KB once built: their checksums fit in a few MB.
# Only successes are kept; an event that fails is checked afresh each time,
# so its error is the same as ever. The warehouse benchmark's widest tables
# send 70 KB of lineage (`fll.openlineage.memo.MEMO_MAX_KEY`: the widest kept).

def _sizeof_built(value: tuple[str, frozenset[EndPoint]] | None) -> int:
    """Bytes of a (checksum, destinations) entry: a checksum string, and each
    destination with its properties (held here once the set is gone; measured with tracemalloc: above it)."""
    if value is None:
        return 0
    return 150 + sum(350 + len(e.namespace) + len(e.name)
                     + sum(100 + len(k) + len(v) for k, v in e.properties.items())
                     for e in value[1])


# (inputs, outputs) -> (checksum, destinations) of the operation set their
# column lineage builds (None: none)
_BUILT = Memo(0, _sizeof_built)
# an fllRun facet's operations -> (the checksum of that set, the checksum of
# its normal form), or None when they are not an operation set fll can read
_ORIGINAL = Memo(0, lambda v: 0 if v is None else 200)
# (checksum of a run's recorded set, checksum of the set an event of it builds)
# -> the checksum of their union: a pure function of the two sets (see
# `union`), and a daily job's START and COMPLETE give the same pair run after run
_UNIONS = Memo(0, lambda v: 100)


def memo_budget(nbytes: int) -> None:
    """Bound what this process remembers of the events it ingested to
    ``nbytes`` (`fll.store.cache.CacheBudget.ingest`): the checksums of what
    JSON built, the unions of pairs of sets, and the lineage of the sets
    built lately (`fll.openlineage.facets._SOURCES`: only what merges a
    run's next event without reading its set again)."""
    _BUILT.budget = nbytes * 45 // 100
    _UNIONS.budget = nbytes * 10 // 100
    _ORIGINAL.budget = nbytes * 5 // 100
    _SOURCES.budget = nbytes * 40 // 100


memo_budget(DEFAULT_MEMO_BYTES)


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
    return run_event(event)[0]


def run_event(event: Any, raw: bytes | None = None
              ) -> tuple[tuple[FieldLineageInfo, str, int, str], Callable[[], dict]]:
    """`run_event_to_lineage`, and a function giving the event's ``inputs`` and
    ``outputs`` again (a dict of those two), read back from their JSON bytes
    when ingest kept them: what merging the event into its run may read, so
    that a caller waiting to write need not hold the parsed event (a thousand
    containers or more, which the garbage collector walks while they live;
    `fll.server.collector`). ``raw``: the event's `lineage_json`, when the
    caller made it already."""
    ev = _obj(event, "$")
    run_id = event_run_id(ev)
    start_ms = event_time_ms(ev)
    program = _job_program(ev)
    if ev.get("eventType") is not None:
        _str(ev["eventType"], "$.eventType")
    info, raw = _event_set(ev, raw)
    if info is None:
        raise InvalidLineageError(
            "the event has no output with a columnLineage facet "
            "($.outputs[*].facets.columnLineage): nothing to record")
    again: Callable[[], dict] = (lambda: ev) if raw is None else (lambda: _reread(raw))
    original = _original_run(ev, info)
    if original is not None:
        return (original[0], original[1], start_ms, original[2]), again
    return (info, run_id, start_ms, program), again


def _event_set(ev: dict, raw: bytes | None = None
               ) -> tuple[FieldLineageInfo | None, bytes | None]:
    """The operation set an event's column lineage builds (None when it has
    none): built, or a `DeferredSet` when the same JSON built it before; and
    the JSON of the event's inputs and outputs, when it can stand for them
    (``raw``: that JSON, made by the caller)."""
    if raw is None:
        raw = lineage_json(ev)
    key = None if raw is None else Memo.digest(raw)
    hit = _BUILT.find(key) if key is not None else MISS
    if hit is MISS:
        info = _lineage_info(ev)
        if key is not None:
            _BUILT.keep(key, None if info is None else (info.checksum, info.destinations))
        return info, raw
    if hit is None:
        return None, raw
    assert raw is not None
    return DeferredSet(hit[0], lambda: _lineage_info(_reread(raw)) or _no_lineage(),
                       hit[1]), raw


def _reread(raw: bytes) -> dict:
    """An event's inputs and outputs from the JSON `_event_set` kept of them."""
    inputs, outputs = orjson.loads(raw)
    return {"inputs": inputs, "outputs": outputs}


def _no_lineage() -> FieldLineageInfo:
    raise RuntimeError("an event remembered with column lineage built none")


def _lineage_info(ev: dict) -> FieldLineageInfo | None:
    """The operation set an event's column lineage builds; None when it has none."""
    lineage, props = _event_lineage(ev)
    return _build(lineage, props) if lineage else None


# -- sets built in another process ------------------------------------------------
#
# Building a new set is most of a new event's CPU, and a server's one process
# does it holding the GIL. A builder process (`fll.server.set_builder`) builds
# instead: this process sends an event's inputs and outputs as JSON
# (`lineage_json`, when not `built_here`), the builder builds them
# (`build_json`, and `union_built` for the union with the run's set when it
# built that one too), and this process remembers what came back (`adopt`,
# `adopt_union`) as it remembers what it built: the event then gets a
# `DeferredSet`, as a repeated event does.

def lineage_json(ev: Any) -> bytes | None:
    """The JSON an event's set is built from (its inputs and outputs, keys
    sorted), which `run_event` takes instead of making it again; None when
    nothing can stand for them."""
    return canonical([ev.get("inputs"), ev.get("outputs")]) if isinstance(ev, dict) else None


def built_here(raw: bytes) -> bool:
    """Whether this process built the set of ``raw`` (`lineage_json`), or was
    told what it is, and still remembers it."""
    return _BUILT.find(Memo.digest(raw)) is not MISS


def build_json(raw: bytes) -> FieldLineageInfo | None:
    """The set the inputs and outputs ``raw`` (`lineage_json`) build; None when they
    carry no column lineage. Raises as `run_event` does."""
    return _lineage_info(_reread(raw))


def union_built(prior: str, mine: FieldLineageInfo, raw: bytes) -> FieldLineageInfo | None:
    """`union_of` the set whose checksum is ``prior`` and ``mine``, which this
    process built from ``raw``: when it built ``prior`` too and still has its
    lineage (else None: the union is made where the run's set is read)."""
    if prior == mine.checksum or normal_checksum(mine) != mine.checksum or \
            _SOURCES.find(prior) is MISS:
        return None
    merged = _union(DeferredSet(prior, _no_lineage), _reread(raw), mine)
    _UNIONS.keep((prior, mine.checksum), merged.checksum)
    return merged


def adopt(raw: bytes, checksum: str | None, destinations: frozenset[EndPoint] | None) -> None:
    """Remember what another process built from ``raw`` (`build_json`): the
    set's checksum and destinations, or None for no column lineage."""
    _BUILT.keep(Memo.digest(raw), None if checksum is None or destinations is None
                else (checksum, destinations))
    if checksum is not None:
        _normal_itself(checksum)


def adopt_union(prior: str, mine: str, merged: str) -> None:
    """Remember that the union of the sets ``prior`` and ``mine`` is ``merged``
    (`union_built`, in another process)."""
    _UNIONS.keep((prior, mine), merged)
    _normal_itself(merged)


def _normal_itself(checksum: str) -> None:
    """A set built from facets is its own normal form (as `_build` notes)."""
    if checksum not in _NORMAL:
        if len(_NORMAL) >= _NORMAL_ENTRIES:
            _NORMAL.clear()
        _NORMAL[checksum] = checksum


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
    key = _ORIGINAL.key(ops)
    found = _ORIGINAL.find(key) if key is not None else MISS
    original: FieldLineageInfo | None = None
    if found is MISS:
        original = _facet_operations(ops)
        found = None if original is None else (original.checksum, normal_checksum(original))
        if key is not None:
            _ORIGINAL.keep(key, found)
    # the facet is trusted only as far as the column lineage it must reproduce
    if found is None or found[1] != info.checksum:
        return None
    if original is None:
        original = DeferredSet(found[0], lambda: _facet_operations(ops) or _no_lineage())
    return original, rid, program


def _facet_operations(ops: Any) -> FieldLineageInfo | None:
    """The operation set an fllRun facet lists, or None when the facet is not
    fll's own (then the event's lineage stands)."""
    try:
        original = FieldLineageInfo(operations_from_list(ops))
        normal_checksum(original)  # its operations read back as facets
        return original
    except (FllError, TypeError, ValueError, KeyError, AttributeError):
        return None


def normal_checksum(info: FieldLineageInfo) -> str:
    """``normal_form(info).checksum``, remembered per set (a set ingest built is
    its own normal form, known without building it again)."""
    found = _NORMAL.get(info.checksum)
    if found is None:
        found = normal_form(info).checksum
        if len(_NORMAL) >= _NORMAL_ENTRIES:
            _NORMAL.clear()
        _NORMAL[info.checksum] = found
    return found


def union(prior: FieldLineageInfo, event: Any, built: FieldLineageInfo | None = None
          ) -> FieldLineageInfo | None:
    """The operation set of a run whose recorded set is ``prior`` after ``event``
    (a later RunEvent of the same run): the union of both column lineages, with
    the transformation tags of an edge merged. None when ``prior`` is not an
    operation set OpenLineage ingest made (a run recorded through the store API
    or a pipeline keeps CDAP's rule: one run, one operation set). ``built``:
    the set `run_event_to_lineage` gave for ``event``, when it is in normal
    form (then it is the set the event's column lineage builds: not built or
    looked up again)."""
    ev = _obj(event, "$")
    return union_of(prior, lambda: ev, built)


def union_of(prior: FieldLineageInfo, event: Callable[[], dict],
             built: FieldLineageInfo | None = None) -> FieldLineageInfo | None:
    """`union` of ``prior`` and the event ``event()`` gives (a dict), called
    only when the union is not remembered (`run_event` gives such a function)."""
    if normal_checksum(prior) != prior.checksum:
        return None
    mine_info = built if built is not None and normal_checksum(built) == built.checksum \
        else _event_set(event())[0]
    if mine_info is None:  # no column lineage: what the prior set says, read back
        return _union(prior, event(), None)
    pair = (prior.checksum, mine_info.checksum)
    found = _UNIONS.find(pair)
    if found is MISS:
        merged = _union(prior, event(), mine_info)
        _UNIONS.keep(pair, merged.checksum)
        return merged
    if found == mine_info.checksum:  # the usual COMPLETE: all its START said, and more
        return mine_info
    if found == prior.checksum:
        return prior
    return DeferredSet(found, lambda: _union(prior, event(), mine_info))


def _union(prior: FieldLineageInfo, ev: dict, mine_info: FieldLineageInfo | None
           ) -> FieldLineageInfo:
    """`union` of ``prior`` and ``ev``, whose own set is ``mine_info``. Kept per
    pair of sets: a set's lineage and the properties of every dataset it reads
    or writes are in its operations, so two events building one set merge
    alike (properties an event gives a dataset it names but does not use are
    in no set; the merge keeps those of the first event built, as before)."""
    known = _SOURCES.find(prior.checksum)
    if known is not MISS:  # built here: its lineage, copied where it is merged into
        lineage = {d: {n: dict(i) for n, i in per.items()} for d, per in known[0].items()}
        props = {ep: dict(p) for ep, p in known[1].items()}
    else:
        lineage, props = _info_lineage(prior)
    built = _SOURCES.find(mine_info.checksum) if mine_info is not None else MISS
    more, more_props = built if built is not MISS else _event_lineage(ev)
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
