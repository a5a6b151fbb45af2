"""Reading raw rows: `scan_rows` (by kind, one dataset, a time range) and
`stats` (rows and bytes per kind, sets, datasets, runs)."""
from __future__ import annotations

from typing import Iterator

from ... import rowkeys as rk
from ...errors import BadRequest
from ..base import Table
from .rows import _INDEX_KINDS, _RUN_ROWS, Progress, row_bytes, timed_columns


def scan_rows(table: Table, *, kinds: list[bytes] | None = None, dataset: tuple[str, str] |
              None = None, start_ms: int | None = None, end_ms: int | None = None,
              limit: int | None = None, reverse: bool = False
              ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
    """Rows in key order, streamed, restricted to row kinds, one dataset and a time range.

    With a time range, rows without a time (``d|`` rows, unknown keys) are
    left out; ``b|``/``f|`` of one dataset are read as one contiguous key
    range, every other kind is filtered row by row.
    """
    if dataset is not None:
        kinds = [k for k in (kinds or list(_INDEX_KINDS)) if k in _INDEX_KINDS]
        if not kinds:
            raise BadRequest("--dataset selects index rows: use --prefix b, f, i, o, B or F",
                             "dataset")
    timed = start_ms is not None or end_ms is not None
    lo_t = 0 if start_ms is None else start_ms
    hi_t = rk.MAX_TIME if end_ms is None else end_ms
    ranges: list[tuple[bytes, bytes, bool]] = []  # (start, stop, filter by time)
    for kind in sorted(kinds) if kinds else [b""]:
        if dataset is not None:
            prefix = rk.dataset_prefix(kind, *dataset)
            if kind in _RUN_ROWS and timed:
                # from the 64 ms run row holding ``start``: its runs before
                # ``start`` (and older narrow rows there) are filtered out below
                lo, _ = rk.time_range(prefix, lo_t, hi_t)
                _, hi = rk.time_range(prefix, lo_t - lo_t % rk.LEVELS4[0], hi_t)
                ranges.append((lo, hi if hi_t > lo_t else lo, True))
            else:
                ranges.append((prefix, rk.prefix_end(prefix), timed))
        elif kind:
            prefix = kind + rk.SEP
            ranges.append((prefix, rk.prefix_end(prefix), timed))
        else:
            ranges.append((b"", b"", timed))
    if reverse:
        ranges.reverse()
    emitted = 0
    for lo, hi, filtered in ranges:
        if lo == hi and lo:
            continue
        # the backend honours the limit only when no row is filtered out here
        for key, cols in table.scan(lo, hi, reverse=reverse,
                                    limit=None if filtered or limit is None else limit - emitted):
            if filtered:
                kept = timed_columns(key, cols, lo_t, hi_t)
                if kept is None:
                    continue
                cols = kept
            yield key, cols
            emitted += 1
            if limit is not None and emitted >= limit:
                return


def stats(table: Table, progress: Progress | None = None) -> dict:
    """Rows and bytes per kind, distinct operation sets, datasets and runs (one full scan)."""
    kinds = {name: {"rows": 0, "bytes": 0} for name in list(rk.KINDS.values()) + ["unknown"]}
    datasets: set[tuple[bytes, bytes]] = set()
    total_rows = total_bytes = 0
    started_only = 0  # run rows whose start was claimed (OpenLineage START) and no set came
    for key, cols in table.scan():
        name = rk.KINDS.get(key[:1], "unknown") if key[1:2] == rk.SEP else "unknown"
        size = row_bytes(key, cols)
        kinds[name]["rows"] += 1
        kinds[name]["bytes"] += size
        total_rows += 1
        total_bytes += size
        if key[:1] in (rk.BACKWARD, rk.FORWARD):
            parts = key.split(rk.SEP, 3)
            if len(parts) == 4:
                datasets.add((parts[1], parts[2]))
        elif name == "run" and "c" not in cols:
            started_only += 1
        if progress:
            progress(1)
    out = {"store": table.url, "rows": total_rows, "bytes": total_bytes, "kinds": kinds,
           "operation_sets": kinds["data"]["rows"],
           "runs": kinds["run"]["rows"] - started_only, "started_only_runs": started_only,
           "datasets": len(datasets)}
    size_bytes = getattr(table, "size_bytes", None)
    if callable(size_bytes):
        out["file_bytes"] = size_bytes()
    return out
