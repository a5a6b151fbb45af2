"""The run model: each OpenLineage run's job, state, times, facets and raw events.

Rows (format 6, additive: see `fll.rowkeys`):

- ``n|<run>``: ``j`` = the run's job (msgpack ``[namespace, name]``) and a
  column per event received, ``<16 hex event ms><16 hex digest>`` → its
  eventType. Blind puts of distinct columns: two servers given events of one
  run at once never overwrite each other, and every answer below is computed
  from the set of columns, so it does not depend on arrival order.
- ``e|<inv event ms>|<run>|<digest>``: ``z`` = the event as received
  (canonical JSON, deflated). Newest first: "events in a time range" is one
  key range.
- ``j|<ns>|<job>``: a marker; the jobs of a namespace are one key range.
- ``J|<ns>|<job>|<inv start>|<run>``: the runs of a job, newest first.

A run's start is the one the store claimed first for it (`LineageStore.claim_run_start`,
the ``r|`` row): the key of its ``J|`` row never moves.

The state rule (`final_state`): FAIL and ABORT win over everything (a run
that failed once is a failed run, whatever else it said); else COMPLETE wins
over START, RUNNING and OTHER; among events of the winning kind the latest
eventTime (then FAIL over ABORT) fixes the state and the end time. The rule is
monotone (a run never leaves FAIL/ABORT), so moving a failed run's index cells
out of the default index (`LineageStore.move_to_failed`) happens once, and
never has to be undone, whatever the order events arrive in.

Facets: run and job facets of every event, merged in eventTime order (later
events override a facet of the same name), as Marquez shows them.
"""
from __future__ import annotations

import zlib
from typing import Iterable, NamedTuple

import msgpack
import orjson
import xxhash

from .. import rowkeys as rk
from ..errors import BadRequest, StoreError
from .base import Compressed, Table
from .layout import FAILED_STATES
from .lineage import LineageStore

STATES = ("START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER")
#: the run states Marquez shows for each final OpenLineage eventType
MARQUEZ_STATES = {"START": "RUNNING", "RUNNING": "RUNNING", "COMPLETE": "COMPLETED",
                  "FAIL": "FAILED", "ABORT": "ABORTED", "OTHER": "NEW"}
_TERMINAL_RANK = {"FAIL": 3, "ABORT": 2, "COMPLETE": 1}
_OPEN_RANK = {"RUNNING": 2, "START": 1, "OTHER": 0}
_FAILED = frozenset(s.decode() for s in FAILED_STATES)


class RunEvent(NamedTuple):
    """What the run model keeps of one RunEvent (`event_facts`)."""

    run_id: str
    job_namespace: str
    job_name: str
    state: str
    at_ms: int
    digest: str
    body: bytes  # canonical JSON


def event_facts(event: dict, run_id: str, at_ms: int) -> RunEvent:
    """The run-model facts of a RunEvent already checked by `fll.openlineage`
    (run id and eventTime parsed by the caller). An unknown eventType counts
    as OTHER; a missing job is a `BadRequest` naming ``$.job``."""
    job = event.get("job")
    if not isinstance(job, dict) or not isinstance(job.get("namespace"), str) \
            or not isinstance(job.get("name"), str) or not job["namespace"] or not job["name"]:
        raise BadRequest("$.job must have a non-empty namespace and name", "$.job")
    state = event.get("eventType")
    state = state.upper() if isinstance(state, str) else "OTHER"
    if state not in STATES:
        state = "OTHER"
    body = orjson.dumps(event, option=orjson.OPT_SORT_KEYS)
    return RunEvent(run_id, job["namespace"], job["name"], state, at_ms,
                    xxhash.xxh64_hexdigest(body), body)


def _column(at_ms: int, digest: str) -> str:
    return f"{at_ms:016x}{digest}"


def _parse_column(col: str) -> tuple[int, str] | None:
    if len(col) != 32:
        return None
    try:
        return int(col[:16], 16), col[16:]
    except ValueError:
        return None


