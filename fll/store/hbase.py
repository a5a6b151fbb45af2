"""The HBase backend, through an HBase Thrift server and happybase.

URL: ``hbase://host:9090/table`` (table default ``fll``) with optional
``?prefix=…`` (happybase table prefix, joined with ``_``),
``transport=buffered|framed``, ``protocol=binary|compact``, ``pool=4``
(connections), ``timeout=30`` (seconds per Thrift call), ``deadline=30``
(seconds of retrying before giving up), ``batch=1000`` (mutations per Thrift
``mutateRows``), ``page=500`` (rows per scan page), ``create=true|false``
(create the table and its column family ``c`` on first use) and
``compat=0.98`` (happybase compatibility level; reverse scans need ≥ 0.98).

Each call borrows a pooled connection for one short exchange: scans read one
bounded page with a fresh scanner and resume after the last row, so no scanner
stays open while a caller walks the generator, and a retried page starts
cleanly. Transient Thrift and socket errors are retried with jittered backoff
(happybase's pool replaces the broken connection); everything else becomes a
`StoreError` naming the host, port and table. HBase applies each row
atomically but not a batch of rows, so ``atomic_batches`` is False.

HBase reverse scans take the *upper* bound as the (inclusive) start row and
the *lower* bound as the (exclusive) stop row; this module turns the protocol's
``[start, stop)`` into that and trims the ends client-side.

This module must never put credentials in a message, nor hold a pooled
connection across a yield.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import StoreError
from .base import (Row, Span, SpanGroup, SpanRead, in_ranges, read_span_groups_by_rows,
                   read_spans_by_rows, redact,
                   register_backend, scan_bounds)

FAMILY = "c"
_COL = FAMILY.encode() + b":"
_EXTRA_HINT = "pip install 'fll[hbase]'"
# server-side exceptions (inside Thrift IOError) that go away by themselves
_TRANSIENT_SERVER = ("NotServingRegionException", "RegionTooBusyException",
                     "RegionMovedException", "ServerNotRunningYetException",
                     "CallQueueTooBigException", "RetriesExhaustedException",
                     "RegionOpeningException", "PleaseHoldException")
_T = TypeVar("_T")


IDL_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hbase.thrift")
MAX_ROW_LENGTH = 32767  # HBase refuses longer row keys (HConstants.MAX_ROW_LENGTH)
_FRAME_SETTING = "hbase.regionserver.thrift.framed.max_frame_size_in_mb"
# bytes a request spends besides its cells: method name, table, struct headers
_REQUEST_OVERHEAD = 4096
_CELL_OVERHEAD = 24
_log = logging.getLogger("fll.store")
_idl_lock = threading.Lock()
_idl_module: Any = None


def thrift_idl() -> Any:
    """fll's copy of HBase's Thrift 1 IDL (with ``checkAndPut``), loaded once."""
    global _idl_module
    with _idl_lock:
        if _idl_module is None:
            import thriftpy2
            _idl_module = thriftpy2.load(IDL_PATH, module_name="fll_hbase_thrift")
        return _idl_module


def _thrift_types() -> dict[str, Any]:
    """happybase's Thrift exception classes (and fll's IDL's), imported only when needed."""
    try:
        import happybase  # noqa: F401  (loads the Hbase_thrift module)
        import Hbase_thrift
        from thriftpy2.thrift import TApplicationException, TException
        from thriftpy2.transport import TTransportException
    except ImportError as e:
        raise StoreError(f"the hbase:// backend needs happybase ({e}); {_EXTRA_HINT}") from None
    idl = thrift_idl()
    return {"IOError": (Hbase_thrift.IOError, idl.IOError),
            "IllegalArgument": (Hbase_thrift.IllegalArgument, idl.IllegalArgument),
            "AlreadyExists": (Hbase_thrift.AlreadyExists, idl.AlreadyExists),
            "TException": TException, "TApplicationException": TApplicationException,
            "TTransportException": TTransportException, "idl": idl}


