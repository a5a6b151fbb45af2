"""What the route modules share: the request body, the common parameters and
the per-app state a route reads.

Every router of the server (`fll.server.cdap`, `fll.server.marquez`,
`fll.server.openlineage_ingest`, `fll.server.spark_ingest`, ...) takes its
helpers from here, never from `fll.server.app`: the app factory imports the
routers, so a router importing the app would close a circle. The app factory
puts what a route needs on ``app.state`` (see `create_app`); the accessors
below are the one place that knows those names.

This module must never buffer more of a body than the limit allows (nor more
than the limit once decompressed), and never open a store.
"""
from __future__ import annotations

import zlib
from typing import Any, AsyncIterator

from fastapi import Request

from ..errors import BadRequest
from ..model import EndPoint, EndPointField
from ..store.lineage import LineageStore
from ..timerange import now_ms, parse_time
from .errors import ApiError
from .paths import segment

#: hard cap of ``level`` and ``depth`` unless the app is given another
MAX_LEVEL = 100
DEFAULT_FIELD_LEVEL = 1
DEFAULT_DATASET_LEVEL = 10
DEFAULT_DEPTH = 20

INDIRECT_HELP = "show|hide: INDIRECT (filter, join, group-by, sort…) edges"
FAILED_HELP = "also answer from runs that ended FAIL or ABORT (left out by default)"
TIME_HELP = "epoch seconds, or now / now-7d / now-1d+4h (units s m h d w); start inclusive"
END_HELP = "epoch seconds, or now / now-7d / now-1d+4h; end exclusive"


# -- parameters ------------------------------------------------------------------

def time_range(start: str | None, end: str | None, *, required: bool = True) -> tuple[int, int]:
    """``[start, end)`` in ms from REST parameters (semantics §3: both required)."""
    clock = now_ms()
    s = parse_time(start, "start", now=clock, default=None if required else 0)
    e = parse_time(end, "end", now=clock, default=None if required else clock + 1)
    if s > e:
        raise BadRequest(f"start must not be after end (start={start!r}, end={end!r})", "start")
    return s, e


def limit(value: int, name: str, *, minimum: int = 1, cap: int = MAX_LEVEL) -> int:
    """``value`` when ``minimum <= value <= cap``, else a 400 naming ``name``."""
    if value < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {value}", name)
    if value > cap:
        raise BadRequest(f"{name} must be at most {cap}, got {value}", name)
    return value


def endpoint(ns: str, ds: str) -> EndPoint:
    """The dataset a route's ``{ns}`` and ``{ds}`` path parameters name."""
    return EndPoint(segment(ns), segment(ds))


def endpoint_field(ns: str, ds: str, field: str) -> EndPointField:
    """The field a route's ``{ns}``, ``{ds}`` and ``{field}`` path parameters name."""
    return EndPointField(endpoint(ns, ds), segment(field))


# -- the request body ------------------------------------------------------------

async def read_body(declared: str | None, stream: AsyncIterator[bytes], max_body: int) -> bytes:
    """The whole body, or 413 as soon as it is known to be over ``max_body``
    (by its Content-Length, else while reading)."""
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


def decoded(raw: bytes, encoding: str, max_body: int) -> bytes:
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


# -- what the app gives its routes (set by fll.server.app.create_app) -------------

def store(request: Request) -> LineageStore:
    """The app's store itself (writes, and reads that must see the latest write)."""
    return request.app.state.store


def reader(request: Request, include_failed: bool = False) -> LineageStore:
    """The store as this request reads it (`fll.store.reads.ReadView`: every
    read once); ``include_failed``: answering from FAIL/ABORT runs too."""
    return request.app.state.reader(include_failed)


def max_level(request: Request) -> int:
    """The app's cap of ``level`` and ``depth``."""
    return getattr(request.app.state, "max_level", MAX_LEVEL)


def max_body(request: Request) -> int:
    """The app's largest accepted request body, in bytes."""
    return request.app.state.max_body


def level(request: Request, value: int, name: str, minimum: int = 1) -> int:
    """``value`` of the ``level``/``depth`` parameter ``name``, checked against
    the app's cap."""
    return limit(value, name, minimum=minimum, cap=max_level(request))


def state(request: Request, name: str) -> Any:
    """Another object the app keeps for its routes (e.g. ``ingest``)."""
    return getattr(request.app.state, name)
