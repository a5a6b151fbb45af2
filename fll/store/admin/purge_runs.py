"""`purge`: remove the runs that started before a time, then the bucket,
data, shape and schema rows no remaining run uses."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ... import rowkeys as rk
from ...errors import FllError
from .. import runs as run_model
from ..base import Table
from ..datarows import SHAPED
from ..layout import FIRST_OF_RUN, set_used_since, unused_buckets
from ..lineage import LineageStore
from .rows import _BATCH, _BUCKET_OF, Progress, iso_ms, row_time
from .lease import atomically, _delete, maintenance
from .unused import (_bucket_kept_since, _by_row, drop_unused_schemas, drop_unused_shapes,
                     _set_endpoints)


@dataclass
class PurgeReport:
    before_ms: int
    dry_run: bool
    runs: int = 0
    index_rows: int = 0
    bucket_rows: int = 0
    data_rows: int = 0
    shape_rows: int = 0
    #: bucket and data rows a dry run already counted (a set spans batches)
    counted: set = field(default_factory=set, repr=False)

    def to_dict(self) -> dict:
        return {"before_ms": self.before_ms, "before": iso_ms(self.before_ms),
                "dry_run": self.dry_run, "runs": self.runs, "index_rows": self.index_rows,
                "bucket_rows": self.bucket_rows, "data_rows": self.data_rows,
                "shape_rows": self.shape_rows}


def count_runs_before(table: Table, before_ms: int) -> int:
    """How many runs started before ``before_ms`` (a scan of the ``r|`` rows)."""
    n = 0
    for key, cols in table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        t = row_time(key, cols)
        if t is not None and t < before_ms:
            n += 1
    return n


def purge(store: LineageStore, before_ms: int, *, dry_run: bool = False,
          progress: Progress | None = None) -> PurgeReport:
    """Remove every run that started before ``before_ms``: its index rows and run
    row, then the bucket and data rows no remaining run uses.

    Batch by batch, each in one transaction on SQLite that re-reads its run rows
    and re-checks every bucket and data row's use after its deletes, so a writer
    reusing a set meanwhile either committed first (the set stays) or commits
    after (and writes the data row again). Idempotent and restartable.
    ``dry_run`` counts with the same rules and changes nothing.
    """
    table = store.table
    if not dry_run:
        with maintenance(table, "purge"):
            return _purge(store, before_ms, progress=progress)
    return _purge(store, before_ms, dry_run=True, progress=progress)


def _purge(store: LineageStore, before_ms: int, *, dry_run: bool = False,
           progress: Progress | None = None) -> PurgeReport:
    table = store.table
    report = PurgeReport(before_ms, dry_run)
    batch: list[bytes] = []

    def flush() -> None:
        if batch:
            if dry_run:
                _purge_batch(store, table, list(batch), before_ms, report, dry_run=True)
            else:
                counts = PurgeReport(before_ms, False)
                atomically(table, functools.partial(_purge_in_txn, store, list(batch),
                                                    before_ms, counts))
                report.runs += counts.runs
                report.index_rows += counts.index_rows
                report.bucket_rows += counts.bucket_rows
                report.data_rows += counts.data_rows
            if progress:
                progress(len(batch))
        batch.clear()

    for key, cols in table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        start = row_time(key, cols)
        if start is None or start >= before_ms:
            continue
        batch.append(key)
        if len(batch) >= _BATCH:
            flush()
    flush()
    if report.data_rows:
        report.shape_rows = _unused_shapes(table, report.counted) if dry_run \
            else drop_unused_shapes(table)
    if not dry_run:  # schemas reported by purged runs
        old: dict[bytes, list[str]] = {}
        for key, cols in table.scan(rk.SCHEMAS + rk.SEP, rk.prefix_end(rk.SCHEMAS + rk.SEP)):
            for col in cols:
                try:
                    if rk.schema_column_of(col)[0] < before_ms:
                        old.setdefault(key, []).append(col)
                except ValueError:
                    continue  # of no known shape: fsck reports it
        cells = list(old.items())
        for i in range(0, len(cells), _BATCH):
            table.delete_columns(dict(cells[i:i + _BATCH]))
        if old:
            drop_unused_schemas(table)
        if report.runs:
            _delete(table, run_model.empty_jobs(table))  # jobs whose every run went
    return report


def _unused_shapes(table: Table, going: set) -> int:
    """How many shapes no ``d|`` row would name once the rows in ``going`` are gone."""
    used = set()
    for key, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        value = cols.get(SHAPED)
        if key not in going and value is not None and len(value) >= 16:
            used.add(rk.checksum_of(value[:16]))
    return sum(1 for key, _ in table.scan(rk.SHAPE + rk.SEP, rk.prefix_end(rk.SHAPE + rk.SEP))
               if rk.decode(key).checksum not in used)


def _purge_in_txn(store: LineageStore, keys: list[bytes], before_ms: int,
                  report: PurgeReport, table: Table) -> None:
    report.runs = report.index_rows = report.bucket_rows = report.data_rows = 0
    _purge_batch(store, table, keys, before_ms, report, dry_run=False)


def _purge_batch(store: LineageStore, table: Table, keys: list[bytes], before_ms: int,
                 report: PurgeReport, *, dry_run: bool) -> None:
    runs = table.get_many(keys)
    cells: dict[bytes, set[str]] = {}
    wanted: list[tuple[bytes, str, str, str, int]] = []
    sets: dict[str, list[tuple[bytes, str, str]]] = {}
    firsts: dict[bytes, set[str]] = {}
    gone_runs = []
    gone_models: list[tuple[str, int]] = []  # the runs' run-model rows go with them
    failed_rows: list[bytes] = []  # and their failed-run rows, if they failed
    for key, cols in runs.items():
        start = row_time(key, cols)
        if start is None or start >= before_ms:
            continue  # changed since the scan
        gone_runs.append(key)
        run_id = rk.decode(key).run_id or ""
        gone_models.append((run_id, start))
        checksum = cols.get("c", b"").decode("utf-8", "replace")
        if not checksum:
            continue  # only a claimed start
        if checksum not in sets:
            try:
                sets[checksum] = _set_endpoints(store.operation_set(checksum))
            except FllError:
                sets[checksum] = []  # data row gone: fsck owns that case
        for kind, ns, name in sets[checksum]:
            failed_rows.append(rk.failed(rk.FAILED_BACKWARD if kind == rk.BACKWARD
                                         else rk.FAILED_FORWARD, ns, name, start, run_id))
            cells.setdefault(rk.run_row(kind, ns, name, start), set()).add(run_id)
            # its first-run cell, if it was its set's first run
            firsts.setdefault(rk.run_row(FIRST_OF_RUN[kind], ns, name, start),
                              set()).add(run_id)
            wanted.append((_BUCKET_OF[kind], ns, name, checksum, start))
    there = table.get_many(sorted(firsts)) if firsts else {}
    first_cells = sum(1 for k, runs in firsts.items() for r in runs if r in there.get(k, {}))
    if not dry_run:
        # the runs' cells first: the bucket and data rows are then unused
        # exactly when no other run keeps them
        table.delete(gone_runs)
        table.delete_columns({k: sorted(v) for k, v in (cells | firsts).items()})
        table.delete(failed_rows + run_model.purge_keys(table, gone_models))
        stale = unused_buckets(table, wanted)
        unused = [rk.data(c) for c, eps in sets.items()
                  if eps and not set_used_since(table, c, eps, 0)]
        present = table.get_many(sorted({k for k, _ in stale}) + unused)
        stale = [(k, c) for k, c in stale if c in present.get(k, {})]
        table.delete_columns(_by_row(stale))
        table.delete([k for k in unused if k in present])
        # a top bucket row left without columns leaves its dataset's directory
        tops = sorted({k for k, _ in stale if rk.decode(k).level == rk.TOP})
        if tops:
            still = table.get_many(tops)
            listed: dict[bytes, list[str]] = {}
            for k in tops:
                if k not in still:
                    d = rk.decode(k)
                    listed.setdefault(rk.directory(k[:1], d.namespace or "", d.name or ""),
                                      []).append(str(d.start_ms))
            table.delete_columns(listed)
        report.bucket_rows += len(stale)
        report.data_rows += sum(1 for k in unused if k in present)
    else:
        # nothing is deleted: a bucket cell or set counts when no run from the
        # cut on keeps it
        buckets = {(rk.bucket4(kind, ns, name, level, start - start % rk.LEVELS4[level]), c)
                   for kind, ns, name, c, start in wanted for level in range(1, rk.TOP + 1)}
        present = table.get_many(sorted({k for k, _ in buckets}))
        stale = [b for b in sorted(buckets) if b not in report.counted
                 and b[1] in present.get(b[0], {}) and not _bucket_kept_since(table, b, before_ms)]
        unused = [rk.data(c) for c, eps in sets.items() if rk.data(c) not in report.counted
                  and eps and not set_used_since(table, c, eps, before_ms)]
        there = table.get_many(unused)
        report.counted.update(stale)
        report.counted.update(there)
        report.bucket_rows += len(stale)
        report.data_rows += len(there)
    report.runs += len(gone_runs)
    report.index_rows += sum(len(v) for v in cells.values()) + first_cells
