"""Connections and transactions of the SQLite backend (`fll.store.sqlite`).

A store of the older layout (``cells(row, col, val)``, one SQLite row per
column) is converted when this module first opens it, in one ``BEGIN
IMMEDIATE`` transaction (all or nothing; another process opening it at the
same time waits, then finds it converted). The old table is replaced by a
one-row view that tells an fll reading that layout the store has format 3,
so it refuses with its newer-format error instead of reading an empty table
or writing where this module never looks.

Several processes may write at once: every write is one ``BEGIN IMMEDIATE``
transaction (a batch is all or nothing), waits on a busy timeout and retries
with backoff when the lock is still held. Each
thread (and each process after a fork) gets its own connection. `atomic`
runs a caller's reads and writes in one such transaction (the lineage store's
check-then-act), `check_and_put` is one too, and a store file unlinked or
replaced under the process is noticed before any write. Scans page
through the table in short statements, so no read transaction stays open
while a caller walks a generator, unless the caller asks for one: `snapshot`
(a read transaction, which blocks no writer in WAL mode) lets a checker
compare several scans of one state. This module and `fll.store.sqlite`
must never hold a lock across a yield.
"""
from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from ..errors import StoreError
from .sqlite_layout import (_LEGACY, _LEGACY_VIEW, _SCHEMA, _WIDE_SCHEMA, _add_temp_wide,
                            _prepare)

_RETRIES = 8
_R = TypeVar("_R")
_S = TypeVar("_S", bound="SQLiteConnections")


