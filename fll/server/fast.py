"""The hot read routes without the framework in the way.

A field question is a few store reads and a dict; under load, FastAPI's
middleware layers, parameter solving and the hop to a worker thread cost more
CPU than the answer. `FastReads` answers the routes a lineage UI asks most
(the CDAP field routes and Marquez's column lineage) as a plain ASGI callable
in front of the app, on the event loop thread, with the same handlers, the
same encoder and the same error bodies. Anything it is not certain to answer
exactly as the app would — another route or method, a parameter that is empty
or not in its plainest form (``level=+2``, ``includeCurrent=yes``), a path
that is not valid UTF-8, a missing token — it leaves to the app, which answers
as documented (validation messages included). So the fast path can only ever
be faster, never different.

This module must never answer a request the token check would refuse, nor
answer in another shape than the app's.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote_to_bytes

from starlette.responses import Response

from .errors import GENERIC_500, error_response, known_error_response
from .responses import JSONResponse

log = logging.getLogger("fll.server")

#: handler(path segments after the prefix, query) -> JSON content
Handler = Callable[[list[str], dict[str, str]], Any]

_INT = re.compile(r"(0|-?[1-9][0-9]{0,8})\Z")
_BOOL = {"true": True, "false": False}


class Fallback(Exception):
    """Not for the fast path: the app answers this request."""


def int_param(query: dict[str, str], name: str, default: int) -> int:
    value = query.get(name)
    if value is None:
        return default
    if not _INT.match(value):  # the app's validation has the words for it
        raise Fallback
    return int(value)


def bool_param(query: dict[str, str], name: str, default: bool) -> bool:
    value = query.get(name)
    if value is None:
        return default
    found = _BOOL.get(value)
    if found is None:
        raise Fallback
    return found


def str_param(query: dict[str, str], name: str, default: str | None = None) -> str | None:
    value = query.get(name)
    if value is None:
        return default
    if value == "":
        raise Fallback
    return value


class FastReads:
    """Routes by exact segment shape: each pattern is a tuple of path segments,
    ``None`` where the route takes a name; the handler gets those names decoded
    (see `fll.server.paths`: a name may hold ``/``) and the query."""

    def __init__(self, routes: dict[tuple[str | None, ...], Handler],
                 token: bytes | None, public_reads: bool,
                 authorized: Callable[[list[tuple[bytes, bytes]]], bool]):
        self.token = token
        self.public_reads = public_reads
        self.authorized = authorized
        self._by_length: dict[int, list[tuple[tuple[bytes | None, ...], Handler]]] = {}
        for pattern, handler in routes.items():
            self._by_length.setdefault(len(pattern), []).append(
                (tuple(None if p is None else p.encode() for p in pattern), handler))

    def match(self, raw_path: bytes) -> tuple[Handler, list[str]] | None:
        parts = raw_path.split(b"/")
        if parts[0] != b"":
            return None
        parts = parts[1:]
        for pattern, handler in self._by_length.get(len(parts), ()):
            names = []
            for want, got in zip(pattern, parts, strict=True):
                if want is None:
                    if not got:
                        break
                    names.append(got)
                elif want != got:
                    break
            else:
                try:
                    return handler, [unquote_to_bytes(n).decode("utf-8") for n in names]
                except UnicodeDecodeError:  # the app's 400 names it
                    return None
        return None

    async def __call__(self, scope: dict, send: Any) -> bool:
        """Answer the request and return True, or return False for the app to."""
        if scope["type"] != "http" or scope["method"] != "GET":
            return False
        if self.token is not None and not self.public_reads \
                and not self.authorized(scope["headers"]):
            return False  # the app's token check answers 401
        raw = scope.get("raw_path")
        if raw is None:
            return False
        found = self.match(raw.split(b"?", 1)[0])
        if found is None:
            return False
        handler, segments = found
        query = dict(parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True))
        response: Response
        try:
            response = JSONResponse(handler(segments, query))
        except Fallback:
            return False
        except Exception as e:
            known = known_error_response(e)
            if known is None:
                log.exception("unhandled error on GET %s", scope.get("path"))
            response = known or error_response(500, GENERIC_500)
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
        return True