# an event body's zlib level: 3 costs half of level 6's CPU on the warehouse
# benchmark's events (35 against 76 us for 15.8 KB of JSON, ~3% of an
# event's ingest) for bodies 11% larger (1,080 against 971 bytes; on SQLite
# the file grows ~5%, as more event rows overflow their B-tree page)
_EVENT_ZLIB_LEVEL = 3


def model_rows(facts: RunEvent, start_ms: int) -> dict[bytes, dict[str, bytes]]:
    """Every row one event writes, the ``n|`` row (which names the event) last."""
    return {
        rk.event(facts.at_ms, facts.run_id, facts.digest): {
            "z": Compressed(zlib.compress(facts.body, _EVENT_ZLIB_LEVEL))},
        rk.job(facts.job_namespace, facts.job_name): {"x": b""},
        rk.job_run(facts.job_namespace, facts.job_name, start_ms, facts.run_id): {"x": b""},
        rk.run_model(facts.run_id): {
            "j": msgpack.packb([facts.job_namespace, facts.job_name], use_bin_type=True),
            _column(facts.at_ms, facts.digest): facts.state.encode()},
    }


def record_event(store: LineageStore, facts: RunEvent, start_ms: int) -> None:
    """Keep one event of a run whose start the store claimed as ``start_ms``.
    Idempotent: blind puts of the same cells (the same event again writes
    nothing new). A FAIL or ABORT then moves the run's lineage out of the
    default index (`LineageStore.move_to_failed`), in the same transaction
    where there is one."""
    table = store.table
    rows = model_rows(facts, start_ms)
    atomic = getattr(table, "atomic", None)
    if not callable(atomic):
        # no transactions: the event's rows before the run row names them (a
        # backend may apply the rows of one batch in any order)
        key = rk.run_model(facts.run_id)
        named = rows.pop(key)
        table.put(rows)
        table.put({key: named})
        if facts.state in _FAILED:
            store.move_to_failed([facts.run_id])
        return
    if facts.state not in _FAILED:
        table.put(rows)
        return

    def write() -> None:
        table.put(rows)
        store.move_to_failed([facts.run_id], table=table)
    atomic(lambda _t: write())


# -- reading --------------------------------------------------------------------
class Transition(NamedTuple):
    at_ms: int
    state: str
    digest: str


class RunModel(NamedTuple):
    """A run as the run model knows it (`run_model`)."""

    run_id: str
    job_namespace: str
    job_name: str
    start_ms: int | None  # the start the store claimed (None: its r| row is gone)
    transitions: list[Transition]  # oldest first

    @property
    def state(self) -> str:
        return final_state(self.transitions)[0]

    @property
    def end_ms(self) -> int | None:
        return final_state(self.transitions)[1]

    @property
    def failed(self) -> bool:
        return self.state in ("FAIL", "ABORT")

    @property
    def started_ms(self) -> int | None:
        opened = [t.at_ms for t in self.transitions if t.state in ("START", "RUNNING")]
        return min(opened) if opened else self.start_ms

    def event_keys(self) -> list[bytes]:
        tail = rk.SEP + rk.escape(self.run_id) + rk.SEP
        return [rk.EVENT + rk.SEP + rk.invert(t.at_ms) + tail + rk.escape(t.digest)
                for t in self.transitions]


def final_state(transitions: Iterable[Transition]) -> tuple[str, int | None]:
    """(state, end ms) by the rule of the module docstring; ("OTHER", None)
    for a run without events."""
    ts = list(transitions)
    failed = [t for t in ts if t.state in _FAILED]
    if failed:
        last = max(failed, key=lambda t: (t.at_ms, _TERMINAL_RANK[t.state], t.digest))
        return last.state, last.at_ms
    complete = [t for t in ts if t.state == "COMPLETE"]
    if complete:
        return "COMPLETE", max(t.at_ms for t in complete)
    if ts:
        last = max(ts, key=lambda t: (t.at_ms, _OPEN_RANK.get(t.state, 0), t.digest))
        return last.state, None
    return "OTHER", None


