"""The fsck repair: each fix re-checked (`fsck_confirm`) inside the
transaction that applies it, or under the maintenance lease elsewhere."""
from __future__ import annotations

import functools
from typing import Callable, Iterator

from ... import rowkeys as rk
from ...errors import FllError
from .. import runs as run_model
from ..base import Table
from ..datarows import decode_data
from ..layout import run_failed
from ..lineage import LineageStore
from .rows import _BATCH, _T, Cell
from .lease import atomically
from .unused import _bucket_kept_since, _by_row, drop_unused_schemas, drop_unused_shapes
from .fsck_report import FsckReport
from .fsck_confirm import (_still_dangling, _still_dangling_cells, _still_dangling_schemas,
                           _still_missing_runs, _still_missing_twins, _still_present, _still_stale,
                           _still_stray_failed, _still_stray_firsts, _unused_data_rows)


def _repair(table: Table, report: FsckReport) -> int:
    """Each fix re-checked (`_still_*`) inside the transaction that applies it;
    returns how many rows or cells were fixed, each list counted as it is."""
    def chunks(items: list) -> Iterator[list]:
        for i in range(0, len(items), _BATCH):
            yield items[i:i + _BATCH]

    def drop_dangling(t: Table, keys: list[bytes]) -> int:
        gone = _still_dangling(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_dangling_cells(t: Table, cells: list[Cell]) -> int:
        gone = _still_dangling_cells(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_orphans(t: Table, keys: list[bytes]) -> int:
        gone = _unused_data_rows(t, keys)  # shapes after the data rows: `drop_unused_shapes`
        t.delete(gone)
        return len(gone)

    def add_runs(t: Table, items: list[tuple[bytes, dict[str, bytes]]]) -> int:
        keep = dict(_still_missing_runs(t, items, report.run_cell_of))
        if keep:
            t.put(keep)
        return len(keep)

    def add_twins(t: Table, items: list[tuple[bytes, dict[str, bytes]]]) -> int:
        keep: dict[bytes, dict[str, bytes]] = {}
        for key, cols in _still_missing_twins(t, items, report.twin_wanters):
            k = rk.decode(key)
            for col, value in cols.items():
                # a bucket cell: only while a run of its set in the bucket is there
                if k.level == rk.DIRECTORY_LEVEL or _bucket_kept_since(t, (key, col), 0):
                    keep.setdefault(key, {})[col] = value
        if keep:
            t.put(keep)
        return len(keep)

    def drop_stray_firsts(t: Table, cells: list[Cell]) -> int:
        # still without the same cell in the run row (a writer may have finished since)
        gone = _still_stray_firsts(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_dangling_schemas(t: Table, cells: list[Cell]) -> int:
        # still naming a body that is not there (a writer writes both at once)
        gone = _still_dangling_schemas(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_stray_run_rows(t: Table, keys: list[bytes]) -> int:
        gone = run_model.still_stray(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_stray_failed(t: Table, keys: list[bytes]) -> int:
        gone = _still_stray_failed(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_broken_refs(t: Table, cells: list[Cell]) -> int:
        gone = run_model.still_broken(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_stale(t: Table, cells: list[Cell]) -> int:
        # in key order: children before their parents (earlier batches are deleted)
        gone = _still_stale(t, cells, set())
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_legacy(t: Table, keys: list[bytes]) -> int:
        gone = _still_present(t, keys)
        t.delete(gone)
        return len(gone)

    def finish_runs(t: Table, keys: list[bytes]) -> int:
        # what the writer would have done next: the index rows, then w=1
        writer = LineageStore(t)
        done = 0
        for key, cols in t.get_many(keys).items():
            if cols.get("w") != b"0" or "c" not in cols or "t" not in cols:
                continue
            data = t.get(rk.data(cols["c"].decode()))
            try:
                info = decode_data(data, t) if data else None
            except (ValueError, FllError):
                info = None
            if info is None:
                continue  # its data row is gone: reported as dangling
            run_id = rk.decode(key).run_id or ""
            t.put(writer._index_rows(info, run_id, _T.unpack(cols["t"])[0], cols.get("p", b"")))
            t.put({key: {"w": b"1"}})
            if run_failed(t.get(rk.run_model(run_id))):  # a failed run's cells go apart
                writer.move_to_failed([run_id], table=t)
            done += 1
        return done

    steps: list[tuple[list, Callable[[Table, list], int]]] = [
        (report.dangling, drop_dangling),
        (report.dangling_cells, drop_dangling_cells),
        (list(report.missing_runs.items()), add_runs),
        (list(report.missing_twins.items()), add_twins),
        (report.stale_buckets, drop_stale),
        (report.stray_firsts, drop_stray_firsts),
        (report.unfinished, finish_runs),
        (report.legacy, drop_legacy),
        (report.dangling_schemas, drop_dangling_schemas),
        (report.stray_run_rows, drop_stray_run_rows),
        (report.broken_event_refs, drop_broken_refs),
        (report.stray_failed, drop_stray_failed),
        (report.orphans, drop_orphans)]
    fixed = 0
    for items, fix in steps:
        for batch in chunks(items):
            fixed += atomically(table, functools.partial(_apply, fix, batch))
    if report.orphans:
        fixed += drop_unused_shapes(table)
    if report.unused_schemas:
        fixed += drop_unused_schemas(table)
    return fixed


def _apply(fix: Callable[[Table, list], int], batch: list, table: Table) -> int:
    return fix(table, batch)
