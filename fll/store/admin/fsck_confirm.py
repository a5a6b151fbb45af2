"""Confirming what the fsck scans found.

Each `_still_*` takes problems of one kind as the scans listed them and returns
those a fresh read of exactly what the problem depends on still shows: the
scans read the store at different moments (on SQLite one snapshot, elsewhere
as they go, beside writers between two of their writes). `_confirm` runs them
before anything is reported; the repair (`fsck_repair`) runs them again inside
the transaction (SQLite) or under the lease (elsewhere) that applies each fix.
The row checks they share with the scans (`_check_data`, `_shape_parts`,
`_body_digest`, `_row_checksum`, `_bucket_kept`) live here too.
"""
from __future__ import annotations

import functools
import time
from typing import Callable

import msgpack
import xxhash

from ... import rowkeys as rk
from ...errors import FllError
from ...model import EndPoint
from ...opset import decode_canonical
from ...summaries import Summaries
from .. import runs as run_model
from ..base import Table
from ..datarows import SHAPED, data_parts, decode_data, join_shape, shape_ref
from ..layout import RUN_OF_FIRST, SCHEMA_REF, set_used_since
from .fsck_report import FsckReport
from .rows import _BATCH, _BUCKETS, _BY_SET, _RUN_ROWS, Cell
from .unused import _bucket_kept_since, _set_endpoints, _shapes_used


#: seconds a check on a backend without transactions waits before re-reading
#: what it suspects: a writer's puts for one batch follow each other within
#: milliseconds, so what a writer was in the middle of is finished by then
SETTLE_S = 2.0


def _still_stray_failed(t: Table, keys: list[bytes]) -> list[bytes]:
    """Failed-run rows still there whose run row is gone or names another set
    (a purge or supersede cut short)."""
    if not keys:
        return []
    rows = t.get_many(keys)
    runs = t.get_many(sorted({rk.run(rk.decode(k).run_id or "") for k in rows}))
    out = []
    for key in keys:
        cols = rows.get(key)
        if cols is None:
            continue
        run = runs.get(rk.run(rk.decode(key).run_id or "")) or {}
        if run.get("c") != cols.get("c"):
            out.append(key)
    return out


def _still_present(t: Table, keys: list[bytes]) -> list[bytes]:
    rows = t.get_many(keys)
    return [k for k in keys if k in rows]


def _still_dangling(t: Table, keys: list[bytes]) -> list[bytes]:
    """Rows still naming a set whose data row is absent (or naming none)."""
    rows = t.get_many(keys)
    checks: dict[bytes, str | None] = {}
    for key, cols in rows.items():
        if key[:1] == rk.RUN and "c" not in cols and "t" in cols:
            continue  # a start claimed, as a writer's first step is
        try:
            checks[key] = _row_checksum(key, cols)
        except (ValueError, UnicodeDecodeError):
            continue
    present = t.get_many([rk.data(c) for c in set(checks.values()) if c])
    return [k for k in keys if k in checks
            and (checks[k] is None or rk.data(checks[k] or "") not in present)]


def _still_dangling_cells(t: Table, cells: list[Cell]) -> list[Cell]:
    """Cells still there naming a set whose data row is absent."""
    rows = t.get_many(sorted({k for k, _ in cells}))
    named: dict[Cell, str] = {}
    for key, col in cells:
        cols = rows.get(key, {})
        if col not in cols:
            continue
        try:
            named[(key, col)] = rk.run_of(0, cols[col])[1] if key[:1] in _RUN_ROWS else col
        except (ValueError, UnicodeDecodeError):
            continue
    present = t.get_many([rk.data(c) for c in set(named.values())])
    return [cell for cell in cells if cell in named and rk.data(named[cell]) not in present]


def _still_missing_runs(t: Table, items: list[tuple[bytes, dict[str, bytes]]],
                        cell_of: dict[bytes, Cell]) -> list[tuple[bytes, dict[str, bytes]]]:
    """Run rows still absent while the run cell that names them is there (and
    its set's data row, which a rebuilt run row needs)."""
    keys = [k for k, _ in items]
    cells = [cell_of[k] for k in keys if k in cell_of]
    found = t.get_many(keys + [rk.data(v["c"].decode()) for _, v in items]
                       + sorted({row for row, _ in cells}))
    out = []
    for key, cols in items:
        cell = cell_of.get(key)
        if key in found or rk.data(cols["c"].decode()) not in found:
            continue
        if cell is not None and cell[1] not in found.get(cell[0], {}):
            continue  # the run went since (a purge, a supersede)
        out.append((key, cols))
    return out


def _still_missing_twins(t: Table, items: list[tuple[bytes, dict[str, bytes]]],
                         wanters: dict[Cell, list[tuple[bytes, str, bytes, bytes]]]
                         ) -> list[tuple[bytes, dict[str, bytes]]]:
    """Twin cells still absent while a run cell that needs them is there
    without its first-run cell."""
    keys = {k for k, _ in items}
    for key, cols in items:
        for col in cols:
            for row, _, _, first in wanters.get((key, col), ()):
                keys.update((row, first))
    found = t.get_many(sorted(keys))
    out = []
    for key, cols in items:
        have = found.get(key, {})
        still = {}
        for col, value in cols.items():
            if col in have:
                continue
            wanted_by = wanters.get((key, col))
            if wanted_by is not None and not any(
                    found.get(row, {}).get(run) == v and found.get(first, {}).get(run) != v
                    for row, run, v, first in wanted_by):
                continue  # no run cell needs it now
            still[col] = value
        if still:
            out.append((key, still))
    return out


