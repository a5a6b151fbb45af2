"""What no run uses any more, as purge and the fsck repair both decide it:
the bucket cells a run keeps, the endpoints of a set, the shapes and schema
bodies no row names (and their removal)."""
from __future__ import annotations

from ... import rowkeys as rk
from ..base import Table
from ..datarows import SHAPED
from ..layout import RUN_OF_BUCKET, row_sets
from .rows import Cell
from .lease import atomically


def _bucket_kept_since(table: Table, cell: Cell, since_ms: int) -> bool:
    """Whether a run of the bucket cell's set started in the bucket's span, at
    or after ``since_ms``: the run rows of the span, read until one is found."""
    key, checksum = cell
    k = rk.decode(key)
    first = k.start_ms or 0
    end = min(first + rk.LEVELS4[k.level or 0], rk.MAX_TIME + 1)
    since = max(first, since_ms)
    lo, hi = rk.time_range(rk.dataset_prefix(RUN_OF_BUCKET[key[:1]], k.namespace or "",
                                             k.name or ""), since - since % rk.LEVELS4[0], end)
    for row, cols in table.scan(lo, hi):
        try:
            if any(c == checksum and t >= since for _, c, t in row_sets(row, cols)):
                return True
        except (ValueError, UnicodeDecodeError):
            continue
    return False


def _by_row(cells: "list[Cell] | set[Cell]") -> dict[bytes, list[str]]:
    out: dict[bytes, list[str]] = {}
    for key, col in sorted(cells):
        out.setdefault(key, []).append(col)
    return out


def _set_endpoints(info) -> list[tuple[bytes, str, str]]:
    return [(rk.BACKWARD, e.namespace, e.name) for e in sorted(info.destinations)] + \
        [(rk.FORWARD, e.namespace, e.name) for e in sorted(info.sources)]


def _shapes_used(table: Table) -> set[str]:
    """The shapes the ``d|`` rows name (one scan of them)."""
    used = set()
    for _, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        value = cols.get(SHAPED)
        if value is not None and len(value) >= 16:
            used.add(rk.checksum_of(value[:16]))
    return used


def drop_unused_shapes(table: Table) -> int:
    """Remove the ``p|`` rows no ``d|`` row names any more, in one transaction
    with the scan that decides it (elsewhere under the maintenance lease, as
    purge and repair run): a writer storing a set of a shape writes the shape
    again in its own transaction. Returns how many went."""
    def drop(t: Table) -> int:
        used = _shapes_used(t)
        gone = []
        for key, _ in t.scan(rk.SHAPE + rk.SEP, rk.prefix_end(rk.SHAPE + rk.SEP)):
            try:
                if rk.decode(key).checksum not in used:
                    gone.append(key)
            except (ValueError, UnicodeDecodeError):
                continue  # of no known shape: fsck reports it
        t.delete(gone)
        return len(gone)
    return atomically(table, drop)


def drop_unused_schemas(table: Table) -> int:
    """Remove the ``q|`` rows (schema bodies) no ``S|`` cell names any more, in one
    transaction with the scan that decides it (elsewhere under the maintenance
    lease): a writer writes a schema's body in the same batch as the row
    naming it. Returns how many went."""
    def drop(t: Table) -> int:
        used = {d for _, cols in t.scan(rk.SCHEMAS + rk.SEP, rk.prefix_end(rk.SCHEMAS + rk.SEP))
                for d in cols.values()}
        gone = []
        for key, _ in t.scan(rk.SCHEMA_BODY + rk.SEP, rk.prefix_end(rk.SCHEMA_BODY + rk.SEP)):
            checksum = rk.decode(key).checksum or ""
            if rk.checksum_bytes(checksum) not in used:
                gone.append(key)
        t.delete(gone)
        return len(gone)
    return atomically(table, drop)
