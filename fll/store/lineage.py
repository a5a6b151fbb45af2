"""The lineage store: records runs as wide rows and answers time-ranged questions.

Format 6 (see `fll.rowkeys` and docs/storage.md, "How runs are stored"): wide
rows, a column per run or per set; time buckets, first-run rows, shapes,
summaries stored as shared groups with their tags, schemas stored once.

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
never the history. This module must never recompute a summary per query, nor
cache a row that did not decode.

Whether a bucket cell is still used (purge, supersede, fsck) is decided
without any by-set index: level 1 by the run rows of its 4 s, each coarser
level by its 64 children one level down (`unused_buckets`).
"""
from __future__ import annotations

import bisect
import copy
import os
import socket
import struct
import threading
import time
import uuid
import zlib
from collections import OrderedDict
from typing import AbstractSet as Set, Callable, Iterable, Iterator, NamedTuple, Sequence

import msgpack
import xxhash

from .. import rowkeys as rk
from ..codec import (PLACEHOLDER_NS, Summaries, canonical_doc, decode_canonical,
                     summaries_to_bytes)
from ..errors import FllError, InvalidLineageError, StoreError
from ..model import DROPPED, EndPoint, EndPointField, FieldLineageInfo, Operation
from .base import Span, Table
from .cache import DEFAULT_CACHE_MB, CacheBudget, SizedLRU

_T = struct.Struct(">q")
_INV = struct.Struct(">Q").pack
# the ``w`` column of a run row on backends without transactions: its index
# rows are being written (pending) or are all written; absent means written
_PENDING = b"0"
_WRITTEN = b"1"
#: the maintenance lease row (``v|lease``) and the writer rows (``v|writer-…``)
#: of backends without transactions; see `_announce_writer` and `admin.maintenance`
LEASE = "lease"
WRITER_PREFIX = "writer-"
WRITER_TTL_MS = 30_000


_RUN_ROW_MS, _BUCKET1_MS = rk.LEVELS4[0], rk.LEVELS4[1]


def _now_ms() -> int:
    return int(time.time() * 1000)


#: the row layout this module writes and reads (see docs/storage.md, "How runs are stored")
FORMAT = 6
#: key prefixes of the rows that gather a column per run or per set: a backend
#: that stores rows packed keeps these a cell at a time (`SQLiteTable.declare_wide`)
WIDE_PREFIXES = (rk.BACKWARD + rk.SEP, rk.FORWARD + rk.SEP, rk.BACKWARD_BUCKET + rk.SEP,
                 rk.FORWARD_BUCKET + rk.SEP, rk.FIRST_BACKWARD + rk.SEP,
                 rk.FIRST_FORWARD + rk.SEP)
#: the eventTypes that make a run failed (`fll.store.runs`): its lineage is kept
#: out of the default index, in the failed-run rows (``x|``/``y|``)
FAILED_STATES = frozenset({b"FAIL", b"ABORT"})
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

# -- the d| row ----------------------------------------------------------------
#
# ``z``: a version byte, then one raw deflate stream (no header) against a
# preset dictionary of what every canonical set repeats (map keys, operation
# types, the shape of inputs and endpoints) of: the length of the canonical
# operations (4 bytes), the operations, the summaries. One stream, so the
# summaries reuse the operations' field names. A 10-field set takes 428 bytes
# instead of 549. Dropping the summaries (computing them on first read) would
# save 183 more, but a set read for the first time would cost about 2.7 ms
# instead of 0.35 (measured on the bench's 10-field set): wide ranges over
# many sets, beyond the cache, would pay it on every question; and with tags
# (format 6) far more. Older rows (format 2's plain ``o`` and ``s``, the
# summaries of formats 2-5) are converted by `fll.store.admin.upgrade`, never
# read here. The dictionary of version 1 must
# never change: a new one takes a new version byte.
_ZDICT_1 = (b"\xa6source\x83\xa4name\xa9namespace\xaaproperties\x80\xa4type\xa4READ\x85"
            b"\xabdescription\xabdestination\x83\xa4name\xa9namespace\xaaproperties\x80"
            b"\xa6inputs\x93\x82\xa4name\xa4type\xa5WRITE\xa1v\x01\x82\xaaoperations\x85"
            b"\xabdescription\xa4read\xa4name\xa4read\xa7outputs\x91\x82\xa4name\xa6origin"
            b"\xa4read\xa4type\xa9TRANSFORM\x85\xabdescription\xa6inputs\x91\x82\xa4name"
            b"\xa6origin\xa4name\xa7outputs\x91\xa4type\xa9TRANSFORM\x85\xabdescription")
_ZDICTS = {1: _ZDICT_1}
_ZVERSION = 1
_LEN = struct.Struct(">I")


def data_row(info: FieldLineageInfo) -> dict[str, bytes]:
    """The ``d|`` row of an operation set, as this format writes it."""
    return {"z": _deflated(info.canonical_bytes(), summaries_to_bytes(info))}


def _deflated(ops: bytes, summaries: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zdict=_ZDICTS[_ZVERSION])
    return bytes([_ZVERSION]) + z.compress(_LEN.pack(len(ops)) + ops + summaries) + z.flush()