def _still_stale(t: Table, cells: list[Cell], gone: set[Cell]) -> list[Cell]:
    """Bucket cells still there that no run keeps; in key order, so a bucket's
    children come first and those found unused (``gone``, updated) keep nothing."""
    present = t.get_many(sorted({k for k, _ in cells}))
    out = []
    for cell in cells:
        if cell[1] in present.get(cell[0], {}) and not _bucket_kept(t, cell, gone):
            gone.add(cell)
            out.append(cell)
    return out


def _still_stray_firsts(t: Table, cells: list[Cell]) -> list[Cell]:
    """First-run cells still there without the same cell in their run row."""
    rows = t.get_many(sorted({k for k, _ in cells}))
    runs = t.get_many(sorted({RUN_OF_FIRST[k[:1]] + k[1:] for k, _ in cells}))
    return [(k, c) for k, c in cells if c in rows.get(k, {})
            and runs.get(RUN_OF_FIRST[k[:1]] + k[1:], {}).get(c) != rows[k][c]]


def _still_unfinished(t: Table, keys: list[bytes]) -> list[bytes]:
    rows = t.get_many(keys)
    return [k for k in keys if rows.get(k, {}).get("w") == b"0"]


def _still_dangling_schemas(t: Table, keys: list[bytes]) -> list[bytes]:
    """Schema rows still naming a body that is not there."""
    rows = t.get_many(keys)
    refs = {k: cols.get(SCHEMA_REF, b"") for k, cols in rows.items()}
    present = t.get_many([rk.schema_body(rk.checksum_of(d)) for d in set(refs.values())
                          if len(d) == 16])
    return [k for k in keys if len(refs.get(k, b"")) == 16
            and rk.schema_body(rk.checksum_of(refs[k])) not in present]


def _still_unused_schemas(t: Table, keys: list[bytes]) -> list[bytes]:
    """Schema bodies still there that no schema row names (one scan of them)."""
    if not keys:
        return []
    used = {cols.get(SCHEMA_REF) for _, cols in
            t.scan(rk.SCHEMA + rk.SEP, rk.prefix_end(rk.SCHEMA + rk.SEP))}
    present = t.get_many(keys)
    return [k for k in keys if k in present
            and rk.checksum_bytes(rk.decode(k).checksum or "") not in used]


def _still_corrupt(t: Table, keys: list[bytes]) -> list[bytes]:
    """Rows still there that still do not decode: a data row in shape form
    with its shape as it is now; every other row depends on itself alone."""
    rows = t.get_many(keys)
    shape_keys = set()
    for key, cols in rows.items():
        if key[:1] == rk.DATA and SHAPED in cols:
            try:
                shape_keys.add(rk.shape(shape_ref(cols)[0]))
            except _DATA_ERRORS:
                continue
    shape_rows = t.get_many(sorted(shape_keys))
    shapes: dict[str, tuple[bytes, bytes]] = {}
    for key, cols in shape_rows.items():
        try:
            shapes[rk.decode(key).checksum or ""] = _shape_parts(cols)
        except (ValueError, FllError, UnicodeDecodeError):
            continue
    out = []
    for key in keys:
        if key not in rows:
            continue
        cols = rows[key]
        try:
            if key[:1] == rk.DATA and key[1:2] == rk.SEP:
                _check_data(key, cols, shapes)
            elif key[:1] == rk.SHAPE and key[1:2] == rk.SEP:
                _shape_parts(cols)
            elif key[:1] == rk.SCHEMA_BODY and key[1:2] == rk.SEP:
                _body_digest(key, cols)
            else:
                out.append(key)
            continue
        except _DATA_ERRORS + _BODY_ERRORS:
            out.append(key)
    return out


def _unused_data_rows(t: Table, keys: list[bytes]) -> list[bytes]:
    """``d|`` rows still there that no run of their set uses (a row that does
    not decode is left out: it is reported corrupt, never deleted)."""
    out = []
    for key, cols in t.get_many([k for k in keys if k[:1] == rk.DATA]).items():
        try:
            info = decode_data(cols, t)
        except (ValueError, FllError):
            continue
        if not set_used_since(t, rk.decode(key).checksum or "", _set_endpoints(info), 0):
            out.append(key)
    return out


def _still_orphans(t: Table, keys: list[bytes], corrupt: set[bytes]) -> list[bytes]:
    """Data rows no run uses and shapes no data row names, still; a corrupt
    data row nothing references stays listed while it is still there."""
    unused = set(_unused_data_rows(t, keys))
    unused.update(_still_present(t, [k for k in keys if k in corrupt]))
    shapes = [k for k in keys if k[:1] == rk.SHAPE]
    if shapes:
        used = _shapes_used(t)
        present = t.get_many(shapes)
        unused.update(k for k in shapes if k in present and rk.decode(k).checksum not in used)
    return [k for k in keys if k in unused]


