"""What stands between the network and the routes: the token, the ingest cap,
the read timeouts.

- `TokenMiddleware`: with a token configured, every route needs
  ``Authorization: Bearer <token>`` (the header the OpenLineage clients send
  for ``auth: {type: api_key, apiKey: ...}``), except the public shell:
  ``/health``, the explorer page and its static files, ``/openapi.json`` and
  the API docs pages. ``public_reads`` lets GET/HEAD through anonymously.
  It wraps the whole router, so a route added later is protected by default.
- `IngestLimitMiddleware`: at most ``max_ingests`` ingests at once (by
  default `max_ingests_for` the store: more where they wait on round trips; a request
  waits up to ``ingest_wait`` seconds for a slot, then 503 + Retry-After). The
  slot is taken only once the body has fully arrived: a client that sends its
  body slowly, or not at all, holds its connection and never the work (17
  half-sent bodies used to hold every slot for 60 s). A body is read by its
  own bounds instead: at most ``max_body`` bytes (413), within
  ``body_timeout`` seconds of the first read (408, connection closed), and,
  for the process, at most ``body_memory`` bytes held by bodies beyond the
  first `FREE_BODY_BYTES` of each (503 + Retry-After, connection closed),
  from the first byte read until the ingest is answered. Every other request
  body must arrive within ``body_timeout`` seconds too.
- `check_fields`: the cap on column-lineage fields per event (413), checked on
  the parsed JSON before any lineage object is built.
- `timed_http` (httptools when installed) / `timed_h11`: uvicorn's HTTP
  protocol with a header deadline. uvicorn only
  times out idle keep-alive connections after a response; a connection that
  never completes its request head (slowloris, half-open) would stay forever.
  The deadline counts from the connection (or the previous response), and a
  trickle of bytes does not extend it.

This module must never answer in another shape than ``{"error", "status"}``,
compare the token with ``==``, take an ingest slot before the body has arrived,
or hold more body bytes than its bounds.
"""
from __future__ import annotations

import asyncio
import collections
import hmac
import threading
import time
from typing import Any, Callable

import h11
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..store.base import transactional
from .errors import ApiError, error_bytes

INGEST_PATH = "/api/v1/lineage"
PUBLIC_PATHS = frozenset({"/", "/health", "/openapi.json", "/docs", "/docs/oauth2-redirect",
                          "/redoc"})
PUBLIC_PREFIXES = ("/static/",)
READ_METHODS = frozenset({"GET", "HEAD"})

DEFAULT_MAX_INGESTS = 8
# on a store without transactions (Bigtable, HBase) an ingest spends most of
# its time waiting on round trips, written beside others by as many threads
# (fll.server.ingest.WRITERS): 8 at once left half of them idle
REMOTE_MAX_INGESTS = 16
DEFAULT_INGEST_WAIT = 10.0
DEFAULT_MAX_FIELDS = 50_000
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 60.0
#: bytes of ingest bodies a server process holds at once (beyond each body's
#: first FREE_BODY_BYTES), from the first byte read until the ingest is answered
DEFAULT_BODY_MEMORY = 128 * 1024 * 1024
#: what uvicorn buffers of a body per connection anyway before it stops reading
#: the socket (its HIGH_WATER_LIMIT): a usual event is smaller, so idle or slow
#: bodies filling the budget never keep a usual ingest out
FREE_BODY_BYTES = 64 * 1024
DEFAULT_MAX_BODY = 10 * 1024 * 1024