class _Clock:
    """Millisecond timestamps for mutations, shared by every table in the process.

    HBase hides a put under a delete marker of the same or a later timestamp,
    so a write right after a delete in the same millisecond would vanish. Every
    mutation here carries an explicit timestamp, and a write waits for the
    millisecond after the latest delete this process sent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_delete = 0

    def for_delete(self) -> int:
        with self._lock:
            now = int(time.time() * 1000)
            self._last_delete = max(self._last_delete, now)
            return now

    def for_put(self) -> int:
        with self._lock:
            while True:
                now = int(time.time() * 1000)
                if now > self._last_delete:
                    return now
                time.sleep(0.0005)


_clock = _Clock()


class HBaseTable:
    """A `Table` in one HBase table, one column family ``c``."""

    atomic_batches = False
    max_key_bytes = MAX_ROW_LENGTH

    def __init__(self, host: str, port: int, table: str, *, prefix: str | None = None,
                 transport: str = "buffered", protocol: str = "binary", pool_size: int = 4,
                 timeout: float = 30.0, deadline: float = 30.0, batch_rows: int = 1000,
                 page_rows: int = 500, create: bool = True, compat: str = "0.98",
                 frame_mb: float = 2.0, url: str | None = None, pool: Any = None):
        self._x = _thrift_types()
        self.host, self.port, self.table_name = host, port, table
        self.prefix = prefix
        self.transport, self.protocol = transport, protocol
        self.timeout = timeout
        self.deadline = deadline
        self.batch_rows = batch_rows
        self.page_rows = page_rows
        self.create = create
        self.frame_bytes = int(frame_mb * 1024 * 1024)
        self.url = url or f"hbase://{host}:{port}/{table}"
        full = f"{prefix}_{table}" if prefix else table
        self._where = f"hbase table {full!r} at {host}:{port}"
        self._ensured = False
        self._ensure_lock = threading.Lock()
        self._reached = False  # has any call got an answer from the server?
        self._warned = False
        if pool is None:
            import happybase

            def make_pool():
                return happybase.ConnectionPool(
                    pool_size, host=host, port=port, timeout=int(timeout * 1000),
                    table_prefix=prefix or None, transport=transport, protocol=protocol,
                    compat=compat)
            # the pool opens its first connection at once: retry that like any call
            pool = self._retry("connect", make_pool, answers=False)
        self._pool = pool
        if create:
            self._ensure_table()

    # -- errors and retries ----------------------------------------------------
    def _error(self, what: str, e: BaseException | str) -> StoreError:
        return StoreError(f"{self._where}: {what} failed: "
                          f"{e if isinstance(e, str) else _brief(e)}")

    def _transient(self, e: BaseException) -> bool:
        if isinstance(e, socket.gaierror) or isinstance(e.__cause__ or e.__context__,
                                                        socket.gaierror):
            return False  # an unresolvable host name will not resolve on a retry
        if isinstance(e, (self._x["TTransportException"], socket.timeout, ConnectionError,
                          EOFError, BrokenPipeError)):
            return True
        if isinstance(e, self._x["IOError"]):
            return any(name in _brief(e) for name in _TRANSIENT_SERVER)
        if type(e).__name__ == "NoConnectionsAvailable":
            return True
        return isinstance(e, OSError) and not isinstance(e, FileNotFoundError)

    def _mismatch_hint(self) -> str:
        return (f"; the server closed or never answered the connection: check that "
                f"transport={self.transport} and protocol={self.protocol} match the Thrift "
                f"server (hbase.regionserver.thrift.framed, hbase.regionserver.thrift.compact)")

    def _retry(self, what: str, fn: Callable[[], _T], *, answers: bool = True) -> _T:
        give_up = time.monotonic() + self.deadline
        delay = 0.05
        recreated = False
        unanswered = 0
        while True:
            try:
                result = fn()
                # opening a socket proves nothing about transport and protocol
                self._reached = self._reached or answers
                return result
            except StoreError:
                raise
            except Exception as e:
                if isinstance(e, self._x["IOError"]) and _table_missing(_brief(e)) and \
                        self.create and not recreated:
                    recreated = True
                    self._ensured = False
                    self._ensure_table()
                    continue
                if not self._transient(e):
                    raise self._error(what, e) from None
                if not self._reached and _refused(e):
                    # nothing listens there: waiting for the deadline would only hide that
                    raise self._error(what, f"connection refused: {_brief(e)}") from None
                if not self._reached and _unanswered(e):
                    # the port accepts connections but never answers a call: almost
                    # always a transport or protocol the server does not speak
                    unanswered += 1
                    if unanswered >= 3:
                        raise self._error(what, f"{_brief(e)}{self._mismatch_hint()}") from None
                if time.monotonic() + delay > give_up:
                    hint = self._mismatch_hint() if not self._reached else ""
                    raise self._error(what, f"gave up after {self.deadline:g}s of retries: "
                                      f"{_brief(e)}{hint}") from None
                if not self._warned:
                    self._warned = True
                    _log.warning("%s: %s failed (%s); retrying for up to %gs …", self._where,
                                 what, _brief(e), self.deadline)
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)

    def _call(self, what: str, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(table)`` on a pooled connection, with retries."""
        def once() -> _T:
            with self._pool.connection(timeout=self.timeout) as conn:
                return fn(conn.table(self.table_name))
        return self._retry(what, once)

    def _ensure_table(self) -> None:
        with self._ensure_lock:
            if self._ensured:
                return

            def ensure() -> None:
                with self._pool.connection(timeout=self.timeout) as conn:
                    if self.table_name.encode() in conn.tables():
                        return
                    try:
                        conn.create_table(self.table_name, {FAMILY: {"max_versions": 1}})
                    except self._x["AlreadyExists"]:
                        pass  # another client created it first

            self._retry("creating the table and column family", ensure)
            self._ensured = True

    # -- writes ----------------------------------------------------------------
    def _check_key(self, key: bytes) -> None:
        if not key:
            raise StoreError(f"{self._where}: HBase row keys cannot be empty")
        if len(key) > MAX_ROW_LENGTH:
            raise StoreError(f"{self._where}: a row key of {len(key):,} bytes is longer than "
                             f"HBase's limit of {MAX_ROW_LENGTH:,} bytes (key starts "
                             f"{key[:40]!r}); nothing was written")

    def _chunks(self, rows: list[tuple[bytes, int]]) -> list[list[int]]:
        """Indexes of ``rows`` (key, estimated bytes) in batches that fit both the
        mutation count and the server's largest request."""
        budget = self.frame_bytes - _REQUEST_OVERHEAD
        out: list[list[int]] = []
        current: list[int] = []
        size = 0
        for i, (key, n) in enumerate(rows):
            if n > budget and self.transport == "framed":
                raise StoreError(
                    f"{self._where}: row {key[:40]!r} needs about {n:,} bytes in one Thrift "
                    f"request, more than the server's framed limit of {self.frame_bytes:,} "
                    f"bytes ({_FRAME_SETTING}); raise that setting and the URL's frame= "
                    f"parameter together; nothing was written")
            if current and (len(current) >= self.batch_rows or size + n > budget):
                out.append(current)
                current, size = [], 0
            current.append(i)
            size += n
        if current:
            out.append(current)
        return out

    def _mutate(self, what: str, rows: list[tuple[bytes, list[Any]]], stamp: Callable[[], int]
                ) -> None:
        """Send ``(key, [Mutation])`` rows as byte-capped ``mutateRowsTs`` calls,
        each chunk retried whole (re-sending the same cells at the same
        timestamp is idempotent)."""
        idl = self._x["idl"]
        sizes = [(k, len(k) + _CELL_OVERHEAD + sum(len(m.column) + len(m.value or b"") +
                                                   _CELL_OVERHEAD for m in ms))
                 for k, ms in rows]
        for chunk in self._chunks(sizes):
            batch = [idl.BatchMutation(row=rows[i][0], mutations=rows[i][1]) for i in chunk]
            ts = stamp()

            def send(table: Any, batch: list[Any] = batch, ts: int = ts) -> None:
                self._client(table).mutateRowsTs(table.name, batch, ts, {})
            self._call(what, send)

    def _client(self, table: Any) -> Any:
        """A client of fll's IDL on the same connection as happybase's client."""
        from thriftpy2.thrift import TClient
        proto = table.connection.client._iprot
        return TClient(self._x["idl"].Hbase, proto, table.connection.client._oprot)

    def put(self, rows: Mapping[bytes, Row]) -> None:
        idl = self._x["idl"]
        cells = [(bytes(k), [idl.Mutation(column=_COL + c.encode("utf-8"), value=bytes(v))
                             for c, v in cols.items()])
                 for k, cols in rows.items() if cols]
        for key, _ in cells:
            self._check_key(key)
        if cells:
            self._mutate("write", cells, _clock.for_put)

    def delete(self, rows: list[bytes]) -> None:
        keys = [bytes(k) for k in dict.fromkeys(rows) if k]
        if not keys:
            return
        idl = self._x["idl"]
        # a whole-family delete marker at an explicit timestamp: writes after it
        # (this process waits for the next millisecond) stay visible
        self._mutate("delete", [(k, [idl.Mutation(isDelete=True, column=FAMILY.encode())])
                                for k in keys], _clock.for_delete)

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Mapping[str, bytes]) -> bool:
        """HBase's Thrift 1 ``checkAndPut``: put ``values`` if ``column`` holds
        ``expected`` (None: absent). That call guards one cell; with several
        values the guarded cell is ``column``'s new value (else the first one)
        and the others follow in one ``mutateRow`` once the check has won."""
        key = bytes(row)
        self._check_key(key)
        if not values:
            raise StoreError(f"{self._where}: check and put needs at least one value")
        idl = self._x["idl"]
        data = {_COL + c.encode("utf-8"): bytes(v) for c, v in values.items()}
        guard_col = _COL + column.encode("utf-8")
        first = guard_col if guard_col in data else next(iter(data))
        guarded = idl.Mutation(column=first, value=data[first])
        rest = [idl.Mutation(column=c, value=v) for c, v in data.items() if c != first]
        _clock.for_put()  # never in the same millisecond as a delete we sent

        def cas(table) -> bool:
            return bool(self._client(table).checkAndPut(
                table.name, key, guard_col, None if expected is None else bytes(expected),
                guarded, {}))
        won = self._call("check and put", cas)
        if won and rest:
            self._mutate("write", [(key, rest)], _clock.for_put)
        return won

    # -- reads -----------------------------------------------------------------
    def get(self, row: bytes) -> dict[str, bytes] | None:
        if not row:
            return None
        found = _columns(self._call("read", lambda t: t.row(bytes(row))))
        return found or None

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        """Thrift ``getRows``: every row in ONE call, split only where the
        request would pass the server's frame limit (a field question's cover
        is a few hundred short keys, far below it)."""
        keys = list(dict.fromkeys(bytes(r) for r in rows if r))
        out: dict[bytes, dict[str, bytes]] = {}
        budget = self.frame_bytes - _REQUEST_OVERHEAD
        chunk: list[bytes] = []
        size = 0
        chunks: list[list[bytes]] = []
        for key in keys:
            if chunk and size + len(key) + 8 > budget:
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(key)
            size += len(key) + 8
        if chunk:
            chunks.append(chunk)
        for part in chunks:
            def read(table: Any, part: list[bytes] = part) -> list:
                return self._client(table).getRows(table.name, part, {})
            for r in self._call("read", read):
                cols = _cells(r.columns)
                if cols:
                    out[r.row] = cols
        return out

    def delete_columns(self, cells: Mapping[bytes, Any]) -> None:
        """Remove single columns: a column delete marker per cell (``mutateRowsTs``)."""
        idl = self._x["idl"]
        rows = [(bytes(k), [idl.Mutation(isDelete=True, column=_COL + c.encode("utf-8"))
                            for c in cols]) for k, cols in cells.items() if k and cols]
        if rows:
            self._mutate("delete", rows, _clock.for_delete)

    def scan(self, start: bytes = b"", stop: bytes = b"", *, limit: int | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        bounds = scan_bounds(start, stop, limit)
        if bounds is None:
            return
        start, stop = bounds
        emitted = 0
        cursor = b""  # forward: next start row; reverse: exclusive upper bound
        while True:
            want = self.page_rows if limit is None else min(self.page_rows, limit - emitted)
            if reverse:
                page, done = self._reverse_page(start, cursor or stop, want)
            else:
                page, done = self._forward_page(cursor or start, stop, want)
            for key, cols in page:
                yield key, cols
            emitted += len(page)
            if done or not page or (limit is not None and emitted >= limit):
                return
            # b"\x00" appended is the very next key in byte order
            cursor = page[-1][0] if reverse else page[-1][0] + b"\x00"

    def read_spans(self, spans: Sequence[Span], names: Sequence[Span] = (),
                   values: Sequence[Span] = ()) -> SpanRead:
        """One ``getRows`` of every key the spans give, a scanner per span
        without keys (see `scan_ranges`: each costs three calls here)."""
        return read_spans_by_rows(self, spans, names, values, by_keys=True)

    def read_span_groups(self, groups: Sequence[SpanGroup]) -> list[SpanRead]:
        """One ``getRows`` of every key the groups give, a scanner per keyless span."""
        return read_span_groups_by_rows(self, groups, by_keys=True)

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]
                    ) -> list[tuple[bytes, dict[str, bytes]]]:
        """Several ranges: one scanner per run of overlapping or touching ranges,
        three Thrift calls each (open, one ``scannerGetList`` per page, close).

        HBase reads several ranges in one scanner only through
        ``MultiRowRangeFilter``, which the filter language of Thrift 1
        (``ParseFilter``) does not register, and a ``RowFilter`` OR-list over the
        covering span would make the region server read every row between the
        ranges (all the history between two bucket levels). So the calls grow
        with the ranges, not with the rows: happybase's own scan costs a fourth
        call per range (an empty ``scannerGetList`` to learn that the scanner
        is done), which a short page already says. Rows come range by range,
        each in key order, a row in two overlapping ranges twice."""
        wanted = [b for b in (scan_bounds(lo, hi, None) for lo, hi in ranges) if b is not None]
        if not wanted:
            return []
        merged: list[list[bytes]] = []
        for lo, hi in sorted(wanted):
            last = merged[-1] if merged else None
            if last is not None and (not last[1] or lo <= last[1]):
                if last[1] and (not hi or hi > last[1]):
                    last[1] = hi
                continue
            merged.append([lo, hi])
        rows: list[tuple[bytes, dict[str, bytes]]] = []
        for lo, hi in merged:
            rows.extend(self._one_scanner(lo, hi))
        if len(merged) == len(wanted) and wanted == sorted(wanted):
            return rows
        return in_ranges(rows, wanted)

    def _one_scanner(self, lo: bytes, hi: bytes) -> list[tuple[bytes, dict[str, bytes]]]:
        """Every row of ``[lo, hi)`` through one scanner on one pooled connection:
        open, a page per ``scannerGetList`` until one comes back short, close."""
        idl = self._x["idl"]
        want = self.page_rows

        def read(table: Any) -> list[tuple[bytes, dict[str, bytes]]]:
            client = self._client(table)
            sid = client.scannerOpenWithScan(
                table.name, idl.TScan(startRow=lo or None, stopRow=hi or None, caching=want), {})
            out: list[tuple[bytes, dict[str, bytes]]] = []
            try:
                while True:
                    page = client.scannerGetList(sid, want)
                    out.extend((r.row, _cells(r.columns)) for r in page)
                    # HBase's scannerGetList fills the page unless the scan is over
                    if len(page) < want:
                        return out
            finally:
                client.scannerClose(sid)
        return self._call("scan", read)

    def _forward_page(self, lo: bytes, hi: bytes, want: int):
        raw = self._call("scan", lambda t: list(t.scan(
            row_start=lo or None, row_stop=hi or None, limit=want,
            batch_size=min(want, 1000))))
        page = [(k, _columns(d)) for k, d in raw]
        return page, len(raw) < want

    def _reverse_page(self, lo: bytes, hi: bytes, want: int):
        # HBase reverse: row_start is an inclusive upper bound, so ask for one
        # row more and drop ``hi`` itself; row_stop is an exclusive lower bound
        # and ``lo`` has no finite predecessor, so stop just below it and trim
        below = _below(lo)
        raw = self._call("scan", lambda t: list(t.scan(
            row_start=hi or None, row_stop=below, limit=want + 1,
            batch_size=min(want + 1, 1000), reverse=True)))
        done = len(raw) < want + 1
        page = []
        for key, data in raw:
            if hi and key >= hi:
                continue
            if key < lo:
                done = True
                break
            page.append((key, _columns(data)))
        return page[:want], done

    def close(self) -> None:
        # happybase pools have no close(); close each idle connection we can reach
        queue = getattr(self._pool, "_queue", None)
        if queue is None:
            return
        while True:
            try:
                conn = queue.get_nowait()
            except Exception:
                break
            try:
                conn.close()
            except Exception:
                pass


