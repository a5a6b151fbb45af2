"""`fsck`: the scans that look for problems, then their confirmation
(`fsck_confirm`) and, when asked, their repair (`fsck_repair`)."""
from __future__ import annotations

import struct
from contextlib import contextmanager
from typing import Iterator

from ... import rowkeys as rk
from ...errors import FllError, StoreError
from .. import runs as run_model
from ..base import Table, transactional
from ..datarows import SHAPED, shape_ref
from ..layout import FIRST_OF_RUN, RUN_OF_FIRST, row_sets, run_cells
from ..tags import decode_assignment, decode_def
from .rows import _BATCH, _BUCKETS, _INDEX_KINDS, _T, Cell, Progress
from .lease import maintenance
from .fsck_report import FsckReport
from .fsck_confirm import (_BODY_ERRORS, _DATA_ERRORS, _body_digest, _bucket_kept, _check_data,
                           _confirm, _row_checksum, _shape_parts, _still_stray_failed)
from .fsck_repair import _repair
from .format_upgrade import store_format


def fsck(table: Table, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    """Check that every run cell and run row points at a data row, every data
    row is referenced, every run cell has its twins (its set's bucket cells at
    each level and its directory cell), every bucket cell is kept by a run, and
    no row of an older format is left; with ``repair``, fix what can be fixed.
    A store of an older format is refused: `fll admin upgrade` converts it
    first (a rerun finishes an interrupted one).

    Several scans (the shapes, the schema bodies, the ``d|`` rows, then every
    row), each judging from what the earlier ones saw. Writers may run
    meanwhile: on SQLite the scans read one snapshot (`SQLiteTable.snapshot`,
    which blocks no writer); on backends without transactions they read as
    they go. Either way a problem is reported only once a fresh read of what
    it depends on still shows it (`_confirm`; after `SETTLE_S` where writers
    may be between two puts), so a sound store beside writers reports
    nothing. The repair re-checks each problem again inside the transaction
    that changes it (one per batch; elsewhere under the lease, which no
    writer holds meanwhile) and leaves alone what a writer completed since;
    ``report.fixed`` counts what it changed.
    """
    from ..lineage import FORMAT, OlderFormat

    report = FsckReport()
    found = store_format(table)
    if 0 < found < FORMAT:
        raise OlderFormat(table.url, found)  # its rows are read by `upgrade` alone
    if found > FORMAT:
        raise StoreError(f"store {table.url} has format {found}, newer than format {FORMAT} "
                         f"this fll reads; upgrade fll")
    report.format = found or FORMAT
    with _read_view(table):
        _find_problems(table, report, progress)
    if not report.clean:
        _confirm(table, report, settle=not transactional(table))
    if repair and not report.clean:
        with maintenance(table, "fsck --repair"):
            if not transactional(table):
                # no writer runs now (the lease): this re-read is the state repaired
                _confirm(table, report, settle=False)
            report.fixed = _repair(table, report)
        report.repaired = True
        report.unrepaired = len(report.corrupt) + len(report.unknown)
    return report


@contextmanager
def _read_view(table: Table) -> Iterator[None]:
    """One state of the store for every read inside, where the backend can
    (SQLite: `SQLiteTable.snapshot`); elsewhere reads as they come, and what
    they suggest is confirmed by `_confirm`."""
    snapshot = getattr(table, "snapshot", None)
    if callable(snapshot):
        with snapshot():
            yield
    else:
        yield


def _find_problems(table: Table, report: FsckReport, progress: Progress | None) -> None:
    """The scans of `fsck`: what they find goes into ``report``, to be confirmed."""
    data: set[str] = set()
    # the shapes first (format 5): few, and every shaped d| row is checked against its own
    shapes: dict[str, tuple[bytes, bytes]] = {}
    shape_keys: dict[str, bytes] = {}
    for key, cols in table.scan(rk.SHAPE + rk.SEP, rk.prefix_end(rk.SHAPE + rk.SEP)):
        try:
            c = rk.decode(key).checksum or ""
            shape_keys[c] = key
            shapes[c] = _shape_parts(cols)
        except (ValueError, FllError, UnicodeDecodeError):
            shapes.pop(c, None)
            report.corrupt.append(key)
    used_shapes: set[str] = set()
    # schema bodies (format 6): few, each checked against the digest it is keyed by
    bodies: dict[bytes, bytes] = {}
    for key, cols in table.scan(rk.SCHEMA_BODY + rk.SEP,
                                rk.prefix_end(rk.SCHEMA_BODY + rk.SEP)):
        try:
            bodies[_body_digest(key, cols)] = key
        except _BODY_ERRORS:
            report.corrupt.append(key)
    named_schemas: set[bytes] = set()
    for key, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        data.add(rk.decode(key).checksum or "")
        try:
            if SHAPED in cols:
                used_shapes.add(shape_ref(cols)[0])
            _check_data(key, cols, shapes)
        except _DATA_ERRORS:
            report.corrupt.append(key)
    referenced: set[str] = set()
    # runs seen in b|/f| rows, and twins expected, checked a batch at a time so
    # memory stays flat whatever the number of runs
    pending: dict[str, tuple[str, int, bytes, bytes | None]] = {}  # ..., the run cell's row
    twins: dict[bytes, dict[str, bytes]] = {}
    # format 5: a run cell is indexed either by its first-run cell (row, run,
    # value) or by its bucket cells, as in format 4; and the run cell's row
    either: list[tuple[bytes, str, bytes, dict[bytes, dict[str, bytes]], bytes]] = []
    firsts: list[tuple[bytes, str, bytes]] = []  # first-run cells, to match with run cells
    stale: set[Cell] = set()
    current = report.format >= 4
    fmt5 = report.format >= 5
    model = run_model.ModelCheck()
    failed_rows: list[bytes] = []  # x|/y| rows, checked against their run rows in batches

    def check_runs() -> None:
        found = table.get_many([rk.run(r) for r in pending])
        for run_id, (checksum, start, program, row) in pending.items():
            if rk.run(run_id) not in found:
                report.missing_runs[rk.run(run_id)] = {
                    "c": checksum.encode(), "t": _T.pack(start), "p": program}
                if row is not None:
                    report.run_cell_of[rk.run(run_id)] = (row, run_id)
        pending.clear()

    def check_twins() -> None:
        keys = set(twins)
        for first, _, _, buckets, _ in either:
            keys.add(first)
            keys.update(buckets)
        found = table.get_many(sorted(keys))
        expected: list[tuple[bytes, dict[str, bytes], tuple[bytes, str, bytes, bytes] | None]] = \
            [(key, cols, None) for key, cols in twins.items()]
        for first, run_id, value, buckets, row in either:
            if found.get(first, {}).get(run_id) != value:
                expected.extend((key, cols, (row, run_id, value, first))
                                for key, cols in buckets.items())
        for key, cols, wanter in expected:
            have = found.get(key, {})
            missing = {c: v for c, v in cols.items() if c not in have}
            if missing:
                report.missing_twins.setdefault(key, {}).update(missing)
                if wanter is not None:
                    for c in missing:
                        report.twin_wanters.setdefault((key, c), []).append(wanter)
        twins.clear()
        either.clear()

    def check_firsts() -> None:
        found = table.get_many(sorted({RUN_OF_FIRST[k[:1]] + k[1:] for k, _, _ in firsts}))
        for key, run_id, value in firsts:
            if found.get(RUN_OF_FIRST[key[:1]] + key[1:], {}).get(run_id) != value:
                report.stray_firsts.append((key, run_id))
        firsts.clear()

    for key, cols in table.scan():
        report.rows += 1
        if progress:
            progress(1)
        kind = key[:1]
        if kind in (rk.DATA, rk.META, rk.SHAPE, rk.SCHEMA_BODY) and key[1:2] == rk.SEP:
            continue
        try:
            k = rk.decode(key)
            if kind in run_model.ModelCheck.KINDS:
                model.see(key, cols)  # the run model: checked once the scan is done
                continue
            if kind in (rk.FAILED_BACKWARD, rk.FAILED_FORWARD):
                if "c" not in cols or k.run_id is None:
                    raise ValueError("a failed-run row without its set")
                failed_set = cols["c"].decode()
                if failed_set not in data:
                    report.dangling.append(key)  # its set's data row is missing
                else:
                    referenced.add(failed_set)
                    failed_rows.append(key)
                if len(failed_rows) >= _BATCH:
                    report.stray_failed += _still_stray_failed(table, failed_rows)
                    failed_rows.clear()
                continue
            if kind == rk.SCHEMA:
                report.legacy.append(key)  # format 6's row per report, left by an upgrade
                continue
            if kind == rk.SCHEMAS:
                for col, digest in sorted(cols.items()):
                    rk.schema_column_of(col)  # a column of another shape: corrupt
                    if len(digest) != 16:
                        raise ValueError("a schema reference of another size")
                    named_schemas.add(digest)
                    if digest not in bodies and table.get(rk.schema_body(
                            rk.checksum_of(digest))) is None:  # (not written since the scan)
                        report.dangling_schemas.append((key, col))
                continue
            if kind == rk.ALIASED_BY:
                if k.alias is not None:
                    report.legacy.append(key)  # format 7's row per alias, left by an upgrade
                else:
                    for col in cols:
                        rk.alias_of_column(col)  # a column of another shape: corrupt
                continue
            if kind == rk.ALIAS:
                continue  # no operation set behind it
            if kind == rk.TAG:
                decode_def(key, cols)  # a tag's definition: it must decode, nothing more
                continue
            if kind == rk.TAGGED:
                decode_assignment(key, cols)  # names no set: a tag may be put before any run
                continue
            if kind == rk.RUN:
                if "t" in cols:
                    _T.unpack(cols["t"])
                if "c" not in cols and "t" in cols:
                    continue  # a start claimed before the run's lineage arrived
                if cols.get("w") == b"0":
                    report.unfinished.append(key)  # a writer stopped between its puts
            if kind in _BUCKETS and k.checksum is None:
                if k.level == rk.DIRECTORY_LEVEL:  # the directory row: columns are bucket starts
                    if not all(c.isdigit() for c in cols):
                        raise ValueError("a directory column that is no bucket start")
                    continue
                _bucket_cells(table, key, cols, data, referenced, report, stale, current)
                continue
            if kind in (rk.BACKWARD, rk.FORWARD) and k.level == 0:
                for run_id, checksum, t in list(row_sets(key, cols)):
                    if checksum not in data:
                        report.dangling_cells.append((key, run_id))
                        continue
                    referenced.add(checksum)
                    if current:
                        wanted = run_cells(kind, k.namespace or "", k.name or "", t, run_id,
                                           checksum)
                        wanted.pop(key, None)
                        if fmt5:
                            either.append((FIRST_OF_RUN[kind] + key[1:], run_id, cols[run_id],
                                           wanted, key))
                        else:
                            for twin, want in wanted.items():
                                twins.setdefault(twin, {}).update(want)
                    pending.setdefault(run_id, (checksum, t, b"", key))
                if len(twins) + len(either) >= _BATCH:
                    check_twins()
                if len(pending) >= _BATCH:
                    check_runs()
                continue
            if kind in RUN_OF_FIRST and k.level == 0:
                for run_id, checksum, _ in list(row_sets(key, cols)):
                    if checksum not in data:
                        report.dangling_cells.append((key, run_id))
                    else:
                        firsts.append((key, run_id, cols[run_id]))
                if len(firsts) >= _BATCH:
                    check_firsts()
                continue
            if current and kind in _INDEX_KINDS + _BUCKETS:
                report.legacy.append(key)  # narrow rows an interrupted upgrade left
                continue
            if kind in _BUCKETS:
                continue  # an older store's narrow buckets: checked after its upgrade
            named = _row_checksum(key, cols)
        except (ValueError, UnicodeDecodeError, struct.error):
            (report.corrupt if kind in rk.KINDS and key[1:2] == rk.SEP
             else report.unknown).append(key)
            continue
        if named is None or named not in data:
            report.dangling.append(key)
            continue
        referenced.add(named)
        if kind in (rk.BACKWARD, rk.FORWARD):
            pending.setdefault(k.run_id or "", (named, k.start_ms or 0, cols.get("p", b""),
                                                None))
            if len(pending) >= _BATCH:
                check_runs()
    check_runs()
    check_twins()
    check_firsts()
    report.stray_failed += _still_stray_failed(table, failed_rows)
    report.corrupt += model.corrupt
    report.stray_run_rows, report.broken_event_refs = model.problems()
    report.orphans = [rk.data(c) for c in sorted(data - referenced)] + \
        [shape_keys[c] for c in sorted(set(shape_keys) - used_shapes)]
    report.unused_schemas = sorted(key for digest, key in bodies.items()
                                   if digest not in named_schemas)


def _bucket_cells(table: Table, key: bytes, cols: dict[str, bytes], data: set[str],
                  referenced: set[str], report: FsckReport, stale: set[Cell],
                  current: bool) -> None:
    """Check the cells of one format-4 bucket row. Scanned in key order, a
    bucket's children (one level down) came first, so ``stale`` holds those
    already found unused."""
    for checksum in sorted(cols):
        if checksum not in data:
            report.dangling_cells.append((key, checksum))
            continue
        referenced.add(checksum)
        if current and not _bucket_kept(table, (key, checksum), stale):
            report.stale_buckets.append((key, checksum))
            stale.add((key, checksum))