async def _send_error(send: Any, status: int, message: str,
                      headers: dict[str, str] | None = None) -> None:
    body = error_bytes(status, message)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def max_ingests_for(store: Any) -> int:
    """The default number of ingests at once for ``store``: `REMOTE_MAX_INGESTS`
    where its table has no transactions, else `DEFAULT_MAX_INGESTS`."""
    table = getattr(store, "table", None)
    return REMOTE_MAX_INGESTS if table is not None and not transactional(table) \
        else DEFAULT_MAX_INGESTS


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class TokenMiddleware:
    """401 for any non-public request without the bearer token (see the module doc)."""

    def __init__(self, app: Any, token: str, public_reads: bool = False):
        self.app = app
        self.token = token.encode()
        self.public_reads = public_reads

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = next((v for k, v in headers if k == b"authorization"), b"")
        scheme, _, value = given.partition(b" ")
        # compare_digest even for a wrong scheme, so the answer time says nothing
        ok = hmac.compare_digest(value.strip(), self.token)
        return ok and scheme.lower() == b"bearer"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (scope["type"] != "http" or is_public(scope["path"])
                or (self.public_reads and scope["method"] in READ_METHODS)
                or self.authorized(scope["headers"])):
            await self.app(scope, receive, send)
            return
        what = "write lineage" if scope["method"] not in READ_METHODS else "read lineage"
        await _send_error(send, 401, f"a valid bearer token is required to {what}",
                          {"WWW-Authenticate": 'Bearer realm="fll"'})


_timeout = getattr(asyncio, "timeout", None)  # Python 3.11+


class _BodyTimeout(Exception):
    pass


class _Refused(Exception):
    """A body refused while it is read: answered ``status`` and the connection closed."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class IngestLimitMiddleware:
    """The ingest slots, the ingest bodies' bounds and the body deadline (see the
    module doc)."""

    def __init__(self, app: Any, max_ingests: int = DEFAULT_MAX_INGESTS,
                 ingest_wait: float = DEFAULT_INGEST_WAIT,
                 body_timeout: float = DEFAULT_BODY_TIMEOUT, slots: Any = None,
                 max_body: int = DEFAULT_MAX_BODY, body_memory: int = DEFAULT_BODY_MEMORY):
        self.app = app
        self.max_ingests = max_ingests
        self.ingest_wait = ingest_wait
        self.body_timeout = body_timeout
        self.max_body = max_body
        self.body_memory = body_memory
        # a counter, not an asyncio.Semaphore: a semaphore binds to one event loop.
        # ``slots`` (a process-shared semaphore of max_ingests) replaces it when
        # several worker processes serve one socket: the cap is for the server
        self.slots = slots
        self.active = 0
        self._lock = threading.Lock()
        # ingests of this process waiting for a slot, oldest first
        self._waiting: collections.deque[object] = collections.deque()
        #: bytes of ingest bodies counted against ``body_memory`` now (this process;
        #: only the event loop changes it)
        self.held = 0

    def _take(self) -> bool:
        if self.slots is not None:
            return bool(self.slots.acquire(False))
        with self._lock:
            if self.active < self.max_ingests:
                self.active += 1
                return True
            return False

    async def _queue(self) -> bool:
        """Wait for a slot: the ingests of this process that wait take one in the
        order they came, polling every millisecond (a newcomer that finds a slot
        free takes it at once: making it queue would cost it a turn of the event
        loop, which under load is many requests long); False after
        ``ingest_wait`` seconds."""
        give_up = time.monotonic() + self.ingest_wait
        ticket = object()
        self._waiting.append(ticket)
        try:
            while not (self._waiting[0] is ticket and self._take()):
                if time.monotonic() >= give_up:
                    return False
                await asyncio.sleep(0.001)
            return True
        finally:
            self._waiting.remove(ticket)

    def _give(self) -> None:
        if self.slots is not None:
            self.slots.release()
            return
        with self._lock:
            self.active -= 1

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False
        body_done = False
        deadline: float | None = None

        async def timed_receive() -> dict:
            nonlocal deadline, body_done
            if body_done:  # waiting for a disconnect is not reading a body: no deadline
                return await receive()
            if deadline is None:
                deadline = time.monotonic() + self.body_timeout
            left = max(deadline - time.monotonic(), 0)
            try:
                if _timeout is not None:
                    # no task per read (wait_for makes one before 3.12): a body
                    # already here is read without a turn of the loop, which
                    # under load is every other connection's request
                    async with _timeout(left):
                        message = await receive()
                else:  # pragma: no cover - Python 3.10
                    message = await asyncio.wait_for(receive(), left)
            except asyncio.TimeoutError:
                raise _BodyTimeout from None
            body_done = not message.get("more_body", False)
            return message

        async def watch(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        if scope["method"] == "POST" and scope["path"] == INGEST_PATH:
            await self._ingest(scope, timed_receive, receive, watch)
            return
        try:
            await self.app(scope, timed_receive, watch)
        except _BodyTimeout:
            if not started:  # Connection: close makes uvicorn drop the unread rest
                await self._too_slow(send)
        except ClientDisconnect:
            pass  # the client left mid-body: nobody to answer

    async def _too_slow(self, send: Any) -> None:
        await _send_error(send, 408, f"the request body did not arrive within "
                                     f"{self.body_timeout:g} s", {"Connection": "close"})

    async def _ingest(self, scope: dict, timed_receive: Any, receive: Any, send: Any) -> None:
        """An ingest: its whole body read first (its bounds, no slot), then a slot
        taken for the work, and the app given the body as it arrived."""
        counted = 0  # bytes of this body counted against body_memory

        def charge(size: int) -> None:
            nonlocal counted
            more = size - FREE_BODY_BYTES - counted
            if more <= 0:
                return
            if self.held + more > self.body_memory:
                raise _Refused(503, f"the server is busy: request bodies of "
                                    f"{_size(self.body_memory)} are arriving or waiting "
                                    f"(the configured maximum); retry later",
                               {"Retry-After": "1"})
            self.held += more
            counted += more

        try:
            body = await self._read_body(scope, timed_receive, charge)
            if not self._take() and not await self._queue():
                await _send_error(
                    send, 503, f"the server is busy: {self.max_ingests} ingests are in "
                               f"progress (the configured maximum); retry later",
                    {"Retry-After": "1"})
                return
            try:
                await self.app(scope, _replay(body, receive), send)
            finally:
                self._give()
        except _BodyTimeout:
            await self._too_slow(send)
        except _Refused as e:
            # the rest of the body is not read: Connection: close makes uvicorn drop it
            await _send_error(send, e.status, e.message, {**e.headers, "Connection": "close"})
        except ClientDisconnect:
            pass  # the client left mid-body: nobody to answer
        finally:
            self.held -= counted

    async def _read_body(self, scope: dict, timed_receive: Any,
                         charge: Callable[[int], None]) -> bytes:
        """The whole body, or `_Refused` 413 beyond ``max_body`` (from the declared
        length when there is one, before anything is read) or 503 beyond the
        process's ``body_memory``; `_BodyTimeout` past ``body_timeout``."""
        too_big = f"request body is larger than {self.max_body} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                if value.isdigit() and int(value) > self.max_body:
                    raise _Refused(413, too_big)
                break
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await timed_receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > self.max_body:
                    raise _Refused(413, too_big)
                charge(size)
                chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 1024:g} KiB"


