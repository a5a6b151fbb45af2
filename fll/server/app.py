"""The fll REST server's app factory: `create_app` wires the store, the
middleware and the routers together, and does nothing else.

The routes live in one module per API, each a router that takes what it
needs from `fll.server.shared` (never from this module):
`fll.server.cdap` (health, dataset list, CDAP v3, the seed design's paths,
Marquez's column lineage), `fll.server.marquez` (Marquez's read API),
`fll.server.runs` (Marquez's jobs, runs and events), `fll.server.governance`
(tags and diffs), `fll.server.openlineage_ingest` and
`fll.server.spark_ingest` (the writes), `fll.server.explorer` (the page).

FastAPI (on Starlette, served by uvicorn) was chosen for its generated OpenAPI
document and query-parameter handling; answers are built as plain dicts by
the view modules and sent as they are, so key names match design/rest-api.md
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
import threading
from typing import Any, AsyncIterator, cast

from fastapi import FastAPI

from .. import __version__
from ..store.lineage import LineageStore
from ..store.reads import ReadView, SetMerges
from . import cdap, marquez, openlineage_ingest, runs, spark_ingest
from .checkpoint import Checkpointer
from .collector import FreezeOld
from .errors import CatchAllMiddleware, install
from .explorer import mount_explorer
from .fast import FastReads
from .governance import routes as governance_routes
from .guard import (DEFAULT_BODY_MEMORY, DEFAULT_BODY_TIMEOUT, DEFAULT_INGEST_WAIT, INGEST_PATH,
                    DEFAULT_MAX_BODY, DEFAULT_MAX_FIELDS,
                    IngestLimitMiddleware, TokenMiddleware, max_ingests_for)
from .ingest import GroupCommit, IngestRoute
from .paths import RawPathMiddleware
from .responses import JSONResponse
from .set_builder import SetBuilder
from .shared import MAX_LEVEL
from .stalls import StallLog

MAX_BODY = DEFAULT_MAX_BODY


def create_app(store: LineageStore | str, token: str | None = None, *,
               max_body: int = MAX_BODY, max_level: int = MAX_LEVEL,
               public_reads: bool = False, max_ingests: int | None = None,
               ingest_wait: float = DEFAULT_INGEST_WAIT, max_fields: int = DEFAULT_MAX_FIELDS,
               body_timeout: float = DEFAULT_BODY_TIMEOUT, ingest_slots: Any = None,
               body_memory: int = DEFAULT_BODY_MEMORY,
               fast_reads: bool = True, write_lock: Any = None,
               log_stalls: float | None = None, gc_freeze: bool = False,
               checkpoint_every: float | None = None, build_processes: int = 0) -> FastAPI:
    """The ASGI app over ``store`` (a `LineageStore` or a store URL).

    ``token``: when set, every route but the public shell (/health, the explorer
    page, /openapi.json, the docs) needs ``Authorization: Bearer <token>``;
    ``public_reads`` lets GET/HEAD through without it.
    ``max_ingests``/``ingest_wait``: concurrent ingests (None: `max_ingests_for`
    the store), and how long one waits for a slot before 503. ``max_fields``:
    column-lineage fields per event (413 above).
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
    ``build_processes``: while the app runs, the operation sets of lineage
    it has not seen are built in this many processes of their own, beside
    the GIL of this one (`fll.server.set_builder`; ``fll serve`` starts one
    where there is a second core); 0: built here.
    ``fast_reads``: False answers every route through the framework, each
    reading the store directly (no `fll.server.fast`, no `fll.store.reads`,
    no `fll.server.ingest.IngestRoute`):
    the same answers, slower; what benchmarks and tests compare against.
    """
    if isinstance(store, str):
        from ..store import open_store
        store = open_store(store)
    lineage: LineageStore = store
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
        if build_processes:
            ingest.builder = SetBuilder(build_processes, lineage.cache_budget.ingest)
        try:
            yield
        finally:
            if checkpointer is not None:
                checkpointer.stop()
            builder, ingest.builder = ingest.builder, None
            if builder is not None:
                builder.close()
            writer.close()
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
    # what the routers take through fll.server.shared
    app.state.reader = reader
    app.state.max_level = max_level
    app.state.max_body = max_body
    ingest = openlineage_ingest.OpenLineageIngest(lineage, writer, max_body, max_fields)
    app.state.ingest = ingest
    app.state.prepare_ingest = ingest.prepare  # an event's checks and build (benchmarks)
    install(app)
    # innermost first: the token is checked before an ingest slot is taken, and
    # both before an ingest is answered in front of the router
    if fast_reads:
        app.add_middleware(IngestRoute, answer=ingest.answer)
    if max_ingests is None:
        max_ingests = max_ingests_for(lineage)
    app.add_middleware(IngestLimitMiddleware, max_ingests=max_ingests, ingest_wait=ingest_wait,
                       body_timeout=body_timeout, slots=ingest_slots, max_body=max_body,
                       body_memory=body_memory)
    if token:
        app.add_middleware(TokenMiddleware, token=token, public_reads=public_reads)
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(RawPathMiddleware)

    app.include_router(cdap.router)
    app.include_router(openlineage_ingest.router)
    app.fast = None if not fast_reads else FastReads(
        cdap.fast_routes(reader, max_level), token.encode() if token else None, public_reads,
        TokenMiddleware(None, token or "", public_reads).authorized)
    # classification tags and lineage diffs (fll.govern): their own routes
    app.include_router(governance_routes(lineage, reader, max_level))
    marquez.install(app)  # Marquez's read API: namespaces, datasets, lineage, search, stats
    app.include_router(runs.router)  # Marquez's jobs, runs and events
    app.include_router(spark_ingest.router)  # the JVM listener's writes
    mount_explorer(app)  # the explorer page at /, static files only
    return app


class _App(FastAPI):
    """The app, with the hot read routes answered before the framework is entered
    (`fll.server.fast.FastReads`; what it declines goes through as before), and
    an OpenLineage ingest handed straight to fll's own middleware (the path,
    the catch-all, the token, the ingest limit, `IngestRoute`), past the
    framework's layers that do nothing for it: a tenth of an ingest's CPU on
    the event loop. The first request builds the stack as usual."""

    fast: FastReads | None = None
    _ingest_entry: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        fast = self.fast
        if fast is None:
            await super().__call__(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] == "POST" and \
                scope["path"] == INGEST_PATH and self.middleware_stack is not None:
            entry = self._ingest_entry
            if entry is None:
                entry = self._ingest_entry = _find(self.middleware_stack, RawPathMiddleware)
            if entry is not None:
                scope["app"] = self  # as the framework sets it, for what IngestRoute passes on
                await entry(scope, receive, send)
                return
        if not await fast(scope, send):
            await super().__call__(scope, receive, send)


def _find(app: Any, kind: type) -> Any:
    """The first layer of ``kind`` in the middleware stack ``app``, or None."""
    while app is not None and not isinstance(app, kind):
        app = getattr(app, "app", None)
    return app