def _confirm(table: Table, report: FsckReport, *, settle: bool) -> None:
    """Keep in ``report`` only the problems a fresh read still shows (after
    `SETTLE_S` when ``settle``: a backend without transactions, whose writers
    may be between two puts)."""
    before = report.problems + report.reclaimable
    if settle:
        time.sleep(SETTLE_S)

    def each(fn: Callable[[Table, list], list], items: list) -> list:
        return [x for i in range(0, len(items), _BATCH) for x in fn(table, items[i:i + _BATCH])]

    report.corrupt = each(_still_corrupt, report.corrupt)
    report.unknown = each(_still_present, report.unknown)
    report.legacy = each(_still_present, report.legacy)
    report.dangling = each(_still_dangling, report.dangling)
    report.dangling_cells = each(_still_dangling_cells, report.dangling_cells)
    report.missing_runs = dict(each(functools.partial(
        _still_missing_runs, cell_of=report.run_cell_of), list(report.missing_runs.items())))
    report.missing_twins = dict(each(functools.partial(
        _still_missing_twins, wanters=report.twin_wanters), list(report.missing_twins.items())))
    report.stale_buckets = _still_stale(table, report.stale_buckets, set())
    report.stray_firsts = each(_still_stray_firsts, report.stray_firsts)
    report.unfinished = each(_still_unfinished, report.unfinished)
    report.dangling_schemas = each(_still_dangling_schemas, report.dangling_schemas)
    report.stray_run_rows = each(run_model.still_stray, report.stray_run_rows)
    report.stray_failed = each(_still_stray_failed, report.stray_failed)
    report.broken_event_refs = each(run_model.still_broken, report.broken_event_refs)
    report.unused_schemas = _still_unused_schemas(table, report.unused_schemas)
    report.orphans = _still_orphans(table, report.orphans, set(report.corrupt))
    report.unconfirmed += before - report.problems - report.reclaimable


def _row_checksum(key: bytes, cols: dict[str, bytes]) -> str | None:
    """The set a narrow row (of any format) or a run row names."""
    if key[:1] in _BY_SET or key[:1] in _BUCKETS:
        return rk.decode(key).checksum
    c = cols.get("c")
    return c.decode("utf-8") if c is not None else None


def _bucket_children(key: bytes, k: rk.Key) -> list[bytes]:
    level, first = k.level or 0, k.start_ms or 0
    size = rk.LEVELS4[level - 1]
    return [rk.bucket4(key[:1], k.namespace or "", k.name or "", level - 1, first + i * size)
            for i in range(rk.LEVELS4[level] // size) if first + i * size <= rk.MAX_TIME]


def _bucket_kept(table: Table, cell: Cell, gone: "set[Cell] | frozenset[Cell]" = frozenset()
                 ) -> bool:
    """Whether a bucket cell is kept: at level 1 by a run of its set in its
    span (the run rows, filtered by checksum); above, by its column in one of
    its children one level down that is present and not in ``gone``."""
    key, checksum = cell
    k = rk.decode(key)
    if (k.level or 0) <= 1:
        return _bucket_kept_since(table, cell, 0)
    present = table.get_many(_bucket_children(key, k))
    return any(checksum in cols and (child, checksum) not in gone
               for child, cols in present.items())


def _shape_parts(cols: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(shape, summaries) of a ``p|`` row; an error when it does not decode."""
    parts = data_parts(cols)
    decode_canonical(parts[0])
    Summaries(parts[1])
    return parts


_BODY_ERRORS = (ValueError, KeyError, UnicodeDecodeError, msgpack.UnpackException)
_DATA_ERRORS = (ValueError, FllError, IndexError, TypeError, KeyError, UnicodeDecodeError)


def _body_digest(key: bytes, cols: dict[str, bytes]) -> bytes:
    """The digest a ``q|`` row is keyed by, once its body is checked against it."""
    digest = rk.checksum_bytes(rk.decode(key).checksum or "")
    msgpack.unpackb(cols["f"], raw=False)
    if xxhash.xxh3_128_digest(cols["f"]) != digest:
        raise ValueError("not the schema its key names")
    return digest


def _check_data(key: bytes, cols: dict[str, bytes],
                shapes: dict[str, tuple[bytes, bytes]]) -> None:
    """An error when a ``d|`` row does not decode to the set its key names
    (a row in shape form with the shapes given, by checksum)."""
    stored = rk.decode(key).checksum or ""
    if SHAPED in cols:
        shape_checksum, eps = shape_ref(cols)
        if shape_checksum not in shapes:
            raise ValueError("its shape row is missing or corrupt")
        ops = join_shape(shapes[shape_checksum][0], eps)
        if decode_canonical(ops).checksum != stored:
            raise ValueError("its shape and endpoints make another set")
        Summaries(shapes[shape_checksum][1], [EndPoint(e["namespace"], e["name"])
                                              for e in eps])
    else:
        ops, summaries = data_parts(cols)
        decode_canonical(ops)
        Summaries(summaries)
