"""The fll REST server: CDAP v3 field-lineage paths, Marquez-style column lineage,
OpenLineage ingest.

FastAPI (on Starlette, served by uvicorn) was chosen for its generated OpenAPI
document and query-parameter handling; answers are built as plain dicts by
`fll.server.views` and sent as they are, so key names match design/rest-api.md
exactly. Each request reads the store through a `fll.store.reads.ReadView`
(every read once). The hot read routes are also answered in front of the
framework on the event loop (`fll.server.fast`), with the same handlers; the
other read routes are plain functions run in the thread pool (the store is
synchronous and thread-safe). A usual ingest runs on the event loop.

What this module must never do: answer in any error shape but
``{"error", "status"}``, show a stack trace, accept a write without the
configured token (fll.server.guard checks it before any route), or record
half an event.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import zlib
from typing import Any, AsyncIterator, Callable, cast

from fastapi import FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool

from .. import __version__
from ..errors import BadRequest, InvalidLineageError
from ..model import EndPoint, EndPointField
from .. import openlineage as ol
from ..openlineage import check_shape, event_run_id, event_time_ms, run_event_to_lineage
from ..render import parse_indirect
from ..store import runs as run_model
from ..store.lineage import LineageStore
from ..timerange import now_ms, parse_time
from . import marquez, spark_ingest, views
from .checkpoint import Checkpointer
from .collector import FreezeOld
from .errors import ApiError, CatchAllMiddleware, install
from .guard import (DEFAULT_BODY_MEMORY, DEFAULT_BODY_TIMEOUT, DEFAULT_INGEST_WAIT,
                    DEFAULT_MAX_BODY, DEFAULT_MAX_FIELDS, DEFAULT_MAX_INGESTS,
                    IngestLimitMiddleware, TokenMiddleware, check_fields)
from .fast import FastReads, bool_param, int_param, str_param
from .ingest import GroupCommit, IngestRoute, parse_json
from .paths import RawPathMiddleware, segment
from ..store.reads import ReadView, SetMerges
from .stalls import StallLog
from .responses import JSONResponse

log = logging.getLogger("fll.server")

MAX_BODY = DEFAULT_MAX_BODY
MAX_LEVEL = 100
# column-lineage fields up to which an ingest runs on the event loop (a few ms)
INLINE_FIELDS = 2_000
DEFAULT_FIELD_LEVEL = 1
DEFAULT_DATASET_LEVEL = 10
DEFAULT_DEPTH = 20

_V3 = "/v3/namespaces/{ns}/datasets/{ds}"
_INDIRECT_HELP = "show|hide: INDIRECT (filter, join, group-by, sort…) edges"
_FAILED_HELP = "also answer from runs that ended FAIL or ABORT (left out by default)"
_TIME_HELP = "epoch seconds, or now / now-7d / now-1d+4h (units s m h d w); start inclusive"
_END_HELP = "epoch seconds, or now / now-7d / now-1d+4h; end exclusive"


def time_range(start: str | None, end: str | None, *, required: bool = True) -> tuple[int, int]:
    """``[start, end)`` in ms from REST parameters (semantics §3: both required)."""
    clock = now_ms()
    s = parse_time(start, "start", now=clock, default=None if required else 0)
    e = parse_time(end, "end", now=clock, default=None if required else clock + 1)
    if s > e:
        raise BadRequest(f"start must not be after end (start={start!r}, end={end!r})", "start")
    return s, e


def limit(value: int, name: str, *, minimum: int = 1, cap: int = MAX_LEVEL) -> int:
    if value < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {value}", name)
    if value > cap:
        raise BadRequest(f"{name} must be at most {cap}, got {value}", name)
    return value


# why a DatasetEvent's or JobEvent's columnLineage facet is not kept
_STATIC_LINEAGE = ("the job's declared (static) column lineage, outside any run: fll keeps "
                   "column lineage per run, so it was not recorded; send it with the job's "
                   "RunEvents (START or COMPLETE) to have it kept")


def _endpoint(ns: str, ds: str) -> EndPoint:
    ns, ds = segment(ns), segment(ds)
    return EndPoint(ns, ds)


def _field(ns: str, ds: str, field: str) -> EndPointField:
    return EndPointField(_endpoint(ns, ds), segment(field))


def _has_column_lineage(event: Any) -> bool:
    outputs = event.get("outputs") if isinstance(event, dict) else None
    return isinstance(outputs, list) and any(
        isinstance(o, dict) and isinstance(o.get("facets"), dict)
        and o["facets"].get("columnLineage") is not None for o in outputs)


async def _read_body(declared: str | None, stream: AsyncIterator[bytes], max_body: int) -> bytes:
    too_big = f"request body is larger than {max_body} bytes"
    if declared and declared.isdigit() and int(declared) > max_body:
        raise ApiError(413, too_big)
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > max_body:  # enforced while reading: never buffer more than the limit
            raise ApiError(413, too_big)
        chunks.append(chunk)
    return b"".join(chunks)


def _decoded(raw: bytes, encoding: str, max_body: int) -> bytes:
    """The body without its Content-Encoding: openlineage-python's HttpTransport
    sends gzip when configured with ``compression: gzip``. The limit holds for
    the decompressed size too (a small bomb stays small)."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return raw
    if enc != "gzip":
        raise ApiError(415, f"Content-Encoding {encoding!r} is not supported (gzip or none)")
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(raw, max_body + 1)
    except zlib.error as e:
        raise ApiError(400, f"the body is not valid gzip: {e}") from None
    if len(out) > max_body or inflate.unconsumed_tail:
        raise ApiError(413, f"request body is larger than {max_body} bytes once decompressed")
    return out


