"""Admin commands and writers side by side on one SQLite store, in real processes.

Each race runs several rounds with writers, purge or fsck --repair started
together, so a check-then-act that is not inside the write it guards loses
confirmed runs in at least one of them (the figures of the reliability issue:
dozens to hundreds of lost runs per try before the fix). A run is confirmed
when its writer printed its id, i.e. after `record()` returned.
"""
from __future__ import annotations

import os

import pytest

from fll import EndPointField, StoreError
from fll import rowkeys as rk
from fll.store import open_store
from fll.store.admin import fsck, purge

from .conftest import finish, release, spawn_worker
from .workers import BASE_MS, FIELDS, shared_set

CUT = BASE_MS + 1_000_000


def _seed_old_runs(url: str, n: int = 640) -> None:
    """Runs before the cut-off with the eight shared sets: purge removes these
    and must keep the sets the writers go on using after the cut-off."""
    with open_store(url) as store:
        store.record_many([(shared_set(i), f"old-{i}", BASE_MS + i, "old") for i in range(n)])


def _confirmed(outputs: list[str]) -> set[str]:
    return {line for out in outputs for line in out.split() if line and line != "DONE"}


def _assert_every_run_answers(url: str, runs: set[str]) -> None:
    with open_store(url) as store:
        missing = sorted(r for r in runs if store.run(r) is None)
        assert not missing, f"{len(missing)} confirmed runs lost, e.g. {missing[:5]}"
        broken = []
        for r in sorted(runs):
            info = store.operation_set(store.run(r).checksum)
            dst = sorted(info.destinations)[0]
            try:
                store.incoming(EndPointField(dst, FIELDS[0]), 0, rk.MAX_TIME)
            except StoreError as e:
                broken.append((r, str(e)))
        assert not broken, f"{len(broken)} runs fail to answer, e.g. {broken[:3]}"
        report = fsck(store.table)
        assert report.clean, report.to_dict()


@pytest.mark.reliability("purge --before T beside 4 writer processes recording runs at or "
                         "after T that reuse existing sets (batches of 10), 5 tries")
@pytest.mark.slow
def test_purge_beside_writers_reusing_its_sets_loses_no_confirmed_run(tmp_path, figures):
    """Every confirmed run is readable afterwards, its set answers, fsck is clean."""
    lost_total = 0
    confirmed_total = 0
    for round_ in range(5):
        url = f"sqlite:///{tmp_path}/purge{round_}.db"
        _seed_old_runs(url)
        gate = tmp_path / f"gate-purge{round_}"
        os.environ["FLL_TEST_GATE"] = str(gate)
        purger = spawn_worker("admin", url, "purge", 3, CUT, "u0-r9")
        # the purge starts as soon as the first writer's first batch is in
        writers = [spawn_worker("reuse-writer", url, w, 150, CUT) for w in range(4)]
        del os.environ["FLL_TEST_GATE"]
        release([purger] + writers, gate)
        outs = [finish(p, 180) for p in writers + [purger]]
        assert outs[-1][0].strip() == "DONE", outs[-1][1][-2000:]
        runs = _confirmed([o for o, _ in outs[:-1]])
        assert len(runs) == 600, [e[-500:] for _, e in outs[:-1]]
        confirmed_total += len(runs)
        with open_store(url) as store:
            lost_total += sum(1 for r in runs if store.run(r) is None)
        _assert_every_run_answers(url, runs)
        with open_store(url) as store:  # and purge did its job
            assert all(store.run(f"old-{i}") is None for i in range(640))
    figures["confirmed_runs"] = confirmed_total
    figures["lost_runs"] = lost_total


@pytest.mark.reliability("fsck --repair, 6 rounds each beside 4 writer processes making "
                         "new sets")
@pytest.mark.slow
def test_fsck_repair_beside_writers_deletes_no_confirmed_run(tmp_path, figures):
    """No confirmed run loses a row to a concurrent repair; fsck is clean afterwards."""
    confirmed_total = 0
    for round_ in range(3):
        url = f"sqlite:///{tmp_path}/fsck{round_}.db"
        _seed_old_runs(url, 50)
        gate = tmp_path / f"gate-fsck{round_}"
        os.environ["FLL_TEST_GATE"] = str(gate)
        fscker = spawn_worker("admin", url, "fsck", 6, 0, "u0-r9")
        writers = [spawn_worker("reuse-writer", url, w, 150, CUT) for w in range(4)]
        del os.environ["FLL_TEST_GATE"]
        release([fscker] + writers, gate)
        outs = [finish(p, 180) for p in writers + [fscker]]
        assert outs[-1][0].strip() == "DONE", outs[-1][1][-2000:]
        runs = _confirmed([o for o, _ in outs[:-1]])
        assert len(runs) == 600
        confirmed_total += len(runs)
        _assert_every_run_answers(url, runs)
    figures["confirmed_runs"] = confirmed_total


