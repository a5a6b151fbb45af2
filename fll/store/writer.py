"""Recording runs: `record`/`record_many` (supersede included), in one
transaction where the backend has them (`_record_in_txn`), else data rows
first, run rows claimed by check-and-put, then the index (`_record_guarded`);
and `claim_run_start`."""
from __future__ import annotations

import time
from typing import Callable, Iterable, NamedTuple

from .. import rowkeys as rk
from ..errors import InvalidLineageError, StoreError
from ..opset import FieldLineageInfo
from .base import Table
from .datarows import set_rows
from .grouped import meanwhile
from .indexing import IndexCells, not_put
from .layout import (_T, FIRST_OF_RUN, UNDER_WAY, _check_run, failed_rows,
                     marked_under_way, run_ended, run_failed)

# the ``w`` column of a run row on backends without transactions: its index
# rows are being written (pending) or are all written; absent means written
_PENDING = b"0"
_WRITTEN = b"1"
#: the maintenance lease row (``v|lease``) and the writer rows (``v|writer-…``)
#: of backends without transactions; see `_announce_writer` and `admin.maintenance`
LEASE = "lease"
WRITER_PREFIX = "writer-"
WRITER_TTL_MS = 30_000
#: sets made by another process whose rows wait for their first write (`Writer.adopt`)
ADOPTED_KEPT = 512


def _now_ms() -> int:
    return int(time.time() * 1000)


#: sets a store keeps as it recorded them (`LineageStore.operation_set`)
_WRITTEN_KEPT = 32
_WRITTEN_BYTES = 64 * 1024  # the largest of them, as canonical bytes


#: rows read in an open transaction, by key (None: absent), for `Writer.record`
Known = dict[bytes, "dict[str, bytes] | None"]


class _Pending(NamedTuple):
    info: FieldLineageInfo
    run_id: str
    start: int
    program: str | None
    # the event recording it leaves the run under way (`Writer.record`)
    under_way: bool = False


Rows = dict[bytes, dict[str, bytes]]


class StaleRun(Exception):
    """The run's stored set is not the one the caller merged with (`RunWrite`):
    ``found`` is what is stored, (checksum, start, program), or None (no set)."""

    def __init__(self, found: tuple[str, int, str | None] | None):
        super().__init__(found)
        self.found = found


class RunWrite:
    """What an ingest writes with one run's lineage on a backend without
    transactions (`Writer.record_run`), in the write path's own calls:
    ``expect`` is the set the caller merged with (None: no set stored) and
    is checked against the run row read and claimed (else `StaleRun`, before
    any index or run row is written); ``before`` rows go with the data rows
    (content-addressed, naming nothing); ``beside(start)`` with the index
    rows, ``after(start)`` with the run marked written, at the start stored.
    Afterwards ``start`` and ``program`` are the run's as stored."""

    __slots__ = ("expect", "before", "beside", "after", "start", "program")

    def __init__(self, expect: str | None, before: Rows, beside: Callable[[int], Rows],
                 after: Callable[[int], Rows]):
        self.expect = expect
        self.before = before
        self.beside = beside
        self.after = after
        self.start: int | None = None
        self.program: str | None = None

    def check(self, old: dict[str, bytes] | None) -> None:
        """`StaleRun` unless the run row ``old`` holds the expected set."""
        stored = old.get("c") if old else None
        if stored == (None if self.expect is None else self.expect.encode()):
            return
        if stored is None or old is None:
            raise StaleRun(None)
        raise StaleRun((stored.decode(), _T.unpack(old["t"])[0] if "t" in old else -1,
                        old.get("p", b"").decode() or None))


def _conflict(run_id: str, prior: str, checksum: str) -> InvalidLineageError:
    return InvalidLineageError(
        f"run {run_id!r} is already recorded with operation set {prior}; "
        f"refusing a different set ({checksum}) for the same run")


