"""The row layout of format 8: which keys and cells a run writes, and how a
time range is covered (see `fll.rowkeys` and docs/storage.md, "How runs are
stored").

Run rows (``b|``/``f|``, a column per run), first-run rows (``i|``/``o|``),
bucket rows (``g|``/``h|``, a column per set) with their directory row, and
the failed-run rows (``x|``/``y|``); the spans a question reads
(`_cover_spans`, `_first_run_spans`); and whether a bucket cell or a set is
still used (`unused_buckets`, `set_used_since`), decided without any by-set
index. The rest of the store builds on this module; it imports none of it.
"""
from __future__ import annotations

import bisect
import struct
from typing import AbstractSet as Set, Iterable, Iterator, Sequence

import msgpack

from .. import rowkeys as rk
from ..errors import InvalidLineageError, StoreError
from .base import Span, Table

_T = struct.Struct(">q")
_INV = struct.Struct(">Q").pack

_RUN_ROW_MS, _BUCKET1_MS = rk.LEVELS4[0], rk.LEVELS4[1]


#: key prefixes of the rows that gather a column per run or per set: a backend
#: that stores rows packed keeps these a cell at a time (`SQLiteTable.declare_wide`)
WIDE_PREFIXES = (rk.BACKWARD + rk.SEP, rk.FORWARD + rk.SEP, rk.BACKWARD_BUCKET + rk.SEP,
                 rk.FORWARD_BUCKET + rk.SEP, rk.FIRST_BACKWARD + rk.SEP,
                 rk.FIRST_FORWARD + rk.SEP, rk.SCHEMAS + rk.SEP)
#: the eventTypes that make a run failed (`fll.store.runs`): its lineage is kept
#: out of the default index, in the failed-run rows (``x|``/``y|``)
FAILED_STATES = frozenset({b"FAIL", b"ABORT"})
#: the states that end a run (`run_ended`)
ENDED_STATES = FAILED_STATES | {b"COMPLETE"}
#: the run row's column marking a run indexed in the first-run rows because it
#: was under way when recorded (`fll.store.writer`: its bucket cells come with
#: the event that ends it): b"1"; absent or b"0" (a backend without
#: transactions writes the mark off in the run's check-and-put) when not
UNDER_WAY = "i"


def marked_under_way(row: dict[str, bytes] | None) -> bool:
    """Whether a run row (``r|``) marks its run indexed while under way."""
    return row is not None and row.get(UNDER_WAY) == b"1"
_FAILED_KINDS = {"incoming": rk.FAILED_BACKWARD, "outgoing": rk.FAILED_FORWARD}
_BUCKET_KINDS = {"incoming": rk.BACKWARD_BUCKET, "outgoing": rk.FORWARD_BUCKET}
_RUN_KINDS = {"incoming": rk.BACKWARD, "outgoing": rk.FORWARD}
_FIRST_KINDS = {"incoming": rk.FIRST_BACKWARD, "outgoing": rk.FIRST_FORWARD}
#: the first-run rows beside each run index (format 5)
FIRST_OF_RUN = {rk.BACKWARD: rk.FIRST_BACKWARD, rk.FORWARD: rk.FIRST_FORWARD}
RUN_OF_FIRST = {v: k for k, v in FIRST_OF_RUN.items()}
#: the run index a bucket kind summarizes
RUN_OF_BUCKET = {rk.BACKWARD_BUCKET: rk.BACKWARD, rk.FORWARD_BUCKET: rk.FORWARD}
_BUCKET_OF_RUN = {v: k for k, v in RUN_OF_BUCKET.items()}

#: the column of a format-6 ``s|`` row: the 16-byte digest of its schema,
#: whose fields are in the ``q|`` row of that digest (a schema is stored once,
#: not once per run that reports it); format 7 keeps the digest in a column
#: per run of the dataset's ``S|`` row (`fll.rowkeys.schema_column`)
SCHEMA_REF = "h"


def _corrupt(url: str, key: bytes) -> StoreError:
    return StoreError(f"store {url}: row {key!r} is corrupt (run `fll admin fsck`)")


def _target(url: str, key: bytes, raw: bytes) -> tuple[str, str]:
    try:
        ns, name = msgpack.unpackb(raw, raw=False)
        return str(ns), str(name)
    except Exception:
        raise _corrupt(url, key) from None


def alias_candidates(url: str, key: bytes, row: dict[str, bytes] | None
                     ) -> list[tuple[str, str]]:
    """The aliases a dataset's ``A|`` row names, to confirm (`confirmed_aliases`)."""
    try:
        return [rk.alias_of_column(c) for c in row or ()]
    except (ValueError, UnicodeDecodeError):
        raise _corrupt(url, key) from None