class SQLiteConnections:
    """One SQLite file: its layout made sure of on open, a connection per
    thread, every write one retried transaction (`atomic`, `snapshot`)."""

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
        self._identity: tuple[int, int] | None = None  # no file yet: nothing to check
        # WAL pages after which a commit checkpoints (SQLite's default); 0: never,
        # whoever set it checkpoints with `checkpoint` (the REST server, off its
        # event loop)
        self.autocheckpoint = 1000
        self._wide: tuple[bytes, ...] = ()
        self._packed_wide = True
        self._stray_cells = True  # cells under no declared prefix (`declare_wide`)
        self._temp_wide = False
        self._open_layout()
        self._identity = self._file_identity()

    def _layout(self, conn: sqlite3.Connection) -> tuple[bool, str | None]:
        """(the packed table exists, what ``cells`` is: "table" for the legacy
        layout's data, "view" for the refusing view, None)."""
        found = dict(conn.execute(
            "SELECT name, type FROM sqlite_master WHERE name IN ('rows', 'wide', ?)",
            (_LEGACY,)))
        return found.get("rows") == "table" and found.get("wide") == "table", found.get(_LEGACY)

    def _open_layout(self) -> None:
        """Make sure the file has the packed layout, converting a legacy one.
        The common case (already packed) is one read, no write lock."""
        packed, legacy = self._retry(self._layout, write=False)
        if packed and legacy == "view":
            return

        def convert(conn: sqlite3.Connection) -> None:
            # checked again under the write lock: another process may have
            # converted the file while this one waited for it
            packed, legacy = self._layout(conn)
            if not packed:
                conn.execute(_SCHEMA)
                conn.execute(_WIDE_SCHEMA)
            if legacy == "table":
                self._convert_cells(conn)
            if legacy != "view":
                conn.execute(_LEGACY_VIEW)
        try:
            self._retry(convert, write=True)
        except StoreError as e:
            if legacy == "table":
                raise StoreError(f"sqlite store {self.path} has the one-row-per-column layout "
                                 f"of older fll and could not be converted to packed rows "
                                 f"(open it once where it is writable): {e}") from None
            if packed:
                return  # read-only access to a packed store without the view: reads work
            if self._retry(self._has_rows_table, write=False):
                # a store written before the wide table existed, opened where it
                # cannot be written: it holds no wide cells, so an empty table
                # of the connection's own (TEMP) stands in and reads work
                self._temp_wide = True
                self._retry(_add_temp_wide, write=False)
                return
            raise

    @staticmethod
    def _has_rows_table(conn: sqlite3.Connection) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'rows' AND "
                            "type = 'table'").fetchone() is not None

    @staticmethod
    def _convert_cells(conn: sqlite3.Connection) -> None:
        """Move every legacy row into ``rows`` (columns a packed row already has
        win: this layout wrote them, later) and drop the old table, in the
        caller's transaction (which then puts the refusing view in its place)."""
        conn.execute("INSERT INTO rows (row, val) SELECT row, fll_pack(col, val) FROM cells "
                     "WHERE true GROUP BY row ON CONFLICT (row) "
                     "DO UPDATE SET val = fll_merge(excluded.val, val)")
        conn.execute(f"DROP TABLE {_LEGACY}")

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _check_file(self) -> None:
        """SQLite keeps writing to a file unlinked or replaced under an open
        connection, and every write then vanishes: refuse instead."""
        if self._identity is not None and self._file_identity() != self._identity:
            raise StoreError(f"sqlite store {self.path}: the store file was removed or "
                             f"replaced while this process had it open; nothing was written "
                             f"(restart the process to open the file now at that path)")

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
                conn.execute(f"PRAGMA wal_autocheckpoint={int(self.autocheckpoint)}")
                _prepare(conn)
                if self._temp_wide:
                    _add_temp_wide(conn)
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
        if getattr(self._local, "snapshot", False):
            if write:
                raise StoreError(f"sqlite store {self.path}: a write inside a read snapshot "
                                 f"(`snapshot`): end the snapshot first")
            # the snapshot's read transaction is open on this thread's connection
            return fn(self._local.conn)
        if getattr(self._local, "txn", False):
            # inside `atomic`: the caller's transaction is open on this thread's
            # connection; a failure unwinds to `atomic`, which retries it whole
            return fn(self._local.conn)
        delay = 0.01
        for attempt in range(_RETRIES):
            if write:
                self._check_file()
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

    def _read_txn(self, fn: Callable[[sqlite3.Connection], _R]) -> _R:
        """``fn`` in one read transaction: every statement sees one snapshot."""
        def read(conn: sqlite3.Connection) -> _R:
            own = not conn.in_transaction
            if own:
                conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                if own:
                    conn.execute("COMMIT")
        return self._retry(read, write=False)

    def atomic(self: _S, fn: Callable[[_S], _R]) -> _R:
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

    @property
    def in_transaction(self) -> bool:
        """Whether this thread is inside `atomic` (its reads see the state its
        writes will commit on)."""
        return bool(getattr(self._local, "txn", False))

    @contextmanager
    def snapshot(self: _S) -> Iterator[_S]:
        """Every read this thread makes inside sees one state of the store: one
        deferred read transaction (WAL mode: writers go on committing, unseen
        here), so several scans can be compared (fsck). Writes inside are
        refused. It does hold the WAL back from being checkpointed past its
        start until it ends, so keep it to one pass of reads. Nested calls and
        calls inside `atomic` join the open transaction."""
        if getattr(self._local, "snapshot", False) or getattr(self._local, "txn", False):
            yield self
            return
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            # a deferred transaction takes its snapshot at its first read
            conn.execute("SELECT 1 FROM rows LIMIT 1").fetchall()
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise self._error("read", e) from None
        self._local.snapshot = True
        try:
            yield self
        finally:
            self._local.snapshot = False
            if conn.in_transaction:
                conn.execute("COMMIT")

    #: `scan_ranges` is one statement (a read transaction past 100 ranges)

    def set_autocheckpoint(self, pages: int) -> None:
        """Checkpoint in the committing connection once the WAL holds ``pages``
        pages (SQLite's default 1000), or never (0): then the caller runs
        `checkpoint` itself, or the WAL grows without bound. This process's
        connections only."""
        self.autocheckpoint = int(pages)
        with self._lock:
            conns = list(self._all)
        for conn in conns:
            try:
                conn.execute(f"PRAGMA wal_autocheckpoint={self.autocheckpoint}")
            except sqlite3.Error as e:
                raise self._error("setting wal_autocheckpoint", e) from None

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int]:
        """One WAL checkpoint (``PRAGMA wal_checkpoint(mode)``): (1 if it could not
        finish because another connection held a lock it needs else 0, pages in
        the WAL, pages of it now in the database file)."""
        if mode.upper() not in ("PASSIVE", "FULL", "RESTART", "TRUNCATE"):
            raise StoreError(f"sqlite checkpoint mode must be PASSIVE, FULL, RESTART or "
                             f"TRUNCATE, got {mode!r}")

        def run(conn: sqlite3.Connection) -> tuple[int, int, int]:
            busy, log, done = conn.execute(f"PRAGMA wal_checkpoint({mode.upper()})").fetchone()
            return int(busy), int(log), int(done)
        return self._retry(run, write=False)

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
