"""Pipelined Thrift calls on one happybase connection, for `fll.store.hbase`.

A Thrift client may write several requests before it reads any answer: the
answers come back in the order the requests were sent, because HBase's
Thrift 1 servers handle a connection's requests one at a time. The default
server (``hbase.regionserver.thrift.server.type=threadpool``, HBase's
``TBoundedThreadPoolServer``) gives each connection one worker thread whose
``ClientConnnection.run`` loops ``processor.process(in, out)``: the next
request is read only after the last was answered. The non-blocking servers
(``nonblocking``, ``hsha``, ``threadedselector``, always framed) are
libthrift's: a connection's ``FrameBuffer`` reads a 4-byte size and exactly
that frame, drops its read interest (``interestOps(0)``) until the answer is
written, then reads the next frame, which meanwhile waits in the socket. So N
calls cost one round trip instead of N (`Burst`): a level of a walk opens
every scanner in one burst and reads and closes them all in the next. (The
sequence ids of thriftpy2's requests are all 0; the order alone pairs each
answer with its call, as it does for one call at a time.)

thriftpy2 (happybase's Thrift library) sends and reads a call in one step;
`Burst` uses its two halves, ``TClient._send`` and ``TClient._recv``, which
`check_thriftpy2` requires to exist. All requests of a burst leave in one
socket write, framed like the connection's transport, so a burst is one
burst on the wire too. thriftpy2's Cython transports do not expose their
socket, so the first burst on a pooled connection gives it a new transport
over a socket this module keeps (`_wired`), built the way happybase builds
its own; happybase's calls use it too.

An answer that is an exception the service declares (``IOError``,
``IllegalArgument``) or a ``TApplicationException`` is read whole and
handed back in its place; the rest of the burst is still read, so the
connection stays in step. Anything else (a socket error, a truncated frame)
leaves the connection half read: it is closed and rebuilt before the error
is raised, never returned to the pool in that state.

This module must never hold a connection's answers unread when it returns.
"""
from __future__ import annotations

import struct
from typing import Any

#: requests per burst at most: a burst's requests must fit the socket buffers
#: (tens of kilobytes) while the server writes its answers, or both ends
#: would wait on each other; a scanner call is about 50 bytes.
MAX_BURST = 256


class PipelineUnavailable(RuntimeError):
    """The installed thriftpy2 or happybase lacks what pipelining relies on."""


def check_thriftpy2() -> Any:
    """thriftpy2's ``TClient``, after checking it still has ``_send`` and
    ``_recv`` (internal names: a thriftpy2 that renamed them fails here, not
    halfway through a burst)."""
    from thriftpy2.thrift import TClient
    missing = [n for n in ("_send", "_recv") if not callable(getattr(TClient, n, None))]
    if missing:
        raise PipelineUnavailable(
            f"thriftpy2's TClient has no {', '.join(missing)}: fll's HBase backend "
            f"pipelines Thrift calls with them; install a thriftpy2 that has them "
            f"(0.7 does)")
    return TClient


