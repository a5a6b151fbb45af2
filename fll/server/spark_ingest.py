"""``POST /api/v1/spark/events``: record the writes the JVM listener reports.

The listener (``fll.spark.LineageListener``, enabled with one ``--conf``)
posts one event per successful write of any Spark application; the lineage
is worked out here by `fll.spark.events.analyse_event`, the same rules
`fll.spark.track()` applies in-process, and recorded as one run (the
event's run id and start time, program = the application's name).

This module must never record part of an event, never need a Spark
session, and never answer a store failure as a client error: a `StoreError`
propagates to the app's handler (503), so the listener keeps the event in
its spool and sends it again.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from ..errors import BadRequest, InvalidLineageError
from ..store.lineage import LineageStore
from .errors import ApiError

__all__ = ["ROUTE", "register", "record_event"]

ROUTE = "/api/v1/spark/events"


def record_event(store: LineageStore, event: Any) -> tuple[int, dict[str, Any]]:
    """(HTTP status, answer) for one listener event; shared by the route and ``fll record``.

    201 recorded, 200 already recorded with the same operations, 202 nothing
    to record (the write reads no dataset). `BadRequest` for an event that
    cannot be analysed (422); `ApiError` 409 for a run id already recorded
    with other operations.
    """
    from ..spark.events import analyse_event

    ev = analyse_event(event)
    answer: dict[str, Any] = {"runId": ev.run_id, "command": ev.command,
                              "destination": {"namespace": ev.destination[0],
                                              "name": ev.destination[1]}}
    if ev.info is None:
        return 202, {**answer, "recorded": False,
                     "reason": "the data written reads no dataset (inline rows, range)"}
    prior = store.run(ev.run_id)
    if prior is not None and prior.checksum != ev.info.checksum:
        raise ApiError(409, f"run {ev.run_id!r} is already recorded with other operations; "
                            f"nothing was changed")
    try:
        new = store.record(ev.info, ev.run_id, ev.start_ms, ev.program)
    except InvalidLineageError:
        raced = store.run(ev.run_id)
        if raced is not None and raced.checksum != ev.info.checksum:
            raise ApiError(409, f"run {ev.run_id!r} is already recorded with other "
                                f"operations; nothing was changed") from None
        raise
    return (201 if new else 200), {**answer, "recorded": new, "checksum": ev.info.checksum,
                                   "program": ev.program,
                                   "startTimeInSeconds": ev.start_ms // 1000}


def register(app: FastAPI, store: LineageStore, check_token: Callable[[Request], None],
             max_body: int) -> None:
    """Add the route to ``app`` (called once from `fll.server.app.create_app`)."""
    from .app import _read_body

    @app.post(ROUTE, status_code=201, tags=["spark"],
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": {
                      "type": "object",
                      "description": "a write reported by fll.spark.LineageListener"}}}}})
    async def spark_event(request: Request) -> JSONResponse:
        """Record one Spark write reported by the JVM listener.

        201: recorded. 200: this run was already recorded. 202: the write reads
        no dataset. 409: the run id is recorded with other operations. 422: the
        event cannot be analysed (the reason names the JSON path).
        """
        check_token(request)
        raw = await _read_body(request, max_body)
        try:
            event = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the body is not JSON: {e}") from None
        except RecursionError:
            raise ApiError(400, "the body nests JSON arrays/objects too deeply") from None
        try:
            status, answer = await run_in_threadpool(record_event, store, event)
        except BadRequest as e:
            raise ApiError(422, f"invalid Spark write event: {e}") from None
        except InvalidLineageError as e:
            raise ApiError(422, f"the Spark write gives no valid lineage: {e}") from None
        return JSONResponse(answer, status_code=status)
