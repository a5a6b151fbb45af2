"""Path segments that may hold any character, ``/`` and ``|`` included.

ASGI servers hand Starlette an already percent-decoded ``path``, so a dataset
called ``a/b`` sent as ``a%2Fb`` would split into two segments before routing.
`RawPathMiddleware` rebuilds ``path`` from ``raw_path``: each raw segment is
decoded once (UTF-8) and re-encoded with nothing left unescaped, so routing
sees exactly the client's segments. Routes then decode their path parameters
with `segment()`. This module must never decode a segment twice (``%252F``
is the three characters ``%2F``, not a slash).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

from .errors import error_bytes


def segment(value: str) -> str:
    """A path parameter as the client meant it (see module docstring)."""
    return unquote(value, errors="strict")


class RawPathMiddleware:
    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("raw_path") is not None:
            raw: bytes = scope["raw_path"].split(b"?", 1)[0]
            try:
                parts = [unquote_to_bytes(p).decode("utf-8") for p in raw.split(b"/")]
            except UnicodeDecodeError:
                body = error_bytes(400, "the URL path is not valid percent-encoded UTF-8")
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            scope = dict(scope)
            scope["path"] = "/".join(quote(p, safe="") for p in parts)
        elif scope["type"] == "http":
            # no raw path from this server: the best we can do is keep the
            # decoded segments (an encoded "/" is lost), encoded the same way
            scope = dict(scope)
            scope["path"] = "/".join(quote(p, safe="") for p in scope["path"].split("/"))
        await self.app(scope, receive, send)
