"""The HBase-shaped `Table` protocol every backend implements, and the
registry that builds a backend from a store URL.

A table maps a row key (bytes) to columns (str → bytes). Backends promise:
`put` applies one batch (atomically where the backend can; SQLite can),
`get` returns a row or None, `scan` yields rows in key order within
``[start, stop)`` (``stop=b""`` means to the end), honouring ``limit`` and
``reverse``, and `delete` removes whole rows. Nothing above this module may
know which backend it talks to, and this module must import none: the
package (``fll.store``) registers the built-in backends, others call
`register_backend`.
"""
from __future__ import annotations

import bisect
import itertools
from typing import (Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Protocol, Sequence,
                    TypeVar, runtime_checkable)
from urllib.parse import urlsplit

from ..errors import StoreError

Row = Mapping[str, bytes]


class Compressed(bytes):
    """A column value that is already compressed (a run model's event body):
    a backend that compresses long rows stores a row of these as it is,
    since compressing it again spends CPU to win nothing."""

    __slots__ = ()


class Span(NamedTuple):
    """The rows ``lo <= key < hi``. ``keys``, when the caller knows them, are
    every key the span can hold (a few buckets of a time index): a backend
    that cannot read key ranges in one call reads those keys instead. They
    may be built on first iteration (a backend that reads ranges never
    builds them)."""

    lo: bytes
    hi: bytes
    keys: Iterable[bytes] | None = None


class SpanRead(NamedTuple):
    """What `Table.read_spans` answers."""

    rows: dict[bytes, dict[str, bytes]]  # every row of the spans read whole
    names: set[str]  # the distinct column names of the ``names`` spans' rows
    values: set[bytes]  # the distinct cell values of the ``values`` spans' rows


#: one `Table.read_spans` question: (spans read whole, names spans, values spans)
SpanGroup = tuple[Sequence[Span], Sequence[Span], Sequence[Span]]


