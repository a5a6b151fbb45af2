"""Concurrent writers and readers on one store: nothing lost, nothing half-visible.

Writers are separate processes calling `LineageStore.record` once per run (one
transaction each); readers are threads of the test process querying all the
while. Every reader checks, for every index row it sees, that the data row it
points at is readable at that moment.
"""
from __future__ import annotations

import random
import threading
import time
import uuid

import pytest

from fll import EndPointField
from fll import rowkeys as rk
from fll.store import open_store
from fll.store.admin import fsck
from fll.store.layout import row_sets
from .conftest import finish, spawn_worker

from .workers import FIELDS, TARGETS

#: one record() per run, as a real writer would (about 15-20 s against the emulator)
BT_BATCH = 1


class Readers:
    """Reader threads querying until told to stop; they collect errors, never raise."""

    def __init__(self, url: str, count: int = 4):
        self.url = url
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.queries = [0] * count
        self.index_rows_checked = [0] * count
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                        for n in range(count)]

    def __enter__(self) -> "Readers":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in self.threads), "a reader thread hung"

    def _run(self, n: int) -> None:
        store = open_store(self.url)
        rnd = random.Random(n)
        try:
            while not self.stop.is_set():
                try:
                    self._one(n, store, rnd)
                except Exception as e:  # every failure is a finding
                    self.errors.append(f"reader {n}: {type(e).__name__}: {e}")
                self.queries[n] += 1
        finally:
            store.close()

    def _one(self, n: int, store, rnd: random.Random) -> None:
        dst = rnd.choice(TARGETS)
        kind = n % 4
        if kind in (0, 1):
            # newest index rows of a dataset: each must point at a data row
            prefix = rk.dataset_prefix(rk.BACKWARD if kind == 0 else rk.FORWARD,
                                       dst.namespace, dst.name)
            for key, cols in store.table.scan(prefix, rk.prefix_end(prefix), limit=50):
                for _, checksum, _ in row_sets(key, cols):  # a cell per run
                    if store.table.get(rk.data(checksum)) is None:
                        self.errors.append(f"reader {n}: index row {key!r} has no data row")
                self.index_rows_checked[n] += 1
        elif kind == 2:
            f = EndPointField(dst, rnd.choice(FIELDS))
            store.incoming(f, 0, 2 ** 62)
            for group in store.operations(f, 0, 2 ** 62):
                assert group.runs, f"an operation group of {f} without runs"
        else:
            for checksum in store.checksums(dst, 0, 2 ** 62):
                store.operation_set(checksum)
                self.index_rows_checked[n] += 1
            for r in store.runs(dst, 0, 2 ** 62, limit=20):
                got = store.run(r.run_id)
                if got is None or got.checksum != r.checksum:
                    self.errors.append(f"reader {n}: run {r.run_id} listed but run row is {got}")


def run_writers(url: str, writers: int, runs: int, batch: int, timeout: float) -> list[str]:
    procs = [spawn_worker("writer", url, w, runs, batch) for w in range(writers)]
    outputs = []
    for p in procs:
        out, err = finish(p, timeout)
        assert p.returncode == 0, f"writer failed: {err[-3000:]}"
        outputs.extend(out.split("\n"))
    return outputs


def check_all_runs(store, writers: int, runs: int) -> None:
    stored = {rk.decode(k).run_id for k, _ in store.table.scan(b"r|", rk.prefix_end(b"r|"))}
    expected = {f"w{w}-r{i}" for w in range(writers) for i in range(runs)}
    assert stored == expected, (f"{len(expected - stored)} runs missing, "
                                f"{len(stored - expected)} unexpected")
    report = fsck(store.table)
    assert report.clean, report.to_dict()


@pytest.mark.reliability("8 writer processes × 2,000 runs (one record() each) + 4 reader "
                         "threads, one SQLite file")
def test_eight_sqlite_writer_processes_lose_no_run_while_four_readers_never_see_a_dangling_index(
        tmp_path, figures):
    """Exactly 16,000 runs readable afterwards, fsck clean, no reader error, and no
    reader ever saw an index row whose data row was missing."""
    url = f"sqlite:///{tmp_path}/fll.db"
    open_store(url).close()  # the schema, before anyone forks
    began = time.monotonic()
    with Readers(url) as readers:
        out = run_writers(url, 8, 2000, batch=1, timeout=180)
    took = time.monotonic() - began
    assert out.count("DONE 2000") == 8
    assert not readers.errors, readers.errors[:10]
    assert sum(readers.queries) > 40 and all(readers.queries), readers.queries
    store = open_store(url)
    check_all_runs(store, 8, 2000)
    store.close()
    figures["runs"] = 16000
    figures["seconds"] = took
    figures["runs_per_s"] = 16000 / took
    figures["reader_queries"] = sum(readers.queries)
    figures["index_rows_checked"] = sum(readers.index_rows_checked)


@pytest.mark.reliability("4 writer processes × 1,000 runs + 4 reader threads, Bigtable "
                         "emulator (one record() each)")
def test_four_bigtable_writer_processes_lose_no_run_while_readers_never_see_a_dangling_index(
        bigtable_emulator, figures):
    """Exactly 4,000 runs readable afterwards, fsck clean, no reader error, no index
    row seen without its data row (Bigtable batches are not atomic: the store
    writes data rows before index rows, and readers run meanwhile)."""
    url = (f"bigtable://fll-rel/rel/conc-{uuid.uuid4().hex[:8]}"
           f"?emulator={bigtable_emulator.host}&deadline=30")
    open_store(url).close()  # creates the table before the writers race to
    began = time.monotonic()
    with Readers(url) as readers:
        out = run_writers(url, 4, 1000, batch=BT_BATCH, timeout=180)
    took = time.monotonic() - began
    assert out.count("DONE 1000") == 4
    assert not readers.errors, readers.errors[:10]
    assert all(readers.queries), readers.queries
    store = open_store(url)
    check_all_runs(store, 4, 1000)
    store.close()
    figures["runs"] = 4000
    figures["batch"] = BT_BATCH
    figures["seconds"] = took
    figures["reader_queries"] = sum(readers.queries)
    figures["index_rows_checked"] = sum(readers.index_rows_checked)
