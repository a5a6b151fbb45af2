"""The lineage store: records runs as wide rows and answers time-ranged questions.

Format 8 (see `fll.rowkeys` and docs/storage.md, "How runs are stored"): wide
rows, a column per run or per set; time buckets, first-run rows, shapes,
summaries stored as shared groups with their tags, schemas stored once and
named from a row per dataset (a column per run, `fll.store.datasets`), and a
dataset's aliases listed in one row of its own (a column per alias).

Write path (`record`): the ``d|<checksum>`` row once per distinct operation
set: its shape's checksum and its endpoints, the shape (``p|``: the operations
with placeholder endpoints and their summaries) once per shape (see
`split_shape`); or, when the set cannot be a shape, its canonical operations
and summaries deflated with a preset dictionary (`data_row`). Per run and
endpoint one cell in the endpoint's run row of those
64 ms (``b|``/``f|``: run → its millisecond in the row and its checksum,
level 0), one cell per bucket level (``g|``/``h|``: 4 s ×64 up to 2.2 years,
checksum → b"", blind and idempotent: a set re-run in a bucket writes nothing
new) and the top bucket's column in the endpoint's directory row; last the
``r|<run>`` row, whose first stored start time is the run's for good, and the
only row holding the run's program. A set's first run (its ``d|`` row was
absent) writes the same cell again in a first-run row (``i|``/``o|``) instead
of its bucket and directory cells, on backends whose questions read the
first-run range in the same call as the cover (SQLite, Bigtable: see
`LineageStore.first_runs`). Write amplification: 1 + 5 + 1 cells per run and
endpoint, 2 for a first run, of which a set re-run often adds only its run cell; a
batch merges a set's bucket cells once per 4 s bucket, since the finest
bucket fixes every coarser one (`_index_rows`). On
SQLite the checks and the writes are one transaction (`SQLiteTable.atomic`);
on Bigtable/HBase the run row is claimed by check-and-put before its index
cells, after the data row (a blind put: it is content-addressed).

Read path: a field question over ``[start, end)`` reads the canonical cover
(`fll.rowkeys.cover4`: at most 63 rows per side per level, the edges being
run rows whose runs are filtered by their exact time) as ONE multi-get of
explicit row keys (HBase ``getRows``; on SQLite and Bigtable as key ranges in
one call, with the first-run rows of the range), then each set once (one
multi-get of those not cached, one more of their shapes not cached) and its
stored summaries: two round trips, a third only when the range spans more
than 64 top buckets (140 years: the directory row says which exist). Worst
case: about 700 keys asked, most absent. Cost follows the sets in the range,
never the history. The store must never recompute a summary per query, nor
cache a row that did not decode.

Whether a bucket cell is still used (purge, supersede, fsck) is decided
without any by-set index: level 1 by the run rows of its 4 s, each coarser
level by its 64 children one level down (`unused_buckets`).

The parts: `fll.store.layout` (keys, cells, cover spans, unused buckets),
`fll.store.datarows` (the ``d|`` and ``p|`` rows), `fll.store.writer` and
`fll.store.indexing` (recording), `fll.store.reader` (questions),
`fll.store.levels` (a walk's hop read at once), `fll.store.datasets`
(schemas and aliases); this module composes them into
`LineageStore` and holds the format version.
"""
from __future__ import annotations

import copy
import os
import socket
import threading
import uuid
from collections import OrderedDict

from .. import rowkeys as rk
from ..errors import StoreError
from ..opset import FieldLineageInfo
from .base import Table
from .cache import DEFAULT_CACHE_MB, CacheBudget, SizedLRU
from .datarows import _Cached
from .datasets import Datasets
from .layout import WIDE_PREFIXES, _corrupt
from .levels import Levels
from .writer import WRITER_TTL_MS, Writer

#: the row layout this module writes and reads (see docs/storage.md, "How runs are stored")
FORMAT = 8


def has_lineage_rows(table: Table) -> bool:
    """Whether a table holds a row other than meta rows (a maintenance lease or
    a writer's row is no content: a table of only those is a new store)."""
    meta = rk.META + rk.SEP
    return any(True for lo, hi in ((b"", meta), (rk.prefix_end(meta), b""))
               for _ in table.scan(lo, hi, limit=1))


def unstamped_format(table: Table) -> int:
    """The format of a table without a format stamp: this one when it holds no
    lineage or its run rows are of this format (a store whose rows were lost
    under a running writer, as a Bigtable emulator restarted, gets rows again
    without the stamp written at its first open); 1 (before versioning) when
    its run index is narrow rows or its upgrade began (`fll.store.admin.upgrade`
    marks that before it changes a row); 6 when its run rows are wide but its
    schema reports are a row each; 7 when its aliases are a row each."""
    if not has_lineage_rows(table):
        return FORMAT
    if table.get(rk.meta("upgrade")) is not None:
        return 1  # an upgrade of an unstamped store began: its rows are of both kinds
    for key, _ in table.scan(rk.BACKWARD + rk.SEP, rk.prefix_end(rk.BACKWARD + rk.SEP), limit=1):
        try:
            if rk.decode(key).level != 0:
                return 1
        except (ValueError, UnicodeDecodeError):
            return 1
    for _ in table.scan(rk.SCHEMA + rk.SEP, rk.prefix_end(rk.SCHEMA + rk.SEP), limit=1):
        return 6  # wide run rows, but a row per run's schema report
    prefix = rk.ALIASED_BY + rk.SEP
    for key, _ in table.scan(prefix, rk.prefix_end(prefix)):  # aliases are few
        if key.count(rk.SEP) > 2:
            return 7  # a row per alias
    return FORMAT


