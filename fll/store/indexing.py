"""The index cells of a run: those it writes (`_index_rows`), those it leaves
to delete when superseded (`_old_index`), and its move to the failed-run rows
when its run model says FAIL or ABORT (`move_to_failed`)."""
from __future__ import annotations

from typing import Iterable

from .. import rowkeys as rk
from ..errors import FllError
from ..opset import FieldLineageInfo
from .base import Table
from .datarows import decode_data, set_endpoints
from .layout import (_BUCKET1_MS, _BUCKET_OF_RUN, _RUN_ROW_MS, _T, FIRST_OF_RUN, failed_rows,
                     unused_buckets)
from .state import StoreState


class IndexCells(StoreState):
    """The index cells of runs, built with memos per set and bucket."""

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
            hit = set_endpoints(info)
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

    def _old_index(self, table: Table, checksum: str, run_id: str, start: int,
                   under_way: bool = False) -> dict[bytes, set[str]]:
        """The cells a run recorded with ``checksum`` at ``start`` leaves to delete
        when it goes: its run cells and the bucket cells no other run keeps.
        ``under_way``: the run row it was claimed from is marked indexed while
        under way, so it has a first-run cell at every endpoint and no bucket
        cell: nothing to look up."""
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
        if self.first_runs and under_way:
            return cells
        if self.first_runs:
            for key, cols in table.get_many(sorted(firsts)).items():
                value = cols.get(run_id)
                if value is not None and len(value) > 1 and \
                        rk.checksum_of(value[1:]) == checksum:
                    skip.add(firsts[key])
        wanted = [(kind, ns, name, checksum, start)
                  for kind, eps in ((rk.BACKWARD_BUCKET, dsts), (rk.FORWARD_BUCKET, srcs))
                  for ns, name in eps if (kind, ns, name) not in skip]
        for key, col in unused_buckets(table, wanted, ignore={run_id}, at_once=True):
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


def not_put(cells: dict[bytes, set[str]], puts: dict[bytes, dict[str, bytes]]
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