@runtime_checkable
class Table(Protocol):
    """One wide table. Each call is a round trip for remote backends: batch."""

    url: str

    def put(self, rows: Mapping[bytes, Row]) -> None:
        """Write every row of the batch (columns merged into existing rows)."""

    def get(self, row: bytes) -> dict[str, bytes] | None:
        """One row's columns, or None."""

    def get_many(self, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        """Several rows in one call; absent rows are left out."""

    def scan(self, start: bytes = b"", stop: bytes = b"", *, limit: int | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """Rows with ``start <= key < stop`` in key order (descending if reverse)."""

    def scan_ranges(self, ranges: list[tuple[bytes, bytes]]
                    ) -> list[tuple[bytes, dict[str, bytes]]]:
        """Every row of several ``[start, stop)`` ranges, as one call where the
        backend can (Bigtable: one ReadRows with several row ranges; SQLite:
        one statement). Rows come range by range, each in key order. A backend
        that reads any number of ranges in one round trip says so with a true
        ``one_call_ranges`` attribute (HBase's Thrift 1 has no multi-range
        scan: callers that know their keys use `get_many` there)."""

    def read_spans(self, spans: Sequence[Span], names: Sequence[Span] = (),
                   values: Sequence[Span] = ()) -> SpanRead:
        """The rows of ``spans``, the distinct column names in the rows of
        ``names`` and the distinct cell values in the rows of ``values``, in as
        few round trips as the backend can: how a time index is read (the
        lineage layer never asks which backend it talks to). SQLite: a
        statement for the rows and one that keeps names and values distinct
        itself; Bigtable: one ReadRows; HBase: one ``getRows`` of the spans'
        known keys, a scanner for a span without them (`read_spans_by_rows`)."""

    def read_span_groups(self, groups: Sequence[SpanGroup]) -> list[SpanRead]:
        """`read_spans` of several groups (``(spans, names, values)``) in the
        round trips of one: each group answered apart, as `read_spans` would.
        How a walk reads the index rows of every dataset of one hop at once
        (Bigtable: one ReadRows; HBase: one ``getRows`` of the known keys and a
        scanner per keyless span; SQLite: each group's statements, no network)."""

    def first_cells(self, rows: Sequence[bytes], lo: str, hi: str
                    ) -> dict[bytes, tuple[str, bytes]]:
        """Of each row, its first column in ``[lo, hi)`` (columns in byte order)
        and that cell's value; rows without one are left out. One call for
        any number of rows: how the latest schema of every dataset of a hop is
        read (Bigtable: one ReadRows of the keys with a column-range filter
        and one cell per row; SQLite: one statement; HBase's Thrift 1, whose
        multi-get takes no column range: one ``getRows`` of the whole rows,
        `first_cells_by_rows`). A table whose ``first_cells`` reads the
        whole rows so says with a true ``first_cells_reads_rows`` attribute:
        reading those rows beside another read then costs no more bytes."""

    def delete(self, rows: list[bytes]) -> None:
        """Remove these rows entirely."""

    def delete_columns(self, cells: Mapping[bytes, list[str]]) -> None:
        """Remove these columns of these rows (a wide row's cell: one run, one
        set); other columns stay, and a row left without columns is gone."""

    def check_and_put(self, row: bytes, column: str, expected: bytes | None,
                      values: Row) -> bool:
        """Atomically: if ``row``'s ``column`` holds exactly ``expected`` (None: the
        cell is absent), put ``values`` into ``row`` and return True; else change
        nothing and return False. The one check-then-act every backend offers
        (SQLite: one ``BEGIN IMMEDIATE`` transaction; Bigtable: CheckAndMutateRow;
        HBase: Thrift ``checkAndPut``)."""

    def close(self) -> None:
        """Release connections."""


def transactional(table: Any) -> bool:
    """Whether ``table`` runs a function in one transaction (``atomic``: SQLite);
    Bigtable and HBase write row by row, guarded by check-and-put."""
    return callable(getattr(table, "atomic", None))


def scan_bounds(start: bytes, stop: bytes, limit: int | None) -> tuple[bytes, bytes] | None:
    """The protocol's scan arguments as plain bytes, or None when the scan is
    empty by definition (``limit <= 0``, or a stop at or before the start)."""
    if limit is not None and limit <= 0:
        return None
    start, stop = bytes(start), bytes(stop)
    if stop and stop <= start:
        return None
    return start, stop


_V = TypeVar("_V")


def in_ranges(rows: list[tuple[bytes, _V]], ranges: list[tuple[bytes, bytes]]
              ) -> list[tuple[bytes, _V]]:
    """``rows`` (sorted by key, read in one go) regrouped range by range in the
    order ``ranges`` were asked, as `Table.scan_ranges` answers."""
    keys = [k for k, _ in rows]
    out: list[tuple[bytes, _V]] = []
    for lo, hi in ranges:
        first = bisect.bisect_left(keys, lo)
        stop = bisect.bisect_left(keys, hi) if hi else len(keys)
        out.extend(rows[first:stop])
    return out


def read_spans_by_rows(table: "Table", spans: Sequence[Span], names: Sequence[Span] = (),
                       values: Sequence[Span] = (), *, by_keys: bool = False) -> SpanRead:
    """`Table.read_spans` from whole rows: one `scan_ranges` of every span,
    or (``by_keys``, a backend whose ranges cost a call each) one
    `get_many` of the keys of the spans that give them and a range read
    of those that do not. Names and values are taken from the rows."""
    return read_span_groups_by_rows(table, [(spans, names, values)], by_keys=by_keys)[0]


def read_span_groups_by_rows(table: "Table", groups: Sequence[SpanGroup], *,
                             by_keys: bool = False) -> list[SpanRead]:
    """`Table.read_span_groups` from whole rows: the rows of every group read
    together (as `read_spans_by_rows` reads one group), then each group's
    answer taken from them."""
    every = [sp for group in groups for part in group for sp in part]
    found: dict[bytes, dict[str, bytes]] = {}
    ranged = [(s.lo, s.hi) for s in every if not (by_keys and s.keys is not None)]
    if ranged:
        found.update(table.scan_ranges(ranged))
    if by_keys:
        keys = sorted(set(itertools.chain.from_iterable(
            s.keys for s in every if s.keys is not None)))
        if keys:
            found.update(table.get_many(keys))
    return answer_span_groups(groups, found)


def answer_span_groups(groups: Sequence[SpanGroup], found: dict[bytes, dict[str, bytes]]
                       ) -> list[SpanRead]:
    """Each group's `SpanRead` from ``found``, every row its spans can hold
    (read together for all the groups)."""
    ordered = sorted(found)

    def rows_of(part: Iterable[Span]) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        for s in part:
            first = bisect.bisect_left(ordered, s.lo)
            stop = bisect.bisect_left(ordered, s.hi) if s.hi else len(ordered)
            for key in ordered[first:stop]:
                yield key, found[key]
    answers = []
    for spans, names, values in groups:
        out = SpanRead(dict(rows_of(spans)), set(), set())
        for _, cols in rows_of(names):
            out.names.update(cols)
        for _, cols in rows_of(values):
            out.values.update(cols.values())
        answers.append(out)
    return answers


def first_cells_by_rows(table: "Table", rows: Sequence[bytes], lo: str, hi: str
                        ) -> dict[bytes, tuple[str, bytes]]:
    """`Table.first_cells` from whole rows: one `get_many`, the first column
    in ``[lo, hi)`` (in byte order, as the backends sort columns) picked here."""
    return first_cells_in(table.get_many(list(dict.fromkeys(bytes(r) for r in rows))), lo, hi)


def first_cells_in(rows: Mapping[bytes, Mapping[str, bytes]], lo: str, hi: str
                   ) -> dict[bytes, tuple[str, bytes]]:
    """`Table.first_cells` of whole rows already read: each row's first column
    in ``[lo, hi)``, in byte order (as the backends sort columns)."""
    low, high = lo.encode("utf-8"), hi.encode("utf-8")
    out: dict[bytes, tuple[str, bytes]] = {}
    for key, cols in rows.items():
        inside = [c for c in cols if low <= c.encode("utf-8") < high]
        if inside:
            first = min(inside, key=lambda c: c.encode("utf-8"))
            out[key] = (first, cols[first])
    return out


_BACKENDS: dict[str, Callable[[str], Table]] = {}
_EXTRAS: dict[str, str] = {}


def register_backend(scheme: str, factory: Callable[[str], Table], extra: str | None = None
                     ) -> None:
    """Make ``<scheme>://…`` URLs open tables built by ``factory(url)``."""
    _BACKENDS[scheme] = factory
    if extra:
        _EXTRAS[scheme] = extra


def known_schemes() -> list[str]:
    return sorted(_BACKENDS)


def redact(url: str) -> str:
    """The URL with any password or token removed, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable store URL>"
    if parts.password or "@" in (parts.netloc or ""):
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        netloc = (parts.username + ":***@" if parts.username else "***@") + host
        parts = parts._replace(netloc=netloc)
    query = parts.query
    if query:
        redacted = []
        for item in query.split("&"):
            k, _, _v = item.partition("=")
            if k.lower() in ("token", "password", "secret", "key", "credentials"):
                item = f"{k}=***"
            redacted.append(item)
        parts = parts._replace(query="&".join(redacted))
    if parts == urlsplit(url):
        return url  # nothing secret: keep it exact (geturl drops a slash of sqlite:////abs)
    return parts.geturl()


def open_table(url: str) -> Table:
    """Build the backend a store URL names; a bad URL is a `StoreError` listing the schemes."""
    if not isinstance(url, str) or "://" not in url:
        raise StoreError(f"store URL {redact(str(url))!r} has no scheme; use one of "
                         f"{', '.join(s + '://' for s in known_schemes())}")
    scheme = url.split("://", 1)[0].lower()
    factory = _BACKENDS.get(scheme)
    if factory is None:
        raise StoreError(f"unknown store URL scheme {scheme!r} in {redact(url)!r}; known: "
                         f"{', '.join(s + '://' for s in known_schemes())}")
    return factory(url)