class OlderFormat(StoreError):
    """A store of a format older than `FORMAT`: `fll admin upgrade` converts it."""

    def __init__(self, url: str, found: int):
        super().__init__(f"store {url} has format {found}; this fll reads and writes format "
                         f"{FORMAT}: convert it with `fll --store {url} admin upgrade` "
                         f"(stop the writers of the older fll first)")
        self.found = found


class LineageStore(Writer, Levels, Datasets):
    """Field lineage over any `Table` backend. Safe to share between threads.

    Runs whose run model says FAIL or ABORT (`fll.store.runs`) are indexed in
    the failed-run rows instead of the default index: questions leave them
    out, and `including_failed` gives a store whose questions read them too."""

    def __init__(self, table: Table, *, cache_size: int = 4096,
                 cache_mb: float = DEFAULT_CACHE_MB):
        """``cache_size``: decoded operation sets kept at most; ``cache_mb``: the
        bytes this process's caches hold at most (`fll.store.cache`), shared
        with the `SetMerges` a server makes from `cache_budget`."""
        self.table = table
        self.url = table.url
        self.cache_budget = CacheBudget.of_mb(cache_mb)
        self._cache: SizedLRU[_Cached] = SizedLRU(self.cache_budget.sets, _Cached.footprint,
                                                  cache_size)
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, int], list[tuple[bytes, dict[str, bytes]]]] = {}
        self._level_keys: dict[tuple[str, int, int], list[tuple[bytes, dict[str, bytes]]]] = {}
        self._cols: dict[str, dict[str, bytes]] = {}
        self._eps: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {}
        self._writer_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._announced = -WRITER_TTL_MS
        self._raw: dict[str, bytes] = {}
        self._shape_rows: dict[str, bytes] = {}  # shape checksum -> its p| row's z, to write
        self._sets_put: set[str] = set()  # sets whose data rows a put of this process stored
        # rows of sets made by another process, until written (`Writer.adopt`)
        self._adopted: OrderedDict[str, dict[bytes, dict[str, bytes]]] = OrderedDict()
        self._adopt_lock = threading.Lock()
        # read: ops, summaries as stored
        self._shapes: SizedLRU[tuple[bytes, bytes]] = SizedLRU(
            self.cache_budget.shapes, lambda p: 200 + len(p[0]) + len(p[1]), 1024)
        # the last sets recorded, as given (`operation_set`); few: a wide set is large
        self._written: OrderedDict[str, FieldLineageInfo] = OrderedDict()
        # schemas read, by their digest (content-addressed: never stale)
        self._schema_bodies: OrderedDict[bytes, list] = OrderedDict()
        self._tops_seen: set[int] = set()
        declare = getattr(table, "declare_wide", None)
        if callable(declare):
            declare(WIDE_PREFIXES)
        self.format = self._open_format()
        # a set's first run indexed without bucket cells (format 5): only where
        # a question reads the first-run rows of its range in the same call
        # as its cover; on HBase (keys, not ranges, in one call) every run
        # writes its bucket cells, as in format 4
        self.first_runs = bool(getattr(table, "one_call_ranges", False))

    def _open_format(self) -> int:
        """The store's format version; an empty store is stamped with this one's.
        A store without a stamp but with rows predates versioning: format 1.
        This class reads and writes one format, `FORMAT`: a store of an older
        one is refused until `fll admin upgrade` converts it (the only code
        that reads older formats, `fll.store.admin.upgrade`)."""
        row = self.table.get(rk.meta("format"))
        if row is None or "v" not in row:
            found = unstamped_format(self.table)
            if found == FORMAT:
                try:
                    self.table.put({rk.meta("format"): {"v": str(FORMAT).encode()}})
                except StoreError:
                    pass  # read-only access: an empty store reads the same in any format
                return FORMAT
        else:
            try:
                found = int(row["v"])
            except ValueError:
                raise _corrupt(self.url, rk.meta("format")) from None
        if found > FORMAT:
            raise StoreError(f"store {self.url} has format {found}, newer than format "
                             f"{FORMAT} this fll reads; upgrade fll")
        if found < FORMAT:
            raise OlderFormat(self.url, found)
        return found

    def close(self) -> None:
        self.table.close()

    def including_failed(self) -> "LineageStore":
        """This store, whose questions also answer from FAIL/ABORT runs (the
        same table, caches and lock: a view, not a second store)."""
        if self.include_failed:
            return self
        view = copy.copy(self)
        view.include_failed = True
        return view

    def clear_caches(self, *, shapes: bool = True) -> None:
        """Forget every decoded set, schema, set kept as recorded and (unless
        ``shapes`` is False) shape: the store then reads as a process that just
        opened it (tests, benchmarks)."""
        with self._lock:
            self._cache.clear()
            if shapes:
                self._shapes.clear()
            self._written.clear()
            self._schema_bodies.clear()
            self._sets_put.clear()

    def __enter__(self) -> "LineageStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