def confirmed_aliases(candidates: dict[tuple[str, str], list[tuple[str, str]]],
                      rows: dict[bytes, dict[str, bytes]]
                      ) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Of each dataset's candidate aliases, those whose alias row (in
    ``rows``) names it, sorted: an ``A|`` column outlives a crash between a
    change's puts, and the alias row says what holds."""
    out = {}
    for d, found in candidates.items():
        want = msgpack.packb(list(d), use_bin_type=True)
        out[d] = sorted(a for a in found if rows.get(rk.alias(*a), {}).get("t") == want)
    return out


def _decode_key(url: str, key: bytes) -> rk.Key:
    try:
        return rk.decode(key)
    except (ValueError, UnicodeDecodeError):
        raise _corrupt(url, key) from None


def _check_name(value: object, what: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidLineageError(f"{what} must be a non-empty string, got {value!r}")


def _check_run(run_id: object, start_ms: object) -> None:
    if not isinstance(run_id, str) or not run_id:
        raise InvalidLineageError(f"run id must be a non-empty string, got {run_id!r}")
    if isinstance(start_ms, bool) or not isinstance(start_ms, int):
        raise InvalidLineageError(f"start time must be integer epoch milliseconds, "
                                  f"got {start_ms!r}")
    if not 0 <= start_ms <= rk.MAX_TIME:
        raise InvalidLineageError(f"start time {start_ms} ms is out of range")


def run_failed(row: dict[str, bytes] | None) -> bool:
    """Whether a run-model row (``n|``) holds a FAIL or ABORT event."""
    return row is not None and any(v in FAILED_STATES for c, v in row.items() if len(c) == 32)


def run_ended(row: dict[str, bytes] | None) -> bool:
    """Whether a run-model row (``n|``) holds a COMPLETE, FAIL or ABORT event."""
    return row is not None and any(v in ENDED_STATES for c, v in row.items() if len(c) == 32)


def failed_rows(run_id: str, start: int, checksum: str,
                endpoints: tuple[list[tuple[str, str]], list[tuple[str, str]]]
                ) -> dict[bytes, dict[str, bytes]]:
    """The failed-run rows of a run: one per destination (``x|``) and source
    (``y|``) of its set (``endpoints``: (destinations, sources))."""
    dsts, srcs = endpoints
    value = {"c": checksum.encode()}
    rows = {rk.failed(rk.FAILED_BACKWARD, ns, name, start, run_id): value for ns, name in dsts}
    rows.update({rk.failed(rk.FAILED_FORWARD, ns, name, start, run_id): value
                 for ns, name in srcs})
    return rows


def _first_run_spans(prefix: bytes, start: int, end: int, interior: list[Span]
                     ) -> list[Span]:
    """The spans of an endpoint's first-run rows for ``[start, end)``: the rows
    holding ``start`` and ``end - 1``, whose runs the caller filters by time,
    returned; those between, which hold only runs in the range, added to
    ``interior``."""
    start, end = max(start, 0), min(end, rk.MAX_TIME + 1)
    if end <= start:
        return []
    first, last = start - start % _RUN_ROW_MS, (end - 1) - (end - 1) % _RUN_ROW_MS
    if last - first <= _RUN_ROW_MS:
        return [Span(*rk.time_range(prefix, first, last + _RUN_ROW_MS))]
    interior.append(Span(*rk.time_range(prefix, first + _RUN_ROW_MS, last)))
    return [Span(*rk.time_range(prefix, first, first + _RUN_ROW_MS)),
            Span(*rk.time_range(prefix, last, last + _RUN_ROW_MS))]


def _cover_spans(heads: list[bytes], runs: Sequence[tuple[int, int, int]]) -> list[Span]:
    """The cover's runs (`fll.rowkeys.cover4_runs`) as key spans with their keys:
    consecutive buckets of one level are consecutive keys (newest first), and
    no other row lies between them."""
    out: list[Span] = []
    for k, first, newest in runs:
        head = heads[k]
        # the keys between are built only for a backend that reads keys (HBase)
        out.append(Span(head + _INV(rk.MAX_TIME - newest),
                        head + _INV(rk.MAX_TIME - first) + b"\x00",
                        _Keys(head, range(first, newest + 1, rk.LEVELS4[k]))))
    return out


def row_sets(key: bytes, cols: dict[str, bytes], ignore: Set[str] = frozenset()
             ) -> Iterator[tuple[str, str, int]]:
    """(run, checksum, start ms) of every run a run row (``b|``, ``f|``, ``i|``,
    ``o|``) holds, a column per run. ValueError when the row does not decode
    (a narrow row of an older format included: `fll admin upgrade` reads those)."""
    k = rk.decode(key)
    if k.level != 0:
        raise ValueError("not a run row of this format")
    for run_id, value in cols.items():
        if run_id not in ignore:
            t, checksum = rk.run_of(k.start_ms or 0, value)
            yield run_id, checksum, t


Bucket = tuple[bytes, str, str, str, int]  # (bucket kind, namespace, name, checksum, start ms)


def unused_buckets(table: Table, wanted: Iterable[Bucket], *, ignore: Set[str] = frozenset(),
                   at_once: bool = False) -> list[tuple[bytes, str]]:
    """The bucket cells ``(row, checksum)``, at every level, of these (kind,
    endpoint, set, start) that no run keeps once the runs in ``ignore`` (and
    any whose run cells are already deleted) are gone.

    Level 1 (4 s): the run rows of the bucket's span, filtered by checksum.
    Level k: a bucket is kept when one of its 64 children at level k - 1 is
    (present, and not found unused here): one multi-get per level. Levels are
    done in order for all of ``wanted`` at once, and a kept bucket stops its
    way up (every coarser bucket holds it). Directory cells stay (one per
    endpoint and 2.2 years: an absent top bucket costs a key in a multi-get).

    ``at_once``: every level's rows in the first read (a backend without
    `rows_holding`), as a superseded run's cleanup wants: its set is most
    often unused all the way up (its other runs were superseded too), and
    one call reads what the level-by-level walk would in five.
    """
    wanted = list(wanted)
    size1 = rk.LEVELS4[1]
    holding = getattr(table, "rows_holding", None)
    # level 1: the run rows of each bucket's span, all in one read
    spans: dict[tuple[bytes, str, str, int], Span] = {}
    for kind, ns, name, _, start in wanted:
        first = start - start % size1
        span = (kind, ns, name, first)
        if span not in spans:
            spans[span] = _children(RUN_OF_BUCKET[kind], ns, name, 0, first, size1)
    ahead: dict[bytes, Span] = {}
    if at_once and holding is None:
        for kind, ns, name, _, start in wanted:
            for k in range(1, rk.TOP):
                size = rk.LEVELS4[k + 1]
                sp = _children(kind, ns, name, k, start - start % size, size)
                ahead.setdefault(sp.lo, sp)
    rows = table.read_spans(list(spans.values()) + list(ahead.values())).rows
    keys = every_key = sorted(rows)
    users: dict[tuple[bytes, str, str, int], set[str]] = {}
    for span, sp in spans.items():
        found = users[span] = set()
        for key in keys[bisect.bisect_left(keys, sp.lo):bisect.bisect_left(keys, sp.hi)]:
            try:
                found.update(c for _, c, _ in row_sets(key, rows[key], ignore))
            except (ValueError, UnicodeDecodeError):
                continue  # a corrupt row keeps nothing: fsck reports it
    level = {(kind, ns, name, checksum, start - start % size1)
             for kind, ns, name, checksum, start in wanted
             if checksum not in users[(kind, ns, name, start - start % size1)]}
    out: list[tuple[bytes, str]] = []
    for k in range(1, len(rk.LEVELS4)):
        if not level:
            break
        gone = {(rk.bucket4(kind, ns, name, k, t), c) for kind, ns, name, c, t in level}
        out.extend(sorted(gone))
        if k == rk.TOP:
            break
        parent_size = rk.LEVELS4[k + 1]
        parents = {(kind, ns, name, c, t - t % parent_size) for kind, ns, name, c, t in level}
        # the children that exist, read as one span per parent (SQLite and
        # Bigtable read only the rows there; HBase gets the 64 keys)
        children = {p: _children(p[0], p[1], p[2], k, p[4], parent_size) for p in parents}
        # a backend that can find the children holding the set's cell itself
        # (SQLite: `SQLiteTable.rows_holding`) sends back no other set's cells
        asked = list(children.items())
        held = holding([(sp, p[3]) for p, sp in asked]) if holding is not None else None
        if held is not None:
            level = {p for (p, _), rows in zip(asked, held, strict=True)
                     if not any((key, p[3]) not in gone for key in rows)}
            continue
        if ahead and all(sp.lo in ahead for sp in children.values()):
            present, keys = rows, every_key  # read with level 1
        else:
            present = table.read_spans(
                list({sp.lo: sp for sp in children.values()}.values())).rows
            keys = sorted(present)
        level = {p for p, sp in children.items()
                 if not any(p[3] in present[key] and (key, p[3]) not in gone
                            for key in keys[bisect.bisect_left(keys, sp.lo):
                                            bisect.bisect_left(keys, sp.hi)])}
    return out


def _children(kind: bytes, namespace: str, name: str, k: int, first: int, size: int) -> Span:
    """The span of the level-``k`` rows (level 0: run rows) of one endpoint
    that lie in ``[first, first + size)``; its keys built only if a backend
    asks for them."""
    times = range(first, min(first + size, rk.MAX_TIME + 1), rk.LEVELS4[k])
    # the keys of `rk.run_row` (level 0) and `rk.bucket4`: times aligned to the
    # level and within [0, MAX_TIME] (checked once), the endpoint's prefix
    # escaped once, not once per key (HBase asks 64 keys per span)
    if first % rk.LEVELS4[k] or not 0 <= first <= rk.MAX_TIME:
        raise ValueError(f"a level-{k} span cannot start at {first} ms")
    head = rk.dataset_prefix(kind, namespace, name) + (bytes([0x30 + k]) if k else b"")
    return Span(head + _INV(rk.MAX_TIME - times[-1]),
                head + _INV(rk.MAX_TIME - times[0]) + b"\x00", _Keys(head, times))


class _Keys:
    """The keys of a span of time-index rows, built when iterated, newest first."""

    __slots__ = ("_head", "_times")

    def __init__(self, head: bytes, times: range):
        self._head, self._times = head, times

    def __iter__(self) -> Iterator[bytes]:
        # ``head + inverted time`` for each, newest first, with no Python frame per key
        return map(self._head.__add__,
                   map(_INV, map(rk.MAX_TIME.__sub__, reversed(self._times))))


def set_used_since(table: Table, checksum: str, endpoints: Iterable[tuple[bytes, str, str]],
                   since_ms: int) -> bool:
    """Whether any run of the set, failed runs included, started at or after
    ``since_ms`` (`_used_by_index`; a FAIL/ABORT run's cells are in the
    failed-run rows of each of its endpoints: those of one endpoint are read)."""
    eps = list(endpoints)
    if _used_by_index(table, checksum, eps, since_ms):
        return True
    for kind, ns, name in eps[:1]:
        failed_kind = rk.FAILED_BACKWARD if kind == rk.BACKWARD else rk.FAILED_FORWARD
        lo, hi = rk.time_range(rk.dataset_prefix(failed_kind, ns, name), since_ms,
                               rk.MAX_TIME + 1)
        return any(cols.get("c") == checksum.encode() for _, cols in table.scan(lo, hi))
    return False


def _used_by_index(table: Table, checksum: str, endpoints: Iterable[tuple[bytes, str, str]],
                   since_ms: int) -> bool:
    """Whether any run of the set started at or after ``since_ms``: the run
    indexes of its endpoints (``(b|/f| kind, namespace, name)``) read side by
    side, a page each in turn, stopping as soon as one of them holds a run of
    the set (used) or one ends without (unused: every run of a set has a row
    in each of its endpoints' index), so the cost follows the endpoint with
    the fewest runs."""
    scans = []
    for kind, ns, name in endpoints:
        # from the run row holding ``since_ms``: its runs are filtered by time
        lo, hi = rk.time_range(rk.dataset_prefix(kind, ns, name),
                               since_ms - since_ms % rk.LEVELS4[0], rk.MAX_TIME + 1)
        scans.append(iter(table.scan(lo, hi)))
    if not scans:
        return False
    while True:
        for scan in scans:
            for _ in range(256):
                row = next(scan, None)
                if row is None:
                    return False
                try:
                    if any(c == checksum and t >= since_ms
                           for _, c, t in row_sets(row[0], row[1])):
                        return True
                except (ValueError, UnicodeDecodeError):
                    continue


def run_cells(kind: bytes, namespace: str, name: str, start: int, run_id: str, checksum: str
              ) -> dict[bytes, dict[str, bytes]]:
    """Every cell one run writes for one endpoint (``kind``: ``b|`` or ``f|``):
    its run cell, its set's bucket cells at each level and its directory cell.
    What an upgrade writes and fsck expects; the write path builds the same
    cells with memos (`LineageStore._index_rows`)."""
    bucket_kind = _BUCKET_OF_RUN[kind]
    rows: dict[bytes, dict[str, bytes]] = {
        rk.run_row(kind, namespace, name, start): {
            run_id: rk.run_value(start, rk.checksum_bytes(checksum))}}
    for k in range(1, len(rk.LEVELS4)):
        rows[rk.bucket4(bucket_kind, namespace, name, k, start - start % rk.LEVELS4[k])] = \
            {checksum: b""}
    top = start - start % rk.LEVELS4[rk.TOP]
    rows[rk.directory(bucket_kind, namespace, name)] = {str(top): b""}
    return rows


_BUCKET_OF_RUN = {rk.BACKWARD: rk.BACKWARD_BUCKET, rk.FORWARD: rk.FORWARD_BUCKET}
