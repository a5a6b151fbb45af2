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

import random
import socket
import threading
import time
from operator import methodcaller
from typing import Any, Callable, Iterator, Mapping, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import StoreError
from .base import Row, redact, register_backend, scan_bounds

FAMILY = "c"
_COL = FAMILY.encode() + b":"
_EXTRA_HINT = "pip install 'fll[hbase]'"
# server-side exceptions (inside Thrift IOError) that go away by themselves
_TRANSIENT_SERVER = ("NotServingRegionException", "RegionTooBusyException",
                     "RegionMovedException", "ServerNotRunningYetException",
                     "CallQueueTooBigException", "RetriesExhaustedException",
                     "RegionOpeningException", "PleaseHoldException")
_T = TypeVar("_T")


def _thrift_types() -> dict[str, Any]:
    """happybase's Thrift exception classes, imported only when needed."""
    try:
        import happybase  # noqa: F401  (loads the Hbase_thrift module)
        import Hbase_thrift
        from thriftpy2.thrift import TException
        from thriftpy2.transport import TTransportException
    except ImportError as e:
        raise StoreError(f"the hbase:// backend needs happybase ({e}); {_EXTRA_HINT}") from None
    return {"IOError": Hbase_thrift.IOError, "IllegalArgument": Hbase_thrift.IllegalArgument,
            "AlreadyExists": Hbase_thrift.AlreadyExists, "TException": TException,
            "TTransportException": TTransportException}


class HBaseTable:
    """A `Table` in one HBase table, one column family ``c``."""

    atomic_batches = False

    def __init__(self, host: str, port: int, table: str, *, prefix: str | None = None,
                 transport: str = "buffered", protocol: str = "binary", pool_size: int = 4,
                 timeout: float = 30.0, deadline: float = 30.0, batch_rows: int = 1000,
                 page_rows: int = 500, create: bool = True, compat: str = "0.98",
                 url: str | None = None, pool: Any = None):
        self._x = _thrift_types()
        self.host, self.port, self.table_name = host, port, table
        self.prefix = prefix
        self.timeout = timeout
        self.deadline = deadline
        self.batch_rows = batch_rows
        self.page_rows = page_rows
        self.create = create
        self.url = url or f"hbase://{host}:{port}/{table}"
        full = f"{prefix}_{table}" if prefix else table
        self._where = f"hbase table {full!r} at {host}:{port}"
        self._ensured = False
        self._ensure_lock = threading.Lock()
        if pool is None:
            import happybase

            def make_pool():
                return happybase.ConnectionPool(
                    pool_size, host=host, port=port, timeout=int(timeout * 1000),
                    table_prefix=prefix or None, transport=transport, protocol=protocol,
                    compat=compat)
            # the pool opens its first connection at once: retry that like any call
            pool = self._retry("connect", make_pool)
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

    def _retry(self, what: str, fn: Callable[[], _T]) -> _T:
        give_up = time.monotonic() + self.deadline
        delay = 0.05
        recreated = False
        while True:
            try:
                return fn()
            except StoreError:
                raise
            except Exception as e:
                if isinstance(e, self._x["IOError"]) and "TableNotFound" in _brief(e) and \
                        self.create and not recreated:
                    recreated = True
                    self._ensured = False
                    self._ensure_table()
                    continue
                if not self._transient(e):
                    raise self._error(what, e) from None
                if time.monotonic() + delay > give_up:
                    raise self._error(what, f"gave up after {self.deadline:g}s of retries: "
                                      f"{_brief(e)}") from None
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
    def put(self, rows: Mapping[bytes, Row]) -> None:
        cells = [(bytes(k), {_COL + c.encode("utf-8"): bytes(v) for c, v in cols.items()})
                 for k, cols in rows.items() if cols]
        for key, _ in cells:
            if not key:
                raise StoreError(f"{self._where}: HBase row keys cannot be empty")
        if not cells:
            return

        def write(table) -> None:
            # a whole retry re-sends every row: puts of the same values are idempotent
            batch = table.batch(batch_size=self.batch_rows)
            for key, data in cells:
                batch.put(key, data)
            batch.send()
        self._call("write", write)

    def delete(self, rows: list[bytes]) -> None:
        keys = [bytes(k) for k in dict.fromkeys(rows) if k]
        if not keys:
            return

        def remove(table) -> None:
            batch = table.batch(batch_size=self.batch_rows)
            for key in keys:
                batch.delete(key)
            batch.send()
        self._call("delete", remove)

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Mapping[str, bytes]) -> bool:
        """HBase's ``checkAndPut``: put ``values`` if ``column`` holds ``expected``
        (None: absent). happybase's bundled Thrift IDL has no checkAndPut, so
        this needs a connection whose table offers ``check_and_put`` (HBase's
        own IDL); without one it is a `StoreError`, never an unguarded put."""
        key = bytes(row)
        if not key:
            raise StoreError(f"{self._where}: HBase row keys cannot be empty")
        data = {_COL + c.encode("utf-8"): bytes(v) for c, v in values.items()}

        def cas(table) -> bool:
            fn = getattr(table, "check_and_put", None)
            if fn is None:
                raise StoreError(f"{self._where}: this Thrift client has no checkAndPut "
                                 f"(happybase's bundled IDL lacks it)")
            return bool(fn(key, _COL + column.encode("utf-8"),
                           None if expected is None else bytes(expected), data))
        return self._call("check and put", cas)

    # -- reads -----------------------------------------------------------------
    def get(self, row: bytes) -> dict[str, bytes] | None:
        if not row:
            return None
        found = _columns(self._call("read", lambda t: t.row(bytes(row))))
        return found or None

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        keys = list(dict.fromkeys(bytes(r) for r in rows if r))
        out: dict[bytes, dict[str, bytes]] = {}
        for i in range(0, len(keys), self.page_rows):
            chunk = keys[i:i + self.page_rows]
            for key, data in self._call("read", methodcaller("rows", chunk)):
                cols = _columns(data)
                if cols:
                    out[key] = cols
        return out

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


def _columns(data: Mapping[bytes, bytes]) -> dict[str, bytes]:
    return {k[len(_COL):].decode("utf-8"): v for k, v in data.items() if k.startswith(_COL)}


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
             "create", "compat"}
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
                compat=params.get("compat", "0.98"), url=url)


def _open(url: str) -> HBaseTable:
    return HBaseTable(**parse_url(url))


register_backend("hbase", _open, extra="hbase")
