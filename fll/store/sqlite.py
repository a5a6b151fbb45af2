"""The embedded default backend: one SQLite file, WAL mode.

One ``WITHOUT ROWID`` table clustered on ``(row, col)``, so a row range is a
contiguous B-tree range. Several processes may write at once: every write is
one ``BEGIN IMMEDIATE`` transaction (a batch is all or nothing), waits on a
busy timeout and retries with backoff when the lock is still held. Each
thread (and each process after a fork) gets its own connection. Scans page
through the table in short statements, so no read transaction stays open
while a caller walks a generator. This module must never hold a lock across
a yield.

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``, with
optional ``?timeout=30&synchronous=NORMAL|FULL``.
"""
from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from typing import Callable, Iterator, Mapping, TypeVar
from urllib.parse import parse_qs

from ..errors import StoreError
from .base import Row, redact, register_backend, scan_bounds

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    row BLOB NOT NULL,
    col TEXT NOT NULL,
    val BLOB NOT NULL,
    PRIMARY KEY (row, col)
) WITHOUT ROWID
"""
_PAGE = 2048
_RETRIES = 8
_R = TypeVar("_R")


class SQLiteTable:
    """A `Table` in one SQLite file."""

    def __init__(self, path: str, *, timeout: float = 30.0, synchronous: str = "NORMAL",
                 url: str | None = None):
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"sqlite synchronous must be OFF, NORMAL, FULL or EXTRA, "
                             f"got {synchronous!r}")
        self.path = os.path.abspath(path)
        self.url = url or f"sqlite:///{self.path}"
        self.timeout = timeout
        self.synchronous = synchronous.upper()
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        parent = os.path.dirname(self.path)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the store directory {parent}: {e.strerror}") from None
        self._retry(lambda c: c.execute(_SCHEMA), write=False)

    # -- connections ---------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        pid = getattr(self._local, "pid", None)
        if conn is None or pid != os.getpid():
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
            except sqlite3.Error as e:
                if conn is not None:  # half-opened: do not leak its file handle
                    conn.close()
                raise self._error("open", e) from None
            self._local.conn = conn
            self._local.pid = os.getpid()
            with self._lock:
                self._all.append(conn)
        return conn

    def _error(self, what: str, e: BaseException) -> StoreError:
        text = str(e)
        hint = self._access_hint() if ("readonly" in text or "unable to open" in text) else ""
        return StoreError(f"sqlite store {self.path}: {what} failed: {text}{hint}")

    def _access_hint(self) -> str:
        """Why SQLite could not write, when the file system can tell."""
        parent = os.path.dirname(self.path)
        try:
            if os.statvfs(parent).f_flag & os.ST_RDONLY:
                return " (the file system holding the store is mounted read-only)"
        except OSError:
            return ""
        for path in (self.path, parent):
            if os.path.exists(path) and not os.access(path, os.W_OK):
                return f" ({path} is not writable; a WAL store also needs to create files " \
                       f"beside it)"
        return ""

    def _drop_conn(self) -> None:
        """Forget this thread's connection. SQLite keeps a connection it opened
        read-only read-only for good, so after a permission fault the next call
        must reopen the file to see it writable again."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                if conn in self._all:
                    self._all.remove(conn)
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def _retry(self, fn, *, write: bool):
        if getattr(self._local, "txn", False):
            # inside `atomic`: the caller's transaction is open on this thread's
            # connection; a failure unwinds to `atomic`, which retries it whole
            return fn(self._local.conn)
        delay = 0.01
        for attempt in range(_RETRIES):
            conn = self._conn()
            try:
                if not write:
                    return fn(conn)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                    return result
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as e:
                readonly = "readonly" in str(e)
                if readonly:  # reopen once: the file may have become writable since
                    self._drop_conn()
                locked = isinstance(e, sqlite3.OperationalError) and (
                    "locked" in str(e) or "busy" in str(e))
                if not (locked or (readonly and attempt == 0)) or attempt == _RETRIES - 1:
                    raise self._error("write" if write else "read", e) from None
                if readonly:
                    continue
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 1.0)
        raise StoreError(f"sqlite store {self.path}: gave up after {_RETRIES} retries")

    # -- Table protocol ------------------------------------------------------
    def put(self, rows: Mapping[bytes, Row]) -> None:
        cells = [(bytes(r), c, bytes(v)) for r, cols in rows.items() for c, v in cols.items()]
        if not cells:
            return
        self._retry(lambda c: c.executemany(
            "INSERT OR REPLACE INTO cells (row, col, val) VALUES (?, ?, ?)", cells), write=True)

    def get(self, row: bytes) -> dict[str, bytes] | None:
        found = self._retry(lambda c: c.execute(
            "SELECT col, val FROM cells WHERE row = ?", (bytes(row),)).fetchall(), write=False)
        return {col: val for col, val in found} if found else None

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        out: dict[bytes, dict[str, bytes]] = {}
        keys = [bytes(r) for r in rows]
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            found = self._retry(lambda c, chunk=chunk, marks=marks: c.execute(
                f"SELECT row, col, val FROM cells WHERE row IN ({marks})", chunk).fetchall(),
                write=False)
            for r, col, val in found:
                out.setdefault(r, {})[col] = val
        return out

    def scan(self, start: bytes = b"", stop: bytes = b"", *, limit: int | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        bounds = scan_bounds(start, stop, limit)
        if bounds is None:
            return
        start, stop = bounds
        emitted = 0
        current: bytes | None = None
        cols: dict[str, bytes] = {}
        cursor: tuple[bytes, str] | None = None
        # a short first page for limited scans: a skip-scan seek wants one row,
        # not a full page of cells
        size = min(_PAGE, limit * 4) if limit is not None else _PAGE
        while True:
            page = self._page(start, stop, reverse, cursor, size)
            for r, col, val in page:
                if r != current:
                    if current is not None:
                        yield current, cols
                        emitted += 1
                        if limit is not None and emitted >= limit:
                            return
                    current, cols = r, {}
                cols[col] = val
            if len(page) < size:
                break
            size = _PAGE
            cursor = (page[-1][0], page[-1][1])
        if current is not None:
            yield current, cols

    def _page(self, start: bytes, stop: bytes, reverse: bool,
              cursor: tuple[bytes, str] | None, size: int) -> list[tuple[bytes, str, bytes]]:
        where = ["row >= ?"]
        args: list[object] = [start]
        if stop:
            where.append("row < ?")
            args.append(stop)
        if cursor is not None:
            # seek from the cursor's row, not the range start: the row-value
            # comparison alone is not used by the index, and a long scan would
            # re-read everything before the cursor on every page
            if reverse:
                where.append("row <= ?")
                args.append(cursor[0])
                where.append("(row, col) < (?, ?)")
            else:
                where[0] = "row >= ?"
                args[0] = max(start, cursor[0])
                where.append("(row, col) > (?, ?)")
            args.extend(cursor)
        order = "row DESC, col DESC" if reverse else "row, col"
        sql = (f"SELECT row, col, val FROM cells WHERE {' AND '.join(where)} "
               f"ORDER BY {order} LIMIT {size}")
        return self._retry(lambda c: c.execute(sql, args).fetchall(), write=False)

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Mapping[str, bytes]) -> bool:
        key = bytes(row)
        cells = [(key, c, bytes(v)) for c, v in values.items()]

        def cas(conn: sqlite3.Connection) -> bool:
            found = conn.execute("SELECT val FROM cells WHERE row = ? AND col = ?",
                                 (key, column)).fetchone()
            current = None if found is None else bytes(found[0])
            if current != (None if expected is None else bytes(expected)):
                return False
            conn.executemany("INSERT OR REPLACE INTO cells (row, col, val) VALUES (?, ?, ?)",
                             cells)
            return True
        return bool(self._retry(cas, write=True))

    def atomic(self, fn: Callable[["SQLiteTable"], _R]) -> _R:
        """Run ``fn(self)`` inside one ``BEGIN IMMEDIATE`` transaction: every read
        and write it makes on this thread sees and commits one state, serialized
        with every other writer of the file (other processes included). Retried
        whole while the lock is busy, so ``fn`` must have no other side effects.
        Nested calls join the open transaction."""
        if getattr(self._local, "txn", False):
            return fn(self)

        def body(conn: sqlite3.Connection) -> _R:
            self._local.txn = True
            try:
                return fn(self)
            finally:
                self._local.txn = False
        return self._retry(body, write=True)

    def delete(self, rows: list[bytes]) -> None:
        keys = [(bytes(r),) for r in rows]
        if keys:
            self._retry(lambda c: c.executemany("DELETE FROM cells WHERE row = ?", keys),
                        write=True)

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += os.path.getsize(self.path + suffix)
            except OSError:
                pass
        return total

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()


def _open(url: str) -> SQLiteTable:
    rest = url.split("://", 1)[1]
    if not rest.startswith("/"):
        raise StoreError(f"sqlite URL must look like sqlite:///path/to/fll.db, got {redact(url)!r}")
    path, _, query = rest[1:].partition("?")
    if not path:
        raise StoreError(f"sqlite URL {redact(url)!r} names no file")
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    unknown = set(params) - {"timeout", "synchronous"}
    if unknown:
        raise StoreError(f"unknown sqlite URL parameter(s) {', '.join(sorted(unknown))} in "
                         f"{redact(url)!r}; known: timeout, synchronous")
    try:
        timeout = float(params.get("timeout", 30))
    except ValueError:
        raise StoreError(f"sqlite URL parameter timeout must be a number, in {redact(url)!r}") from None
    return SQLiteTable(path, timeout=timeout, synchronous=params.get("synchronous", "NORMAL"),
                       url=url)


register_backend("sqlite", _open)
