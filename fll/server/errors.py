"""The one error shape of the REST API: ``{"error": "...", "status": N}``.

Every failure — a bad parameter, an unknown dataset, an unknown route, a body
too large, an invalid event, a crash — leaves the server in this shape.
An unexpected exception is logged with its stack trace and answered with a
generic message: this module must never put internals (trace, paths, store
URL) in a response.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import BadRequest, InvalidLineageError, NotFound, StoreError

log = logging.getLogger("fll.server")

GENERIC_500 = "internal server error (details are in the server log)"


class ApiError(Exception):
    """An HTTP failure with its status, raised anywhere in a request."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def error_response(status: int, message: str, headers: dict[str, str] | None = None
                   ) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status,
                        headers=headers)


def error_bytes(status: int, message: str) -> bytes:
    return json.dumps({"error": message, "status": status}).encode()


STORE_UNAVAILABLE = "the lineage store is unavailable (details are in the server log)"
#: the exceptions a route may raise on purpose, each with its documented status
KNOWN_ERRORS = (ApiError, BadRequest, NotFound, InvalidLineageError, StoreError)


def known_error_response(exc: BaseException) -> JSONResponse | None:
    """The documented answer to an exception a route raises on purpose, or None
    for any other (a crash: the caller logs it and answers 500). The framework's
    handlers and the routes answered in front of it share this one mapping."""
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.message, exc.headers)
    if isinstance(exc, BadRequest):
        return error_response(400, str(exc))
    if isinstance(exc, NotFound):
        return error_response(404, str(exc))
    if isinstance(exc, InvalidLineageError):
        return error_response(422, str(exc))
    if isinstance(exc, StoreError):
        # a store message may hold the store URL or file paths: log it, answer generically
        log.error("store failure: %s", exc)
        return error_response(503, STORE_UNAVAILABLE)
    return None


_REASONS = {404: "not found", 405: "method not allowed", 401: "unauthorized"}


def install(app: Any) -> None:
    """Map every exception a route can raise onto the error shape."""

    async def _known(_: Request, exc: Exception) -> JSONResponse:
        response = known_error_response(exc)
        assert response is not None  # registered only for the classes it answers
        return response

    for cls in KNOWN_ERRORS:
        app.add_exception_handler(cls, _known)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            loc = [str(x) for x in err.get("loc", ()) if x not in ("query", "path", "body")]
            name = ".".join(loc) or "request"
            got = err.get("input")
            parts.append(f"{name}: {err.get('msg', 'invalid value')}"
                         + (f", got {got!r}" if isinstance(got, (str, int, float)) else ""))
        return error_response(400, "; ".join(parts) or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else None
        if exc.status_code == 404 and (not detail or detail == "Not Found"):
            detail = f"no such route: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            detail = f"method {request.method} is not allowed on {request.url.path}"
        return error_response(exc.status_code, detail or _REASONS.get(exc.status_code, "error"),
                              getattr(exc, "headers", None))


class CatchAllMiddleware:
    """Outermost ASGI wrapper: any exception that escaped becomes a logged 500
    in the error shape (Starlette's own handler would re-raise and print a trace)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            body = error_bytes(500, GENERIC_500)
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
