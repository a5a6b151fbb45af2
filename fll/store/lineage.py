"""The lineage store: records runs as wide rows and answers time-ranged questions.

Write path (`record`): the ``d|<checksum>`` row once per distinct operation
set (operations plus precomputed summaries), then per run the index rows
``b|``/``f|`` (by time) and ``B|``/``F|`` (by operation set, then time), and
last the ``r|<run>`` row. On a backend with atomic batches that is one batch;
elsewhere the data row is written before any index row, so a crash can leave
an unreferenced data row but never an index row pointing at nothing.

Read path: a question over ``[start, end)`` first finds the distinct
operation sets with a run in the range by skip-scanning the ``B|``/``F|``
index (two short seeks per set, whatever the number of runs), then reads each
set's precomputed summary once. Cost follows distinct operation sets, not
runs. This module must never recompute a summary per query.
"""
from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from typing import Iterable, Iterator, NamedTuple

from .. import rowkeys as rk
from ..codec import Summaries, canonical_bytes, decode_canonical, summaries_to_bytes
from ..errors import InvalidLineageError, StoreError
from ..model import DROPPED, EndPoint, EndPointField, FieldLineageInfo, Operation
from .base import Table

_T = struct.Struct(">q")


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


class _Cached:
    __slots__ = ("raw_ops", "summaries", "_info")

    def __init__(self, raw_ops: bytes, summaries: Summaries):
        self.raw_ops = raw_ops
        self.summaries = summaries
        self._info: FieldLineageInfo | None = None

    @property
    def info(self) -> FieldLineageInfo:
        if self._info is None:
            self._info = decode_canonical(self.raw_ops)
        return self._info


def _check_run(run_id: object, start_ms: object) -> None:
    if not isinstance(run_id, str) or not run_id:
        raise InvalidLineageError(f"run id must be a non-empty string, got {run_id!r}")
    if isinstance(start_ms, bool) or not isinstance(start_ms, int):
        raise InvalidLineageError(f"start time must be integer epoch milliseconds, "
                                  f"got {start_ms!r}")
    if not 0 <= start_ms <= rk.MAX_TIME:
        raise InvalidLineageError(f"start time {start_ms} ms is out of range")


