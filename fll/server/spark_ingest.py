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

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from ..errors import BadRequest, InvalidLineageError
from ..spark.events import record_event
from . import shared
from .errors import ApiError
from .responses import JSONResponse

__all__ = ["ROUTE", "router"]

ROUTE = "/api/v1/spark/events"

router = APIRouter()


@router.post(ROUTE, status_code=201, tags=["spark"],
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
    raw = await shared.read_body(request.headers.get("content-length"), request.stream(),
                                 shared.max_body(request))
    try:
        event = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the body is not JSON: {e}") from None
    except RecursionError:
        raise ApiError(400, "the body nests JSON arrays/objects too deeply") from None
    try:
        status, answer = await run_in_threadpool(record_event, shared.store(request), event)
    except BadRequest as e:
        raise ApiError(422, f"invalid Spark write event: {e}") from None
    except InvalidLineageError as e:
        raise ApiError(422, f"the Spark write gives no valid lineage: {e}") from None
    if status == 409:
        raise ApiError(409, answer["error"])
    return JSONResponse(answer, status_code=status)