def _model(url: str, run_id: str, row: dict[str, bytes], start_ms: int | None) -> RunModel:
    try:
        ns, name = msgpack.unpackb(row["j"], raw=False)
        transitions = []
        for col, value in row.items():
            parsed = _parse_column(col)
            if parsed is not None:
                transitions.append(Transition(parsed[0], value.decode(), parsed[1]))
    except Exception:
        raise StoreError(f"store {url}: row {rk.run_model(run_id)!r} is corrupt "
                         f"(run `fll admin fsck`)") from None
    transitions.sort()
    return RunModel(run_id, str(ns), str(name), start_ms, transitions)


def run_models(store: LineageStore, run_ids: list[str],
               starts: dict[str, int] | None = None) -> dict[str, RunModel]:
    """The run model of each run known to it (one multi-get of the ``n|`` rows,
    and of the ``r|`` rows for the starts not given in ``starts``)."""
    if not run_ids:
        return {}
    starts = starts or {}
    rows = store.table.get_many([rk.run_model(r) for r in run_ids] +
                                [rk.run(r) for r in run_ids if r not in starts])
    out = {}
    for r in run_ids:
        row = rows.get(rk.run_model(r))
        if row is None or "j" not in row:
            continue
        start: int | None = starts.get(r)
        if start is None:
            t = rows.get(rk.run(r), {}).get("t")
            start = int.from_bytes(t, "big", signed=True) if t and len(t) == 8 else None
        out[r] = _model(store.url, r, row, start)
    return out


def run_model(store: LineageStore, run_id: str) -> RunModel | None:
    return run_models(store, [run_id]).get(run_id)


def run_states(store: LineageStore, run_ids: Iterable[str]) -> dict[str, str]:
    """The final state of each run the run model knows (runs recorded through
    the store API have none: they are shown as COMPLETE by their callers)."""
    return {r: m.state for r, m in run_models(store, sorted(set(run_ids))).items()}


def events_of(store: LineageStore, models: Iterable[RunModel]) -> dict[bytes, dict]:
    """The raw events of these runs, by event row key (one multi-get)."""
    keys = [k for m in models for k in m.event_keys()]
    rows = store.table.get_many(keys) if keys else {}
    return {k: _event_json(store.url, k, cols) for k, cols in rows.items()}


def _event_json(url: str, key: bytes, cols: dict[str, bytes]) -> dict:
    try:
        return orjson.loads(zlib.decompress(cols["z"]))
    except Exception:
        raise StoreError(f"store {url}: row {key!r} is corrupt (run `fll admin fsck`)") from None


def merged_facets(model: RunModel, events: dict[bytes, dict]) -> tuple[dict, dict]:
    """(run facets, job facets) of a run, merged in eventTime order."""
    run_facets: dict = {}
    job_facets: dict = {}
    for key in model.event_keys():
        ev = events.get(key)
        if ev is None:
            continue
        rf = (ev.get("run") or {}).get("facets")
        jf = (ev.get("job") or {}).get("facets")
        if isinstance(rf, dict):
            run_facets.update(rf)
        if isinstance(jf, dict):
            job_facets.update(jf)
    return run_facets, job_facets


def datasets_of(model: RunModel, events: dict[bytes, dict]) -> tuple[list[tuple[str, str]],
                                                                       list[tuple[str, str]]]:
    """(inputs, outputs) every event of the run named, sorted."""
    ins: set[tuple[str, str]] = set()
    outs: set[tuple[str, str]] = set()
    for key in model.event_keys():
        ev = events.get(key) or {}
        for side, into in (("inputs", ins), ("outputs", outs)):
            for d in ev.get(side) or []:
                if isinstance(d, dict) and isinstance(d.get("namespace"), str) \
                        and isinstance(d.get("name"), str):
                    into.add((d["namespace"], d["name"]))
    return sorted(ins), sorted(outs)


def job_runs(table: Table, namespace: str, name: str, limit: int | None = None,
             offset: int = 0) -> list[tuple[str, int]]:
    """(run id, start) of the runs of a job, newest first (start time, then
    run id): one range scan of ``limit + offset`` rows."""
    prefix = rk.dataset_prefix(rk.JOB_RUN, namespace, name)
    want = None if limit is None else limit + offset
    n = len(prefix)
    out = [(rk.unescape(key[n + 9:]), rk.uninvert(key[n:n + 8])) for key, _ in
           table.scan(prefix, rk.prefix_end(prefix), limit=want)]
    return out[offset:]


def job_run_ids(table: Table, namespace: str, name: str, limit: int | None = None,
                offset: int = 0) -> list[str]:
    """The ids of `job_runs`."""
    return [r for r, _ in job_runs(table, namespace, name, limit, offset)]


def count_job_runs(table: Table, namespace: str, name: str) -> int:
    prefix = rk.dataset_prefix(rk.JOB_RUN, namespace, name)
    return sum(1 for _ in table.scan(prefix, rk.prefix_end(prefix)))


def first_run_start(table: Table, namespace: str, name: str) -> int | None:
    """The start of a job's oldest run (one reverse scan of one row)."""
    prefix = rk.dataset_prefix(rk.JOB_RUN, namespace, name)
    for key, _ in table.scan(prefix, rk.prefix_end(prefix), limit=1, reverse=True):
        return rk.decode(key).start_ms
    return None


def jobs(table: Table, namespace: str | None = None) -> list[tuple[str, str]]:
    """Every job (of one namespace), sorted: one range scan of the ``j|`` rows."""
    prefix = rk.JOB + rk.SEP + (rk.escape(namespace) + rk.SEP if namespace is not None else b"")
    out = []
    for key, _ in table.scan(prefix, rk.prefix_end(prefix)):
        k = rk.decode(key)
        out.append((k.namespace or "", k.name or ""))
    return out


def events(store: LineageStore, after_ms: int, before_ms: int, limit: int, offset: int,
           descending: bool = True) -> tuple[list[dict], int]:
    """Raw events with ``after <= eventTime < before`` (newest first unless not
    ``descending``), a page of them and how many the range holds. One scan of
    the range's ``e|`` rows (keys only counted, page decoded)."""
    lo, hi = rk.time_range(rk.EVENT + rk.SEP, after_ms, before_ms)
    table = store.table
    page: list[tuple[bytes, dict[str, bytes]]] = []
    total = 0
    if descending:
        for key, cols in table.scan(lo, hi):
            if offset <= total < offset + limit:
                page.append((key, cols))
            total += 1
    else:
        for key, cols in table.scan(lo, hi, reverse=True):
            if offset <= total < offset + limit:
                page.append((key, cols))
            total += 1
    return [_event_json(store.url, k, c) for k, c in page], total


# -- maintenance ----------------------------------------------------------------
def purge_keys(table: Table, runs: list[tuple[str, int]]) -> list[bytes]:
    """The run-model rows of these runs (run id, claimed start): their ``n|``,
    ``e|`` and ``J|`` rows (what `fll admin purge` deletes beside their lineage)."""
    if not runs:
        return []
    rows = table.get_many([rk.run_model(r) for r, _ in runs])
    out: list[bytes] = []
    for run_id, start in runs:
        key = rk.run_model(run_id)
        row = rows.get(key)
        if row is None:
            continue
        out.append(key)
        for col in row:
            parsed = _parse_column(col)
            if parsed is not None:
                out.append(rk.event(parsed[0], run_id, parsed[1]))
        try:
            ns, name = msgpack.unpackb(row["j"], raw=False)
            out.append(rk.job_run(str(ns), str(name), start, run_id))
        except Exception:
            pass  # a corrupt run row: fsck reports it, its J| row shows as stray
    return out


def empty_jobs(table: Table) -> list[bytes]:
    """``j|`` rows of jobs left without runs (after a purge)."""
    return empty_jobs_of(table, [rk.job(ns, name) for ns, name in jobs(table)])


def empty_jobs_of(table: Table, keys: list[bytes]) -> list[bytes]:
    """Those of these ``j|`` rows still there whose job has no ``J|`` row."""
    out = []
    there = table.get_many(keys) if keys else {}
    for key in keys:
        if key not in there:
            continue
        k = rk.decode(key)
        prefix = rk.dataset_prefix(rk.JOB_RUN, k.namespace or "", k.name or "")
        if next(iter(table.scan(prefix, rk.prefix_end(prefix), limit=1)), None) is None:
            out.append(key)
    return out


class ModelCheck:
    """What fsck checks of the run-model rows, fed row by row during its scan:
    every event a run row names has its row (else the cell is a broken
    reference), every event row is named by its run's row, every ``J|`` row has
    its run's row (else the row is stray)."""

    KINDS = (rk.RUN_MODEL, rk.EVENT, rk.JOB, rk.JOB_RUN)

    def __init__(self) -> None:
        self.named: dict[bytes, tuple[bytes, str]] = {}  # event key -> (n| key, column)
        self.events: set[bytes] = set()
        self.runs: set[str] = set()
        self.job_runs: list[tuple[bytes, str]] = []
        self.jobs: list[bytes] = []
        self.jobs_with_runs: set[tuple[str, str]] = set()
        self.corrupt: list[bytes] = []

    def see(self, key: bytes, cols: dict[str, bytes]) -> None:
        k = rk.decode(key)
        kind = key[:1]
        if kind == rk.RUN_MODEL:
            run_id = k.run_id or ""
            try:
                msgpack.unpackb(cols["j"], raw=False)
            except Exception:
                self.corrupt.append(key)
                return
            self.runs.add(run_id)
            for col in cols:
                parsed = _parse_column(col)
                if parsed is not None:
                    self.named[rk.event(parsed[0], run_id, parsed[1])] = (key, col)
        elif kind == rk.EVENT:
            if "z" not in cols:
                self.corrupt.append(key)
                return
            self.events.add(key)
        elif kind == rk.JOB_RUN:
            self.job_runs.append((key, k.run_id or ""))
            self.jobs_with_runs.add((k.namespace or "", k.name or ""))
        elif kind == rk.JOB:
            self.jobs.append(key)

    def problems(self) -> tuple[list[bytes], list[tuple[bytes, str]]]:
        """(stray rows, broken references)."""
        stray = sorted(k for k in self.events if k not in self.named)
        stray += [k for k, r in self.job_runs if r not in self.runs]
        stray += [k for k in self.jobs if _job_of(k) not in self.jobs_with_runs]
        broken = sorted(v for k, v in self.named.items() if k not in self.events)
        return stray, broken


def _job_of(key: bytes) -> tuple[str, str]:
    k = rk.decode(key)
    return k.namespace or "", k.name or ""


def still_stray(t: Table, keys: list[bytes]) -> list[bytes]:
    """Event and ``J|`` rows still present whose run row does not name them,
    and ``j|`` rows still without any run."""
    jobs = [k for k in keys if k[:1] == rk.JOB]
    keys = [k for k in keys if k[:1] != rk.JOB]
    empty = set(empty_jobs_of(t, jobs))
    rows = t.get_many(keys)
    runs: dict[str, None] = {}
    for key in rows:
        run_id = rk.decode(key).run_id or ""
        runs[run_id] = None
    models = t.get_many([rk.run_model(r) for r in runs])
    out = []
    for key in keys:
        if key not in rows:
            continue
        k = rk.decode(key)
        model = models.get(rk.run_model(k.run_id or ""))
        if model is None:
            out.append(key)
        elif key[:1] == rk.EVENT and _column(k.start_ms or 0, k.checksum or "") not in model:
            out.append(key)
    return out + [k for k in jobs if k in empty]


def still_broken(t: Table, cells: list[tuple[bytes, str]]) -> list[tuple[bytes, str]]:
    """Run-row cells still present whose event row is missing."""
    rows = t.get_many(sorted({k for k, _ in cells}))
    wanted = []
    for key, col in cells:
        if col in rows.get(key, {}):
            parsed = _parse_column(col)
            if parsed is not None:
                wanted.append((key, col, rk.event(parsed[0], rk.decode(key).run_id or "",
                                                  parsed[1])))
    there = t.get_many([e for _, _, e in wanted])
    return [(k, c) for k, c, e in wanted if e not in there]