class LineageStore:
    """Field lineage over any `Table` backend. Safe to share between threads."""

    def __init__(self, table: Table, *, cache_size: int = 4096):
        self.table = table
        self.url = table.url
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._atomic = bool(getattr(table, "atomic_batches", False)) or \
            type(table).__name__ == "SQLiteTable"

    def close(self) -> None:
        self.table.close()

    def __enter__(self) -> "LineageStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------
    def record(self, info: FieldLineageInfo, run_id: str, start_time_ms: int,
               program: str | None = None) -> bool:
        """Store one run's lineage. Returns False if this run was already recorded
        with the same operation set (idempotent); a different set for a known run
        is an error."""
        return self.record_many([(info, run_id, start_time_ms, program)]) == 1

    def record_many(self, runs: Iterable[tuple[FieldLineageInfo, str, int, str | None]]) -> int:
        """Store many runs in as few batches as the backend allows; returns how many were new.

        Everything is checked before anything is written: one bad run fails the
        whole call with nothing stored.
        """
        items = list(runs)
        for info, run_id, start, _program in items:
            if not isinstance(info, FieldLineageInfo):
                raise InvalidLineageError(f"run {run_id!r}: expected a FieldLineageInfo")
            _check_run(run_id, start)
        # one round trip for the run rows (idempotence) and the data rows (dedup);
        # the table is asked, never a memory of this process, because another
        # process (purge, fsck --repair) may have removed a data row since
        data_keys = {rk.data(info.checksum) for info, _, _, _ in items}
        existing = self.table.get_many([rk.run(r) for _, r, _, _ in items] + sorted(data_keys))
        data_rows: dict[bytes, dict[str, bytes]] = {}
        index_rows: dict[bytes, dict[str, bytes]] = {}
        run_rows: dict[bytes, dict[str, bytes]] = {}
        seen_runs: dict[str, str] = {}
        new = 0
        for info, run_id, start, program in items:
            checksum = info.checksum
            old = existing.get(rk.run(run_id))
            prior = old.get("c", b"").decode() if old else seen_runs.get(run_id)
            if prior is not None:
                if prior != checksum:
                    raise InvalidLineageError(
                        f"run {run_id!r} is already recorded with operation set {prior}; "
                        f"refusing a different set ({checksum}) for the same run")
                continue
            seen_runs[run_id] = checksum
            new += 1
            dkey = rk.data(checksum)
            if dkey not in data_rows and dkey not in existing:
                data_rows[dkey] = {"o": canonical_bytes(info.operations),
                                   "s": summaries_to_bytes(info)}
            prog = (program or "").encode("utf-8")
            for ep in info.destinations:
                index_rows[rk.backward(ep.namespace, ep.name, start, run_id)] = {
                    "c": checksum.encode(), "p": prog}
                index_rows[rk.by_set(rk.BACKWARD_BY_SET, ep.namespace, ep.name, checksum,
                                     start, run_id)] = {"p": prog}
            for ep in info.sources:
                index_rows[rk.forward(ep.namespace, ep.name, start, run_id)] = {
                    "c": checksum.encode(), "p": prog}
                index_rows[rk.by_set(rk.FORWARD_BY_SET, ep.namespace, ep.name, checksum,
                                     start, run_id)] = {"p": prog}
            run_rows[rk.run(run_id)] = {"c": checksum.encode(), "t": _T.pack(start), "p": prog}
        if not new:
            return 0
        if self._atomic:
            self.table.put({**data_rows, **index_rows, **run_rows})
        else:
            # data before index, run row last: a crash leaves at worst an
            # unreferenced data row, which fsck removes
            if data_rows:
                self.table.put(data_rows)
            self.table.put(index_rows)
            self.table.put(run_rows)
        return new

    # -- operation sets --------------------------------------------------------
    def _load(self, checksum: str) -> _Cached:
        with self._lock:
            hit = self._cache.get(checksum)
            if hit is not None:
                self._cache.move_to_end(checksum)
                return hit
        row = self.table.get(rk.data(checksum))
        if row is None or "o" not in row or "s" not in row:
            raise StoreError(f"store {self.url}: operation set {checksum} is referenced by an "
                             f"index row but its data row is missing (run `fll admin fsck`)")
        cached = _Cached(row["o"], Summaries(row["s"]))
        with self._lock:
            self._cache[checksum] = cached
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return cached

    def operation_set(self, checksum: str) -> FieldLineageInfo:
        """The operation set stored under ``checksum``."""
        return self._load(checksum).info

    def checksums(self, endpoint: EndPoint, start: int, end: int,
                  direction: str = "incoming") -> list[str]:
        """Distinct operation sets with a run in ``[start, end)`` that write
        (incoming) or read (outgoing) ``endpoint``; two seeks per set."""
        kind = {"incoming": rk.BACKWARD_BY_SET, "outgoing": rk.FORWARD_BY_SET}[direction]
        prefix = rk.dataset_prefix(kind, endpoint.namespace, endpoint.name)
        stop = rk.prefix_end(prefix)
        cursor = prefix
        found: list[str] = []
        while True:
            first = next(iter(self.table.scan(cursor, stop, limit=1)), None)
            if first is None:
                break
            checksum = rk.decode(first[0]).checksum or ""
            set_prefix = rk.by_set_prefix(kind, endpoint.namespace, endpoint.name, checksum)
            lo, hi = rk.time_range(set_prefix, start, end)
            if next(iter(self.table.scan(lo, hi, limit=1)), None) is not None:
                found.append(checksum)
            cursor = rk.prefix_end(set_prefix)
        return found

    def _summaries(self, endpoint: EndPoint, start: int, end: int,
                   direction: str) -> Iterator[tuple[str, Summaries]]:
        for c in self.checksums(endpoint, start, end, direction):
            yield c, self._load(c).summaries

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
        Groups are ordered by their newest run."""
        kind = {"incoming": rk.BACKWARD_BY_SET, "outgoing": rk.FORWARD_BY_SET}[direction]
        groups: list[OperationGroup] = []
        for checksum in self.checksums(efield.endpoint, start, end, direction):
            cached = self._load(checksum)
            s = cached.summaries
            if direction == "incoming":
                if efield not in s.destination_fields:
                    continue
                ops = cached.info.incoming_operations(efield)
            else:
                if efield not in s.source_fields:
                    continue
                ops = cached.info.outgoing_operations(efield)
            runs = list(self._runs_by_set(kind, efield.endpoint, checksum, start, end))
            groups.append(OperationGroup(checksum, ops, runs))
        groups.sort(key=lambda g: (-g.runs[0].start_ms if g.runs else 0, g.checksum))
        return groups

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

    def _runs_by_set(self, kind: bytes, endpoint: EndPoint, checksum: str, start: int,
                     end: int, limit: int | None = None) -> Iterator[RunInfo]:
        prefix = rk.by_set_prefix(kind, endpoint.namespace, endpoint.name, checksum)
        lo, hi = rk.time_range(prefix, start, end)
        for key, cols in self.table.scan(lo, hi, limit=limit):
            k = rk.decode(key)
            yield RunInfo(k.run_id or "", k.start_ms or 0,
                          cols.get("p", b"").decode() or None, checksum)

    def runs(self, endpoint: EndPoint, start: int, end: int, direction: str = "both",
             limit: int | None = None) -> list[RunInfo]:
        """Runs that wrote (incoming) and/or read (outgoing) the dataset, newest first."""
        kinds = {"incoming": [rk.BACKWARD], "outgoing": [rk.FORWARD],
                 "both": [rk.BACKWARD, rk.FORWARD]}[direction]
        seen: dict[str, RunInfo] = {}
        for kind in kinds:
            lo, hi = rk.time_range(rk.dataset_prefix(kind, endpoint.namespace, endpoint.name),
                                   start, end)
            for key, cols in self.table.scan(lo, hi, limit=limit):
                k = rk.decode(key)
                seen.setdefault(k.run_id or "", RunInfo(
                    k.run_id or "", k.start_ms or 0, cols.get("p", b"").decode() or None,
                    cols.get("c", b"").decode()))
        ordered = sorted(seen.values(), key=lambda r: (-r.start_ms, r.run_id))
        return ordered[:limit] if limit is not None else ordered

    def run(self, run_id: str) -> RunInfo | None:
        """A recorded run by id, or None."""
        row = self.table.get(rk.run(run_id))
        if row is None:
            return None
        return RunInfo(run_id, _T.unpack(row["t"])[0], row.get("p", b"").decode() or None,
                       row["c"].decode())

    def properties(self, endpoint: EndPoint, start: int, end: int) -> list[dict]:
        """Per run in the range, the properties the run gave ``endpoint``."""
        out = []
        for r in self.runs(endpoint, start, end):
            ep = self._load(r.checksum).info.endpoint(endpoint.namespace, endpoint.name)
            out.append({"programRun": r.run_id, "program": r.program, "startMs": r.start_ms,
                        "properties": dict(ep.properties) if ep else {}})
        return out

    def datasets(self) -> list[EndPoint]:
        """Every dataset with at least one recorded run, as source or destination."""
        found: set[EndPoint] = set()
        for kind in (rk.BACKWARD, rk.FORWARD):
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

    def exists(self, endpoint: EndPoint) -> bool:
        """Whether any run ever read or wrote ``endpoint``."""
        for kind in (rk.BACKWARD, rk.FORWARD):
            prefix = rk.dataset_prefix(kind, endpoint.namespace, endpoint.name)
            if next(iter(self.table.scan(prefix, rk.prefix_end(prefix), limit=1)), None):
                return True
        return False
