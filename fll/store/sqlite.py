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
where a row was written never changes what is read (keys under no declared
prefix are read from ``rows`` alone while the file holds no cell outside the
prefixes, as found when they are declared); this module knows no layout
beyond the prefixes it is given.

Connections, transactions and the conversion of the older layout are in
`fll.store.sqlite_conn`; the tables, statements and packed values in
`fll.store.sqlite_layout`.

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``, with
optional ``?timeout=30&synchronous=NORMAL|FULL``.
"""
from __future__ import annotations

import binascii
import sqlite3
from typing import Iterator, Mapping, Sequence
from urllib.parse import parse_qs

from ..errors import StoreError
from .base import (Row, Span, SpanGroup, SpanRead, first_cells_by_rows, in_ranges,
                   read_spans_by_rows, redact, register_backend, scan_bounds)
from .sqlite_conn import SQLiteConnections
from .sqlite_layout import _HEX_STR, _UPSERT, _UPSERT_CELL, _after, _col_in, _col_out, pack, unpack

_PAGE = 2048


class SQLiteTable(SQLiteConnections):
    """A `Table` in one SQLite file."""

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

        # cells under none of these prefixes (a table that declared others wrote
        # them): while there are none, rows under none of them are read from
        # the packed table alone
        def stray(conn: sqlite3.Connection) -> bool:
            lo = b""
            for p, end in sorted((p, _after(p)) for p in self._wide):
                if lo < p and conn.execute("SELECT 1 FROM wide WHERE row >= ? AND row < ? "
                                           "LIMIT 1", (lo, p)).fetchone():
                    return True
                lo = max(lo, end)
            return conn.execute("SELECT 1 FROM wide WHERE row >= ? LIMIT 1",
                                (lo,)).fetchone() is not None
        self._stray_cells = not self._wide or self._retry(stray, write=False)

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

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        """One statement per 500 keys (both tables, merged), in one read transaction."""
        keys = sorted({bytes(r) for r in rows})
        if not keys:
            return {}

        wide = self._wide
        cells_only = not self._packed_wide and bool(wide) and \
            all(k.startswith(wide) for k in keys)
        # no key under a declared prefix, and no cell of the file outside them:
        # the packed table alone (no union of both tables to sort)
        packed_only = not cells_only and not self._stray_cells and \
            not any(k.startswith(wide) for k in keys)

        def read(conn: sqlite3.Connection) -> dict[bytes, dict[str, bytes]]:
            out: dict[bytes, dict[str, bytes]] = {}
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                marks = ",".join("?" * len(chunk))
                found = conn.execute(
                    f"SELECT row, col, val FROM wide WHERE row IN ({marks}) ORDER BY 1, 2",
                    chunk).fetchall() if cells_only else conn.execute(
                    f"SELECT row, NULL, val FROM rows WHERE row IN ({marks}) ORDER BY 1",
                    chunk).fetchall() if packed_only else conn.execute(
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

    def first_cells(self, rows: Sequence[bytes], lo: str, hi: str
                    ) -> dict[bytes, tuple[str, bytes]]:
        """One statement per 200 rows: each row's first cell in ``[lo, hi)``,
        a seek in the cell table. Rows that may be packed (not under a declared
        prefix, or written before it was) are read whole instead."""
        keys = sorted({bytes(r) for r in rows})
        if not keys or not lo < hi:
            return {}
        if self._packed_wide or not all(self._is_wide(k) for k in keys):
            return first_cells_by_rows(self, keys, lo, hi)
        one = "SELECT * FROM (SELECT row, col, val FROM wide WHERE row = ? AND col >= ? " \
              "AND col < ? ORDER BY col LIMIT 1)"

        def read(conn: sqlite3.Connection) -> dict[bytes, tuple[str, bytes]]:
            out: dict[bytes, tuple[str, bytes]] = {}
            for i in range(0, len(keys), 200):
                part = keys[i:i + 200]
                sql = " UNION ALL ".join([one] * len(part))
                for r, col, val in conn.execute(sql, [a for k in part for a in (k, lo, hi)]):
                    out[bytes(r)] = (_col_out(col), bytes(val))
            return out
        return self._retry(read, write=False) if len(keys) <= 200 else self._read_txn(read)

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

    def rows_holding(self, queries: Sequence[tuple[Span, str]]) -> list[list[bytes]] | None:
        """For each (span, column), the keys of the span's rows that hold the
        column, found by SQLite (one statement per 100 spans: no cell of
        another column comes back). None when a row there may be packed
        (written before its prefix was declared wide): the caller reads the
        rows instead. What `fll.store.layout.unused_buckets` asks of a bucket's
        64 children, each a cell per set that ran in it."""
        wide = self._wide
        if self._packed_wide or not wide or not all(
                s.hi and any(s.lo.startswith(p) and s.hi.startswith(p) for p in wide)
                for s, _ in queries):
            return None
        out: list[list[bytes]] = [[] for _ in queries]

        def read(conn: sqlite3.Connection) -> None:
            for i in range(0, len(queries), 100):
                part = queries[i:i + 100]
                sql = " UNION ALL ".join(
                    f"SELECT {i + n}, row FROM wide WHERE row >= ? AND row < ? AND col = ?"
                    for n in range(len(part)))
                args = [a for s, col in part for a in (s.lo, s.hi, _col_in(col))]
                for n, row in conn.execute(sql, args):
                    out[n].append(bytes(row))
        if len(queries) <= 100:
            self._retry(read, write=False)
        else:
            self._read_txn(read)
        return out

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
            # were declared, or by a raw copy): look there too, one statement
            # for every row that may be (a wide row of a file where none is
            # packed is not: reads look for it in the cell table alone too)
            maybe = [r for r in todo if self._packed_wide or not self._is_wide(r)]
            packed: dict[bytes, bytes] = {}
            for i in range(0, len(maybe), 500):
                chunk = maybe[i:i + 500]
                packed.update(conn.execute(
                    f"SELECT row, val FROM rows WHERE row IN ({','.join('?' * len(chunk))})",
                    chunk).fetchall())
            for r in maybe:
                found = packed.get(r)
                if found is None:
                    continue
                cols = todo[r]
                left = self._cols(r, found)
                if not any(c in left for c in cols):
                    continue
                for c in cols:
                    left.pop(c, None)
                if left:
                    conn.execute("UPDATE rows SET val = ? WHERE row = ?", (pack(left), r))
                else:
                    conn.execute("DELETE FROM rows WHERE row = ?", (r,))
        self._retry(drop, write=True)


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
