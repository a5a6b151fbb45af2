"""The fll REST server: CDAP v3 field-lineage paths, Marquez-style column lineage,
OpenLineage ingest.

FastAPI (on Starlette, served by uvicorn) was chosen for its generated OpenAPI
document and query-parameter handling; answers are built as plain dicts by
`fll.server.views` and sent as they are, so key names match design/rest-api.md
exactly. Read routes are plain functions run in the thread pool (the store is
synchronous and thread-safe).

What this module must never do: answer in any error shape but
``{"error", "status"}``, show a stack trace, accept a write without the
configured token, or record half an event.
"""
from __future__ import annotations

import hmac
import json
import logging
import threading
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from .. import __version__
from ..errors import BadRequest, InvalidLineageError
from ..model import EndPoint, EndPointField
from ..openlineage import check_shape, event_run_id, event_time_ms, run_event_to_lineage
from ..render import parse_indirect
from ..store.lineage import LineageStore
from ..timerange import now_ms, parse_time
from . import views
from .errors import ApiError, CatchAllMiddleware, install
from .paths import RawPathMiddleware, segment

log = logging.getLogger("fll.server")

MAX_BODY = 10 * 1024 * 1024
MAX_LEVEL = 100
DEFAULT_FIELD_LEVEL = 1
DEFAULT_DATASET_LEVEL = 10
DEFAULT_DEPTH = 20

_V3 = "/v3/namespaces/{ns}/datasets/{ds}"
_INDIRECT_HELP = "show|hide: INDIRECT (filter, join, group-by, sort…) edges"
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


def _endpoint(ns: str, ds: str) -> EndPoint:
    ns, ds = segment(ns), segment(ds)
    return EndPoint(ns, ds)


def _field(ns: str, ds: str, field: str) -> EndPointField:
    return EndPointField(_endpoint(ns, ds), segment(field))


class _FirstSeen:
    """``eventTime`` of the first event seen per run id (bounded, in memory): a
    run's start time is its first event's, even when only a later event carries
    column lineage. Once recorded, the store's run row is the authority."""

    def __init__(self, size: int = 100_000):
        self._data: OrderedDict[str, int] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def first(self, run_id: str, event_ms: int) -> int:
        with self._lock:
            ms = self._data.setdefault(run_id, event_ms)
            self._data.move_to_end(run_id)
            if len(self._data) > self._size:
                self._data.popitem(last=False)
            return ms

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._data.pop(run_id, None)


def _has_column_lineage(event: Any) -> bool:
    outputs = event.get("outputs") if isinstance(event, dict) else None
    return isinstance(outputs, list) and any(
        isinstance(o, dict) and isinstance(o.get("facets"), dict)
        and o["facets"].get("columnLineage") is not None for o in outputs)


