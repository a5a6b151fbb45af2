"""Connections to an HBase Thrift server for `fll.store.hbase`: fll's copy of
HBase's Thrift IDL, happybase's connection pool, the table and its column
family made sure of, and every call retried with jittered backoff while its
error is transient, else a `StoreError` naming the host, port and table.

This module must never put credentials in a message.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from typing import Any, Callable, TypeVar

from ..errors import StoreError

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


class HBaseConnection:
    """The pooled connections to one HBase table, and calls on them with retries."""

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

    def _client(self, table: Any) -> Any:
        """A client of fll's IDL on the same connection as happybase's client."""
        from thriftpy2.thrift import TClient
        proto = table.connection.client._iprot
        return TClient(self._x["idl"].Hbase, proto, table.connection.client._oprot)

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


def _brief(e: BaseException) -> str:
    message = getattr(e, "message", None)
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    text = message or str(e) or ""
    text = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