def _replay(body: bytes, receive: Any) -> Callable[[], Any]:
    """An ASGI ``receive`` that gives ``body`` whole, then waits as ``receive`` does
    (for the client to leave)."""
    given = False

    async def replayed() -> dict:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()
    return replayed


def count_fields(event: Any) -> int:
    """Column-lineage fields of an event: each output field and each input field it
    lists count once (what the ingest's memory and time grow with)."""
    total = 0
    outputs = event.get("outputs") if isinstance(event, dict) else None
    for out in outputs if isinstance(outputs, list) else ():
        facets = out.get("facets") if isinstance(out, dict) else None
        cl = facets.get("columnLineage") if isinstance(facets, dict) else None
        fields = cl.get("fields") if isinstance(cl, dict) else None
        if not isinstance(fields, dict):
            continue
        total += len(fields)
        for spec in fields.values():
            inputs = spec.get("inputFields") if isinstance(spec, dict) else None
            if isinstance(inputs, list):
                total += len(inputs)
    return total


def check_fields(event: Any, max_fields: int) -> int:
    """413 when the event carries more column-lineage fields than ``max_fields``;
    else how many it carries."""
    n = count_fields(event)
    if n > max_fields:
        raise ApiError(413, f"the event carries {n} column-lineage fields (output fields plus "
                            f"their inputFields); this server accepts at most {max_fields} "
                            f"per event")
    return n