class Failed:
    """An answer that is an exception the server sent (read whole)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Frames:
    """Requests written one after another into one buffer, each framed when
    the connection is: thriftpy2's (Cython) protocol writes a message into a
    memory buffer, taken out after each (``TClient._send`` ends every message
    with a flush, which a memory buffer ignores)."""

    def __init__(self, framed: bool, protocol: str) -> None:
        from thriftpy2.protocol import TBinaryProtocol, TCompactProtocol
        from thriftpy2.transport import TMemoryBuffer
        self.framed = framed
        self.out = bytearray()
        self.buffer = TMemoryBuffer()
        self.proto = (TCompactProtocol if protocol == "compact" else TBinaryProtocol)(
            self.buffer)

    def take(self) -> None:
        """Move the message just written to ``out``."""
        msg = self.buffer.getvalue()
        self.buffer = type(self.buffer)()
        self.proto.trans = self.buffer
        if self.framed:
            self.out += struct.pack("!i", len(msg))
        self.out += msg


_HAPPYBASE_FIELDS = ("host", "port", "timeout", "transport", "client", "_transport_class",
                     "_protocol_class", "_refresh_thrift_client")


def _wired(conn: Any) -> Any:
    """The socket of happybase connection ``conn``, rebuilding its transport
    over a socket kept here on first use (or after happybase replaced it)."""
    state = conn.__dict__
    sock, trans = state.get("_fll_socket"), state.get("_fll_transport")
    if sock is not None and conn.transport is trans and trans.is_open():
        return sock
    missing = [f for f in _HAPPYBASE_FIELDS if not hasattr(conn, f)]
    if missing:
        raise PipelineUnavailable(f"this happybase's Connection has no {', '.join(missing)}: "
                                  f"fll's HBase backend needs them to pipeline Thrift calls")
    from thriftpy2.transport import TSocket
    TClient = check_thriftpy2()
    try:
        conn.transport.close()
    except Exception:  # noqa: BLE001 - the old socket is dropped either way
        pass
    sock = TSocket(host=conn.host, port=conn.port, socket_timeout=conn.timeout)
    trans = conn._transport_class(sock)
    proto = conn._protocol_class(trans, decode_response=False)
    service = conn.client._service
    state.pop("_fll_transport", None)
    trans.open()
    conn.transport, conn.client = trans, TClient(service, proto)
    state["_fll_socket"], state["_fll_transport"] = sock, trans
    return sock


def _discard(conn: Any) -> None:
    """Drop a connection left half read: a fresh, unopened transport
    (happybase's pool opens it on the next borrow)."""
    conn.__dict__.pop("_fll_transport", None)
    conn.__dict__.pop("_fll_socket", None)
    try:
        conn.transport.close()
    except Exception:  # noqa: BLE001
        pass
    conn._refresh_thrift_client()


class Burst:
    """Calls written together on one connection, answered in order by `run`.

        burst = Burst(conn, idl.Hbase, framed=True, protocol="binary",
                      declared=(idl.IOError, idl.IllegalArgument))
        burst.add("scannerOpenWithScan", tableName=t, scan=scan, attributes={})
        burst.add("getRows", tableName=t, rows=keys, attributes={})
        sid, rows = burst.run()  # a value or a `Failed` per call, in order
    """

    def __init__(self, conn: Any, service: Any, *, framed: bool, protocol: str,
                 declared: tuple[type[BaseException], ...]) -> None:
        TClient = check_thriftpy2()
        self._conn = conn
        self._frames = _Frames(framed, protocol)
        self._writer = TClient(service, self._frames.proto)
        self._service = service
        self._declared = declared
        self._apis: list[str] = []

    def __len__(self) -> int:
        return len(self._apis)

    def add(self, api: str, **kwargs: Any) -> int:
        """Queue one call (arguments by their IDL names); its index in `run`'s answer."""
        self._writer._send(api, **kwargs)
        self._frames.take()
        self._apis.append(api)
        return len(self._apis) - 1

    def run(self) -> list[Any]:
        """Send every queued call in one write and read every answer, in order."""
        if not self._apis:
            return []
        from thriftpy2.thrift import TApplicationException
        TClient = check_thriftpy2()
        readable: tuple[type[BaseException], ...] = (TApplicationException, *self._declared)
        conn = self._conn
        out: list[Any] = []
        try:
            sock = _wired(conn)
            reader = TClient(self._service, conn.client._iprot)
            sock.write(bytes(self._frames.out))
            for api in self._apis:
                try:
                    out.append(reader._recv(api))
                except readable as e:
                    out.append(Failed(e))  # read whole: the next answer follows
        except BaseException:
            _discard(conn)
            raise
        finally:
            self._frames.out.clear()
            self._apis.clear()
        return out


class Scan:
    """One scanner of `read_scans`, in Thrift's terms: ``start``/``stop`` as
    ``TScan`` takes them (a reverse scan starts at its upper bound), ``page``
    rows per ``scannerGetList``; ``whole``: read on until a short page (forward
    only), else one page."""

    __slots__ = ("start", "stop", "page", "whole", "reverse")

    def __init__(self, start: bytes, stop: bytes, page: int, *, whole: bool = True,
                 reverse: bool = False) -> None:
        if whole and reverse:
            raise ValueError("a reverse scan reads one page")
        self.start, self.stop, self.page = start, stop, page
        self.whole, self.reverse = whole, reverse


def read_scans(conn: Any, idl: Any, table: bytes, scans: list[Scan], gets: list[list[bytes]],
               *, framed: bool, protocol: str) -> tuple[list[list[Any]], list[Any]]:
    """Every scanner of ``scans`` and a ``getRows`` of each key list of
    ``gets`` on happybase connection ``conn``, in two round trips (more only
    past `MAX_BURST` calls, for a list of keys after the first, or to go on
    with a scan whose page came back full).

    Burst one opens the scanners and reads the keys (the ``getRows`` last, so
    its long request is wholly sent before its long answer comes); burst two
    asks each scanner for a page and closes it. A page as long as asked means
    more rows: that scan alone goes on, a new scanner from just after its last
    row. Answers: each scan's ``TRowResult`` list, and the rows the keys found.
    A scanner that failed is still closed when it was opened; then the first
    error the server sent is raised (the caller's pool drops the connection)."""
    declared = (idl.IOError, idl.IllegalArgument)
    found: list[list[Any]] = [[] for _ in scans]
    rows: list[Any] = []
    todo = [(i, s.start) for i, s in enumerate(scans)]
    keys = list(gets)
    error: BaseException | None = None

    def burst() -> Burst:
        return Burst(conn, idl.Hbase, framed=framed, protocol=protocol, declared=declared)
    while todo or keys:
        now, todo = todo[:MAX_BURST // 2], todo[MAX_BURST // 2:]
        first = burst()
        for i, start in now:
            s = scans[i]
            first.add("scannerOpenWithScan", tableName=table, attributes={}, scan=idl.TScan(
                startRow=start or None, stopRow=s.stop or None, caching=min(s.page, 1000),
                reversed=True if s.reverse else None))
        if keys:
            first.add("getRows", tableName=table, rows=keys.pop(0), attributes={})
        answers = first.run()
        if len(answers) > len(now):
            got = answers[-1]
            if isinstance(got, Failed):
                error = error or got.error
            else:
                rows.extend(got)
        opened = []
        for (i, _), sid in zip(now, answers, strict=False):
            if isinstance(sid, Failed):
                error = error or sid.error
            else:
                opened.append((i, sid))
        second = burst()
        reading = error is None  # after a failure, only close what was opened
        for i, sid in opened:
            if reading:
                second.add("scannerGetList", id=sid, nbRows=scans[i].page)
            second.add("scannerClose", id=sid)  # closed whatever the page said
        replies = iter(second.run())
        for i, _ in opened:
            page = next(replies) if reading else None
            closed = next(replies)
            for got in (page, closed):
                if isinstance(got, Failed):
                    error = error or got.error
            if page is None or isinstance(page, Failed):
                continue
            found[i].extend(page)
            s = scans[i]
            # HBase's scannerGetList fills the page unless the scan is over
            if s.whole and page and len(page) >= s.page:
                todo.append((i, page[-1].row + b"\x00"))  # the very next key
        if error is not None:
            raise error
    return found, rows