def data_parts(row: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(canonical operations, summaries) of a whole ``d|`` row (or a ``p|`` row);
    ValueError when it is not one."""
    z = row.get("z")
    if z is None:
        raise ValueError("a data row without operations and summaries")
    zdict = _ZDICTS.get(z[0]) if z else None
    if zdict is None:
        raise ValueError(f"data row encoding {z[:1]!r} is unknown to this fll")
    try:
        d = zlib.decompressobj(-15, zdict=zdict)
        body = d.decompress(z[1:]) + d.flush()
    except zlib.error as e:
        raise ValueError(f"data row does not inflate ({e})") from None
    if not d.eof or len(body) < 4 or _LEN.unpack_from(body)[0] > len(body) - 4:
        raise ValueError("data row is truncated")
    n = _LEN.unpack_from(body)[0]
    return body[4:4 + n], body[4 + n:]


def decode_data(row: dict[str, bytes], table: Table | None = None) -> FieldLineageInfo:
    """The operation set of a ``d|`` row of any format (a row in shape form
    reads its shape row from ``table``); FllError or ValueError if corrupt."""
    if SHAPED in row:
        if table is None:
            raise ValueError("a data row in shape form read without its table")
        shape_checksum, eps = shape_ref(row)
        shape_row = table.get(rk.shape(shape_checksum))
        if shape_row is None:
            raise ValueError(f"the shape {shape_checksum} of a data row is missing")
        return decode_canonical(join_shape(data_parts(shape_row)[0], eps))
    return decode_canonical(data_parts(row)[0])


# -- shapes (format 5) -----------------------------------------------------------
#
# A daily job reading ``.../day=N`` records a new set every day that differs
# from yesterday's only in an endpoint. Its ``d|`` row then holds only what
# differs: ``y`` = the 16 raw bytes of its shape's checksum and the endpoints
# (msgpack, each as the canonical operations spell it, in order of first
# appearance). The shape, ``p|<checksum>``, is the set's canonical operations
# with each endpoint replaced by a placeholder ``#:<i>``, and the summaries of
# that placeholder set, encoded as a full ``d|`` row is (`data_row`): every set
# of the shape shares it, and its summaries are the set's once the endpoints
# are put back (`fll.codec.Summaries`), so no read computes one. A set whose
# endpoints cannot stand apart (one dataset with two sets of properties, a
# namespace ``#``), or whose rebuilt operations would not be byte for byte its
# canonical ones, keeps a full row.
SHAPED = "y"
#: the column of an ``s|`` row: the 16-byte digest of its schema, whose fields
#: are in the ``q|`` row of that digest (format 6: a schema is stored once, not
#: once per run that reports it)
SCHEMA_REF = "h"
#: sets a store keeps as it recorded them (`LineageStore.operation_set`)
_WRITTEN_KEPT = 32
_WRITTEN_BYTES = 64 * 1024  # the largest of them, as canonical bytes
#: schemas a store keeps decoded by digest
_SCHEMAS_KEPT = 1024
_ENDPOINT_FIELDS = ("destination", "source")


def split_shape(info: FieldLineageInfo) -> tuple[bytes, list[dict]] | None:
    """(the shape's canonical bytes, the endpoints in placeholder order) of a
    set, or None when it cannot be stored as a shape. Built from the set's
    canonical document, never by unpacking its canonical bytes; checked
    against them byte for byte as a reader will rebuild them (from the
    endpoints as stored)."""
    doc = canonical_doc(info.operations)
    eps: list[dict] = []
    index: dict[bytes, int] = {}
    named: dict[tuple[str, str], bytes] = {}
    shape_ops, where = [], []
    for n, op in enumerate(doc["operations"]):
        for field in _ENDPOINT_FIELDS:
            ep = op.get(field)
            if ep is None:
                continue
            if ep["namespace"] == PLACEHOLDER_NS:
                return None
            packed = msgpack.packb(ep, use_bin_type=True)
            if named.setdefault((ep["namespace"], ep["name"]), packed) != packed:
                return None  # one dataset, two sets of properties: a summary tells them apart
            i = index.get(packed)
            if i is None:
                i = index[packed] = len(eps)
                eps.append(ep)
            op = dict(op)
            op[field] = {"name": str(i), "namespace": PLACEHOLDER_NS, "properties": {}}
            where.append((n, field, i))
        shape_ops.append(op)
    shape = msgpack.packb({**doc, "operations": shape_ops}, use_bin_type=True)
    stored = shape_ref({SHAPED: bytes(16) + _pack_endpoints(eps)})[1]
    for n, field, i in where:
        doc["operations"][n][field] = stored[i]
    if msgpack.packb(doc, use_bin_type=True) != info.canonical_bytes():
        return None
    return shape, eps


def join_shape(shape: bytes, eps: Sequence[dict]) -> bytes:
    """A set's canonical operations from its shape and its endpoints."""
    doc = msgpack.unpackb(shape, raw=False)
    for op in doc["operations"]:
        for field in _ENDPOINT_FIELDS:
            ep = op.get(field)
            if ep is not None and ep.get("namespace") == PLACEHOLDER_NS:
                op[field] = eps[int(ep["name"])]
    return msgpack.packb(doc, use_bin_type=True)


def _pack_endpoints(eps: list[dict]) -> bytes:
    # [namespace, name, properties] each: the map keys the canonical form spells out, left out
    return msgpack.packb([[e["namespace"], e["name"], e["properties"]] for e in eps],
                         use_bin_type=True)


def shape_ref(row: dict[str, bytes]) -> tuple[str, list[dict]]:
    """(shape checksum, endpoints) of a ``d|`` row in shape form; ValueError if corrupt."""
    value = row[SHAPED]
    if len(value) < 17:
        raise ValueError("a shaped data row too short to name its shape")
    try:
        packed = msgpack.unpackb(value[16:], raw=False)
    except Exception as e:  # msgpack raises several unrelated types on garbage
        raise ValueError(f"a shaped data row's endpoints do not decode ({e})") from None
    if not isinstance(packed, list) or not all(
            isinstance(e, list) and len(e) == 3 and isinstance(e[0], str)
            and isinstance(e[1], str) and isinstance(e[2], dict) for e in packed):
        raise ValueError("a shaped data row's endpoints are not a list of endpoints")
    # in the canonical form's key order (name, namespace, properties)
    return rk.checksum_of(value[:16]), [{"name": n, "namespace": ns, "properties": p}
                                        for ns, n, p in packed]


class RunInfo(NamedTuple):
    """One recorded run."""

    run_id: str
    start_ms: int
    program: str | None
    checksum: str


class OperationGroup(NamedTuple):
    """The operations of one distinct operation set that touch a field, and its runs."""

    checksum: str
    operations: list[Operation]
    runs: list[RunInfo]  # newest first


#: bytes of decoded operations per byte of their canonical form (tracemalloc)
_INFO_BYTES = 12


class _Cached:
    """A decoded ``d|`` row: its summaries, and its operations decoded on first
    use (a set stored as a shape: rebuilt from the shape and its endpoints)."""

    __slots__ = ("_ops", "_eps", "summaries", "_info", "_where")

    def __init__(self, ops: bytes, summaries: Summaries, where: tuple[str, bytes],
                 eps: list[dict] | None = None):
        self._ops = ops
        self._eps = eps
        self.summaries = summaries
        self._info: FieldLineageInfo | None = None
        self._where = where

    def footprint(self) -> int:
        """Bytes held (estimated): the stored operations, the decoded summaries
        with the answers they keep, and the operations once decoded."""
        return 200 + len(self._ops) + self.summaries.footprint + \
            (_INFO_BYTES * len(self._ops) if self._info is not None else 0)

    @property
    def info(self) -> FieldLineageInfo:
        if self._info is None:
            try:
                ops = self._ops if self._eps is None else join_shape(self._ops, self._eps)
                self._info = decode_canonical(ops)
            except (FllError, ValueError, KeyError, IndexError, TypeError):
                raise _corrupt(*self._where) from None
            if self._eps is not None and self._info.checksum != rk.decode(self._where[1]).checksum:
                self._info = None
                raise _corrupt(*self._where)
        return self._info


class _Pending(NamedTuple):
    info: FieldLineageInfo
    run_id: str
    start: int
    program: str | None


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
    marks that before it changes a row)."""
    if not has_lineage_rows(table):
        return FORMAT
    if table.get(rk.meta("upgrade")) is not None:
        return 1  # an upgrade of an unstamped store began: its rows are of both kinds
    for key, _ in table.scan(rk.BACKWARD + rk.SEP, rk.prefix_end(rk.BACKWARD + rk.SEP), limit=1):
        try:
            return FORMAT if rk.decode(key).level == 0 else 1
        except (ValueError, UnicodeDecodeError):
            return 1
    return FORMAT


class OlderFormat(StoreError):
    """A store of a format older than `FORMAT`: `fll admin upgrade` converts it."""

    def __init__(self, url: str, found: int):
        super().__init__(f"store {url} has format {found}; this fll reads and writes format "
                         f"{FORMAT}: convert it with `fll --store {url} admin upgrade` "
                         f"(stop the writers of the older fll first)")
        self.found = found


def _conflict(run_id: str, prior: str, checksum: str) -> InvalidLineageError:
    return InvalidLineageError(
        f"run {run_id!r} is already recorded with operation set {prior}; "
        f"refusing a different set ({checksum}) for the same run")


def _corrupt(url: str, key: bytes) -> StoreError:
    return StoreError(f"store {url}: row {key!r} is corrupt (run `fll admin fsck`)")


def _target(url: str, key: bytes, raw: bytes) -> tuple[str, str]:
    try:
        ns, name = msgpack.unpackb(raw, raw=False)
        return str(ns), str(name)
    except Exception:
        raise _corrupt(url, key) from None


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


class LineageStore:
    """Field lineage over any `Table` backend. Safe to share between threads.

    Runs whose run model says FAIL or ABORT (`fll.store.runs`) are indexed in
    the failed-run rows instead of the default index: questions leave them
    out, and `including_failed` gives a store whose questions read them too."""

    #: whether questions read the failed-run rows too (`including_failed`)
    include_failed = False

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
        # read: ops, summaries as stored
        self._shapes: SizedLRU[tuple[bytes, bytes]] = SizedLRU(
            self.cache_budget.shapes, lambda p: 200 + len(p[0]) + len(p[1]), 1024)
        # the last sets recorded, as given (`operation_set`); few: a wide set is large
        self._written: OrderedDict[str, FieldLineageInfo] = OrderedDict()
        # schemas read, by their digest (content-addressed: never stale)
        self._schema_bodies: OrderedDict[bytes, list] = OrderedDict()
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

    def __enter__(self) -> "LineageStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------
    def record(self, info: FieldLineageInfo, run_id: str, start_time_ms: int,
               program: str | None = None, *, supersede: bool = False) -> bool:
        """Store one run's lineage. Returns False if this run was already recorded
        with the same operation set (idempotent). A different set for a known run
        is an error, unless ``supersede``: then the run's set is replaced (its old
        index rows go, the stored start time stays), as OpenLineage's
        accumulating run events need. Returns True when something changed."""
        return self.record_many([(info, run_id, start_time_ms, program)],
                                supersede=supersede) == 1

    def record_many(self, runs: Iterable[tuple[FieldLineageInfo, str, int, str | None]], *,
                    supersede: bool = False) -> int:
        """Store many runs in as few batches as the backend allows; returns how many
        were new (or, with ``supersede``, replaced).

        Everything is checked before anything is written: one bad run fails the
        whole call with nothing stored. The start time of a run is the one
        stored first (by `claim_run_start` or an earlier record), whatever this
        call says, so two servers given the same run store one run.
        """
        items: dict[str, _Pending] = {}
        for info, run_id, start, program in runs:
            if not isinstance(info, FieldLineageInfo):
                raise InvalidLineageError(f"run {run_id!r}: expected a FieldLineageInfo")
            _check_run(run_id, start)
            prior = items.get(run_id)
            if prior is not None and prior.info.checksum != info.checksum and not supersede:
                raise InvalidLineageError(
                    f"run {run_id!r} is given twice with different operation sets "
                    f"({prior.info.checksum}, {info.checksum})")
            if prior is None or supersede:
                items[run_id] = _Pending(info, run_id, start, program)
        if not items:
            return 0
        self._check_key_lengths(items)
        atomic = getattr(self.table, "atomic", None)
        if callable(atomic):
            # self.table, not the argument: a wrapper (an instrumented table) sees the calls
            new = atomic(lambda _table: self._record_in_txn(self.table, items, supersede))
        else:
            new = self._record_guarded(items, supersede)
        # a set is its checksum's for good: kept as given, right even if an outer
        # transaction rolls this write back (then nothing stored names it)
        with self._lock:
            for p in items.values():
                if len(p.info.canonical_bytes()) > _WRITTEN_BYTES:
                    continue  # a wide set: decoded again if asked, never held here
                self._written[p.info.checksum] = p.info
                self._written.move_to_end(p.info.checksum)
            while len(self._written) > _WRITTEN_KEPT:
                self._written.popitem(last=False)
        return new

    def _check_key_lengths(self, items: "dict[str, _Pending]") -> None:
        """A backend with a row-key limit (HBase: 32,767 bytes) refuses a run
        whose index keys exceed it here, before its data row is written."""
        limit = getattr(self.table, "max_key_bytes", None)
        if not limit:
            return
        for p in items.values():
            for key in self._index_rows(p.info, p.run_id, p.start, b""):
                if len(key) > limit:
                    raise InvalidLineageError(
                        f"run {p.run_id!r}: a dataset name makes a row key of {len(key):,} "
                        f"bytes, over this backend's limit of {limit:,}; nothing was recorded")

    def _index_rows(self, info: FieldLineageInfo, run_id: str, start: int,
                    program: bytes, into: dict[bytes, dict[str, bytes]] | None = None,
                    merged: set[tuple[str, int]] | None = None, first: bool = False
                    ) -> dict[bytes, dict[str, bytes]]:
        """A run's index cells (merged into ``into`` when given: a batch's puts).
        ``merged``: the (set, 4 s bucket) pairs whose bucket cells ``into``
        already holds; a run of one of them adds its run cells only, since the
        finest bucket fixes every coarser one. ``first``: the set's first run
        (its data row was absent), indexed by its run cells and the same cells
        in the first-run rows, without bucket cells. The program is in the run
        row only (``program`` is for callers of older formats)."""
        checksum = info.checksum
        dsts, srcs = self._endpoints(info)
        rows: dict[bytes, dict[str, bytes]] = {} if into is None else into
        raw = self._raw.get(checksum)
        if raw is None:
            if len(self._raw) > 65536:
                self._raw.clear()
            raw = self._raw[checksum] = rk.checksum_bytes(checksum)
        cell = {run_id: rk.run_value(start, raw)}
        # the inverted row time once per run, not once per endpoint
        inv = rk.invert(start - start % _RUN_ROW_MS)
        prefix = rk.dataset_prefix
        for ns, name in dsts:
            _merge_into(rows, prefix(rk.BACKWARD, ns, name) + inv, cell)
        for ns, name in srcs:
            _merge_into(rows, prefix(rk.FORWARD, ns, name) + inv, cell)
        if first:
            for ns, name in dsts:
                _merge_into(rows, prefix(rk.FIRST_BACKWARD, ns, name) + inv, cell)
            for ns, name in srcs:
                _merge_into(rows, prefix(rk.FIRST_FORWARD, ns, name) + inv, cell)
            return rows
        if merged is not None:
            # a set re-run within 4 s of a run earlier in the batch: its 14 or
            # so bucket cells are in the batch already
            mark = (checksum, start - start % _BUCKET1_MS)
            if mark in merged:
                return rows
            merged.add(mark)
        for key, cols in self._bucket_rows(checksum, info, start):
            _merge_into(rows, key, cols)
        return rows

    def _endpoints(self, info: FieldLineageInfo) -> tuple[list[tuple[str, str]],
                                                          list[tuple[str, str]]]:
        """(destinations, sources) of a set as (namespace, name), memoized per set."""
        hit = self._eps.get(info.checksum)
        if hit is None:
            if len(self._eps) > 65536:
                self._eps.clear()
            hit = ([(e.namespace, e.name) for e in sorted(info.destinations)],
                   [(e.namespace, e.name) for e in sorted(info.sources)])
            self._eps[info.checksum] = hit
        return hit

    def _set_columns(self, checksum: str) -> dict[str, bytes]:
        """The column map a set puts into a bucket row, shared by every run of
        it (never mutated)."""
        hit = self._cols.get(checksum)
        if hit is None:
            if len(self._cols) > 4096:
                self._cols.clear()
            hit = self._cols[checksum] = {checksum: b""}
        return hit

    def _bucket_rows(self, checksum: str, info: FieldLineageInfo, start: int
                     ) -> list[tuple[bytes, dict[str, bytes]]]:
        """The bucket cells of a run, at every level, and its directory cell.
        Bucket sizes are powers of two, each a multiple of the finest, so the
        finest bucket fixes the bucket at every level: a run of a set re-run
        often costs one lookup of (set, finest bucket), and a new finest bucket
        builds only the levels whose bucket is new too."""
        # level 1 (4 s) is new for most runs of a set re-run every second or
        # slower: built directly; levels 2 and up memoized together
        cols = self._set_columns(checksum)
        first1 = start - start % rk.LEVELS4[1]
        dsts, srcs = self._endpoints(info)
        out = [(rk.bucket4(rk.BACKWARD_BUCKET, ns, name, 1, first1), cols) for ns, name in dsts]
        out += [(rk.bucket4(rk.FORWARD_BUCKET, ns, name, 1, first1), cols) for ns, name in srcs]
        first = start - start % rk.LEVELS4[2]
        memo = self._buckets
        hit = memo.get((checksum, first))
        if hit is None:
            if len(memo) > 65536:
                memo.clear()
            hit = []
            for k in range(2, len(rk.LEVELS4)):
                first_k = start - start % rk.LEVELS4[k]
                level = self._level_keys.get((checksum, k, first_k))
                if level is None:
                    if len(self._level_keys) > 65536:
                        self._level_keys.clear()
                    dsts, srcs = self._endpoints(info)
                    eps = [(kind, ns, name) for kind, group in ((rk.BACKWARD_BUCKET, dsts),
                                                                (rk.FORWARD_BUCKET, srcs))
                           for ns, name in group]
                    level = [(rk.bucket4(kind, ns, name, k, first_k), cols)
                             for kind, ns, name in eps]
                    if k == rk.TOP:
                        top = {str(first_k): b""}
                        level += [(rk.directory(kind, ns, name), top) for kind, ns, name in eps]
                    self._level_keys[(checksum, k, first_k)] = level
                hit.extend(level)
            memo[(checksum, first)] = hit
        return out + hit

    def _old_index(self, table: Table, checksum: str, run_id: str, start: int
                   ) -> dict[bytes, set[str]]:
        """The cells a run recorded with ``checksum`` at ``start`` leaves to delete
        when it goes: its run cells and the bucket cells no other run keeps."""
        known = self._eps.get(checksum)  # a set this process recorded: no read, no decode
        if known is None:
            row = table.get(rk.data(checksum))
            if row is None:
                return {}  # its data row is gone: fsck removes what is left
            try:
                info = decode_data(row, table)
            except (FllError, ValueError):
                return {}
            known = self._endpoints(info)
        dsts, srcs = known
        cells: dict[bytes, set[str]] = {}
        firsts: dict[bytes, tuple[bytes, str, str]] = {}
        for kind, eps in ((rk.BACKWARD, dsts), (rk.FORWARD, srcs)):
            for ns, name in eps:
                cells.setdefault(rk.run_row(kind, ns, name, start), set()).add(run_id)
                # its first-run cell, if it was the set's first run
                first = rk.run_row(FIRST_OF_RUN[kind], ns, name, start)
                cells.setdefault(first, set()).add(run_id)
                firsts[first] = (_BUCKET_OF_RUN[kind], ns, name)
        # bucket cells are shared by every run of the set in the bucket: only
        # those no other run keeps go. A run indexed by its first-run cell
        # wrote none (where this store writes first-run rows at all): the
        # endpoints where it has one need no look at the buckets, which on a
        # run's START → COMPLETE supersede is the whole cost (a multi-get of
        # 64 children per level and endpoint)
        skip: set[tuple[bytes, str, str]] = set()
        if self.first_runs:
            for key, cols in table.get_many(sorted(firsts)).items():
                value = cols.get(run_id)
                if value is not None and len(value) > 1 and \
                        rk.checksum_of(value[1:]) == checksum:
                    skip.add(firsts[key])
        wanted = [(kind, ns, name, checksum, start)
                  for kind, eps in ((rk.BACKWARD_BUCKET, dsts), (rk.FORWARD_BUCKET, srcs))
                  for ns, name in eps if (kind, ns, name) not in skip]
        for key, col in unused_buckets(table, wanted, ignore={run_id}):
            cells.setdefault(key, set()).add(col)
        return cells

    def _set_endpoints(self, table: Table, checksum: str
                       ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]] | None:
        known = self._eps.get(checksum)
        if known is not None:
            return known
        row = table.get(rk.data(checksum))
        if row is None:
            return None
        try:
            return self._endpoints(decode_data(row, table))
        except (FllError, ValueError):
            return None

    def _failed_keys(self, table: Table, checksum: str, run_id: str, start: int) -> set[bytes]:
        """The failed-run rows a run recorded with ``checksum`` has."""
        eps = self._set_endpoints(table, checksum)
        if eps is None:
            return set()
        dsts, srcs = eps
        return {rk.failed(rk.FAILED_BACKWARD, ns, name, start, run_id) for ns, name in dsts} | \
            {rk.failed(rk.FAILED_FORWARD, ns, name, start, run_id) for ns, name in srcs}

    def move_to_failed(self, run_ids: Iterable[str], *, table: Table | None = None,
                       priors: dict[str, tuple[str, int]] | None = None) -> int:
        """Move the index cells of these runs (FAIL/ABORT: see `fll.store.runs`)
        out of the default index into the failed-run rows; idempotent (a run
        already moved, or without lineage yet, changes nothing). ``table``: the
        one of a transaction in progress. ``priors``: sets these runs had
        before a supersede (their failed rows go). Returns the runs moved."""
        t = table if table is not None else self.table
        ids = sorted(set(run_ids))

        def move(t: Table) -> int:
            rows = t.get_many([rk.run(r) for r in ids])
            gone: dict[bytes, set[str]] = {}
            puts: dict[bytes, dict[str, bytes]] = {}
            old_rows: set[bytes] = set()
            moved = 0
            for r in ids:
                row = rows.get(rk.run(r)) or {}
                if "c" not in row or "t" not in row:
                    continue  # no lineage yet: it lands in the failed rows when it comes
                checksum, start = row["c"].decode(), _T.unpack(row["t"])[0]
                eps = self._set_endpoints(t, checksum)
                if eps is None:
                    continue  # its data row is gone: fsck's case
                keys = failed_rows(r, start, checksum, eps)
                present = t.get_many(sorted(keys))
                if len(present) < len(keys) or any(
                        present[k].get("c") != checksum.encode() for k in present):
                    puts.update(keys)
                for key, cols in self._old_index(t, checksum, r, start).items():
                    gone.setdefault(key, set()).update(cols)
                if priors and r in priors and priors[r][0] != checksum:
                    old_rows |= self._failed_keys(t, priors[r][0], r, priors[r][1])
                moved += 1
            # only the cells still there (a delete of absent cells is a write too)
            there = t.get_many(sorted(gone))
            cells = {k: sorted(c for c in cols if c in there.get(k, {}))
                     for k, cols in gone.items()}
            cells = {k: c for k, c in cells.items() if c}
            if puts:
                t.put(puts)
            if cells:
                t.delete_columns(cells)
            if old_rows - puts.keys():
                t.delete(sorted(old_rows - puts.keys()))
            return moved

        atomic = getattr(t, "atomic", None)
        if table is None and callable(atomic):
            return int(atomic(lambda _t: move(self.table)))
        return move(t)

    def _data_rows(self, info: FieldLineageInfo) -> dict[bytes, dict[str, bytes]]:
        """The ``d|`` row of a set, and the ``p|`` row of its shape (format 5)."""
        key = rk.data(info.checksum)
        split = split_shape(info)
        if split is None:
            return {key: data_row(info)}
        shape, eps = split
        shape_checksum = xxhash.xxh3_128_hexdigest(shape)
        z = self._shape_rows.get(shape_checksum)
        if z is None:
            # the shape's summaries are the set's with each endpoint named by its
            # placeholder (summaries know fields by position, never by name), so
            # the shape is not decoded and summarized again; split_shape made
            # sure the shape and its endpoints give back the set byte for byte
            placeholders = {(e["namespace"], e["name"]): (PLACEHOLDER_NS, str(i))
                            for i, e in enumerate(eps)}
            if len(self._shape_rows) > 1024:
                self._shape_rows.clear()
            z = self._shape_rows[shape_checksum] = _deflated(
                shape, summaries_to_bytes(info, placeholders))
        value = rk.checksum_bytes(shape_checksum) + _pack_endpoints(eps)
        return {key: {SHAPED: value}, rk.shape(shape_checksum): {"z": z}}

    def _record_in_txn(self, table: Table, items: dict[str, "_Pending"],
                       supersede: bool) -> int:
        """The write path on a backend with transactions: every check and every
        write in one transaction, so nothing changes between them."""
        run_keys = {r: rk.run(r) for r in items}
        data_keys = {p.info.checksum: rk.data(p.info.checksum) for p in items.values()}
        model_keys = {r: rk.run_model(r) for r in items}
        existing = table.get_many(list(run_keys.values()) + sorted(data_keys.values())
                                  + list(model_keys.values()))
        puts: dict[bytes, dict[str, bytes]] = {}
        gone_cells: dict[bytes, set[str]] = {}
        gone_rows: set[bytes] = set()
        merged: set[tuple[str, int]] = set()
        new = 0
        for p in items.values():
            checksum = p.info.checksum
            old = existing.get(run_keys[p.run_id]) or {}
            start = _T.unpack(old["t"])[0] if "t" in old else p.start
            prior = old["c"].decode() if "c" in old else None
            if prior == checksum:
                continue
            if prior is not None and not supersede:
                raise _conflict(p.run_id, prior, checksum)
            new += 1
            dkey = data_keys[checksum]
            first = dkey not in existing and dkey not in puts
            if first:
                puts.update(self._data_rows(p.info))
            prog = (p.program or "").encode("utf-8")
            failed = run_failed(existing.get(model_keys[p.run_id]))
            if prior is not None:
                for key, cols in self._old_index(table, prior, p.run_id, start).items():
                    gone_cells.setdefault(key, set()).update(cols)
                if failed:
                    gone_rows.update(self._failed_keys(table, prior, p.run_id, start))
            if failed:  # a FAIL/ABORT seen before this lineage: it lands where the run's is
                puts.update(failed_rows(p.run_id, start, checksum, self._endpoints(p.info)))
            else:
                self._index_rows(p.info, p.run_id, start, prog, into=puts, merged=merged,
                                 first=first and self.first_runs)
            puts[run_keys[p.run_id]] = {"c": checksum.encode(), "t": _T.pack(start), "p": prog}
        cells_gone = _not_put(gone_cells, puts)
        if cells_gone:
            table.delete_columns(cells_gone)
        if gone_rows - puts.keys():
            table.delete(sorted(gone_rows - puts.keys()))
        if puts:
            table.put(puts)
        return new

    def _record_guarded(self, items: dict[str, "_Pending"], supersede: bool) -> int:
        """The write path on a backend without transactions (HBase, Bigtable):
        data rows first (content-addressed, so a blind put is always right),
        then each run row claimed with check-and-put and marked pending
        (``w=0``), then the index rows at the start time that won, then the run
        rows marked written (``w=1``). A crash leaves at worst a data row
        nothing uses or a pending run, which reads as not recorded; recording
        it again finishes it, and fsck repairs both."""
        table = self.table
        self._announce_writer()
        # the data rows too, read before any is put: a set whose row is absent
        # gets its first run indexed in the first-run rows
        sets = {rk.data(p.info.checksum) for p in items.values()} if self.first_runs else set()
        existing = table.get_many([rk.run(r) for r in items] + [rk.meta(LEASE)] + sorted(sets))
        lease = existing.pop(rk.meta(LEASE), None)
        new_sets = {k for k in sets if existing.pop(k, None) is None}
        if lease is not None and _T.unpack(lease["t"])[0] > _now_ms():
            raise StoreError(f"store {self.url}: maintenance in progress "
                             f"({lease.get('w', b'?').decode(errors='replace')}); "
                             f"writes resume when it ends")
        for p in items.values():  # a conflict visible now fails before any write
            old = existing.get(rk.run(p.run_id)) or {}
            if "c" in old and old["c"].decode() != p.info.checksum and not supersede:
                raise _conflict(p.run_id, old["c"].decode(), p.info.checksum)
        data_rows: dict[bytes, dict[str, bytes]] = {}
        for p in items.values():
            old = existing.get(rk.run(p.run_id)) or {}
            if old.get("c") == p.info.checksum.encode() and old.get("w") != _PENDING:
                continue  # recorded and written before
            if rk.data(p.info.checksum) not in data_rows:
                data_rows.update(self._data_rows(p.info))
        if not data_rows:
            return 0
        table.put(data_rows)
        index: dict[bytes, dict[str, bytes]] = {}
        written: dict[bytes, dict[str, bytes]] = {}
        gone_cells: dict[bytes, set[str]] = {}
        priors: dict[str, tuple[str, int]] = {}
        merged: set[tuple[str, int]] = set()
        new = 0
        try:
            for p in items.values():
                outcome, start, prior = self._claim_run(p, existing.get(rk.run(p.run_id)),
                                                        supersede)
                if outcome is None:
                    continue  # recorded and written before: nothing to do
                prog = (p.program or "").encode("utf-8")
                dkey = rk.data(p.info.checksum)
                first = dkey in new_sets
                new_sets.discard(dkey)  # the set's later runs in the batch write buckets
                self._index_rows(p.info, p.run_id, start, prog, into=index, merged=merged,
                                 first=first)
                written[rk.run(p.run_id)] = {"w": _WRITTEN}
                new += 1
                if prior is not None:
                    priors[p.run_id] = (prior, start)
                    for key, cols in self._old_index(table, prior, p.run_id,
                                                     start).items():
                        gone_cells.setdefault(key, set()).update(cols)
        finally:
            # runs claimed before a conflict found mid-batch still get their index rows
            if index:
                table.put(index)
        cells_gone = _not_put(gone_cells, index)
        if cells_gone:
            table.delete_columns(cells_gone)
        if written:
            table.put(written)
            # a FAIL/ABORT recorded before or meanwhile (`fll.store.runs` puts its
            # event, then moves): checked after the index is written, so either
            # this check sees it or that move sees this run's set
            runs = [rk.decode(k).run_id or "" for k in written]
            models = table.get_many([rk.run_model(r) for r in runs])
            failed = [r for r in runs if run_failed(models.get(rk.run_model(r)))]
            if failed:
                self.move_to_failed(failed, priors={r: priors[r] for r in failed
                                                    if r in priors})
        return new

    def _announce_writer(self) -> None:
        """On a backend without transactions, say "a writer is active here" (a
        row that expires WRITER_TTL_MS after the last write), before the lease
        is checked: an admin command takes its lease and then looks for these,
        so a writer and a purge or repair never run at once."""
        now = _now_ms()
        if now - self._announced < WRITER_TTL_MS // 3:
            return
        self.table.put({rk.meta(WRITER_PREFIX + self._writer_id):
                        {"t": _T.pack(now + WRITER_TTL_MS)}})
        self._announced = now

    def _claim_run(self, p: "_Pending", old: dict[str, bytes] | None,
                   supersede: bool) -> tuple[bool | None, int, str | None]:
        """Make the ``r|`` row say this run has ``p``'s set, by check-and-put.

        Returns (True when this call must write the run's index rows, None when
        the run has this set and is fully written; the run's start time; the
        set it replaced)."""
        key = rk.run(p.run_id)
        mine = p.info.checksum.encode()
        prog = (p.program or "").encode("utf-8")
        for _ in range(16):
            if old is None:
                # Claim the start alone first, then the set on "c" below: HBase's
                # checkAndPut guards one cell, so a claim of t, c, p and w in one
                # call would let a racer that sees t without c claim "c" too.
                if self.table.check_and_put(key, "t", None, {"t": _T.pack(p.start)}):
                    old = {"t": _T.pack(p.start)}
                    continue
            else:
                start = _T.unpack(old["t"])[0] if "t" in old else p.start
                prior = old.get("c")
                if prior == mine:
                    if old.get("w") == _PENDING:
                        return True, start, None  # a crashed or concurrent write: finish it
                    return None, start, None
                if prior is not None and not supersede:
                    raise _conflict(p.run_id, prior.decode(), p.info.checksum)
                values = {"c": mine, "p": prog, "w": _PENDING}
                if "t" not in old:
                    values["t"] = _T.pack(start)
                if self.table.check_and_put(key, "c", prior, values):
                    return True, start, None if prior is None else prior.decode()
            old = self.table.get(key)
        raise StoreError(f"store {self.url}: run {p.run_id!r} kept changing under 16 "
                         f"check-and-put attempts; retry")

    def claim_run_start(self, run_id: str, start_ms: int) -> int:
        """Record ``start_ms`` as the start of ``run_id`` unless a start is already
        stored; returns the start that won. Atomic on every backend (one
        check-and-put), persisted, so two servers given the same run agree."""
        _check_run(run_id, start_ms)
        key = rk.run(run_id)
        for _ in range(16):
            if self.table.check_and_put(key, "t", None, {"t": _T.pack(start_ms)}):
                return start_ms
            row = self.table.get(key)
            if row is not None and "t" in row:
                return int(_T.unpack(row["t"])[0])
            # the row went away in between (a purge): claim again
        raise StoreError(f"store {self.url}: could not claim the start of run {run_id!r}")

    # -- schemas and aliases -----------------------------------------------------
    def record_schema(self, namespace: str, name: str, run_id: str, start_ms: int,
                      fields: Sequence[tuple[str, str | None]]) -> None:
        """Store the schema (field name → type or None) a run reported for a dataset.
        Idempotent; time-ranged like runs, so `schema` answers for any range. The
        fields are stored once per distinct schema (``q|``), the run's row names
        them by digest (``s|``)."""
        _check_name(namespace, "namespace")
        _check_name(name, "dataset name")
        _check_run(run_id, start_ms)
        pairs: list[list[str | None]] = []
        for i, f in enumerate(fields):
            if not (isinstance(f, (tuple, list)) and len(f) == 2 and isinstance(f[0], str)
                    and f[0] and (f[1] is None or isinstance(f[1], str))):
                raise InvalidLineageError(f"schema of {namespace}:{name}, field {i + 1}: "
                                          f"expected (name, type or None), got {f!r}")
            pairs.append([f[0], f[1]])
        body = msgpack.packb(pairs, use_bin_type=True)
        digest = xxhash.xxh3_128_digest(body)
        # the body always, first in the batch (one transaction on SQLite): a purge
        # removing an unused body between a cached "already there" and the
        # reference would leave the reference naming nothing. Content-addressed,
        # so a body written again is the same row, still stored once.
        self.table.put({rk.schema_body(rk.checksum_of(digest)): {"f": body},
                        rk.schema(namespace, name, start_ms, run_id): {SCHEMA_REF: digest}})

    def schema(self, namespace: str, name: str, start_ms: int,
               end_ms: int) -> dict[str, str | None] | None:
        """The schema the latest run in ``[start, end)`` reported for the dataset
        (field name → type or None, in the reported order), or None."""
        lo, hi = rk.time_range(rk.dataset_prefix(rk.SCHEMA, namespace, name), start_ms, end_ms)
        for key, cols in self.table.scan(lo, hi, limit=1):
            digest = cols.get(SCHEMA_REF, b"")
            if len(digest) != 16:
                raise _corrupt(self.url, key)
            with self._lock:
                pairs = self._schema_bodies.get(digest)
                if pairs is not None:
                    self._schema_bodies.move_to_end(digest)
            if pairs is None:
                body_key = rk.schema_body(rk.checksum_of(digest))
                row = self.table.get(body_key)
                if row is None:
                    raise StoreError(f"store {self.url}: schema row {key!r} names a schema "
                                     f"whose row is missing (run `fll admin fsck`)")
                try:
                    pairs = msgpack.unpackb(row["f"], raw=False)
                    if xxhash.xxh3_128_digest(row["f"]) != digest:
                        raise ValueError("not the schema named")
                except Exception:
                    raise _corrupt(self.url, body_key) from None  # never cached
                with self._lock:
                    self._schema_bodies[digest] = pairs
                    if len(self._schema_bodies) > _SCHEMAS_KEPT:
                        self._schema_bodies.popitem(last=False)
            try:
                return {str(n): (None if t is None else str(t)) for n, t in pairs}
            except Exception:
                raise _corrupt(self.url, key) from None
        return None

    def schema_history(self, namespace: str, name: str, start_ms: int, end_ms: int
                       ) -> list[tuple[int, str, list[tuple[str, str | None]]]]:
        """Every schema reported for the dataset in ``[start_ms, end_ms)``: (time,
        owner, fields), oldest first; of several reported in one millisecond,
        the one `schema` answers. The owner is what reported it (a run id, or
        what `fll.openlineage.static_owner` names). One scan of the range's
        ``s|`` rows and one multi-get of the schemas not cached."""
        lo, hi = rk.time_range(rk.dataset_prefix(rk.SCHEMA, namespace, name), start_ms, end_ms)
        first: dict[int, tuple[str, bytes]] = {}
        for key, cols in self.table.scan(lo, hi):
            k = _decode_key(self.url, key)
            digest = cols.get(SCHEMA_REF, b"")
            if k.start_ms is None or k.run_id is None or len(digest) != 16:
                raise _corrupt(self.url, key)
            first.setdefault(k.start_ms, (k.run_id, digest))  # the key `schema` reads
        with self._lock:
            known = {d: self._schema_bodies[d] for _, d in first.values()
                     if d in self._schema_bodies}
        wanted = sorted({d for _, d in first.values()} - set(known))
        rows = self.table.get_many([rk.schema_body(rk.checksum_of(d)) for d in wanted])
        for d in wanted:
            key = rk.schema_body(rk.checksum_of(d))
            row = rows.get(key)
            if row is None:
                raise StoreError(f"store {self.url}: a schema row of {namespace}:{name} names "
                                 f"a schema whose row is missing (run `fll admin fsck`)")
            try:
                if xxhash.xxh3_128_digest(row["f"]) != d:
                    raise ValueError("not the schema named")
                known[d] = msgpack.unpackb(row["f"], raw=False)
            except Exception:
                raise _corrupt(self.url, key) from None
        try:
            return [(at, owner, [(str(n), None if t is None else str(t))
                                 for n, t in known[d]])
                    for at, (owner, d) in sorted(first.items())]
        except Exception:
            raise _corrupt(self.url, lo) from None

    def record_alias(self, alias_ns: str, alias_name: str, namespace: str, name: str) -> bool:
        """Make ``alias_ns:alias_name`` (a logical name, e.g. a pipeline's
        ``referenceName``) stand for the dataset ``namespace:name``. Idempotent;
        the latest target wins. Returns True when something changed."""
        for value, what in ((alias_ns, "alias namespace"), (alias_name, "alias name"),
                            (namespace, "namespace"), (name, "dataset name")):
            _check_name(value, what)
        if (alias_ns, alias_name) == (namespace, name):
            return False
        key = rk.alias(alias_ns, alias_name)
        target = msgpack.packb([namespace, name], use_bin_type=True)
        # the pair the other way round (a store written when the location was the
        # alias and the logical name the dataset) is turned: one direction per
        # pair, so resolving never goes round in a circle
        back = rk.alias(namespace, name)
        row = self.table.get(back)
        if row and row.get("t") == msgpack.packb([alias_ns, alias_name], use_bin_type=True):
            if self.table.check_and_put(back, "t", row["t"], {"t": b""}):
                self.table.delete([back, rk.aliased_by(alias_ns, alias_name, namespace, name)])
        for _ in range(16):
            row = self.table.get(key)
            current = row.get("t") if row else None
            if current == target:
                # the reverse row may be missing after a crash: putting it is idempotent
                self.table.put({rk.aliased_by(namespace, name, alias_ns, alias_name): {"x": b""}})
                return False
            # the reverse row first: a crash leaves a reverse row the alias row
            # does not confirm, which `aliases` ignores
            self.table.put({rk.aliased_by(namespace, name, alias_ns, alias_name): {"x": b""}})
            if self.table.check_and_put(key, "t", current, {"t": target}):
                if current:
                    old_ns, old_name = _target(self.url, key, current)
                    self.table.delete([rk.aliased_by(old_ns, old_name, alias_ns, alias_name)])
                return True
        raise StoreError(f"store {self.url}: alias {alias_ns}:{alias_name} kept changing; retry")

    def resolve_dataset(self, namespace: str, name: str) -> tuple[str, str]:
        """The dataset an alias stands for, else ``(namespace, name)`` itself."""
        row = self.table.get(rk.alias(namespace, name))
        if not row or not row.get("t"):  # b"": a turned pair being deleted
            return namespace, name
        return _target(self.url, rk.alias(namespace, name), row["t"])

    def aliases(self, namespace: str, name: str) -> list[tuple[str, str]]:
        """Every alias that stands for ``namespace:name``, sorted."""
        prefix = rk.dataset_prefix(rk.ALIASED_BY, namespace, name)
        candidates = []
        for key, _ in self.table.scan(prefix, rk.prefix_end(prefix)):
            k = rk.decode(key)
            if k.alias is not None:
                candidates.append(k.alias)
        if not candidates:
            return []
        rows = self.table.get_many([rk.alias(*a) for a in candidates])
        want = msgpack.packb([namespace, name], use_bin_type=True)
        return sorted(a for a in candidates if rows.get(rk.alias(*a), {}).get("t") == want)

    def all_aliases(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """Every alias in the store, by the dataset it stands for (one scan of the
        alias rows, however many datasets there are)."""
        prefix = rk.ALIAS + rk.SEP
        out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
            if not cols.get("t"):  # a turned pair being deleted
                continue
            k = _decode_key(self.url, key)
            if k.namespace is None or k.name is None:
                continue
            out.setdefault(_target(self.url, key, cols["t"]), []).append((k.namespace, k.name))
        return {t: sorted(a) for t, a in out.items()}

    # -- operation sets --------------------------------------------------------
    def _decode(self, checksum: str, row: dict[str, bytes] | None,
                shapes: dict[str, tuple[bytes, bytes]]) -> _Cached:
        key = rk.data(checksum)
        if row is None:
            raise StoreError(f"store {self.url}: operation set {checksum} is referenced by an "
                             f"index row but its data row is missing (run `fll admin fsck`)")
        try:
            if SHAPED in row:
                shape_checksum, eps = shape_ref(row)
                shape = shapes.get(shape_checksum)
                if shape is None:
                    raise StoreError(f"store {self.url}: operation set {checksum} has the shape "
                                     f"{shape_checksum}, whose row is missing (run "
                                     f"`fll admin fsck`)")
                return _Cached(shape[0], Summaries(shape[1], [EndPoint(e["namespace"], e["name"])
                                                              for e in eps]),
                               (self.url, key), eps)
            ops, summaries = data_parts(row)
            return _Cached(ops, Summaries(summaries), (self.url, key))
        except StoreError:
            raise
        except (ValueError, FllError, IndexError, TypeError):
            raise _corrupt(self.url, key) from None  # never cached: a repair shows at once

    def _load_shapes(self, rows: Iterable[dict[str, bytes]]) -> dict[str, tuple[bytes, bytes]]:
        """The shapes these ``d|`` rows name: the cache first, the rest in one
        multi-get (an absent or corrupt shape is left out: each set naming it
        is then a store error)."""
        out: dict[str, tuple[bytes, bytes]] = {}
        wanted = set()
        for row in rows:
            value = row.get(SHAPED)
            if value is not None and len(value) >= 16:
                c = rk.checksum_of(value[:16])
                hit = self._shapes.get(c)
                if hit is not None:
                    out[c] = hit
                else:
                    wanted.add(c)
        if not wanted:
            return out
        found = self.table.get_many(sorted(rk.shape(c) for c in wanted))
        for c in wanted:
            shape_row = found.get(rk.shape(c))
            if shape_row is None:
                continue
            try:
                out[c] = parts = data_parts(shape_row)
            except ValueError:
                continue
            self._shapes.put(c, parts)
        return out

    def _remember(self, checksum: str, cached: _Cached) -> None:
        self._cache.put(checksum, cached)

    def _load(self, checksum: str) -> _Cached:
        return self._load_many([checksum])[checksum]

    def _load_many(self, checksums: Iterable[str]) -> dict[str, _Cached]:
        """Operation sets by checksum: the cache first, the rest in one multi-get."""
        out: dict[str, _Cached] = {}
        wanted = list(checksums)
        out.update(self._cache.get_many(wanted))  # type: ignore[arg-type]
        missing = [c for c in dict.fromkeys(wanted) if c not in out]
        if missing:
            rows = self.table.get_many([rk.data(c) for c in missing])
            shapes = self._load_shapes(rows.values())
            for c in missing:
                cached = self._decode(c, rows.get(rk.data(c)), shapes)
                self._remember(c, cached)
                out[c] = cached
        return out

    def operation_set(self, checksum: str) -> FieldLineageInfo:
        """The operation set stored under ``checksum`` (one this process recorded
        lately without reading it: an OpenLineage run's COMPLETE merges with the
        set its START recorded)."""
        with self._lock:
            written = self._written.get(checksum)
        if written is not None:
            return written
        return self._load(checksum).info

    def summaries(self, checksums: Iterable[str]) -> dict[str, Summaries]:
        """The precomputed summaries of operation sets, by checksum (the cache
        first, the rest in one multi-get): what a caller merging many sets at
        once (the REST server) needs without re-deriving them from operations."""
        return {c: cached.summaries for c, cached in self._load_many(checksums).items()}

    def checksums(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> list[str]:
        """Distinct operation sets with a run in ``[start, end)`` that write
        (incoming) or read (outgoing) ``endpoint``, sorted.

        One multi-get of the range's canonical cover (`fll.rowkeys.cover4`):
        bucket rows of whole aligned buckets, the runs' own millisecond rows at
        the edges; a second only when the range spans more than 64 top
        buckets. Cost follows the sets in the range, never the history."""
        bucket_kind, run_kind = _BUCKET_KINDS[direction], _RUN_KINDS[direction]
        ns, name = endpoint.namespace, endpoint.name
        runs, top = rk.cover4_runs(start, end)
        # the keys as rk.run_row / rk.bucket4 build them, a prefix per level made once
        heads = [rk.dataset_prefix(run_kind, ns, name)] + \
            [rk.dataset_prefix(bucket_kind, ns, name) + bytes([0x30 + k])
             for k in range(1, len(rk.LEVELS4))]
        spans = _cover_spans(heads, runs)
        # the run rows at the cover's edges, read whole: their runs are
        # filtered by time below; the buckets' sets are their column names
        edges = [s for s in spans if s.lo[:1] == run_kind]
        buckets = [s for s in spans if s.lo[:1] != run_kind]
        interior: list[Span] = []
        if self.first_runs:
            # the sets' first runs in the range, which have no bucket cells:
            # the rows holding ``start`` and ``end - 1`` filtered by time, the
            # rows between read for their sets alone
            edges += _first_run_spans(rk.dataset_prefix(_FIRST_KINDS[direction], ns, name),
                                      start, end, interior)
        index = rk.directory(bucket_kind, ns, name)
        if top:  # more top buckets than are worth enumerating: the directory lists them
            edges.append(Span(index, index + b"\x00", (index,)))
        read = self.table.read_spans(edges, buckets, interior)
        found = set(read.names)
        try:
            found.update(rk.checksum_of(v[1:]) for v in read.values if len(v) > 1)
        except (ValueError, UnicodeDecodeError):
            raise _corrupt(self.url, interior[0].lo) from None
        listed = read.rows.pop(index, None)
        if top and listed:
            try:
                firsts = sorted(int(c) for c in listed)
            except ValueError:
                raise _corrupt(self.url, index) from None
            tops = [rk.bucket4(bucket_kind, ns, name, rk.TOP, t) for t in firsts
                    if top[0] <= t < top[1]]
            if tops:
                found.update(self.table.read_spans(
                    (), [Span(k, k + b"\x00", (k,)) for k in tops]).names)
        if self.include_failed:
            found.update(r.checksum for r in self._failed_runs(direction, endpoint, start, end))
        for key, cols in read.rows.items():
            try:  # run rows, filtered by each run's exact time
                found.update(c for _, c, t in row_sets(key, cols) if start <= t < end)
            except (ValueError, UnicodeDecodeError):
                raise _corrupt(self.url, key) from None
        return sorted(found)

    def _failed_runs(self, direction: str, endpoint: EndPoint, start: int, end: int
                     ) -> Iterator[RunInfo]:
        """The FAIL/ABORT runs in the range that wrote (incoming) or read
        (outgoing) ``endpoint``, newest first: one scan of its failed-run rows
        (read only when a question asks for failed runs)."""
        lo, hi = rk.time_range(rk.dataset_prefix(_FAILED_KINDS[direction], endpoint.namespace,
                                                 endpoint.name), start, end)
        for key, cols in self.table.scan(lo, hi):
            k = _decode_key(self.url, key)
            if k.start_ms is None or k.run_id is None or "c" not in cols:
                raise _corrupt(self.url, key)
            yield RunInfo(k.run_id, k.start_ms, None, cols["c"].decode())

    def _summaries(self, endpoint: EndPoint, start: int, end: int,
                   direction: str) -> Iterator[tuple[str, Summaries]]:
        loaded = self._load_many(self.checksums(endpoint, start, end, direction))
        for c, cached in loaded.items():
            yield c, cached.summaries

    # -- questions -------------------------------------------------------------
    def fields(self, endpoint: EndPoint, start: int, end: int,
               prefix: str | None = None) -> list[str]:
        """Field names of ``endpoint`` seen as destination or source in the range, sorted."""
        names: set[str] = set()
        for _, s in self._summaries(endpoint, start, end, "incoming"):
            names.update(f.field for f in s.destination_fields if f.endpoint == endpoint)
        for _, s in self._summaries(endpoint, start, end, "outgoing"):
            names.update(f.field for f in s.source_fields if f.endpoint == endpoint)
        if prefix:
            low = prefix.lower()
            names = {n for n in names if n.lower().startswith(low)}
        return sorted(names)

    def incoming(self, efield: EndPointField, start: int, end: int) -> set[EndPointField]:
        """Source fields ``efield`` was built from by runs in the range."""
        out: set[EndPointField] = set()
        for _, s in self._summaries(efield.endpoint, start, end, "incoming"):
            out |= s.incoming.get(efield, frozenset())
        return out

    def outgoing(self, efield: EndPointField, start: int, end: int, *,
                 include_dropped: bool = False) -> set[EndPointField]:
        """Destination fields built from ``efield`` by runs in the range."""
        out: set[EndPointField] = set()
        for _, s in self._summaries(efield.endpoint, start, end, "outgoing"):
            out |= s.outgoing.get(efield, frozenset())
        if not include_dropped:
            out.discard(DROPPED)
        return out

    def operations(self, efield: EndPointField, start: int, end: int,
                   direction: str = "incoming") -> list[OperationGroup]:
        """Per distinct operation set touching the field, its operations on the
        field's paths (topological order) and its runs in the range, newest first.
        Groups are ordered by their newest run. One scan of the runs in the range
        (they are listed anyway) and one multi-get of the sets."""
        by_set: dict[str, list[RunInfo]] = {}
        for r in self._scan_runs(_RUN_KINDS[direction], efield.endpoint, start, end):
            by_set.setdefault(r.checksum, []).append(r)
        groups: list[OperationGroup] = []
        for checksum, cached in self._load_many(by_set).items():
            s = cached.summaries
            if direction == "incoming":
                if efield not in s.destination_fields:
                    continue
                ops = cached.info.incoming_operations(efield)
            else:
                if efield not in s.source_fields:
                    continue
                ops = cached.info.outgoing_operations(efield)
            groups.append(OperationGroup(checksum, ops, by_set[checksum]))
        groups.sort(key=lambda g: (-g.runs[0].start_ms if g.runs else 0, g.checksum))
        return groups

    def _scan_runs(self, kind: bytes, endpoint: EndPoint, start: int, end: int,
                   limit: int | None = None, *, programs: bool = True) -> Iterator[RunInfo]:
        """Runs of the ``b|``/``f|`` rows in the range, newest first (same
        millisecond: by run id): one scan, its cost the answer's size, then one
        multi-get of the answer's run rows for their programs."""
        # from the run row holding ``start``: its runs are filtered by their time
        lo, hi = rk.time_range(rk.dataset_prefix(kind, endpoint.namespace, endpoint.name),
                               start - start % rk.LEVELS4[0] if start > 0 else start, end)
        found: list[tuple[bytes, str, int, str]] = []
        seen: set[str] = set()
        if self.include_failed:
            yield from self._with_failed(kind, endpoint, start, end, limit, programs)
            return
        for key, cols in self._run_rows(lo, hi, limit, found):
            try:
                runs = sorted(((t, r, c) for r, c, t in row_sets(key, cols)
                               if start <= t < end), key=lambda x: (-x[0], x[1]))
            except (ValueError, UnicodeDecodeError):
                raise _corrupt(self.url, key) from None
            for t, run_id, checksum in runs:
                if run_id not in seen:
                    seen.add(run_id)
                    found.append((key, run_id, t, checksum))
        if limit is not None:
            found = found[:limit]
        # the program is in the run row only: one multi-get of the answer's run rows
        rows = self.table.get_many([rk.run(r) for _, r, _, _ in found]) \
            if programs and found else {}
        for key, run_id, t, checksum in found:
            try:
                prog = rows.get(rk.run(run_id), {}).get("p", b"").decode() or None
            except UnicodeDecodeError:
                raise _corrupt(self.url, key) from None
            yield RunInfo(run_id, t, prog, checksum)

    def _with_failed(self, kind: bytes, endpoint: EndPoint, start: int, end: int,
                     limit: int | None, programs: bool) -> Iterator[RunInfo]:
        """`_scan_runs` of the default index and the failed-run rows, merged."""
        direction = "incoming" if kind == rk.BACKWARD else "outgoing"
        plain = copy.copy(self)
        plain.include_failed = False
        runs = list(plain._scan_runs(kind, endpoint, start, end, limit, programs=programs))
        failed = list(self._failed_runs(direction, endpoint, start, end))
        if failed and programs:
            rows = self.table.get_many([rk.run(r.run_id) for r in failed])
            failed = [r._replace(program=rows.get(rk.run(r.run_id), {}).get(
                "p", b"").decode(errors="replace") or None) for r in failed]
        merged = sorted(runs + failed, key=lambda r: (-r.start_ms, r.run_id))
        yield from merged[:limit] if limit is not None else merged

    def _run_rows(self, lo: bytes, hi: bytes, limit: int | None, found: list
                  ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """The run rows of ``[lo, hi)`` until ``found`` (filled by the caller)
        holds ``limit`` runs. A row holds one run or 64 (one a millisecond), so
        with a limit the rows are read in pages sized by the runs per row seen
        so far: one call for a dense history, a few for a sparse one, never
        the whole range (a backend may read a page whole)."""
        if limit is None:
            yield from self.table.scan(lo, hi)
            return
        cursor, want, seen = lo, min(limit + 1, 16), 0
        while len(found) < limit:
            page = list(self.table.scan(cursor, hi, limit=want))
            for row in page:
                if len(found) >= limit:
                    return
                yield row
            seen += len(page)
            if len(page) < want:
                return
            cursor = page[-1][0] + b"\x00"
            per_row = max(len(found), 1) / seen
            want = max(16, int((limit - len(found)) / per_row * 1.25) + 2)

    def field_map(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> dict[EndPointField, set[EndPointField]]:
        """Every field of ``endpoint`` with its lineage over the range, from the
        precomputed summaries: incoming = each field written to it → its source
        fields; outgoing = each field read from it → the fields built from it
        (the dropped marker left out). Fields without lineage map to an empty set."""
        out: dict[EndPointField, set[EndPointField]] = {}
        for _, s in self._summaries(endpoint, start, end, direction):
            if direction == "incoming":
                mine, summary = s.destination_fields, s.incoming
            else:
                mine, summary = s.source_fields, s.outgoing
            for f in mine:
                if f.endpoint == endpoint:
                    out.setdefault(f, set()).update(summary.get(f, frozenset()))
        for targets in out.values():
            targets.discard(DROPPED)
        return out

    def runs(self, endpoint: EndPoint, start: int, end: int, direction: str = "both",
             limit: int | None = None) -> list[RunInfo]:
        """Runs that wrote (incoming) and/or read (outgoing) the dataset, newest first."""
        kinds = {"incoming": [rk.BACKWARD], "outgoing": [rk.FORWARD],
                 "both": [rk.BACKWARD, rk.FORWARD]}[direction]
        seen: dict[str, RunInfo] = {}
        for kind in kinds:
            for r in self._scan_runs(kind, endpoint, start, end, limit):
                seen.setdefault(r.run_id, r)
        ordered = sorted(seen.values(), key=lambda r: (-r.start_ms, r.run_id))
        return ordered[:limit] if limit is not None else ordered

    def run(self, run_id: str) -> RunInfo | None:
        """A recorded run by id, or None."""
        row = self.table.get(rk.run(run_id))
        if row is None or "c" not in row:
            return None  # unknown, or only its start claimed
        # a pending run (w=0) is reported: a reader may already list it from index
        # rows written before the run row was marked; fsck finishes a dead writer's
        try:
            return RunInfo(run_id, _T.unpack(row["t"])[0], row.get("p", b"").decode() or None,
                           row["c"].decode())
        except (KeyError, struct.error, UnicodeDecodeError):
            raise _corrupt(self.url, rk.run(run_id)) from None

    def properties(self, endpoint: EndPoint, start: int, end: int) -> list[dict]:
        """Per run in the range, the properties the run gave ``endpoint``."""
        out = []
        for r in self.runs(endpoint, start, end):
            ep = self._load(r.checksum).info.endpoint(endpoint.namespace, endpoint.name)
            out.append({"programRun": r.run_id, "program": r.program, "startMs": r.start_ms,
                        "properties": dict(ep.properties) if ep else {}})
        return out

    def datasets(self, *, with_schemas: bool = False) -> list[EndPoint]:
        """Every dataset with at least one recorded run, as source or destination;
        with ``with_schemas`` also those known only by a reported schema (an
        OpenLineage DatasetEvent, or a run event without column lineage)."""
        found: set[EndPoint] = set()
        for kind in (rk.BACKWARD, rk.FORWARD) + ((rk.SCHEMA,) if with_schemas else ()):
            prefix = kind + rk.SEP
            stop = rk.prefix_end(prefix)
            cursor = prefix
            while True:
                first = next(iter(self.table.scan(cursor, stop, limit=1)), None)
                if first is None:
                    break
                k = rk.decode(first[0])
                ep = EndPoint(k.namespace or "?", k.name or "?")
                found.add(ep)
                cursor = rk.prefix_end(rk.dataset_prefix(kind, ep.namespace, ep.name))
        return sorted(found)

    def all_runs(self) -> dict[EndPoint, tuple[list[RunInfo], list[RunInfo]]]:
        """Every dataset with recorded runs: (the runs that wrote it, the runs
        that read it), each newest first, as `runs` answers them for the whole
        history. One scan of each run index and one multi-get of the run rows
        (for their programs), however many datasets there are: what a question
        about every dataset and job (Marquez's namespaces, lineage graph,
        search) reads instead of two scans per dataset."""
        found: dict[EndPoint, tuple[list[tuple[int, str, str]], list[tuple[int, str, str]]]] = {}
        for side, kind in enumerate((rk.BACKWARD, rk.FORWARD)):
            prefix = kind + rk.SEP
            # a run row's key is its dataset's prefix and 8 bytes of time: a
            # dataset's key is decoded once, its rows' times read directly
            head: bytes | None = None
            seen: set[str] = set()
            items: list[tuple[int, str, str]] = []
            for key, cols in self.table.scan(prefix, rk.prefix_end(prefix)):
                if key[:-8] != head:
                    k = _decode_key(self.url, key)
                    if k.level != 0 or k.namespace is None or k.name is None:
                        raise _corrupt(self.url, key)
                    head, seen = key[:-8], set()
                    items = found.setdefault(EndPoint(k.namespace, k.name), ([], []))[side]
                try:
                    row_ms = rk.uninvert(key[-8:])
                    for run_id, value in cols.items():
                        if run_id not in seen:  # the newest cell of a run, as _scan_runs
                            seen.add(run_id)
                            t, checksum = rk.run_of(row_ms, value)
                            items.append((t, run_id, checksum))
                except (ValueError, UnicodeDecodeError, struct.error):
                    raise _corrupt(self.url, key) from None
        ids = sorted({r for w, rd in found.values() for _, r, _ in w + rd})
        rows = self.table.get_many([rk.run(r) for r in ids]) if ids else {}
        programs: dict[str, str | None] = {}
        for r in ids:
            try:
                programs[r] = rows.get(rk.run(r), {}).get("p", b"").decode() or None
            except UnicodeDecodeError:
                raise _corrupt(self.url, rk.run(r)) from None

        def infos(items: list[tuple[int, str, str]]) -> list[RunInfo]:
            return [RunInfo(r, t, programs[r], c)
                    for t, r, c in sorted(items, key=lambda x: (-x[0], x[1]))]
        return {ep: (infos(w), infos(rd)) for ep, (w, rd) in found.items()}

    def schema_spans(self) -> dict[EndPoint, tuple[int, int]]:
        """Every dataset a schema was reported for: the times of its first and
        latest report. One scan of the schema index (no schema is read)."""
        out: dict[EndPoint, tuple[int, int]] = {}
        prefix = rk.SCHEMA + rk.SEP
        for key, _ in self.table.scan(prefix, rk.prefix_end(prefix)):
            k = _decode_key(self.url, key)
            if k.start_ms is None or k.namespace is None or k.name is None:
                raise _corrupt(self.url, key)
            ep = EndPoint(k.namespace, k.name)
            lo, hi = out.get(ep, (k.start_ms, k.start_ms))
            out[ep] = (min(lo, k.start_ms), max(hi, k.start_ms))
        return out

    def exists(self, endpoint: EndPoint) -> bool:
        """Whether any run ever read or wrote ``endpoint`` (a failed run
        counts only for a store `including_failed`)."""
        kinds = (rk.BACKWARD, rk.FORWARD) + ((rk.FAILED_BACKWARD, rk.FAILED_FORWARD)
                                            if self.include_failed else ())
        for kind in kinds:
            prefix = rk.dataset_prefix(kind, endpoint.namespace, endpoint.name)
            if next(iter(self.table.scan(prefix, rk.prefix_end(prefix), limit=1)), None):
                return True
        return False


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

        def key(t: int, head: bytes = head) -> bytes:
            return head + _INV(rk.MAX_TIME - t)
        # the keys between are built only for a backend that reads keys (HBase)
        out.append(Span(key(newest), key(first) + b"\x00",
                        _Keys(key, range(first, newest + 1, rk.LEVELS4[k]))))
    return out


class _Merged(dict):
    """A column map a batch built by merging: its own, so it may grow in place."""


def _merge_into(rows: dict[bytes, dict[str, bytes]], key: bytes, cols: dict[str, bytes]
                ) -> None:
    """Add a row's columns to a batch: two runs of a batch share wide rows.
    Column maps are shared between rows and runs, so they are never mutated,
    except the batch's own merged copies (a coarse bucket gathering thousands
    of new sets in one batch grows one map, not a copy per set)."""
    cur = rows.get(key)
    if cur is None:
        rows[key] = cols
    elif type(cur) is _Merged:
        cur.update(cols)
    elif cur is not cols and not cols.items() <= cur.items():
        merged = rows[key] = _Merged(cur)
        merged.update(cols)


def _not_put(cells: dict[bytes, set[str]], puts: dict[bytes, dict[str, bytes]]
             ) -> dict[bytes, list[str]]:
    """The cells to delete that the same batch does not write again (a
    superseded run keeps its run cell, with its new set; another run of the
    batch may keep a bucket cell)."""
    out: dict[bytes, list[str]] = {}
    for key, cols in cells.items():
        again = puts.get(key, {})
        left = sorted(c for c in cols if c not in again)
        if left:
            out[key] = left
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


def unused_buckets(table: Table, wanted: Iterable[Bucket], *, ignore: Set[str] = frozenset()
                   ) -> list[tuple[bytes, str]]:
    """The bucket cells ``(row, checksum)``, at every level, of these (kind,
    endpoint, set, start) that no run keeps once the runs in ``ignore`` (and
    any whose run cells are already deleted) are gone.

    Level 1 (4 s): the run rows of the bucket's span, filtered by checksum.
    Level k: a bucket is kept when one of its 64 children at level k - 1 is
    (present, and not found unused here): one multi-get per level. Levels are
    done in order for all of ``wanted`` at once, and a kept bucket stops its
    way up (every coarser bucket holds it). Directory cells stay (one per
    endpoint and 2.2 years: an absent top bucket costs a key in a multi-get).
    """
    wanted = list(wanted)
    size1 = rk.LEVELS4[1]
    # level 1: the run rows of each bucket's span, all in one read
    spans: dict[tuple[bytes, str, str, int], Span] = {}
    for kind, ns, name, _, start in wanted:
        first = start - start % size1
        span = (kind, ns, name, first)
        if span not in spans:
            spans[span] = _children(RUN_OF_BUCKET[kind], ns, name, 0, first, size1)
    rows = table.read_spans(list(spans.values())).rows
    keys = sorted(rows)
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
        present = table.read_spans(list({sp.lo: sp for sp in children.values()}.values())).rows
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

    def key(t: int) -> bytes:
        return rk.run_row(kind, namespace, name, t) if k == 0 else \
            rk.bucket4(kind, namespace, name, k, t)
    return Span(key(times[-1]), key(times[0]) + b"\x00", _Keys(key, times))


class _Keys:
    """The keys of a span of time-index rows, built when iterated, newest first."""

    __slots__ = ("_key", "_times")

    def __init__(self, key: Callable[[int], bytes], times: range):
        self._key, self._times = key, times

    def __iter__(self) -> Iterator[bytes]:
        return map(self._key, reversed(self._times))


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
