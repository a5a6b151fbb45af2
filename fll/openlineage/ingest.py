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

import hashlib
import threading
from typing import Any, Callable

import orjson

from ..codec import operations_from_list
from ..errors import FllError, InvalidLineageError
from ..opset import FieldLineageInfo
from .events import RUN_FACET, _obj, _str, _job_program, event_run_id, event_time_ms, job_of
from .facets import (_MEMO_ENTRIES, _NORMAL, _SOURCES, _build, _event_lineage, _info_lineage,
                     _merge_tags, normal_form)

# -- remembering what the same JSON always builds -------------------------------

# Producers send the same column lineage run after run (a daily job, START and
# COMPLETE of one run), and building an operation set from it is most of an
# ingest's CPU. Building is a pure function of the JSON it reads, so its result
# is kept under that JSON's canonical bytes (sorted keys), by their BLAKE2b
# digest (a collision is as unlikely as for any cryptographic hash): the same
# bytes can only ever build the same set. Only successes are kept; an event
# that fails is checked afresh each time, so its error is the same as ever.
# The warehouse benchmark's widest tables send 70 KB of lineage, each event of
# them built twice (its own set, then the union) when 64 KB was the limit.
_MEMO_MAX_KEY = 256 * 1024  # a wider event is built each time, not kept


class _Memo:
    """A bounded map of canonical JSON bytes (their digest) to what they
    build; thread-safe."""

    def __init__(self, size: int = _MEMO_ENTRIES):
        self._data: dict[bytes, Any] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, value: Any, build: Callable[[], Any]) -> Any:
        canonical = _canonical(value)
        if canonical is None:
            return build()
        key = hashlib.blake2b(canonical, digest_size=32).digest()
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
# (checksum of a run's recorded set, checksum of the set an event of it builds)
# -> their union: a pure function of the two sets (see `union`), and a daily
# job's START and COMPLETE give the same pair run after run
_UNIONS: dict[tuple[str, str], FieldLineageInfo] = {}


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
    if normal_checksum(prior) != prior.checksum:
        return None
    ev = _obj(event, "$")
    mine_info = built if built is not None and normal_checksum(built) == built.checksum \
        else _BUILT.get([ev.get("inputs"), ev.get("outputs")], lambda: _lineage_info(ev))
    if mine_info is None:  # no column lineage: what the prior set says, read back
        return _union(prior, ev, None)
    pair = (prior.checksum, mine_info.checksum)
    found = _UNIONS.get(pair)
    if found is None:
        found = _union(prior, ev, mine_info)
        if len(_UNIONS) >= _MEMO_ENTRIES:
            _UNIONS.clear()
        _UNIONS[pair] = found
    return found


def _union(prior: FieldLineageInfo, ev: dict, mine_info: FieldLineageInfo | None
           ) -> FieldLineageInfo:
    """`union` of ``prior`` and ``ev``, whose own set is ``mine_info``. Kept per
    pair of sets: a set's lineage and the properties of every dataset it reads
    or writes are in its operations, so two events building one set merge
    alike (properties an event gives a dataset it names but does not use are
    in no set; the merge keeps those of the first event built, as before)."""
    known = _SOURCES.get(prior.checksum)
    if known is not None:  # built here: its lineage, copied where it is merged into
        lineage = {d: {n: dict(i) for n, i in per.items()} for d, per in known[0].items()}
        props = {ep: dict(p) for ep, p in known[1].items()}
    else:
        lineage, props = _info_lineage(prior)
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
