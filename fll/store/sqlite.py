"""The embedded default backend: one SQLite file, WAL mode.

Two ``WITHOUT ROWID`` tables clustered on the row key. ``rows(row, val)``
holds one SQLite row per wide row: ``val`` is the row's columns packed as one
msgpack map, so a row key is stored once, not once per column, and a row range
is a contiguous B-tree range. A put merges its columns into the stored map with
one upsert (the merge is a SQL function registered on every connection) and
leaves a row that already holds them alone, so idempotent re-puts dirty no page.

Rows whose key starts with a prefix the caller declared wide (`declare_wide`:
the lineage store's run and bucket rows, which gather a column per run or per
set, thousands in a coarse bucket) live one SQLite row per CELL in
``wide(row, col, val)``: a packed value would be rewritten whole for every new
column (quadratic), a cell is inserted once and costs its key. A column that
is a checksum (32 lowercase hex digits) is stored as its 16 raw bytes. Reads
consult both tables (one statement: a merged ``UNION ALL`` in key order), so
where a row was written never changes what is read; this module knows no
layout beyond the prefixes it is given.

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
compare several scans of one state. This module must never hold a lock
across a yield.

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``, with
optional ``?timeout=30&synchronous=NORMAL|FULL``.
"""
from __future__ import annotations

import binascii
import os
import random
import re
import sqlite3
import threading
import time
import zlib
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import parse_qs

import msgpack

from ..errors import StoreError
from .base import (Row, Span, SpanGroup, SpanRead, in_ranges, read_spans_by_rows, redact,
                   register_backend, scan_bounds)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    row BLOB NOT NULL PRIMARY KEY,
    val BLOB NOT NULL
) WITHOUT ROWID
"""
_WIDE_SCHEMA = """
CREATE TABLE IF NOT EXISTS wide (
    row BLOB NOT NULL,
    col NOT NULL,
    val BLOB NOT NULL,
    PRIMARY KEY (row, col)
) WITHOUT ROWID
"""
# an idempotent re-put of a cell writes nothing
_UPSERT_CELL = ("INSERT INTO wide (row, col, val) VALUES (?, ?, ?) ON CONFLICT (row, col) "
                "DO UPDATE SET val = excluded.val WHERE val IS NOT excluded.val")
# the layout before rows were packed; converted on open (see `_convert_cells`)
_LEGACY = "cells"
# what an fll reading the legacy layout finds in its place: a format-version row
# newer than the format 2 it reads, so it refuses this store with a clear error
_LEGACY_VIEW = ("CREATE VIEW cells AS SELECT CAST('v|format' AS BLOB) AS row, 'v' AS col, "
                "CAST('3' AS BLOB) AS val")
# merge a put's columns into the stored row, and leave the row alone when it
# already holds every one of them: idempotent re-puts then dirty no page
_UPSERT = ("INSERT INTO rows (row, val) VALUES (?, ?) ON CONFLICT (row) "
           "DO UPDATE SET val = fll_merge(val, excluded.val) "
           "WHERE NOT fll_covers(val, excluded.val)")
_PAGE = 2048
_RETRIES = 8
_R = TypeVar("_R")


# A stored value longer than this is zlib-compressed: SQLite keeps at most about
# 1 KB of a WITHOUT ROWID row in its B-tree page (4 KB pages) and moves the rest
# to an overflow page of its own, so an operation-set row of 1.6 KB would
# otherwise take two pages. Compressed values start with a byte no msgpack map
# starts with.
_COMPRESS_OVER = 400
_ZLIB = b"\x00"


# The ``c`` column as fll writes it (a checksum: 32 lowercase hex digits, in the
# run row and the per-run index rows) is stored as its 16 raw bytes in a msgpack
# extension and given back as the same hex. Any other value is kept as it is.
_HEX_EXT = 1
_HEX = re.compile(rb"[0-9a-f]{32}").fullmatch
_packers = threading.local()  # a Packer per thread: packb would build one per call


def _ext(code: int, data: bytes) -> object:
    if code == _HEX_EXT and len(data) == 16:
        return binascii.hexlify(data)
    return msgpack.ExtType(code, data)  # not a column value: unpack refuses it


def pack(cols: Mapping[str, bytes]) -> bytes:
    """A row's columns as the stored value: one msgpack map of str to bytes,
    a checksum as raw bytes, compressed when long."""
    d = cols if type(cols) is dict else dict(cols)
    c = d.get("c")
    if c is not None and len(c) == 32 and _HEX(c):
        d = dict(d)
        d["c"] = msgpack.ExtType(_HEX_EXT, binascii.unhexlify(c))
    packer = getattr(_packers, "p", None)
    if packer is None:
        packer = _packers.p = msgpack.Packer(use_bin_type=True)
    raw = packer.pack(d)
    if len(raw) > _COMPRESS_OVER:
        small = _ZLIB + zlib.compress(raw, 6)
        if len(small) < len(raw):
            return small
    return raw


def unpack(val: bytes) -> dict[str, bytes]:
    """The columns of a stored value; ValueError when it is not one."""
    try:
        if val[:1] == _ZLIB:
            val = zlib.decompress(val[1:])
        cols = msgpack.unpackb(val, raw=False, ext_hook=_ext)
    except Exception as e:  # msgpack and zlib raise several kinds
        raise ValueError(f"not a packed row ({type(e).__name__})") from None
    if type(cols) is not dict or not all(type(v) is bytes for v in cols.values()):
        raise ValueError("not a packed row (not a map of columns)")
    return cols


_HEX_STR = re.compile(r"[0-9a-f]{32}").fullmatch


def _col_in(col: str) -> str | bytes:
    """A column name as the wide table stores it: a checksum as 16 raw bytes."""
    if len(col) == 32 and _HEX_STR(col):
        return binascii.unhexlify(col)
    return col


def _col_out(col: str | bytes) -> str:
    return binascii.hexlify(col).decode("ascii") if type(col) is bytes else str(col)


def _after(prefix: bytes) -> bytes:
    """The smallest key above every key starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b"\xff" * 9
    p[-1] += 1
    return bytes(p)


