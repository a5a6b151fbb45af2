"""A SQLite store's WAL under a server that checkpoints it from a thread
(`fll.server.checkpoint`): no commit on the event loop checkpoints, and a long
run of ingests, committed while other requests read, leaves the WAL bounded.

The ingests go through the app (TestClient, its one event loop) from many
threads at once while a reader keeps asking field questions, as under load;
the WAL's size is sampled all along. Without the checkpointer (auto-checkpoints
off, as the server sets them) the same run makes the WAL grow with every
ingest: the test of the bound can fail.
"""
from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

from fll import open_store
from fll.rowkeys import MAX_TIME
from fll.server import create_app
from fll.server.checkpoint import Checkpointer

from ..openlineage.test_run_cycle import OUT, event
from .conftest import v3

INGESTS = 1_200
PERIOD = 0.05  # seconds between checkpoints (the server's default is 0.5)
PAGE = 4096
# what the WAL may reach with checkpoints: a few periods of ingests. Without
# them these ingests leave several times as much (asserted below). An ingest
# also keeps its run's event and run rows (fll.store.runs): about 2.2x the
# pages it wrote before (48 MB against 22 MB for these ingests unchecked)
BOUND_PAGES = 1_500


def _run(store, checkpoint_every: float | None) -> tuple[int, list[str]]:
    """INGESTS posted by 16 threads while a reader asks questions; the largest
    WAL file seen (bytes) and the runs sent."""
    app = create_app(store, checkpoint_every=checkpoint_every)
    wal = store.table.path + "-wal"
    largest = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal largest
        while not done.wait(0.005):
            try:
                largest = max(largest, os.path.getsize(wal))
            except OSError:
                pass

    runs = [str(uuid.uuid4()) for _ in range(INGESTS)]
    answers: list[int] = []
    watcher = threading.Thread(target=sample)
    with TestClient(app) as client, ThreadPoolExecutor(max_workers=16) as pool:
        if checkpoint_every is None:  # as the server sets it, with nobody checkpointing
            store.table.set_autocheckpoint(0)

        def read() -> None:
            path = f"{v3(OUT.namespace, OUT.name)}/lineage/fields?start=0&end=now"
            while not done.is_set():
                answers.append(client.get(path).status_code)

        def post(i: int) -> int:
            fields = ["a", "b", "c", "d"][:1 + i % 4]
            return client.post("/api/v1/lineage", json=event(runs[i], "COMPLETE", fields)
                               ).status_code

        watcher.start()
        first = post(0)  # the dataset exists before anyone asks about it
        reader = threading.Thread(target=read)
        reader.start()
        try:
            statuses = [first, *pool.map(post, range(1, INGESTS))]
        finally:
            done.set()
            reader.join()
            watcher.join()
    assert statuses == [201] * INGESTS
    assert answers and set(answers) == {200}
    print(f"largest WAL {largest / 2**20:.1f} MB, {len(answers)} questions meanwhile")
    return largest, runs


@pytest.mark.slow
def test_a_long_run_of_ingests_with_readers_leaves_the_wal_bounded(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/checkpointed.db")
    try:
        largest, runs = _run(store, PERIOD)
        checkpointer_pages = store.table.checkpoint("PASSIVE")[1]
        recorded = {r.run_id for r in store.runs(OUT, 0, MAX_TIME)}
    finally:
        store.close()
    assert largest <= BOUND_PAGES * PAGE, f"the WAL reached {largest / 2**20:.1f} MB"
    assert checkpointer_pages <= BOUND_PAGES
    assert recorded == set(runs)  # none lost on the way

    unchecked = open_store(f"sqlite:///{tmp_path}/unchecked.db")
    try:
        grown, _ = _run(unchecked, None)
    finally:
        unchecked.close()
    # the same ingests without checkpoints: far past the bound (the test can fail)
    assert grown > 3 * BOUND_PAGES * PAGE, f"only {grown / 2**20:.1f} MB without checkpoints"


def test_the_server_turns_auto_checkpoints_off_while_it_runs_and_gives_them_back(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/fll.db")
    try:
        app = create_app(store, checkpoint_every=PERIOD)
        checkpointer = app.state.checkpointer
        assert isinstance(checkpointer, Checkpointer)
        with TestClient(app) as client:
            conn = store.table._conn()  # this thread's connection, opened before or now
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
            assert client.post("/api/v1/lineage", json=event(str(uuid.uuid4()), "COMPLETE",
                                                            ["a"])).status_code == 201
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
        assert checkpointer.failures == 0
    finally:
        store.close()


def test_a_failed_checkpoint_is_logged_and_the_next_turn_tries_again(caplog):
    class Flaky:
        calls = 0

        def checkpoint(self, mode: str) -> tuple[int, int, int]:
            self.calls += 1
            if self.calls == 1:
                raise OSError("disk I/O error")
            return 0, 7, 7

        def set_autocheckpoint(self, pages: int) -> None:
            pass

    checkpointer = Checkpointer(Flaky(), period=PERIOD, lock=threading.Lock())
    checkpointer.turn()
    checkpointer.turn()
    assert (checkpointer.failures, checkpointer.turns) == (1, 1)
    assert checkpointer.largest_wal_pages == 7
    assert any("WAL checkpoint failed" in r.getMessage() and "disk I/O error" in r.getMessage()
               for r in caplog.records)


def test_a_backend_without_a_wal_gets_no_checkpointer(tmp_path):
    class NoWal:
        pass

    assert not Checkpointer.supported(NoWal())
    store = open_store(f"sqlite:///{tmp_path}/fll.db")
    try:
        assert Checkpointer.supported(store.table)
        assert create_app(store).state.checkpointer is None  # only when asked
    finally:
        store.close()
