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
cleanly. A read's scanners and ``getRows`` are pipelined on that connection
(`fll.store.hbase_pipe`): all opened in one burst, all read and closed in the
next, two round trips however many spans. Transient Thrift and socket errors are retried with jittered backoff
(happybase's pool replaces the broken connection); everything else becomes a
`StoreError` naming the host, port and table. HBase applies each row
atomically but not a batch of rows, so ``atomic_batches`` is False.

HBase reverse scans take the *upper* bound as the (inclusive) start row and
the *lower* bound as the (exclusive) stop row; this module turns the protocol's
``[start, stop)`` into that and trims the ends client-side.

The pool, the retries and fll's Thrift IDL are in `fll.store.hbase_conn`.

This module must never put credentials in a message, nor hold a pooled
connection across a yield.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import StoreError
from . import hbase_pipe as pipe
from .base import (Row, Span, SpanGroup, SpanRead, answer_span_groups, first_cells_by_rows,
                   in_ranges, redact,
                   register_backend, scan_bounds)
from .hbase_conn import _COL, FAMILY, HBaseConnection

MAX_ROW_LENGTH = 32767  # HBase refuses longer row keys (HConstants.MAX_ROW_LENGTH)
_FRAME_SETTING = "hbase.regionserver.thrift.framed.max_frame_size_in_mb"
# bytes a request spends besides its cells: method name, table, struct headers
_REQUEST_OVERHEAD = 4096
_CELL_OVERHEAD = 24


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


class HBaseTable(HBaseConnection):
    """A `Table` in one HBase table, one column family ``c``."""

    atomic_batches = False
    max_key_bytes = MAX_ROW_LENGTH
    #: `first_cells` reads whole rows (`Table.first_cells`)
    first_cells_reads_rows = True

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
        out: dict[bytes, dict[str, bytes]] = {}
        for part in self._key_chunks(rows):
            def read(table: Any, part: list[bytes] = part) -> list:
                return self._client(table).getRows(table.name, part, {})
            for r in self._call("read", read):
                cols = _cells(r.columns)
                if cols:
                    out[r.row] = cols
        return out

    def _key_chunks(self, rows: Iterable[bytes]) -> list[list[bytes]]:
        """The distinct non-empty keys of ``rows`` in lists that each fit one
        request under the server's frame limit."""
        budget = self.frame_bytes - _REQUEST_OVERHEAD
        keys = list(dict.fromkeys(map(bytes, rows)))
        keys = [k for k in keys if k] if b"" in keys else keys
        if not keys or sum(map(len, keys)) + 8 * len(keys) <= budget:
            return [keys] if keys else []  # the usual case: one request
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
        return chunks

    def first_cells(self, rows: Sequence[bytes], lo: str, hi: str
                    ) -> dict[bytes, tuple[str, bytes]]:
        """Thrift 1's multi-get takes no column range: one ``getRows`` of the
        whole rows, each row's first column in ``[lo, hi)`` picked here."""
        return first_cells_by_rows(self, rows, lo, hi)

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
        """`read_span_groups` of one group."""
        return self.read_span_groups([(spans, names, values)])[0]

    def read_span_groups(self, groups: Sequence[SpanGroup]) -> list[SpanRead]:
        """One ``getRows`` of every key the groups' spans give and a scanner
        per keyless span (runs of touching spans merged), all pipelined on one
        connection: two round trips (`fll.store.hbase_pipe.read_scans`)."""
        every = [sp for group in groups for part in group for sp in part]
        ranged = [b for b in (scan_bounds(s.lo, s.hi, None) for s in every if s.keys is None)
                  if b is not None]
        keys = sorted({k for s in every if s.keys is not None for k in s.keys})
        scans, found = self._read(_merged(ranged), keys)
        for part in scans:
            found.update(part)
        return answer_span_groups(groups, found)

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]
                    ) -> list[tuple[bytes, dict[str, bytes]]]:
        """Several ranges: one scanner per run of overlapping or touching
        ranges, every scanner opened in one pipelined burst and read and
        closed in the next (`fll.store.hbase_pipe.read_scans`): two round
        trips however many ranges, more only for a range past a page.

        HBase reads several ranges in one scanner only through
        ``MultiRowRangeFilter``, which the filter language of Thrift 1
        (``ParseFilter``) does not register, and a ``RowFilter`` OR-list over the
        covering span would make the region server read every row between the
        ranges (all the history between two bucket levels); hence a scanner
        per range. happybase's own scan costs a fourth call per range (an
        empty ``scannerGetList`` to learn that the scanner is done), which a
        short page already says. Rows come range by range, each in key order,
        a row in two overlapping ranges twice."""
        wanted = [b for b in (scan_bounds(lo, hi, None) for lo, hi in ranges) if b is not None]
        if not wanted:
            return []
        merged = _merged(wanted)
        scans, _ = self._read(merged, [])
        rows = [row for part in scans for row in part]
        if len(merged) == len(wanted) and wanted == sorted(wanted):
            return rows
        return in_ranges(rows, wanted)

    def first_rows(self, ranges: Sequence[tuple[bytes, bytes]]
                   ) -> list[tuple[bytes, dict[str, bytes]] | None]:
        """The first row of each ``[start, stop)`` range (None: the range is
        empty), in the order asked: a one-row scanner per range, all in the
        same two pipelined round trips."""
        scans = [pipe.Scan(lo, hi, 1, whole=False) for lo, hi in
                 ((bytes(a), bytes(b)) for a, b in ranges)]
        live = [i for i, (lo, hi) in enumerate(ranges) if not (hi and bytes(hi) <= bytes(lo))]
        pages = self._scan([scans[i] for i in live])
        out: list[tuple[bytes, dict[str, bytes]] | None] = [None] * len(scans)
        for i, page in zip(live, pages, strict=True):
            out[i] = page[0] if page else None
        return out

    def _read(self, ranges: list[tuple[bytes, bytes]], keys: list[bytes]
              ) -> tuple[list[list[tuple[bytes, dict[str, bytes]]]], dict[bytes, dict[str, bytes]]]:
        """Every row of each range (a scanner each, read whole) and the rows
        of ``keys``, pipelined on one pooled connection."""
        return self._pipelined([pipe.Scan(lo, hi, self.page_rows) for lo, hi in ranges], keys)

    def _scan(self, scans: list[pipe.Scan]) -> list[list[tuple[bytes, dict[str, bytes]]]]:
        return self._pipelined(scans, [])[0] if scans else []

    def _pipelined(self, scans: list[pipe.Scan], keys: list[bytes]
                   ) -> tuple[list[list[tuple[bytes, dict[str, bytes]]]],
                              dict[bytes, dict[str, bytes]]]:
        gets = self._key_chunks(keys)
        if not scans and not gets:
            return [], {}

        def read(table: Any) -> tuple[list[list[Any]], list[Any]]:
            return pipe.read_scans(table.connection, self._x["idl"], table.name, scans, gets,
                                   framed=self.transport == "framed", protocol=self.protocol)
        found, rows = self._call("read", read)
        by_key: dict[bytes, dict[str, bytes]] = {}
        for r in rows:
            cols = _cells(r.columns)
            if cols:
                by_key[r.row] = cols
        return [[(r.row, _cells(r.columns)) for r in part] for part in found], by_key

    def _forward_page(self, lo: bytes, hi: bytes, want: int):
        page = self._scan([pipe.Scan(lo, hi, want, whole=False)])[0]
        return page, len(page) < want

    def _reverse_page(self, lo: bytes, hi: bytes, want: int):
        # HBase reverse: the start row is an inclusive upper bound, so ask for
        # one row more and drop ``hi`` itself; the stop row is an exclusive
        # lower bound and ``lo`` has no finite predecessor, so stop just below
        # it and trim
        raw = self._scan([pipe.Scan(hi, _below(lo) or b"", want + 1, whole=False,
                                    reverse=True)])[0]
        done = len(raw) < want + 1
        page = []
        for key, data in raw:
            if hi and key >= hi:
                continue
            if key < lo:
                done = True
                break
            page.append((key, data))
        return page[:want], done


def _merged(ranges: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Sorted ``[start, stop)`` ranges with overlapping or touching ones joined."""
    merged: list[list[bytes]] = []
    for lo, hi in sorted(ranges):
        last = merged[-1] if merged else None
        if last is not None and (not last[1] or lo <= last[1]):
            if last[1] and (not hi or hi > last[1]):
                last[1] = hi
            continue
        merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def _below(key: bytes) -> bytes | None:
    """A key strictly below ``key`` and close to it (None: no lower bound)."""
    if not key:
        return None
    if key[-1] == 0:
        return key[:-1] or None
    return key[:-1] + bytes([key[-1] - 1])


def _columns(data: Mapping[bytes, bytes]) -> dict[str, bytes]:
    return {k[len(_COL):].decode("utf-8"): v for k, v in data.items() if k.startswith(_COL)}


def _cells(columns: Mapping[bytes, Any] | None) -> dict[str, bytes]:
    """A Thrift ``TRowResult.columns`` map as the protocol's ``{column: value}``."""
    return {k[len(_COL):].decode("utf-8"): c.value or b""
            for k, c in (columns or {}).items() if k.startswith(_COL)}


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