def _merge(old: bytes, new: bytes) -> bytes:
    cols = unpack(old)
    cols.update(unpack(new))
    return pack(cols)


def _covers(old: bytes, new: bytes) -> bool:
    have = unpack(old)
    return all(have.get(c, None) == v for c, v in unpack(new).items())


class _Pack:
    """The aggregate that packs a legacy row's cells (the conversion)."""

    def __init__(self) -> None:
        self.cols: dict[str, bytes] = {}

    def step(self, col: str, val: bytes) -> None:
        self.cols[col] = bytes(val)

    def finalize(self) -> bytes:
        return pack(self.cols)


def _add_temp_wide(conn: sqlite3.Connection) -> None:
    """An empty ``wide`` table in the connection's TEMP schema, for a file that
    has none and cannot be given one (read-only)."""
    conn.execute(_WIDE_SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))


def _prepare(conn: sqlite3.Connection) -> None:
    conn.create_function("fll_merge", 2, _merge, deterministic=True)
    conn.create_function("fll_covers", 2, _covers, deterministic=True)
    conn.create_aggregate("fll_pack", 2, _Pack)  # type: ignore[arg-type]


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
        self._identity: tuple[int, int] | None = None  # no file yet: nothing to check
        # WAL pages after which a commit checkpoints (SQLite's default); 0: never,
        # whoever set it checkpoints with `checkpoint` (the REST server, off its
        # event loop)
        self.autocheckpoint = 1000
        self._wide: tuple[bytes, ...] = ()
        self._packed_wide = True
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

    # -- Table protocol ------------------------------------------------------
    def declare_wide(self, prefixes: "tuple[bytes, ...] | list[bytes]") -> None:
        """Keep rows whose key starts with one of ``prefixes`` a SQLite row per
        cell (see the module docstring). Only where writes go: reads see both."""
        self._wide = tuple(bytes(p) for p in prefixes if p)
        # rows under these prefixes written packed (before they were declared,
        # or by an older format) are read from both tables; else wide keys are
        # read from the cell table alone
        def packed(conn: sqlite3.Connection) -> bool:
            return any(conn.execute("SELECT 1 FROM rows WHERE row >= ? AND row < ? LIMIT 1",
                                    (p, _after(p))).fetchone() for p in self._wide)
        self._packed_wide = bool(self._wide) and self._retry(packed, write=False)

    def _is_wide(self, key: bytes) -> bool:
        return bool(self._wide) and key.startswith(self._wide)

    def _cols(self, row: bytes, val: bytes) -> dict[str, bytes]:
        try:
            return unpack(val)
        except ValueError as e:
            raise StoreError(f"sqlite store {self.path}: row {bytes(row)!r} is corrupt: {e} "
                             f"(run `fll admin fsck`)") from None

    def _group(self, found: list[tuple[bytes, object, bytes]]
               ) -> list[tuple[bytes, dict[str, bytes]]]:
        """``(row, col or NULL, val)`` results in key order (a packed row has no
        col) as protocol rows: consecutive results of one key make one row."""
        out: list[tuple[bytes, dict[str, bytes]]] = []
        for r, col, val in found:
            if not out or out[-1][0] != r:
                out.append((r, {}))
            cols = out[-1][1]
            if col is None:
                cols.update(self._cols(r, val))
            else:
                cols[_col_out(col)] = bytes(val)  # type: ignore[arg-type]
        return out

    def _write(self, conn: sqlite3.Connection, rows: Mapping[bytes, Row]) -> None:
        # a row without columns does not exist in the protocol: store nothing.
        # Callers share one column map between many rows (bucket rows, a run's
        # index rows): each map is packed once per call
        packed: list[tuple[bytes, bytes]] = []
        cells: list[tuple[bytes, str | bytes, bytes]] = []
        seen: dict[int, tuple[Row, bytes]] = {}  # holds each map, so no id is reused
        wide = self._wide  # _is_wide inlined: this loop runs for every row of a batch
        for r, cols in rows.items():
            if not cols:
                continue
            key = r if type(r) is bytes else bytes(r)
            if wide and key.startswith(wide):
                # _col_in inlined: this loop runs for every cell of a batch
                cells.extend((key, binascii.unhexlify(c) if len(c) == 32 and _HEX_STR(c)
                              else c, v if type(v) is bytes else bytes(v))
                             for c, v in cols.items())
                continue
            hit = seen.get(id(cols))
            if hit is None:
                hit = seen[id(cols)] = (cols, pack(cols))
            packed.append((key, hit[1]))
        if packed:
            conn.executemany(_UPSERT, packed)
        if cells:
            conn.executemany(_UPSERT_CELL, cells)

    def put(self, rows: Mapping[bytes, Row]) -> None:
        if any(cols for cols in rows.values()):
            self._retry(lambda c: self._write(c, rows), write=True)

    def get(self, row: bytes) -> dict[str, bytes] | None:
        return self.get_many([row]).get(bytes(row))

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

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        """One statement per 500 keys (both tables, merged), in one read transaction."""
        keys = sorted({bytes(r) for r in rows})
        if not keys:
            return {}

        wide = self._wide
        cells_only = not self._packed_wide and bool(wide) and \
            all(k.startswith(wide) for k in keys)

        def read(conn: sqlite3.Connection) -> dict[bytes, dict[str, bytes]]:
            out: dict[bytes, dict[str, bytes]] = {}
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                marks = ",".join("?" * len(chunk))
                found = conn.execute(
                    f"SELECT row, col, val FROM wide WHERE row IN ({marks}) ORDER BY 1, 2",
                    chunk).fetchall() if cells_only else conn.execute(
                    f"SELECT row, NULL, val FROM rows WHERE row IN ({marks}) UNION ALL "
                    f"SELECT row, col, val FROM wide WHERE row IN ({marks}) ORDER BY 1, 2",
                    chunk + chunk).fetchall()
                for r, cols in self._group(found):
                    if cols:
                        out[r] = cols
            return out
        if len(keys) <= 500:  # one statement: one snapshot without a transaction
            return self._retry(read, write=False)
        return self._read_txn(read)

    def scan(self, start: bytes = b"", stop: bytes = b"", *, limit: int | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        bounds = scan_bounds(start, stop, limit)
        if bounds is None:
            return
        start, stop = bounds
        emitted = 0
        cursor: bytes | None = None
        while True:
            # a page of cells; the last row of a full page may go on in the next
            # one, so it is read again there (the cursor is inclusive)
            size = _PAGE if limit is None else min(_PAGE, limit - emitted + 1)
            found = self._page(start, stop, reverse, cursor, size)
            rows = self._group(found)
            full = len(found) >= size
            if full and len(rows) > 1:
                rows.pop()
            elif full:  # one row wider than a page: read it whole
                rows = [(rows[0][0], self.get(rows[0][0]) or {})]
            for r, cols in rows:
                if not cols:
                    continue
                yield r, cols
                emitted += 1
                if limit is not None and emitted >= limit:
                    return
            if not full:
                return
            cursor = rows[-1][0]

    def _page(self, start: bytes, stop: bytes, reverse: bool, cursor: bytes | None,
              size: int) -> list[tuple[bytes, object, bytes]]:
        # after the first page the last whole row replaces the bound the scan
        # walks away from, so each page is one seek and never re-reads earlier pages
        lower = ("row > ?", cursor) if cursor is not None and not reverse else ("row >= ?", start)
        upper = ("row < ?", cursor) if cursor is not None and reverse else \
            ("row < ?", stop) if stop else None
        where, args = [lower[0]], [lower[1]]
        if upper is not None:
            where.append(upper[0])
            args.append(upper[1])
        cond = " AND ".join(where)
        order = "1 DESC, 2 DESC" if reverse else "1, 2"
        sql = (f"SELECT row, NULL, val FROM rows WHERE {cond} UNION ALL "
               f"SELECT row, col, val FROM wide WHERE {cond} ORDER BY {order} LIMIT {size}")
        return self._retry(lambda c: c.execute(sql, args + args).fetchall(), write=False)

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Mapping[str, bytes]) -> bool:
        key = bytes(row)
        want = None if expected is None else bytes(expected)

        def cas(conn: sqlite3.Connection) -> bool:
            if self._is_wide(key):
                found = conn.execute("SELECT val FROM wide WHERE row = ? AND col = ?",
                                     (key, _col_in(column))).fetchone()
                if (bytes(found[0]) if found else None) != want:
                    return False
                self._write(conn, {key: {c: bytes(v) for c, v in values.items()}})
                return True
            found = conn.execute("SELECT val FROM rows WHERE row = ?", (key,)).fetchone()
            cols = self._cols(key, found[0]) if found else {}
            if cols.get(column) != want:
                return False
            if values:
                cols.update((c, bytes(v)) for c, v in values.items())
                conn.execute("INSERT OR REPLACE INTO rows (row, val) VALUES (?, ?)",
                             (key, pack(cols)))
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

    @contextmanager
    def snapshot(self) -> Iterator["SQLiteTable"]:
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
    one_call_ranges = True

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]
                    ) -> list[tuple[bytes, dict[str, bytes]]]:
        wanted = [b for b in (scan_bounds(lo, hi, None) for lo, hi in ranges) if b is not None]
        if not wanted:
            return []
        wide = self._wide
        # ranges that lie within one declared prefix read the cell table alone
        cells_only = not self._packed_wide and bool(wide) and all(
            hi and any(lo.startswith(p) and hi.startswith(p) for p in wide) for lo, hi in wanted)

        def read(conn: sqlite3.Connection) -> list[tuple[bytes, dict[str, bytes]]]:
            out: list[tuple[bytes, dict[str, bytes]]] = []
            for i in range(0, len(wanted), 100):
                part = wanted[i:i + 100]
                # one OR of ranges: SQLite reads each as a primary-key range
                # ("MULTI-INDEX OR"); an ORDER BY would make it scan the table,
                # so the cells are put in order here (a packed row before cells)
                cond = " OR ".join("(row >= ? AND row < ?)" if hi else "(row >= ?)"
                                   for _, hi in part)
                args = [b for lo, hi in part for b in ((lo, hi) if hi else (lo,))]
                sql = f"SELECT row, col, val FROM wide WHERE {cond}" if cells_only else \
                    (f"SELECT row, NULL, val FROM rows WHERE {cond} UNION ALL "
                     f"SELECT row, col, val FROM wide WHERE {cond}")
                found = conn.execute(sql, args if cells_only else args + args).fetchall()
                found.sort(key=lambda c: (c[0], c[1] is not None))
                out.extend(self._group(found))
            return out
        found = self._retry(read, write=False) if len(wanted) <= 100 else self._read_txn(read)
        if len(wanted) == 1:
            return found
        found.sort(key=lambda r: r[0])
        return in_ranges(found, wanted)

    def read_spans(self, spans: Sequence[Span], names: Sequence[Span] = (),
                   values: Sequence[Span] = ()) -> SpanRead:
        """The spans' rows in one statement (`scan_ranges`), and the names and
        values in one more that SQLite keeps distinct itself: a coarse bucket
        range holding the same set in many rows answers one name, not a cell
        per row."""
        distinct = self._distinct([(s.lo, s.hi) for s in names],
                                  [(s.lo, s.hi) for s in values]) \
            if names or values else (set(), set())
        if distinct is None:  # a row there may be packed: read the rows
            return read_spans_by_rows(self, spans, names, values)
        rows = dict(self.scan_ranges([(s.lo, s.hi) for s in spans])) if spans else {}
        return SpanRead(rows, *distinct)

    def read_span_groups(self, groups: Sequence[SpanGroup]) -> list[SpanRead]:
        """Each group's `read_spans`: statements on a local file, no round trip
        to save, and each keeps its names and values distinct in SQL."""
        return [self.read_spans(*group) for group in groups]

    def _distinct(self, ranges: list[tuple[bytes, bytes]], tails: list[tuple[bytes, bytes]]
                  ) -> tuple[set[str], set[bytes]] | None:
        """The distinct column names of the rows in ``ranges`` and the distinct
        cell values of those in ``tails`` (one statement per 100 ranges). None
        when a row there may be packed (written before its prefix was
        declared wide): the caller reads the rows instead."""
        def bounds(rs: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
            return [b for b in (scan_bounds(lo, hi, None) for lo, hi in rs) if b is not None]
        wanted, values = bounds(ranges), bounds(tails)
        if not wanted and not values:
            return set(), set()
        wide = self._wide
        if self._packed_wide or not wide or len(values) > 99 or not all(
                hi and any(lo.startswith(p) and hi.startswith(p) for p in wide)
                for lo, hi in wanted + values):
            return None

        def where(part: list[tuple[bytes, bytes]]) -> tuple[str, list[bytes]]:
            return (" OR ".join("(row >= ? AND row < ?)" for _ in part),
                    [b for lo, hi in part for b in (lo, hi)])

        def read(conn: sqlite3.Connection) -> tuple[set[str], set[bytes]]:
            names: set[str] = set()
            vals: set[bytes] = set()
            parts = [wanted[i:i + 100] for i in range(0, len(wanted), 100)] or [[]]
            for n, part in enumerate(parts):
                selects, args = [], []
                if part:
                    cond, a = where(part)
                    selects.append(f"SELECT DISTINCT 0, col FROM wide WHERE {cond}")
                    args += a
                if values and n == 0:
                    cond, a = where(values)
                    selects.append(f"SELECT DISTINCT 1, val FROM wide WHERE {cond}")
                    args += a
                for is_value, v in conn.execute(" UNION ".join(selects), args):
                    if is_value:
                        vals.add(bytes(v))
                    else:
                        names.add(_col_out(v))
            return names, vals
        return self._retry(read, write=False) if len(wanted) <= 100 else self._read_txn(read)

    def delete(self, rows: list[bytes]) -> None:
        keys = [(bytes(r),) for r in rows]
        if keys:
            def drop(c: sqlite3.Connection) -> None:
                c.executemany("DELETE FROM rows WHERE row = ?", keys)
                c.executemany("DELETE FROM wide WHERE row = ?", keys)
            self._retry(drop, write=True)

    def delete_columns(self, cells: Mapping[bytes, "list[str] | tuple[str, ...] | set[str]"]
                       ) -> None:
        """Remove these columns of these rows (a row left without any is gone)."""
        todo = {bytes(r): list(cols) for r, cols in cells.items() if cols}
        if not todo:
            return

        def drop(conn: sqlite3.Connection) -> None:
            conn.executemany("DELETE FROM wide WHERE row = ? AND col = ?",
                             [(r, _col_in(c)) for r, cols in todo.items() for c in cols])
            # a row may be packed whatever the prefixes (written before they
            # were declared, or by a raw copy): look there too
            for r, cols in todo.items():
                found = conn.execute("SELECT val FROM rows WHERE row = ?", (r,)).fetchone()
                if not found:
                    continue
                left = self._cols(r, found[0])
                if not any(c in left for c in cols):
                    continue
                for c in cols:
                    left.pop(c, None)
                if left:
                    conn.execute("UPDATE rows SET val = ? WHERE row = ?", (pack(left), r))
                else:
                    conn.execute("DELETE FROM rows WHERE row = ?", (r,))
        self._retry(drop, write=True)

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
