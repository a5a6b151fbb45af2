"""Copying a store: `migrate` copies its rows as they are (resumable);
`migrate_runs` records its runs again in another store, in that store's layout."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ... import rowkeys as rk
from ...errors import BadRequest
from ..base import Table
from ..layout import RUN_OF_FIRST, WIDE_PREFIXES, row_sets, run_cells
from ..lineage import LineageStore
from .rows import Progress, printable_key, row_time


@dataclass
class MigrateReport:
    source: str
    destination: str
    total: int = 0
    copied: int = 0
    resumed_from: bytes | None = None

    def to_dict(self) -> dict:
        return {"from": self.source, "to": self.destination, "total_rows": self.total,
                "copied_rows": self.copied,
                "resumed_from": None if self.resumed_from is None
                else printable_key(self.resumed_from)}


def resume_point(source: Table, destination: Table, batch_size: int) -> bytes | None:
    """Where an interrupted copy restarts: ``batch_size - 1`` source rows before the
    destination's last key, so a batch that landed only in part (on a backend
    without atomic batches) is copied again whole. None when the destination is empty.
    """
    last = next(iter(destination.scan(reverse=True, limit=1)), None)
    if last is None:
        return None
    key = last[0]
    if source.get(key) is None:
        raise BadRequest(f"destination {destination.url} is not empty and its last row "
                         f"{printable_key(key)!r} is not in the source {source.url}: it is not "
                         f"a partial copy of it; use an empty destination", "to")
    if batch_size == 1:
        return key
    back = list(source.scan(b"", key, reverse=True, limit=batch_size - 1))
    return back[-1][0] if back else key


def migrate(source: Table, destination: Table, *, batch_size: int = 1000,
            progress: Progress | None = None, total: int | None = None) -> MigrateReport:
    """Copy every row of ``source`` into ``destination`` in key order, ``batch_size``
    rows per put. Resumable: rerun after an interruption and it continues near the
    destination's last key (puts are idempotent, so rows copied twice are harmless).

    Into a backend whose questions do not read first-run rows (HBase: see
    `LineageStore.first_runs`), each first-run cell also brings its run's
    bucket cells, so the copy answers every question as the source does."""
    if batch_size < 1:
        raise BadRequest(f"batch size must be at least 1, got {batch_size}", "batch-size")
    report = MigrateReport(source.url, destination.url)
    declare = getattr(destination, "declare_wide", None)
    if callable(declare):  # the rows the lineage store keeps a cell at a time
        declare(WIDE_PREFIXES)
    start = resume_point(source, destination, batch_size)
    report.resumed_from = start
    report.total = sum(1 for _ in source.scan()) if total is None else total
    if progress and start:
        progress(sum(1 for _ in source.scan(b"", start)))  # rows already there
    batch: dict[bytes, dict[str, bytes]] = {}
    rows = 0  # source rows in the batch (it may hold bucket cells besides)
    buckets_too = not getattr(destination, "one_call_ranges", False)

    def flush() -> None:
        destination.put(batch)
        report.copied += rows
        if progress:
            progress(rows)

    for key, cols in source.scan(start or b""):
        batch[key] = dict(cols)
        rows += 1
        if buckets_too and key[:1] in RUN_OF_FIRST:
            _first_run_buckets(key, cols, batch)
        if rows >= batch_size:
            flush()
            batch, rows = {}, 0
    if batch:
        flush()
    return report


def _first_run_buckets(key: bytes, cols: dict[str, bytes],
                       into: dict[bytes, dict[str, bytes]]) -> None:
    """The bucket and directory cells of the runs of a first-run row, as a
    format-4 writer would have written them (a cell that does not decode is
    copied as it is: fsck reports it)."""
    try:
        k = rk.decode(key)
        runs = list(row_sets(key, cols))
    except (ValueError, UnicodeDecodeError):
        return
    for run_id, checksum, t in runs:
        for row, new in run_cells(RUN_OF_FIRST[key[:1]], k.namespace or "", k.name or "", t,
                                  run_id, checksum).items():
            into.setdefault(row, {}).update(new)


@dataclass
class RunMigrateReport:
    source: str
    destination: str
    runs: int = 0
    new_runs: int = 0
    other_rows: int = 0

    def to_dict(self) -> dict:
        return {"from": self.source, "to": self.destination, "runs": self.runs,
                "new_runs": self.new_runs, "schema_and_alias_rows": self.other_rows}


def migrate_runs(source: LineageStore, destination: LineageStore, *, batch_size: int = 500,
                 progress: Progress | None = None) -> RunMigrateReport:
    """Copy every run (its operation set, start, program), claimed start, schema
    and alias from one store to another, whatever their formats and backends:
    the destination writes its own layout. Idempotent, so an interrupted copy is
    resumed by running it again (runs already there cost one read per batch)."""
    report = RunMigrateReport(source.url, destination.url)
    pending: list[tuple[Any, str, int, str | None]] = []

    def flush() -> None:
        if pending:
            report.new_runs += destination.record_many(pending)
            if progress:
                progress(len(pending))
            pending.clear()

    for key, cols in source.table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        run_id = rk.decode(key).run_id or ""
        start = row_time(key, cols)
        if start is None:
            continue
        report.runs += 1
        if "c" not in cols:
            destination.claim_run_start(run_id, start)
            if progress:
                progress(1)
            continue
        info = source.operation_set(cols["c"].decode())
        pending.append((info, run_id, start, cols.get("p", b"").decode() or None))
        if len(pending) >= batch_size:
            flush()
    flush()
    other: dict[bytes, dict[str, bytes]] = {}
    # a schema's body before the rows naming it
    # classification tags too: not lineage, but the store's (fll.store.tags)
    for kind in (rk.SCHEMA_BODY, rk.SCHEMAS, rk.ALIAS, rk.ALIASED_BY, rk.TAG, rk.TAGGED):
        for key, cols in source.table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)):
            other[key] = cols
            if len(other) >= batch_size:
                destination.table.put(other)
                report.other_rows += len(other)
                other = {}
    if other:
        destination.table.put(other)
        report.other_rows += len(other)
    return report