class _Deadlines:
    """The header/body deadlines shared by both HTTP parsers: ``_arm`` one phase's
    timer; re-arming the same phase keeps the deadline (bytes do not extend it)."""

    header_timeout = DEFAULT_HEADER_TIMEOUT
    body_timeout = DEFAULT_BODY_TIMEOUT

    _phase: str | None = None
    _timer: asyncio.TimerHandle | None = None
    loop: Any
    transport: Any
    logger: Any

    def _arm_phase(self, phase: str | None) -> None:
        # the app answers 408 at body_timeout; the body timer only catches a body
        # nobody reads
        self._arm(phase, self.header_timeout if phase == "head" else self.body_timeout + 5)

    def _arm(self, phase: str | None, seconds: float) -> None:
        if phase == self._phase:
            return  # same phase: the deadline stands, more bytes do not extend it
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._phase = phase
        if phase is not None:
            self._timer = self.loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self._timer = None
        if not self.transport.is_closing():
            self.logger.debug("closing a connection that did not send its request %s in time",
                              self._phase)
            self.transport.close()


class _TimedH11(_Deadlines, H11Protocol):
    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm(None, 0)
        super().connection_lost(exc)

    def _watch(self) -> None:
        state = self.conn.their_state
        self._arm_phase("head" if state is h11.IDLE else
                        "body" if state is h11.SEND_BODY else None)


class _OneSend:
    """A connection's transport that sends a response's head together with the
    body written right after it: uvicorn writes the two separately, and on a
    small answer the second send (a syscall, and on loopback the receiver's
    wake-up) cost as much as the first. A head with nothing after it in the same
    turn of the event loop (HEAD, 204, a streamed body not ready yet) is sent at
    the end of that turn; closing the connection sends it first."""

    __slots__ = ("_transport", "_loop", "_head", "_flush")

    def __init__(self, transport: Any, loop: Any):
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None
        self._flush: Any = None

    def write(self, data: bytes) -> None:
        if self._head is not None:
            data = self._head + data
            self._head = None
            self._flush.cancel()
        elif data.startswith(b"HTTP/1.1 ") and not data.startswith(b"HTTP/1.1 100 "):
            self._head = bytes(data)
            self._flush = self._loop.call_soon(self._send_head)
            return
        self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def _send_head(self) -> None:
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        if self._head is not None:
            self._flush.cancel()
            self._send_head()
        self._transport.close()

    def abort(self) -> None:
        if self._head is not None:
            self._flush.cancel()
            self._head = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _httptools_protocol() -> type | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional: h11 is the fallback
        return None

    class _TimedHttpTools(_Deadlines, HttpToolsProtocol):
        """httptools (C parser, several times faster than h11) with the same
        deadlines; the phase follows the parser callbacks instead of h11's state."""

        _in_message = False
        _head_done = False

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.transport = _OneSend(transport, self.loop)
            self._arm_phase("head")

        def connection_lost(self, exc: Exception | None) -> None:
            self._arm(None, 0)
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_message, self._head_done = True, False

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._head_done = True
            self._arm_phase("body")

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_message = False
            self._arm_phase(None)  # the app has the request: its own time is not limited

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.transport.is_closing():
                return
            if self._in_message:  # a pipelined request is on its way
                self._arm_phase("body" if self._head_done else "head")
            elif not self.pipeline and self.cycle.response_complete:
                self._arm_phase("head")

    return _TimedHttpTools


def timed_h11(header_timeout: float = DEFAULT_HEADER_TIMEOUT,
              body_timeout: float = DEFAULT_BODY_TIMEOUT) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the header (and last-resort body) deadlines."""
    return type("TimedH11Protocol", (_TimedH11,), {"header_timeout": header_timeout,
                                                   "body_timeout": body_timeout})


def timed_http(header_timeout: float = DEFAULT_HEADER_TIMEOUT,
               body_timeout: float = DEFAULT_BODY_TIMEOUT) -> type:
    """The fastest HTTP protocol installed (httptools, else h11) with the deadlines."""
    base = _httptools_protocol()
    if base is None:
        return timed_h11(header_timeout, body_timeout)
    return type("TimedHttpToolsProtocol", (base,), {"header_timeout": header_timeout,
                                                    "body_timeout": body_timeout})


def raise_open_file_limit() -> None:
    """Lift the soft limit on open files to the hard one: at the common soft limit of
    1,024 a thousand idle sockets would leave no descriptor to accept anyone else."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65_536
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass
