"""``POST /api/v1/lineage``: record an OpenLineage event (spec 2-0-2).

`OpenLineageIngest` checks an event and builds its lineage (`fll.openlineage`),
then hands its write to the app's batched writer (`fll.server.ingest.GroupCommit`).
The app factory makes one per app and keeps it on ``app.state.ingest``; the
route below and `fll.server.ingest.IngestRoute` (the same route in front of
the framework) both answer through its `answer`.

This module must never record half an event (everything is validated
before the first write), never keep a DatasetEvent's or JobEvent's column
lineage, and never answer a valid event with a 4xx.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, AsyncIterator, Callable, ContextManager, Iterable, Iterator

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from .. import openlineage as ol
from ..errors import BadRequest, FllError, InvalidLineageError
from ..openlineage import check_shape, event_run_id, event_time_ms, run_event
from ..store import runs as run_model
from ..store.lineage import LineageStore
from . import shared
from .errors import ApiError
from .guard import check_fields
from .guarded_ingest import RUNS_KEPT, GuardedRuns, cannot_extend, receipt, union_with_stored
from .ingest import GroupCommit, parse_json
from .responses import JSONResponse
from .set_builder import SetBuilder, adopt
from .shared import decoded, read_body

log = logging.getLogger("fll.server")

# column-lineage fields up to which an ingest runs on the event loop (a few ms)
INLINE_FIELDS = 2_000

# why a DatasetEvent's or JobEvent's columnLineage facet is not kept
_STATIC_LINEAGE = ("the job's declared (static) column lineage, outside any run: fll keeps "
                   "column lineage per run, so it was not recorded; send it with the job's "
                   "RunEvents (START or COMPLETE) to have it kept")

router = APIRouter()


@router.post("/api/v1/lineage", status_code=201, tags=["openlineage"],
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {"schema": {
                     "type": "object",
                     "description": "OpenLineage RunEvent, DatasetEvent or JobEvent (spec 2-0-2)"}}}}})
async def ingest(request: Request) -> JSONResponse:
    """Record an OpenLineage event (spec 2-0-2: RunEvent, DatasetEvent or JobEvent).

    A run's lineage is the union of the column lineage of all its events
    (START part of it, COMPLETE all of it); schemas and symlinks of the
    datasets named are kept beside it.
    201: something was recorded (a new run, new lineage for a known run, a schema).
    200: everything the event says is already recorded.
    202: nothing to record (no column lineage, schema or symlinks facet);
    a RunEvent's time still fixes the run's start if it is the first seen.
    A DatasetEvent's or JobEvent's columnLineage (declared, static lineage)
    is not kept: the answer lists each under ``notKept`` with the reason.
    422: not a valid event; the reason names the JSON path (a RunEvent, as
    its ``schemaURL`` or ``eventType`` says, without ``run``: ``$.run``).
    409: the run was recorded through the store API with other operations.
    """
    ingest: OpenLineageIngest = shared.state(request, "ingest")
    return await ingest.answer(request.headers.get("content-length"),
                               request.headers.get("content-encoding", ""), request.stream())


class OpenLineageIngest:
    """The ingest route's work for one app: ``lineage`` is its store, ``writer``
    its batched writer; bodies over ``max_body`` bytes and events with over
    ``max_fields`` column-lineage fields are refused (413)."""

    def __init__(self, lineage: LineageStore, writer: GroupCommit, max_body: int,
                 max_fields: int, builder: SetBuilder | None = None):
        self.lineage = lineage
        self.writer = writer
        self.max_body = max_body
        self.max_fields = max_fields
        # what events built is remembered within the store's cache budget
        budget = getattr(lineage, "cache_budget", None)
        if budget is not None:
            ol.memo_budget(budget.ingest)
        # serialises the events of one run in this process (the union is read-merge-write)
        self.run_locks = [threading.Lock() for _ in range(64)]
        # on a backend without transactions, events are written several at once
        # (fll.server.ingest): those writing the same output datasets one at a
        # time (`_datasets_held`)
        self.dataset_locks = _DatasetLocks() if writer.concurrent else None
        # there too, a run's events merge with the set kept from its last one
        self.runs = GuardedRuns(lineage) if writer.concurrent else None
        # new sets built in builder processes (`fll.server.set_builder`), and
        # the set each run got from the last event one built (its next
        # event's union is made there too)
        self.builder = builder
        self._built_runs: OrderedDict[str, str] = OrderedDict()

    async def answer(self, declared: str | None, encoding: str,
                     stream: AsyncIterator[bytes]) -> JSONResponse:
        """The ingest route's answer (also given in front of the framework by
        `fll.server.ingest.IngestRoute`, inside the token check and the slots)."""
        raw = decoded(await read_body(declared, stream, self.max_body), encoding, self.max_body)
        began = time.monotonic()
        event = parse_json(raw)
        fields = check_fields(event, self.max_fields)  # before any lineage object is built
        lineage = None
        if self.builder is not None and fields <= INLINE_FIELDS:
            waited = time.monotonic()
            lineage = await self._build_elsewhere(event)
            began += time.monotonic() - waited  # the loop did other work meanwhile
        try:
            # a usual event is checked and built on the event loop, as the hot
            # reads are answered: in a worker thread it waited for the GIL after
            # every step while the loop answered reads. Its write then joins the
            # next batch of this process's writes (fll.server.ingest), so the
            # workers' write lock is held for commits only, never for parsing.
            # A wide event (seconds of work) goes to a thread: reads go on beside it.
            # the parsed event is let go before the write waits for its batch:
            # what the write needs was taken from it (a turn of the garbage
            # collector, `fll.server.collector`, would walk it otherwise)
            if fields > INLINE_FIELDS:
                write = await run_in_threadpool(self.prepare, event)
                del event
                return await self.writer.alone(write)
            write = self.prepare(event, lineage)
            del event
            self.writer.prepared(time.monotonic() - began)
            return await self.writer.submit(write)
        except BadRequest as e:
            # well-formed JSON that is not a valid RunEvent: the reason names the JSON path
            raise ApiError(422, f"invalid OpenLineage event: {e}") from None

    async def _build_elsewhere(self, event: Any) -> bytes | None:
        """Have a builder build the set of an event's column lineage when this
        process has not built it (`fll.server.set_builder`): `prepare` then
        finds it built, as for a repeated event. Anything the builder does not
        give, `prepare` builds itself (an invalid event included: it says why).
        Returns the event's `fll.openlineage.lineage_json` when made."""
        assert self.builder is not None
        if not _has_column_lineage(event):
            return None
        try:
            raw = ol.lineage_json(event)
            if raw is None or ol.built_here(raw):
                return raw
            run_id = event_run_id(event)
        except (FllError, ValueError, TypeError):
            return None
        known = self.runs.known(run_id) if self.runs is not None else None
        prior = known.checksum if known is not None else self._built_runs.get(run_id)
        made = await self.builder.build(raw, run_id, prior)
        if made is None:
            return raw

        def keep(checksum: str) -> None:
            self._built_runs[run_id] = checksum
            self._built_runs.move_to_end(run_id)
            while len(self._built_runs) > RUNS_KEPT:
                self._built_runs.popitem(last=False)
        adopt(self.lineage, raw, prior, made, keep)
        return raw

    def prepare(self, event: Any, lineage: bytes | None = None) -> Callable[[], JSONResponse]:
        """Check ``event`` and build its lineage; its write, to run in a batch.
        Everything is validated here, before the first write: nothing half-recorded.
        ``lineage``: the event's `fll.openlineage.lineage_json`, when made already."""
        if not isinstance(event, dict):
            raise BadRequest("$ must be a JSON object (an OpenLineage event)", "$")
        kind = ol.event_kind(event)
        if kind != "run":
            return self._static_event(event, kind)
        check_shape(event)
        facts = ol.dataset_facts(event, kind)
        parsed, again = run_event(event, lineage) if _has_column_lineage(event) \
            else (None, None)
        if parsed is None or again is None:
            run_id, at = event_run_id(event), event_time_ms(event)
            symlinks = any(f.symlinks for f in facts)
            model = run_model.event_facts(event, run_id, at)

            outputs = _outputs(event)

            def claim() -> JSONResponse:
                # the first event the STORE saw fixes the start, whichever server got
                # it (recording lineage does the same claim itself)
                with self._datasets_held(outputs):
                    start_ms = self.lineage.claim_run_start(run_id, at)
                    run_model.record_event(self.lineage, model, start_ms)
                    schemas = self._keep_facts(facts, run_id, start_ms)
                # a schema or symlink kept is something recorded: 201, as the
                # route says (a START often carries only its datasets' schemas)
                kept = schemas > 0 or symlinks
                reason = "no output carries a columnLineage facet"
                if kept:
                    reason += "; the datasets' schemas and symlinks were recorded"
                return JSONResponse({"recorded": kept, "runId": run_id, "schemas": schemas,
                                     "reason": reason}, status_code=201 if kept else 202)
            return claim
        info, run_id, start_ms, program = parsed
        model = run_model.event_facts(event, run_id, ol.exported_end_ms(event, run_id)
                                      or event_time_ms(event))

        failing = model.state in ("FAIL", "ABORT")
        # a START or RUNNING leaves the run going: its lineage is indexed as
        # such (where the store has first-run rows) until the event that ends it
        under_way = model.state in ("START", "RUNNING")
        written = {(e.namespace, e.name) for e in info.destinations} | set(_outputs(event))

        def record() -> JSONResponse:
            with self._datasets_held(written), \
                    self.run_locks[hash(run_id) % len(self.run_locks)]:
                if failing:  # first, so the lineage lands in the failed-run rows at once
                    run_model.record_event(self.lineage, model,
                                           self.lineage.claim_run_start(run_id, start_ms))
                if self.runs is not None:  # no transactions: the rows join the calls
                    return self._record_guarded(again, info, run_id, start_ms, program,
                                                None if failing else model, facts, under_way)
                body, status, start = self._record_run(again, info, run_id, start_ms, program,
                                                       under_way)
                if not failing:  # after its lineage (a FAIL elsewhere moves it then)
                    run_model.record_event(self.lineage, model, start)
                # schemas go under the run's stored start, after its lineage (a resend
                # repairs a crash in between: both writes are idempotent)
                body["schemas"] = self._keep_facts(facts, run_id, start)
            return JSONResponse(body, status_code=status)
        return record

    def _record_guarded(self, event: Callable[[], dict], info: Any, run_id: str, start_ms: int,
                        program: str, model: Any, facts: list, under_way: bool) -> JSONResponse:
        """`_record_run` and the event's other rows on a backend without
        transactions (`fll.server.guarded_ingest`); ``model``: the run-model
        facts still to write (None: written already, a FAIL/ABORT)."""
        assert self.runs is not None

        def rest(start: int) -> int:  # what a 200 still writes, one by one
            if model is not None:
                run_model.record_event(self.lineage, model, start)
            return ol.record_schemas(self.lineage, facts, run_id, start)
        body, status, _start = self.runs.merge(event, info, run_id, start_ms, program, model,
                                               facts, rest, under_way)
        for f in facts:  # symlinks: each a check-and-put of its own
            for alias_ns, alias_name in f.symlinks:
                self.lineage.record_alias(alias_ns, alias_name, f.namespace, f.name)
        return JSONResponse(body, status_code=status)

    def _datasets_held(self, datasets: Iterable[tuple[str, str]]) -> ContextManager:
        """While writing to these output datasets, on a backend without
        transactions: no other event of this process writes to one of them.
        Runs of one operation set write the same outputs, so their index
        writes never race here: the guarded write path's checks of which
        bucket cells another run keeps, and whether a set is new, each read
        then write (`fll.store.writer`), which between servers only fsck
        repairs. A run's events name the same outputs in practice (a run
        whose COMPLETE names outputs its START did not is covered by those
        it names)."""
        if self.dataset_locks is None:
            return contextlib.nullcontext()
        return self.dataset_locks.holding(datasets)

    def _record_run(self, event: Callable[[], dict], info: Any, run_id: str, start_ms: int,
                    program: str, under_way: bool = False) -> tuple[dict, int, int]:
        """Record the run's set merged with what is stored (``event()``: the
        event's inputs and outputs, for a merge not remembered)."""
        atomic = getattr(self.lineage.table, "atomic", None)
        if callable(atomic):
            # one transaction (joining the batch's, if one is open): nothing
            # else writes the run between its read and its write
            return atomic(lambda _table: self._merge_in_txn(event, info, run_id, start_ms,
                                                            program, under_way))
        return self._merge_run(event, info, run_id, start_ms, program)

    def _merge_in_txn(self, event: Callable[[], dict], info: Any, run_id: str, start_ms: int,
                      program: str, under_way: bool) -> tuple[dict, int, int]:
        """`_merge_run` in a transaction: nobody writes the run between its read
        and its write, so it is read once (its run, run-model and data rows in
        one multi-get, handed to the write) and written once. ``under_way``:
        the event leaves the run going (`Writer.record`)."""
        rows = self.lineage.run_rows(run_id, info.checksum)
        prior = self.lineage.run(run_id, rows=rows)
        target = self._target(event, info, run_id, prior)
        if prior is not None and prior.checksum == target.checksum:
            if not under_way and self.lineage.indexed_under_way(run_id, rows):
                # the run has ended with the set its START gave: its bucket cells now
                self.lineage.record(target, run_id, start_ms, program, supersede=True,
                                    known=rows)
            return (receipt(run_id, target.checksum, prior.start_ms, prior.program, False),
                    200, prior.start_ms)
        starts: dict[str, int] = {}
        changed = self.lineage.record(target, run_id, start_ms, program,
                                      supersede=prior is not None, known=rows, starts=starts,
                                      under_way=under_way)
        # the start stored first stays (claimed before, or by the superseded set);
        # the set and program are the ones just written
        start = starts.get(run_id, prior.start_ms if prior is not None else start_ms)
        return (receipt(run_id, target.checksum, start, program or None, changed),
                201 if changed else 200, start)

    def _target(self, event: Callable[[], dict], info: Any, run_id: str, prior: Any) -> Any:
        """The set a run gets from this event (409 when OpenLineage events
        cannot extend the one stored)."""
        target = union_with_stored(self.lineage, event, info, prior)
        if target is None:
            raise cannot_extend(run_id, prior.checksum)
        return target

    def _merge_run(self, event: Callable[[], dict], info: Any, run_id: str, start_ms: int,
                   program: str) -> tuple[dict, int, int]:
        # a run's lineage is the union of its events (fll.openlineage): merge
        # with what is stored, and re-check after writing, since another server
        # may have merged another event of the run at the same moment
        changed = False
        for _ in range(8):
            prior = self.lineage.run(run_id)
            target = self._target(event, info, run_id, prior)
            if prior is not None and prior.checksum == target.checksum:
                return (receipt(run_id, target.checksum, prior.start_ms, prior.program,
                                 changed), 201 if changed else 200, prior.start_ms)
            try:
                changed = self.lineage.record(target, run_id, start_ms, program,
                                              supersede=prior is not None) or changed
            except InvalidLineageError:
                if self.lineage.run(run_id) is None:
                    raise
                # another writer recorded the run first: merge with that instead
                continue
        raise ApiError(503, f"run {run_id!r} kept changing under concurrent events; retry")

    def _keep_facts(self, facts: list, run_id: str, start_ms: int) -> int:
        """Store the schemas and symlinks of the datasets an event names."""
        return ol.record_facts(self.lineage, facts, run_id, start_ms)[0]

    def _static_event(self, event: dict, kind: str) -> Callable[[], JSONResponse]:
        """A DatasetEvent or JobEvent: no run, so no run lineage; their dataset
        schemas and symlinks are kept (201), anything else is acknowledged (202).
        Column lineage they carry (a job's declared, static lineage) is not
        kept, since fll keeps column lineage per run: the answer names every
        such facet under ``notKept`` (a valid event is never a 4xx: 422 is
        for malformed events)."""
        ol.check_static_event(event, kind)
        at = event_time_ms(event)
        facts = ol.dataset_facts(event, kind)
        owner = ol.schema_owner(event, kind) or ol.static_owner(event, kind)
        not_kept = ol.static_column_lineage(event, kind)
        if not_kept:
            log.info("a %s event's column lineage was not recorded (%s): fll keeps column "
                     "lineage per run", kind, ", ".join(not_kept))

        def keep() -> JSONResponse:
            schemas = self._keep_facts(facts, owner, at)
            recorded = schemas > 0 or any(f.symlinks for f in facts)
            body: dict[str, Any] = {"recorded": recorded, "event": kind, "schemas": schemas}
            if not_kept:
                body["notKept"] = [{"path": path, "reason": _STATIC_LINEAGE} for path in not_kept]
            if not recorded:
                body["reason"] = (f"a {kind} event without schema or symlinks facets carries "
                                  f"nothing fll keeps" if not not_kept else
                                  f"a {kind} event's column lineage is not recorded (see "
                                  f"notKept) and it has no schema or symlinks facets")
            return JSONResponse(body, status_code=201 if recorded else 202)
        return keep


class _DatasetLocks:
    """Striped locks by dataset, taken in one order (no deadlock)."""

    def __init__(self, stripes: int = 1024):
        self._locks = [threading.Lock() for _ in range(stripes)]

    @contextlib.contextmanager
    def holding(self, datasets: Iterable[tuple[str, str]]) -> Iterator[None]:
        held = [self._locks[i] for i in sorted({hash(d) % len(self._locks) for d in datasets})]
        for lock in held:
            lock.acquire()
        try:
            yield
        finally:
            for lock in reversed(held):
                lock.release()


def _outputs(event: dict) -> list[tuple[str, str]]:
    """The (namespace, name) of an event's outputs (checked by `check_shape`)."""
    outputs = event.get("outputs")
    return [(str(o.get("namespace")), str(o.get("name"))) for o in outputs
            if isinstance(o, dict)] if isinstance(outputs, list) else []


def _has_column_lineage(event: Any) -> bool:
    outputs = event.get("outputs") if isinstance(event, dict) else None
    return isinstance(outputs, list) and any(
        isinstance(o, dict) and isinstance(o.get("facets"), dict)
        and o["facets"].get("columnLineage") is not None for o in outputs)