def _below(key: bytes) -> bytes | None:
    """A key strictly below ``key`` and close to it (None: no lower bound)."""
    if not key:
        return None
    if key[-1] == 0:
        return key[:-1] or None
    return key[:-1] + bytes([key[-1] - 1])


def _table_missing(text: str) -> bool:
    # HBase 1 says TableNotFoundException; HBase 2's batched calls say
    # "RetriesExhaustedWithDetailsException: … Table 'x' was not found"
    return "TableNotFound" in text or "was not found" in text


def _refused(e: BaseException) -> bool:
    seen: BaseException | None = e
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _unanswered(e: BaseException) -> bool:
    text = _brief(e)
    return ("read 0 bytes" in text or "END_OF_FILE" in text or "connection closed" in text
            or isinstance(e, (socket.timeout, EOFError, ConnectionResetError)))


def _columns(data: Mapping[bytes, bytes]) -> dict[str, bytes]:
    return {k[len(_COL):].decode("utf-8"): v for k, v in data.items() if k.startswith(_COL)}


def _cells(columns: Mapping[bytes, Any] | None) -> dict[str, bytes]:
    """A Thrift ``TRowResult.columns`` map as the protocol's ``{column: value}``."""
    return {k[len(_COL):].decode("utf-8"): c.value or b""
            for k, c in (columns or {}).items() if k.startswith(_COL)}