async def _read_body(request: Request, max_body: int) -> bytes:
    declared = request.headers.get("content-length")
    too_big = f"request body is larger than {max_body} bytes"
    if declared and declared.isdigit() and int(declared) > max_body:
        raise ApiError(413, too_big)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:  # enforced while reading: never buffer more than the limit
            raise ApiError(413, too_big)
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(store: LineageStore | str, token: str | None = None, *,
               max_body: int = MAX_BODY, max_level: int = MAX_LEVEL) -> FastAPI:
    """The ASGI app over ``store`` (a `LineageStore` or a store URL).

    ``token``: when set, ``POST /api/v1/lineage`` needs ``Authorization: Bearer <token>``.
    ``max_body``: largest accepted request body in bytes (413 above).
    ``max_level``: hard cap of ``level`` and ``depth`` (400 above).
    """
    if isinstance(store, str):
        from ..store import open_store
        store = open_store(store)
    lineage: LineageStore = store
    first_seen = _FirstSeen()
    tcache = views.TransformationCache()
    token_bytes = token.encode() if token else None

    app = FastAPI(title="fll", version=__version__,
                  description="Field-level lineage: CDAP v3 field-lineage API, "
                              "Marquez-style column lineage and OpenLineage ingest.")
    app.state.store = lineage
    install(app)
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
        """Every dataset with at least one recorded run."""
        return JSONResponse(views.datasets(lineage))

    # -- CDAP v3 -------------------------------------------------------------
    @app.get(_V3 + "/lineage/fields", tags=["cdap"])
    def lineage_fields(ns: str, ds: str,
                       start: str | None = Query(None, description=_TIME_HELP),
                       end: str | None = Query(None, description=_END_HELP),
                       prefix: str | None = Query(None, description="case-insensitive"),
                       includeCurrent: bool = Query(False)) -> JSONResponse:  # noqa: N803
        s, e = time_range(start, end)
        return JSONResponse(views.dataset_fields(lineage, _endpoint(ns, ds), s, e, prefix,
                                                 includeCurrent))

    @app.get(_V3 + "/lineage/fields/{field}", tags=["cdap"])
    def lineage_field(ns: str, ds: str, field: str,
                      direction: str | None = Query(None, description="incoming|outgoing|both"),
                      start: str | None = Query(None, description=_TIME_HELP),
                      end: str | None = Query(None, description=_END_HELP),
                      level: int = Query(DEFAULT_FIELD_LEVEL, description="hops"),
                      indirect: str = Query("show", description=_INDIRECT_HELP)
                      ) -> JSONResponse:
        if direction is None:
            raise BadRequest("direction is required: incoming, outgoing or both", "direction")
        s, e = time_range(start, end)
        return JSONResponse(views.field_summary(lineage, _field(ns, ds, field), s, e, direction,
                                                lvl(level, "level"), parse_indirect(indirect)))

    @app.get(_V3 + "/lineage/fields/{field}/operations", tags=["cdap"])
    def lineage_field_operations(ns: str, ds: str, field: str,
                                 direction: str = Query("both",
                                                        description="incoming|outgoing|both"),
                                 start: str | None = Query(None, description=_TIME_HELP),
                                 end: str | None = Query(None, description=_END_HELP)
                                 ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.field_operations(lineage, _field(ns, ds, field), s, e,
                                                   direction))

    @app.get(_V3 + "/lineage/allfieldlineage", tags=["cdap"])
    def all_field_lineage(ns: str, ds: str,
                          direction: str = Query("both", description="incoming|outgoing|both"),
                          start: str | None = Query(None, description=_TIME_HELP),
                          end: str | None = Query(None, description=_END_HELP)) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.all_field_lineage(lineage, _endpoint(ns, ds), s, e, direction))

    # -- the seed design's paths ----------------------------------------------
    @app.get(_V3 + "/fields/lineage", tags=["design"])
    def dataset_field_lineage(ns: str, ds: str,
                              start: str | None = Query(None, description=_TIME_HELP),
                              end: str | None = Query(None, description=_END_HELP),
                              level: int = Query(DEFAULT_DATASET_LEVEL,
                                                 description="dataset hops each way"),
                              indirect: str = Query("show", description=_INDIRECT_HELP)
                              ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.dataset_field_mappings(lineage, _endpoint(ns, ds), s, e,
                                                         lvl(level, "level"),
                                                         parse_indirect(indirect)))

    @app.get(_V3 + "/fields/{field}/lineage", tags=["design"])
    def field_lineage_detail(ns: str, ds: str, field: str,
                             start: str | None = Query(None, description=_TIME_HELP),
                             end: str | None = Query(None, description=_END_HELP),
                             direction: str = Query("backward", description="backward|forward")
                             ) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.field_detail(lineage, _field(ns, ds, field), s, e, direction))

    @app.get(_V3 + "/properties", tags=["design"])
    def dataset_properties(ns: str, ds: str,
                           start: str | None = Query(None, description=_TIME_HELP),
                           end: str | None = Query(None, description=_END_HELP)) -> JSONResponse:
        s, e = time_range(start, end)
        return JSONResponse(views.dataset_properties(lineage, _endpoint(ns, ds), s, e))

    # -- Marquez-compatible ---------------------------------------------------
    @app.get("/api/v1/column-lineage", tags=["marquez"])
    def column_lineage(nodeId: str | None = Query(  # noqa: N803
                           None, description="datasetField:<ns>:<dataset>:<field> or "
                                             "dataset:<ns>:<name>"),
                       depth: int = Query(DEFAULT_DEPTH, description="field hops"),
                       withDownstream: bool = Query(False),  # noqa: N803
                       start: str | None = Query(None, description=_TIME_HELP + "; default 0"),
                       end: str | None = Query(None, description=_END_HELP + "; default now")
                       ) -> JSONResponse:
        if not nodeId:
            raise BadRequest("nodeId is required", "nodeId")
        s, e = time_range(start, end, required=False)
        return JSONResponse(views.column_lineage(lineage, tcache, nodeId,
                                                 lvl(depth, "depth", minimum=0),
                                                 withDownstream, s, e))

    # -- OpenLineage ingest ---------------------------------------------------
    def check_token(request: Request) -> None:
        if token_bytes is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                                 token_bytes):
            raise ApiError(401, "a valid bearer token is required to write lineage",
                           {"WWW-Authenticate": 'Bearer realm="fll"'})

    @app.post("/api/v1/lineage", status_code=201, tags=["openlineage"],
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {"type": "object",
                                                  "description": "OpenLineage RunEvent"}}}}})
    async def ingest(request: Request) -> JSONResponse:
        """Record an OpenLineage RunEvent whose outputs carry `columnLineage` facets.

        201: recorded. 200: the run was already recorded with these operations.
        202: no column lineage in this event (its time is kept as the run's start).
        409: the run is already recorded with different operations (nothing changed).
        """
        check_token(request)
        raw = await _read_body(request, max_body)
        try:
            event = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the body is not JSON: {e}") from None
        except RecursionError:  # json nests by recursion: "[[[[…" within the size limit
            raise ApiError(400, "the body nests JSON arrays/objects too deeply") from None
        try:
            return await run_in_threadpool(_ingest, event)
        except BadRequest as e:
            # well-formed JSON that is not a valid RunEvent: the reason names the JSON path
            raise ApiError(422, f"invalid OpenLineage event: {e}") from None

    def _ingest(event: Any) -> JSONResponse:
        if not isinstance(event, dict):
            raise BadRequest("$ must be a JSON object (an OpenLineage RunEvent)", "$")
        check_shape(event)
        run_id = event_run_id(event)
        start_ms = first_seen.first(run_id, event_time_ms(event))
        if not _has_column_lineage(event):
            return JSONResponse({"recorded": False, "runId": run_id,
                                 "reason": "no output carries a columnLineage facet"},
                                status_code=202)
        info, _, _, program = run_event_to_lineage(event)  # validates everything first
        prior = lineage.run(run_id)
        if prior is not None:
            start_ms = prior.start_ms
            if prior.checksum != info.checksum:
                raise ApiError(409, f"run {run_id!r} is already recorded with other operations "
                                    f"(operation set {prior.checksum}); nothing was changed")
            return JSONResponse(_receipt(run_id, info.checksum, start_ms, prior.program, False),
                                status_code=200)
        try:
            new = lineage.record(info, run_id, start_ms, program)
        except InvalidLineageError:
            raced = lineage.run(run_id)  # another request recorded this run meanwhile
            if raced is not None and raced.checksum != info.checksum:
                raise ApiError(409, f"run {run_id!r} is already recorded with other "
                                    f"operations; nothing was changed") from None
            raise
        return JSONResponse(_receipt(run_id, info.checksum, start_ms, program, new),
                            status_code=201 if new else 200)

    from .explorer import mount_explorer  # the explorer page at /, static files only
    mount_explorer(app)
    return app


def _receipt(run_id: str, checksum: str, start_ms: int, program: str | None, new: bool) -> dict:
    return {"recorded": new, "runId": run_id, "checksum": checksum,
            "startTimeInSeconds": start_ms // 1000, "program": program}