class Writer(IndexCells):
    """The write path of a lineage store."""

    # -- writing ---------------------------------------------------------------
    def record(self, info: FieldLineageInfo, run_id: str, start_time_ms: int,
               program: str | None = None, *, supersede: bool = False,
               known: "Known | None" = None, starts: dict[str, int] | None = None,
               under_way: bool = False) -> bool:
        """Store one run's lineage. Returns False if this run was already recorded
        with the same operation set (idempotent). A different set for a known run
        is an error, unless ``supersede``: then the run's set is replaced (its old
        index rows go, the stored start time stays), as OpenLineage's
        accumulating run events need. Returns True when something changed.
        ``known`` and ``starts``: see `record_many`. ``under_way``: the lineage
        comes from an event that leaves the run going (an OpenLineage START or
        RUNNING): see `_record_in_txn`."""
        return self.record_many([(info, run_id, start_time_ms, program)],
                                supersede=supersede, known=known, starts=starts,
                                under_way=under_way) == 1

    def run_rows(self, run_id: str, checksum: str) -> "Known":
        """The rows recording ``run_id`` with the set ``checksum`` reads (the
        run's ``r|`` and ``n|`` rows, the set's ``d|`` row), in one multi-get;
        an absent row maps to None. Read inside a transaction (`atomic`), they
        are what `record` is given as ``known`` in the same transaction: an
        OpenLineage event reads its run once, not once to merge and again to
        record it."""
        keys = [rk.run(run_id), rk.run_model(run_id), rk.data(checksum)]
        found = self.table.get_many(keys)
        return {k: found.get(k) for k in keys}

    def indexed_under_way(self, run_id: str, rows: "Known") -> bool:
        """Whether the run's row among ``rows`` (`run_rows`) marks it indexed
        while under way: recording its set again with an event that ends it
        writes its bucket cells (see `_record_in_txn`)."""
        return marked_under_way(rows.get(rk.run(run_id)))

    def record_many(self, runs: Iterable[tuple[FieldLineageInfo, str, int, str | None]], *,
                    supersede: bool = False, known: "Known | None" = None,
                    starts: dict[str, int] | None = None, under_way: bool = False) -> int:
        """Store many runs in as few batches as the backend allows; returns how many
        were new (or, with ``supersede``, replaced).

        Everything is checked before anything is written: one bad run fails the
        whole call with nothing stored. The start time of a run is the one
        stored first (by `claim_run_start` or an earlier record), whatever this
        call says, so two servers given the same run store one run.

        ``known``: rows `run_rows` read in the transaction this call joins (not
        read again; ignored, and read, unless the table says a transaction of
        this thread is open). ``starts``: filled with each run's stored start
        (backends with transactions).
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
                items[run_id] = _Pending(info, run_id, start, program, under_way)
        if not items:
            return 0
        self._check_key_lengths(items)
        atomic = getattr(self.table, "atomic", None)
        if callable(atomic):
            # self.table, not the argument: a wrapper (an instrumented table) sees the calls
            if known is not None and not getattr(self.table, "in_transaction", False):
                known = None  # read outside this transaction: stale by now
            new = atomic(lambda _table: self._record_in_txn(self.table, items, supersede,
                                                            known, starts))
        else:
            new = self._record_guarded(items, supersede)
        self._keep_written(items)
        return new

    def record_run(self, info: FieldLineageInfo, run_id: str, start_ms: int,
                   program: str | None, write: RunWrite, *, supersede: bool,
                   under_way: bool = False) -> bool:
        """`record` of one run on a backend without transactions, with the rows
        and the check of ``write`` (`RunWrite`) joined to the write path's calls;
        `StaleRun` when the run's set is not ``write.expect``. True when
        something changed. ``under_way``: as `record`'s (`_record_guarded`)."""
        if not isinstance(info, FieldLineageInfo):
            raise InvalidLineageError(f"run {run_id!r}: expected a FieldLineageInfo")
        _check_run(run_id, start_ms)
        items = {run_id: _Pending(info, run_id, start_ms, program, under_way)}
        self._check_key_lengths(items)
        new = self._record_guarded(items, supersede, write)
        self._keep_written(items)
        return new == 1

    def _keep_written(self, items: "dict[str, _Pending]") -> None:
        # a set is its checksum's for good: kept as given, right even if an outer
        # transaction rolls this write back (then nothing stored names it)
        with self._lock:
            for p in items.values():
                if not p.info.built or len(p.info.canonical_bytes()) > _WRITTEN_BYTES:
                    continue  # a wide set (decoded again if asked), or one not built here
                self._written[p.info.checksum] = p.info
                self._written.move_to_end(p.info.checksum)
            while len(self._written) > _WRITTEN_KEPT:
                self._written.popitem(last=False)

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

    def _data_rows(self, info: FieldLineageInfo) -> dict[bytes, dict[str, bytes]]:
        """The ``d|`` row of a set and the ``p|`` row of its shape: as made
        elsewhere (`adopt`), else made here (`fll.store.datarows.set_rows`)."""
        made = self._adopted.pop(info.checksum, None)  # one call: atomic
        return made if made is not None else set_rows(info, self._shape_rows)

    def adopt(self, checksum: str, endpoints: tuple[list[tuple[str, str]],
                                                    list[tuple[str, str]]],
              rows: dict[bytes, dict[str, bytes]]) -> None:
        """What another process made of the set ``checksum`` (its endpoints,
        `fll.store.datarows.set_endpoints`, and its rows, `set_rows`): a run
        of it recorded next is indexed and written from these, without the
        set's operations (an ingest hands the write a `DeferredSet`). The
        rows are kept until written, the last `ADOPTED_KEPT` at most."""
        with self._adopt_lock:
            if len(self._eps) > 65536:
                self._eps.clear()
            self._eps[checksum] = endpoints
            self._adopted[checksum] = rows
            while len(self._adopted) > ADOPTED_KEPT:
                self._adopted.popitem(last=False)

    def _record_in_txn(self, table: Table, items: dict[str, "_Pending"], supersede: bool,
                       known: "Known | None" = None, starts: dict[str, int] | None = None
                       ) -> int:
        """The write path on a backend with transactions: every check and every
        write in one transaction, so nothing changes between them.

        A run recorded while under way (`_Pending.under_way`, and no COMPLETE,
        FAIL or ABORT stored for it) is indexed as a set's first run is: its
        run cells and their first-run twins, no bucket cells, and its run row
        marked (`UNDER_WAY`). An OpenLineage run's START is most often
        superseded by its COMPLETE, and its bucket cells, written and then
        found unused by reading the buckets at every level, were a fifth of
        an event's CPU; its first-run cells go without a look at the buckets.
        The event that ends the run writes its bucket cells, with the same set
        as well (`_settle`), so a range question never reads more first-run
        cells than runs still going and sets' first runs."""
        run_keys = {r: rk.run(r) for r in items}
        data_keys = {p.info.checksum: rk.data(p.info.checksum) for p in items.values()}
        model_keys = {r: rk.run_model(r) for r in items}
        keys = list(run_keys.values()) + sorted(data_keys.values()) + list(model_keys.values())
        if known:
            existing = {k: row for k in keys if (row := known.get(k)) is not None}
            missing = [k for k in keys if k not in known]
            if missing:
                existing.update(table.get_many(missing))
        else:
            existing = table.get_many(keys)
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
            if starts is not None:
                starts[p.run_id] = start
            model = existing.get(model_keys[p.run_id])
            under_way = p.under_way and self.first_runs and not run_ended(model)
            failed = run_failed(model)
            if prior == checksum:
                if marked_under_way(old) and not under_way:
                    self._settle(p, start, old, failed, puts, gone_cells, merged)
                continue
            if prior is not None and not supersede:
                raise _conflict(p.run_id, prior, checksum)
            new += 1
            dkey = data_keys[checksum]
            first = dkey not in existing and dkey not in puts
            if first:
                puts.update(self._data_rows(p.info))
            prog = (p.program or "").encode("utf-8")
            if prior is not None:
                for key, cols in self._old_index(table, prior, p.run_id, start,
                                                 marked_under_way(old)).items():
                    gone_cells.setdefault(key, set()).update(cols)
                if failed:
                    gone_rows.update(self._failed_keys(table, prior, p.run_id, start))
            if failed:  # a FAIL/ABORT seen before this lineage: it lands where the run's is
                puts.update(failed_rows(p.run_id, start, checksum, self._endpoints(p.info)))
            else:
                self._index_rows(p.info, p.run_id, start, prog, into=puts, merged=merged,
                                 first=(first and self.first_runs) or under_way)
            row = puts[run_keys[p.run_id]] = {"c": checksum.encode(), "t": _T.pack(start),
                                              "p": prog}
            if under_way and not first and not failed:
                row[UNDER_WAY] = b"1"
            elif UNDER_WAY in old:  # its mark goes (set off, on another backend)
                gone_cells.setdefault(run_keys[p.run_id], set()).add(UNDER_WAY)
        cells_gone = not_put(gone_cells, puts)
        if cells_gone:
            table.delete_columns(cells_gone)
        if gone_rows - puts.keys():
            table.delete(sorted(gone_rows - puts.keys()))
        if puts:
            table.put(puts)
        return new

    def _first_run_keys(self, info: FieldLineageInfo, start: int) -> list[bytes]:
        """The first-run rows holding a run of ``info`` at ``start``, one per endpoint."""
        dsts, srcs = self._endpoints(info)
        return [rk.run_row(FIRST_OF_RUN[kind], ns, name, start)
                for kind, eps in ((rk.BACKWARD, dsts), (rk.FORWARD, srcs)) for ns, name in eps]

    def _settle(self, p: "_Pending", start: int, old: dict[str, bytes], failed: bool,
                puts: Rows, gone: dict[bytes, set[str]], merged: set[tuple[str, int]]) -> None:
        """A run indexed while under way has ended with the set it has: its
        bucket cells are written and its first-run cells go (a failed run's
        cells were moved to the failed-run rows already: only its mark goes)."""
        key = rk.run(p.run_id)
        gone.setdefault(key, set()).add(UNDER_WAY)
        if failed:
            return
        self._index_rows(p.info, p.run_id, start, old.get("p", b""), into=puts, merged=merged)
        for row in self._first_run_keys(p.info, start):
            gone.setdefault(row, set()).add(p.run_id)

    def _record_guarded(self, items: dict[str, "_Pending"], supersede: bool,
                        extra: RunWrite | None = None) -> int:
        """The write path on a backend without transactions (HBase, Bigtable):
        data rows first (content-addressed, so a blind put is always right),
        then each run row claimed with check-and-put and marked pending
        (``w=0``), then the index rows at the start time that won, then the run
        rows marked written (``w=1``). A crash leaves at worst a data row
        nothing uses or a pending run, which reads as not recorded; recording
        it again finishes it, and fsck repairs both. ``extra``: one run's
        `RunWrite` (its rows joined to these calls).

        A run under way is indexed in the first-run rows where the store has
        them, as in `_record_in_txn`: its mark is set on and off by the claim's
        check-and-put, and a run that ends with the set it has is claimed
        again (pending) to write its bucket cells and delete its first-run
        cells, then marked written."""
        table = self.table
        self._announce_writer()
        # the data rows too, read before any is put: a set whose row is absent
        # gets its first run indexed in the first-run rows (where the store has
        # them); one that is there and this process put is not built again
        sets = {rk.data(p.info.checksum) for p in items.values()}
        # whether a run under way has ended already: its run-model row, read too
        asked = [rk.run_model(p.run_id) for p in items.values()
                 if p.under_way and self.first_runs]
        existing = table.get_many([rk.run(r) for r in items] + [rk.meta(LEASE)] + sorted(sets)
                                  + asked)
        lease = existing.pop(rk.meta(LEASE), None)
        new_sets = {k for k in sets if existing.pop(k, None) is None}
        ended = {k for k in asked if run_ended(existing.pop(k, None))}
        going = {p.run_id for p in items.values() if p.under_way and self.first_runs
                 and rk.run_model(p.run_id) not in ended}
        # runs indexed while under way that end now with the set they have
        settling = {p.run_id for p in items.values() if p.run_id not in going
                    and marked_under_way(existing.get(rk.run(p.run_id)))
                    and existing[rk.run(p.run_id)].get("c") == p.info.checksum.encode()}
        if lease is not None and _T.unpack(lease["t"])[0] > _now_ms():
            raise StoreError(f"store {self.url}: maintenance in progress "
                             f"({lease.get('w', b'?').decode(errors='replace')}); "
                             f"writes resume when it ends")
        if extra is not None:
            extra.check(existing.get(rk.run(next(iter(items)))))
        for p in items.values():  # a conflict visible now fails before any write
            old = existing.get(rk.run(p.run_id)) or {}
            if "c" in old and old["c"].decode() != p.info.checksum and not supersede:
                raise _conflict(p.run_id, old["c"].decode(), p.info.checksum)
        data_rows: dict[bytes, dict[str, bytes]] = {}
        todo = False
        for p in items.values():
            old = existing.get(rk.run(p.run_id)) or {}
            if old.get("c") == p.info.checksum.encode() and old.get("w") != _PENDING \
                    and p.run_id not in settling:
                continue  # recorded and written before
            todo = True
            dkey = rk.data(p.info.checksum)
            if dkey in data_rows or (p.run_id in settling and dkey not in new_sets):
                continue
            if dkey in sets and dkey not in new_sets and p.info.checksum in self._sets_put:
                # its row is there (read just now) and this process's put of it
                # and its shape row came back: both stored (a purge keeps a
                # shape its set uses), nothing to build or send again
                continue
            data_rows.update(self._data_rows(p.info))
        if not todo:
            if extra is not None:  # recorded before: the rows alone, in order
                old = existing[rk.run(next(iter(items)))]
                extra.start = _T.unpack(old["t"])[0]
                extra.program = old.get("p", b"").decode() or None
                table.put({**extra.before, **extra.beside(extra.start)})
                table.put(extra.after(extra.start))
            return 0
        first_put = {**extra.before, **data_rows} if extra is not None else data_rows
        if first_put:
            table.put(first_put)
        if data_rows:
            if len(self._sets_put) > 65536:
                self._sets_put.clear()
            self._sets_put.update(p.info.checksum for p in items.values()
                                  if rk.data(p.info.checksum) in data_rows)
        index: dict[bytes, dict[str, bytes]] = {}
        written: dict[bytes, dict[str, bytes]] = {}
        gone_cells: dict[bytes, set[str]] = {}
        priors: dict[str, tuple[str, int]] = {}
        merged: set[tuple[str, int]] = set()
        new = 0
        broke = True
        try:
            for p in items.values():
                dkey = rk.data(p.info.checksum)
                first = self.first_runs and dkey in new_sets
                settle = p.run_id in settling
                stored = existing.get(rk.run(p.run_id))
                mark = b"1" if p.run_id in going and not first else \
                    b"0" if marked_under_way(stored) else None
                outcome, start, prior, was_marked = self._claim_run(p, stored, supersede,
                                                                    extra, mark, settle)
                if outcome is None:
                    continue  # recorded and written before: nothing to do
                prog = (p.program or "").encode("utf-8")
                new_sets.discard(dkey)  # the set's later runs in the batch write buckets
                self._index_rows(p.info, p.run_id, start, prog, into=index, merged=merged,
                                 first=first or p.run_id in going)
                written[rk.run(p.run_id)] = {"w": _WRITTEN}
                if settle and prior is None:  # ended with its set: its first-run cells go
                    for key in self._first_run_keys(p.info, start):
                        gone_cells.setdefault(key, set()).add(p.run_id)
                    continue
                new += 1
                if prior is not None:
                    priors[p.run_id] = (prior, start)
                    for key, cols in self._old_index(table, prior, p.run_id, start,
                                                     was_marked).items():
                        gone_cells.setdefault(key, set()).update(cols)
            broke = False
        finally:
            # runs claimed before a conflict found mid-batch still get their index rows
            beside = extra.beside(extra.start) if extra is not None and \
                extra.start is not None else {}
            # the old index cells go in the same call where the backend can
            # (both before the runs are marked written, in either order)
            cells_gone = {} if broke else not_put(gone_cells, index)
            joined = getattr(table, "put_and_delete", None) if cells_gone else None
            if joined is not None:
                joined({**beside, **index}, cells_gone)
                cells_gone = {}
            elif index or beside:
                table.put({**beside, **index})
        if cells_gone:
            table.delete_columns(cells_gone)
        after = extra.after(extra.start) if extra is not None and \
            extra.start is not None else {}
        if after and not written:
            table.put(after)
        if written:
            # a FAIL/ABORT recorded before or meanwhile (`fll.store.runs` puts its
            # event, then moves): checked after the index is written, so either
            # this check sees it or that move sees this run's set; while the
            # runs are marked written (nothing orders the two)
            runs = [rk.decode(k).run_id or "" for k in written]
            check = meanwhile(lambda: table.get_many([rk.run_model(r) for r in runs]))
            try:
                table.put({**after, **written})
            except BaseException:
                check.exception()  # waited for, its answer moot
                raise
            models = check.result()
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

    def _claim_run(self, p: "_Pending", old: dict[str, bytes] | None, supersede: bool,
                   extra: RunWrite | None = None, mark: bytes | None = None,
                   settle: bool = False) -> tuple[bool | None, int, str | None, bool]:
        """Make the ``r|`` row say this run has ``p``'s set, by check-and-put
        (with ``extra``: only while it holds ``extra.expect``, whose ``start``
        and ``program`` are set to the run's). ``mark``: the `UNDER_WAY` value
        written with the claim (None: none). ``settle``: a run indexed while
        under way that has this set and has ended: claimed again (pending).

        Returns (True when this call must write the run's index rows, None when
        the run has this set and is fully written; the run's start time; the
        set it replaced; whether the row it was claimed from was marked under
        way, so the replaced set's index is first-run cells only)."""
        key = rk.run(p.run_id)
        mine = p.info.checksum.encode()
        prog = (p.program or "").encode("utf-8")
        marked = {} if mark is None else {UNDER_WAY: mark}
        one_call = getattr(self.table, "one_call_check_and_put", False)
        for _ in range(16):
            if extra is not None:
                extra.check(old)
            if old is None:
                # Claim the start alone first, then the set on "c" below: HBase's
                # checkAndPut guards one cell, so a claim of t, c, p and w in one
                # call would let a racer that sees t without c claim "c" too.
                # Where the call writes every value at once (Bigtable), a row
                # without "t" has no "c" either, and one call claims both.
                if one_call and self.table.check_and_put(
                        key, "t", None, {"t": _T.pack(p.start), "c": mine, "p": prog,
                                         "w": _PENDING, **marked}):
                    if extra is not None:
                        extra.start, extra.program = p.start, p.program or None
                    return True, p.start, None, False
                if not one_call and self.table.check_and_put(
                        key, "t", None, {"t": _T.pack(p.start)}):
                    old = {"t": _T.pack(p.start)}
                    continue
            else:
                start = _T.unpack(old["t"])[0] if "t" in old else p.start
                prior = old.get("c")
                if prior == mine:
                    if extra is not None:
                        extra.start, extra.program = start, old.get("p", b"").decode() or None
                    if settle and marked_under_way(old):
                        if self.table.check_and_put(key, "c", mine,
                                                    {"w": _PENDING, UNDER_WAY: b"0"}):
                            return True, start, None, True
                        old = self.table.get(key)
                        continue
                    if old.get("w") == _PENDING:
                        # a crashed or concurrent write: finish it
                        return True, start, None, marked_under_way(old)
                    return None, start, None, marked_under_way(old)
                if prior is not None and not supersede:
                    raise _conflict(p.run_id, prior.decode(), p.info.checksum)
                values = {"c": mine, "p": prog, "w": _PENDING, **marked}
                if "t" not in old:
                    values["t"] = _T.pack(start)
                if self.table.check_and_put(key, "c", prior, values):
                    if extra is not None:
                        extra.start, extra.program = start, p.program or None
                    return (True, start, None if prior is None else prior.decode(),
                            marked_under_way(old))
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