def create_app(store: LineageStore | str, token: str | None = None, *,
               max_body: int = MAX_BODY, max_level: int = MAX_LEVEL,
               public_reads: bool = False, max_ingests: int = DEFAULT_MAX_INGESTS,
               ingest_wait: float = DEFAULT_INGEST_WAIT, max_fields: int = DEFAULT_MAX_FIELDS,
               body_timeout: float = DEFAULT_BODY_TIMEOUT, ingest_slots: Any = None,
               body_memory: int = DEFAULT_BODY_MEMORY,
               fast_reads: bool = True, write_lock: Any = None,
               log_stalls: float | None = None, gc_freeze: bool = False,
               checkpoint_every: float | None = None) -> FastAPI:
    """The ASGI app over ``store`` (a `LineageStore` or a store URL).

    ``token``: when set, every route but the public shell (/health, the explorer
    page, /openapi.json, the docs) needs ``Authorization: Bearer <token>``;
    ``public_reads`` lets GET/HEAD through without it.
    ``max_ingests``/``ingest_wait``: concurrent ingests, and how long one waits for
    a slot before 503. ``max_fields``: column-lineage fields per event (413 above).
    ``body_timeout``: seconds for a request body to arrive (408 after).
    ``max_body``: largest accepted request body in bytes (413 above).
    ``body_memory``: bytes of ingest bodies this process holds at once beyond
    each body's first 64 KiB (503 above; `fll.server.guard`). An ingest's body
    is read whole before it takes one of the ``max_ingests`` slots.
    ``ingest_slots``: a semaphore shared by worker processes (``fll serve
    --workers``), so ``max_ingests`` holds for the whole server.
    ``max_level``: hard cap of ``level`` and ``depth`` (400 above).
    ``write_lock``: a lock shared by worker processes (``fll serve --workers``)
    that each process's ingest writer takes around a commit (see
    `fll.server.ingest.GroupCommit`); a process of its own gets one of its own.
    ``log_stalls``: log every pause of the process of at least this many ms
    (commits, garbage collections, the event loop held; `fll.server.stalls`).
    ``gc_freeze``: while the app runs (its lifespan), freeze what survives
    every 0.1 s so no garbage collection walks the caches
    (`fll.server.collector`; ``fll serve`` does, tests need not).
    ``checkpoint_every``: while the app runs, a SQLite store's WAL is
    checkpointed every this many seconds from a thread, and never inside a
    commit on the event loop (`fll.server.checkpoint`); None: SQLite's own
    auto-checkpoints.
    ``fast_reads``: False answers every route through the framework, each
    reading the store directly (no `fll.server.fast`, no `fll.store.reads`,
    no `fll.server.ingest.IngestRoute`):
    the same answers, slower; what benchmarks and tests compare against.
    """
    if isinstance(store, str):
        from ..store import open_store
        store = open_store(store)
    lineage: LineageStore = store
    # serialises the events of one run in this process (the union is read-merge-write)
    run_locks = [threading.Lock() for _ in range(64)]
    # this process's ingest writes, committed in batches (fll.server.ingest)
    stalls = StallLog(log_stalls) if log_stalls else None
    writer = GroupCommit(lineage, write_lock if write_lock is not None else threading.Lock(),
                         stalls=stalls)
    # answers merged over a list of operation sets, shared by this process's requests
    merges = SetMerges(size=16_384, budget=lineage.cache_budget.merges)

    def reader(include_failed: bool = False) -> LineageStore:
        """The store as one request reads it (every read once; see fll.store.reads):
        a stand-in with the store's reading methods. ``include_failed``: its
        questions answer from FAIL/ABORT runs too (`LineageStore.including_failed`)."""
        store = lineage.including_failed() if include_failed else lineage
        return cast(LineageStore, ReadView(store, merges)) if fast_reads else store

    freezer = FreezeOld() if gc_freeze else None
    table = getattr(lineage, "table", None)
    checkpointer = Checkpointer(table, checkpoint_every, stalls, writer.lock) \
        if checkpoint_every and Checkpointer.supported(table) else None

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        if stalls is not None:
            stalls.start()
        if checkpointer is not None:
            checkpointer.start()
        if freezer is not None:
            freezer.start()
        try:
            yield
        finally:
            if checkpointer is not None:
                checkpointer.stop()
            # the stall log first: the accounting collection at shutdown is no stall
            if stalls is not None:
                stalls.stop()
            if freezer is not None:
                freezer.stop(account=stalls is not None)

    app = _App(title="fll", version=__version__, default_response_class=JSONResponse,
               lifespan=lifespan,
               description="Field-level lineage: CDAP v3 field-lineage API, "
                           "Marquez-style column lineage and OpenLineage ingest.")
    app.state.store = lineage
    app.state.writer = writer
    app.state.stalls = stalls
    app.state.freezer = freezer
    app.state.checkpointer = checkpointer
    app.state.reader = reader  # the Marquez read routes (fll.server.marquez) read through it
    app.state.max_level = max_level
    install(app)
    # innermost first: the token is checked before an ingest slot is taken, and
    # both before an ingest is answered in front of the router
    if fast_reads:
        app.add_middleware(IngestRoute, answer=lambda *a: answer_ingest(*a))
    app.add_middleware(IngestLimitMiddleware, max_ingests=max_ingests, ingest_wait=ingest_wait,
                       body_timeout=body_timeout, slots=ingest_slots, max_body=max_body,
                       body_memory=body_memory)
    if token:
        app.add_middleware(TokenMiddleware, token=token, public_reads=public_reads)
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(RawPathMiddleware)

    def lvl(value: int, name: str, minimum: int = 1) -> int:
        return limit(value, name, minimum=minimum, cap=max_level)

    # -- service -------------------------------------------------------------
    @app.get("/health", tags=["service"])
    def health() -> dict:
        return {"status": "ok", "version": __version__}

    @app.get("/api/v1/datasets", tags=["explorer"])
    def list_datasets() -> JSONResponse:
        """Every dataset a run read or wrote, or an event reported the schema of."""
        return JSONResponse(views.datasets(reader()))

    # -- CDAP v3 -------------------------------------------------------------
    @app.get(_V3 + "/lineage/fields", tags=["cdap"])
    def lineage_fields(ns: str, ds: str,
                       start: str | None = Query(None, description=_TIME_HELP),
                       end: str | None = Query(None, description=_END_HELP),
                       prefix: str | None = Query(None, description="case-insensitive"),
                       includeCurrent: bool = Query(False),
                       includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                       ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.dataset_fields(reader(includeFailed),
                                                 _endpoint(ns, ds), s, e, prefix,
                                                 includeCurrent))

    @app.get(_V3 + "/lineage/fields/{field}", tags=["cdap"])
    def lineage_field(ns: str, ds: str, field: str,
                      direction: str | None = Query(None, description="incoming|outgoing|both"),
                      start: str | None = Query(None, description=_TIME_HELP),
                      end: str | None = Query(None, description=_END_HELP),
                      level: int = Query(DEFAULT_FIELD_LEVEL, description="hops"),
                      indirect: str = Query("show", description=_INDIRECT_HELP),
                      includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                      ) -> JSONResponse:
        if direction is None:
            raise BadRequest("direction is required: incoming, outgoing or both", "direction")
        s, e = time_range(start, end)
        return JSONResponse(views.field_summary(reader(includeFailed),
                                                _field(ns, ds, field), s, e, direction,
                                                lvl(level, "level"), parse_indirect(indirect)))

    @app.get(_V3 + "/lineage/fields/{field}/operations", tags=["cdap"])
    def lineage_field_operations(ns: str, ds: str, field: str,
                                 direction: str = Query("both",
                                                        description="incoming|outgoing|both"),
                                 start: str | None = Query(None, description=_TIME_HELP),
                                 end: str | None = Query(None, description=_END_HELP),
                                 includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                                 ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.field_operations(reader(includeFailed),
                                                   _field(ns, ds, field), s, e,
                                                   direction))

    @app.get(_V3 + "/lineage/allfieldlineage", tags=["cdap"])
    def all_field_lineage(ns: str, ds: str,
                          direction: str = Query("both", description="incoming|outgoing|both"),
                          start: str | None = Query(None, description=_TIME_HELP),
                          end: str | None = Query(None, description=_END_HELP),
                          includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                          ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.all_field_lineage(reader(includeFailed),
                                                    _endpoint(ns, ds), s, e, direction))

    # -- the seed design's paths ----------------------------------------------
    @app.get(_V3 + "/fields/lineage", tags=["design"])
    def dataset_field_lineage(ns: str, ds: str,
                              start: str | None = Query(None, description=_TIME_HELP),
                              end: str | None = Query(None, description=_END_HELP),
                              level: int = Query(DEFAULT_DATASET_LEVEL,
                                                 description="dataset hops each way"),
                              indirect: str = Query("show", description=_INDIRECT_HELP),
                              includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                              ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.dataset_field_mappings(reader(includeFailed),
                                                         _endpoint(ns, ds), s, e,
                                                         lvl(level, "level"),
                                                         parse_indirect(indirect)))

    @app.get(_V3 + "/fields/{field}/lineage", tags=["design"])
    def field_lineage_detail(ns: str, ds: str, field: str,
                             start: str | None = Query(None, description=_TIME_HELP),
                             end: str | None = Query(None, description=_END_HELP),
                             direction: str = Query("backward", description="backward|forward"),
                             includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                             ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.field_detail(reader(includeFailed),
                                               _field(ns, ds, field), s, e, direction))

    @app.get(_V3 + "/properties", tags=["design"])
    def dataset_properties(ns: str, ds: str,
                           start: str | None = Query(None, description=_TIME_HELP),
                           end: str | None = Query(None, description=_END_HELP),
                           includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                           ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.dataset_properties(reader(includeFailed),
                                                     _endpoint(ns, ds), s, e))

    # -- Marquez-compatible ---------------------------------------------------
    @app.get("/api/v1/column-lineage", tags=["marquez"])
    def column_lineage(nodeId: str | None = Query(  # noqa: N803
                           None, description="datasetField:<ns>:<dataset>:<field> or "
                                             "dataset:<ns>:<name>"),
                       depth: int = Query(DEFAULT_DEPTH, description="field hops"),
                       withDownstream: bool = Query(False),  # noqa: N803
                       start: str | None = Query(None, description=_TIME_HELP + "; default 0"),
                       end: str | None = Query(None, description=_END_HELP + "; default now"),
                       indirect: str = Query("show", description=_INDIRECT_HELP),
                       includeFailed: bool = Query(False, description=_FAILED_HELP)  # noqa: N803
                       ) -> JSONResponse:
        if not nodeId:
            raise BadRequest("nodeId is required", "nodeId")
        s, e = time_range(start, end, required=False)
        return JSONResponse(views.column_lineage(reader(includeFailed), nodeId,
                                                 lvl(depth, "depth", minimum=0),
                                                 withDownstream, s, e,
                                                 parse_indirect(indirect)))

    # -- OpenLineage ingest (the token is checked by TokenMiddleware) ---------
    @app.post("/api/v1/lineage", status_code=201, tags=["openlineage"],
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {"type": "object",
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
        return await answer_ingest(request.headers.get("content-length"),
                                   request.headers.get("content-encoding", ""), request.stream())

    async def answer_ingest(declared: str | None, encoding: str,
                            stream: AsyncIterator[bytes]) -> JSONResponse:
        """The ingest route's answer (also given in front of the framework by
        `fll.server.ingest.IngestRoute`, inside the token check and the slots)."""
        raw = _decoded(await _read_body(declared, stream, max_body), encoding, max_body)
        event = parse_json(raw)
        fields = check_fields(event, max_fields)  # before any lineage object is built
        try:
            # a usual event is checked and built on the event loop, as the hot
            # reads are answered: in a worker thread it waited for the GIL after
            # every step while the loop answered reads. Its write then joins the
            # next batch of this process's writes (fll.server.ingest), so the
            # workers' write lock is held for commits only, never for parsing.
            # A wide event (seconds of work) goes to a thread: reads go on beside it.
            if fields > INLINE_FIELDS:
                write = await run_in_threadpool(_prepare, event)
                return await writer.alone(write)
            return await writer.submit(_prepare(event))
        except BadRequest as e:
            # well-formed JSON that is not a valid RunEvent: the reason names the JSON path
            raise ApiError(422, f"invalid OpenLineage event: {e}") from None

    def _prepare(event: Any) -> Callable[[], JSONResponse]:
        """Check ``event`` and build its lineage; its write, to run in a batch.
        Everything is validated here, before the first write: nothing half-recorded."""
        if not isinstance(event, dict):
            raise BadRequest("$ must be a JSON object (an OpenLineage event)", "$")
        kind = ol.event_kind(event)
        if kind != "run":
            return _static_event(event, kind)
        check_shape(event)
        facts = ol.dataset_facts(event, kind)
        parsed = run_event_to_lineage(event) if _has_column_lineage(event) else None
        if parsed is None:
            run_id, at = event_run_id(event), event_time_ms(event)
            symlinks = any(f.symlinks for f in facts)
            model = run_model.event_facts(event, run_id, at)

            def claim() -> JSONResponse:
                # the first event the STORE saw fixes the start, whichever server got
                # it (recording lineage does the same claim itself)
                start_ms = lineage.claim_run_start(run_id, at)
                run_model.record_event(lineage, model, start_ms)
                schemas = _keep_facts(facts, run_id, start_ms)
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

        def record() -> JSONResponse:
            with run_locks[hash(run_id) % len(run_locks)]:
                if failing:  # first, so the lineage lands in the failed-run rows at once
                    run_model.record_event(lineage, model,
                                           lineage.claim_run_start(run_id, start_ms))
                body, status, start = _record_run(event, info, run_id, start_ms, program)
                if not failing:  # after its lineage (a FAIL elsewhere moves it then)
                    run_model.record_event(lineage, model, start)
            # schemas go under the run's stored start, after its lineage (a resend
            # repairs a crash in between: both writes are idempotent)
            body["schemas"] = _keep_facts(facts, run_id, start)
            return JSONResponse(body, status_code=status)
        return record

    def _record_run(event: Any, info: Any, run_id: str, start_ms: int,
                    program: str) -> tuple[dict, int, int]:
        # a run's lineage is the union of its events (fll.openlineage): merge
        # with what is stored, and re-check after writing, since another server
        # may have merged another event of the run at the same moment
        changed = False
        for _ in range(8):
            prior = lineage.run(run_id)
            if prior is None:
                target = info
            elif prior.checksum == info.checksum:
                target = info
            else:
                merged = ol.union(lineage.operation_set(prior.checksum), event)
                if merged is None or (info.checksum != ol.normal_checksum(info)):
                    raise ApiError(409, f"run {run_id!r} is already recorded with other "
                                        f"operations (operation set {prior.checksum}) that "
                                        f"OpenLineage events cannot extend; nothing was changed")
                target = merged
            if prior is not None and prior.checksum == target.checksum:
                return (_receipt(run_id, target.checksum, prior.start_ms, prior.program, changed),
                        201 if changed else 200, prior.start_ms)
            try:
                changed = lineage.record(target, run_id, start_ms, program,
                                         supersede=prior is not None) or changed
            except InvalidLineageError:
                if lineage.run(run_id) is None:
                    raise
                # another writer recorded the run first: merge with that instead
        raise ApiError(503, f"run {run_id!r} kept changing under concurrent events; retry")


    def _keep_facts(facts: list, run_id: str, start_ms: int) -> int:
        """Store the schemas and symlinks of the datasets an event names."""
        return ol.record_facts(lineage, facts, run_id, start_ms)[0]

    def _static_event(event: dict, kind: str) -> Callable[[], JSONResponse]:
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
            schemas = _keep_facts(facts, owner, at)
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

    # -- the same read routes, answered in front of the framework (fll.server.fast)
    def _v3(*rest: str | None) -> tuple[str | None, ...]:
        return ("v3", "namespaces", None, "datasets", None, *rest)

    def fast_fields(names: list[str], q: dict[str, str]) -> Any:
        start, end, prefix = str_param(q, "start"), str_param(q, "end"), str_param(q, "prefix")
        current = bool_param(q, "includeCurrent", False)
        s, e = time_range(start, end)
        return views.dataset_fields(reader(_failed(q)),
                                    EndPoint(names[0], names[1]), s, e, prefix, current)

    def fast_field(names: list[str], q: dict[str, str]) -> Any:
        direction, start, end = str_param(q, "direction"), str_param(q, "start"), str_param(q, "end")
        level = int_param(q, "level", DEFAULT_FIELD_LEVEL)
        indirect = str_param(q, "indirect", "show")
        if direction is None:
            raise BadRequest("direction is required: incoming, outgoing or both", "direction")
        s, e = time_range(start, end)
        return views.field_summary(reader(_failed(q)),
                                   EndPointField(EndPoint(names[0], names[1]), names[2]), s, e,
                                   direction, lvl(level, "level"), parse_indirect(indirect or ""))

    def fast_operations(names: list[str], q: dict[str, str]) -> Any:
        direction = str_param(q, "direction", "both")
        start, end = str_param(q, "start"), str_param(q, "end")
        s, e = time_range(start, end)
        return views.field_operations(reader(_failed(q)),
                                      EndPointField(EndPoint(names[0], names[1]), names[2]),
                                      s, e, direction or "")

    def fast_all(names: list[str], q: dict[str, str]) -> Any:
        direction = str_param(q, "direction", "both")
        start, end = str_param(q, "start"), str_param(q, "end")
        s, e = time_range(start, end)
        return views.all_field_lineage(reader(_failed(q)),
                                       EndPoint(names[0], names[1]), s, e, direction or "")

    def fast_columns(names: list[str], q: dict[str, str]) -> Any:
        node = str_param(q, "nodeId")
        depth = int_param(q, "depth", DEFAULT_DEPTH)
        downstream = bool_param(q, "withDownstream", False)
        start, end = str_param(q, "start"), str_param(q, "end")
        indirect = str_param(q, "indirect", "show")
        if not node:
            raise BadRequest("nodeId is required", "nodeId")
        s, e = time_range(start, end, required=False)
        return views.column_lineage(reader(_failed(q)), node, lvl(depth, "depth", minimum=0),
                                    downstream, s, e, parse_indirect(indirect or ""))

    app.fast = None if not fast_reads else FastReads({
        _v3("lineage", "fields"): fast_fields,
        _v3("lineage", "fields", None): fast_field,
        _v3("lineage", "fields", None, "operations"): fast_operations,
        _v3("lineage", "allfieldlineage"): fast_all,
        ("api", "v1", "column-lineage"): fast_columns,
    }, token.encode() if token else None, public_reads,
        TokenMiddleware(None, token or "", public_reads).authorized)

    # classification tags and lineage diffs (fll.govern): their own routes
    from .governance import routes as governance_routes
    app.include_router(governance_routes(lineage, reader, max_level))

    marquez.install(app)  # Marquez's read API: namespaces, datasets, lineage, search, stats
    app.state.prepare_ingest = _prepare  # an event's checks and build (benchmarks)
    from .runs import router as runs_router  # Marquez's jobs, runs and events
    app.state.reader = reader
    app.include_router(runs_router)
    spark_ingest.register(app, lineage, max_body)  # the JVM listener's writes
    from .explorer import mount_explorer  # the explorer page at /, static files only
    mount_explorer(app)
    return app


class _App(FastAPI):
    """The app, with the hot read routes answered before the framework is entered
    (`fll.server.fast.FastReads`; what it declines goes through as before)."""

    fast: FastReads | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        fast = self.fast
        if fast is None or not await fast(scope, send):
            await super().__call__(scope, receive, send)


def _failed(q: dict[str, str]) -> bool:
    """The ``includeFailed`` parameter of a read answered in front of the framework."""
    return bool_param(q, "includeFailed", False)


def _receipt(run_id: str, checksum: str, start_ms: int, program: str | None, new: bool) -> dict:
    return {"recorded": new, "runId": run_id, "checksum": checksum,
            "startTimeInSeconds": start_ms // 1000, "program": program}