def _brief(e: BaseException) -> str:
    message = getattr(e, "message", None)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    text = message or str(e) or ""
    text = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def parse_url(url: str) -> dict[str, Any]:
    """The `HBaseTable` keyword arguments an ``hbase://`` URL names, checked, without
    connecting."""
    parts = urlsplit(url)
    try:
        host, port = parts.hostname, parts.port or 9090
    except ValueError:
        raise StoreError(f"hbase URL has a bad port: {redact(url)!r}") from None
    if not host:
        raise StoreError(f"hbase URL must look like hbase://host:9090/table, got {redact(url)!r}")
    table = unquote(parts.path.strip("/")) or "fll"
    if "/" in table:
        raise StoreError(f"hbase URL names one table after the host, got {table!r} in "
                         f"{redact(url)!r}")
    params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    known = {"prefix", "transport", "protocol", "pool", "timeout", "deadline", "batch", "page",
             "create", "compat", "frame"}
    unknown = set(params) - known
    if unknown:
        raise StoreError(f"unknown hbase URL parameter(s) {', '.join(sorted(unknown))} in "
                         f"{redact(url)!r}; known: {', '.join(sorted(known))}")
    choices = {"transport": ("buffered", "framed"), "protocol": ("binary", "compact"),
               "create": ("true", "false", "1", "0", "yes", "no")}
    for name, allowed in choices.items():
        if name in params and params[name].lower() not in allowed:
            raise StoreError(f"hbase URL parameter {name} must be one of {', '.join(allowed)}, "
                             f"got {params[name]!r} in {redact(url)!r}")

    def number(name: str, default: float, kind=float):
        try:
            value = kind(params.get(name, default))
        except ValueError:
            raise StoreError(f"hbase URL parameter {name} must be a number, "
                             f"in {redact(url)!r}") from None
        if value <= 0:
            raise StoreError(f"hbase URL parameter {name} must be positive, in {redact(url)!r}")
        return value

    return dict(host=host, port=port, table=table, prefix=params.get("prefix") or None,
                transport=params.get("transport", "buffered").lower(),
                protocol=params.get("protocol", "binary").lower(),
                pool_size=number("pool", 4, int), timeout=number("timeout", 30.0),
                deadline=number("deadline", 30.0), batch_rows=number("batch", 1000, int),
                page_rows=number("page", 500, int),
                create=params.get("create", "true").lower() in ("true", "1", "yes"),
                compat=params.get("compat", "0.98"), frame_mb=number("frame", 2.0), url=url)


def _open(url: str) -> HBaseTable:
    return HBaseTable(**parse_url(url))


register_backend("hbase", _open, extra="hbase")