@pytest.mark.reliability("the same 200 runs sent at once by 2 processes with different "
                         "start times (two servers on one store)")
def test_one_run_given_to_two_processes_at_once_is_stored_once(tmp_path, figures):
    """Each run has one run row, one index row per endpoint, at the start stored first."""
    url = f"sqlite:///{tmp_path}/same.db"
    open_store(url).close()
    gate = tmp_path / "gate"
    os.environ["FLL_TEST_GATE"] = str(gate)
    procs = [spawn_worker("same-runs", url, w, 200) for w in range(2)]
    del os.environ["FLL_TEST_GATE"]
    release(procs, gate)
    outs = [finish(p, 120) for p in procs]
    assert all(len(o.split()) == 200 for o, _ in outs), [e[-500:] for _, e in outs]
    dst = sorted(shared_set(0).destinations)[0]
    with open_store(url) as store:
        rows = store.runs(dst, 0, rk.MAX_TIME)
        by_run: dict[str, list[int]] = {}
        for r in rows:
            by_run.setdefault(r.run_id, []).append(r.start_ms)
        doubled = {r: t for r, t in by_run.items() if len(t) > 1}
        assert not doubled, f"{len(doubled)} runs stored twice"
        # one run cell per run (a column of the endpoint's row of its 64 ms)
        index_cells = sum(len(cols) for _, cols in store.table.scan(*rk.time_range(
            rk.dataset_prefix(rk.BACKWARD, dst.namespace, dst.name), 0, rk.MAX_TIME)))
        assert index_cells == 200
        assert all(store.run(r).start_ms == t[0] for r, t in by_run.items())
    figures["runs"] = 200
    figures["stored_twice"] = 0


def test_a_purge_of_everything_leaves_no_bucket_or_data_row(tmp_path):
    url = f"sqlite:///{tmp_path}/all.db"
    _seed_old_runs(url, 100)
    with open_store(url) as store:
        report = purge(store, rk.MAX_TIME)
        assert report.runs == 100
        left = [k for k, _ in store.table.scan() if k[:1] != rk.META]
        assert left == []


# -- store faults ------------------------------------------------------------------

def test_a_corrupt_data_row_is_a_store_error_naming_it_and_a_repair_shows_at_once(tmp_path):
    url = f"sqlite:///{tmp_path}/corrupt.db"
    info = shared_set(1)
    dst = sorted(info.destinations)[0]
    field = EndPointField(dst, FIELDS[0])
    with open_store(url) as store:
        store.record(info, "r1", BASE_MS, "p")
        key = rk.data(info.checksum)
        good = store.table.get(key)
        store.clear_caches()
        # a column the row has (a set of a shape: "y"): the repair replaces it
        column = next(c for c in ("s", "y", "z") if c in good)
        store.table.put({key: {column: b"\x01\xc1garbage"}})
        for _ in range(2):  # and again: the bad value was not cached
            with pytest.raises(StoreError, match=r"d\|.*corrupt.*fll admin fsck"):
                store.incoming(field, 0, rk.MAX_TIME)
        store.table.put({key: good})
        assert store.incoming(field, 0, rk.MAX_TIME)


@pytest.mark.parametrize("kind", [rk.BACKWARD, rk.RUN])
def test_garbage_in_an_index_or_run_row_is_a_store_error_not_a_crash(tmp_path, kind):
    url = f"sqlite:///{tmp_path}/garbage.db"
    info = shared_set(2)
    dst = sorted(info.destinations)[0]
    with open_store(url) as store:
        store.record(info, "r1", BASE_MS, "p")
        prefix = kind + rk.SEP
        key = next(k for k, _ in store.table.scan(prefix, rk.prefix_end(prefix)))
        store.table.put({key: {"c": b"\xff\xfe", "t": b"\x01"}})
        with pytest.raises(StoreError, match="corrupt.*fll admin fsck"):
            if kind == rk.RUN:
                store.run("r1")
            else:
                store.runs(dst, 0, rk.MAX_TIME)
        assert fsck(store.table).exit_code == 1


@pytest.mark.parametrize("how", ["unlinked", "replaced"])
def test_a_store_file_removed_under_a_running_process_refuses_the_next_write(tmp_path, how):
    path = tmp_path / "gone.db"
    store = open_store(f"sqlite:///{path}")
    store.record(shared_set(3), "r1", BASE_MS, "p")
    os.unlink(path)
    if how == "replaced":
        open_store(f"sqlite:///{path}").close()  # another store now at that path
    with pytest.raises(StoreError, match="removed or replaced"):
        store.record(shared_set(3), "r2", BASE_MS + 1, "p")
    store.close()
    with open_store(f"sqlite:///{path}") as fresh:
        assert fresh.run("r2") is None
