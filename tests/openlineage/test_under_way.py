"""A run under way (its lineage from a START or RUNNING, no COMPLETE, FAIL or
ABORT stored) is indexed in the first-run rows, without bucket cells, and
its run row marked; the event that ends it writes its bucket cells, with a
new set or the same one, and its first-run cells go. Questions answer the
same at every step, and fsck finds every step sound: on SQLite (in the
transaction) and on Bigtable (the guarded write path, the mark set on and
off by the run's check-and-put)."""
from __future__ import annotations

import itertools
import random
import uuid

import pytest
from fastapi.testclient import TestClient

from fll import rowkeys as rk
from fll.rowkeys import MAX_TIME
from fll import open_store
from fll.server import create_app
from fll.store import admin
from fll.store.layout import marked_under_way

from ..store.conftest import bigtable_emulator, emulator_binary  # noqa: F401 - fixtures

from .test_run_cycle import OUT, event

DAY1, DAY2, DAY3 = "2024-05-01T10:00:00Z", "2024-05-02T10:00:00Z", "2024-05-03T10:00:00Z"
LATER = "2024-05-04T10:00:00Z"
AT = {DAY1: 1714557600000, DAY2: 1714644000000, DAY3: 1714730400000, LATER: 1714816800000}
BUCKETS = (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET)
FIRSTS = (rk.FIRST_BACKWARD, rk.FIRST_FORWARD)


_tables = itertools.count()


@pytest.fixture(params=["sqlite", "bigtable"])
def store(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/fll.db"
    else:
        emu = request.getfixturevalue("bigtable_emulator")
        url = f"bigtable://fll-test/under-way-{next(_tables)}/fll?emulator={emu.host}"
    s = open_store(url)
    yield s
    s.close()


@pytest.fixture
def client(store):
    with TestClient(create_app(store)) as c:
        yield c


def _post(client, body: dict) -> int:
    r = client.post("/api/v1/lineage", json=body)
    assert r.status_code in (200, 201, 202), r.text
    return r.status_code


def _cells(store, kinds: tuple[bytes, ...]) -> dict[bytes, dict[str, bytes]]:
    return {k: c for k, c in store.table.scan() if k[:1] in kinds}


def _runs_in(cells: dict[bytes, dict[str, bytes]]) -> set[str]:
    return {col for cols in cells.values() for col in cols}


def _sets_in_buckets(store) -> set[str]:
    return _runs_in(_cells(store, BUCKETS))


def _marked(store, run_id: str) -> bool:
    return marked_under_way(store.table.get(rk.run(run_id)))


def _sound(store) -> None:
    report = admin.fsck(store.table)
    assert report.sound and report.exit_code == 0, report.to_dict()


def _complete_once(client, fields: list[str], at: str) -> str:
    """A run of the set ``fields`` from START to COMPLETE: after it the set is
    known, so a later run of it is not its first."""
    rid = str(uuid.uuid4())
    _post(client, event(rid, "START", fields, at))
    _post(client, event(rid, "COMPLETE", fields, at))
    return rid


def test_a_start_s_known_set_is_in_the_first_run_rows_until_its_complete(client, store):
    _complete_once(client, ["a"], DAY1)
    before = _sets_in_buckets(store)
    rid = str(uuid.uuid4())
    assert _post(client, event(rid, "START", ["a"], DAY2)) == 201
    # under way: first-run cells on both endpoints, no bucket cell added, marked
    assert _marked(store, rid)
    assert rid in _runs_in(_cells(store, FIRSTS))
    assert _sets_in_buckets(store) == before
    # a question over its day finds it (the first-run rows are read with the cover)
    day2 = (AT[DAY2] - 3_600_000, AT[DAY2] + 3_600_000)
    assert store.fields(OUT, *day2) == ["a"]
    assert [r.run_id for r in store.runs(OUT, *day2)] == [rid]
    _sound(store)
    # its COMPLETE adds b: a new set, the run's first-run cells of the old set go
    # without any look at the buckets, and the new set is that set's first run
    assert _post(client, event(rid, "COMPLETE", ["a", "b"], DAY2)) == 201
    assert not _marked(store, rid)
    assert store.fields(OUT, *day2) == ["a", "b"]
    old = store.operation_set(store.run(rid).checksum)
    assert old is not None
    _sound(store)


def test_a_complete_with_the_start_s_set_writes_its_bucket_cells(client, store):
    first = _complete_once(client, ["a"], DAY1)
    checksum = store.run(first).checksum
    rid = str(uuid.uuid4())
    _post(client, event(rid, "START", ["a"], DAY3))
    firsts = _cells(store, FIRSTS)
    assert _marked(store, rid) and rid in _runs_in(firsts)
    # the same lineage again: nothing new (200), and the run has ended, so it
    # moves from the first-run rows to the buckets
    assert _post(client, event(rid, "COMPLETE", ["a"], DAY3)) == 200
    assert not _marked(store, rid)
    assert rid not in _runs_in(_cells(store, FIRSTS))
    day3 = (AT[DAY3] - 60_000, AT[DAY3] + 60_000)
    buckets = _cells(store, BUCKETS)
    # a bucket cell of the finest level holding day 3 names the set
    fine = [k for k, cols in buckets.items() if checksum in cols
            and rk.decode(k).level == 1 and day3[0] - rk.LEVELS4[1] <= rk.decode(k).start_ms
            <= day3[1]]
    assert len(fine) == 2, sorted(buckets)  # its destination and its source
    assert [r.run_id for r in store.runs(OUT, *day3)] == [rid]
    assert store.fields(OUT, *day3) == ["a"]
    _sound(store)
    # a START sent again after the end changes nothing: the run stays settled
    assert _post(client, event(rid, "START", ["a"], DAY3)) == 200
    assert not _marked(store, rid)
    _sound(store)


@pytest.mark.parametrize("end", ["FAIL", "ABORT"])
def test_a_run_under_way_that_fails_leaves_no_cell_in_the_default_index(client, store, end):
    _complete_once(client, ["a"], DAY1)
    rid = str(uuid.uuid4())
    _post(client, event(rid, "START", ["a"], DAY2))
    _post(client, event(rid, end, ["a"], DAY2))
    assert not _marked(store, rid)
    assert rid not in _runs_in(_cells(store, FIRSTS + BUCKETS + (rk.BACKWARD, rk.FORWARD)))
    assert store.fields(OUT, AT[DAY2] - 1000, AT[DAY2] + 1000) == []
    assert store.including_failed().fields(OUT, 0, MAX_TIME) == ["a"]
    _sound(store)


def test_a_start_arriving_after_the_complete_does_not_mark_the_run(client, store):
    _complete_once(client, ["a"], DAY1)
    rid = str(uuid.uuid4())
    _post(client, event(rid, "COMPLETE", ["a"], DAY2))
    _post(client, event(rid, "START", ["a", "b"], DAY2))  # late, with more lineage
    assert not _marked(store, rid)
    assert rid not in _runs_in(_cells(store, FIRSTS)) or \
        store.run(rid).checksum not in _sets_in_buckets(store)  # then it is the set's first
    assert store.fields(OUT, 0, MAX_TIME) == ["a", "b"]
    _sound(store)


STEPS = [("START", ["a"]), ("RUNNING", ["a", "b"]), ("RUNNING", ["a"]), ("COMPLETE", ["a"]),
         ("COMPLETE", ["a", "c"]), ("FAIL", ["a"])]


def _ended_runs_keep_no_first_run_cell_but_their_sets_first(store, ended: dict[str, bool]
                                                             ) -> None:
    """A run that ended without failing is in the first-run rows only as its
    set's first run: no other run of its set recorded before it."""
    firsts = _cells(store, FIRSTS)
    for rid, failed in ended.items():
        if failed or rid not in _runs_in(firsts):
            continue
        assert not _marked(store, rid)
        run = store.run(rid)
        earlier = [r for r in store.runs(OUT, 0, MAX_TIME)
                   if r.checksum == run.checksum and r.run_id != rid
                   and r.start_ms < run.start_ms]
        assert not earlier, (rid, earlier)


def test_random_event_orders_over_shared_sets_answer_and_check_like_a_plain_model(client,
                                                                                  store):
    """Runs of a few sets, each sent a random run of events (some START only,
    some ending, out of order at times): after every event the fields of every
    day are the union of the lineage of its runs not failed, and fsck is clean."""
    rng = random.Random(11)
    days = [DAY1, DAY2, DAY3, LATER]
    expected: dict[str, set[str]] = {d: set() for d in days}
    failed_runs: set[str] = set()
    lineage: dict[str, tuple[str, set[str]]] = {}
    ended: dict[str, bool] = {}
    for n in range(24):
        rid, day = str(uuid.uuid4()), days[n % len(days)]
        steps = [STEPS[i] for i in sorted(rng.sample(range(len(STEPS)), rng.randint(1, 3)))]
        if rng.random() < 0.2:
            steps.reverse()
        for state, fields in steps:
            _post(client, event(rid, state, fields, day))
            got = lineage.setdefault(rid, (day, set()))[1]
            got.update(fields)
            if state in ("FAIL", "ABORT"):
                failed_runs.add(rid)
            if state in ("COMPLETE", "FAIL", "ABORT"):
                ended[rid] = rid in failed_runs
            for d in days:
                expected[d] = set().union(*[f for r, (dd, f) in lineage.items()
                                            if dd == d and r not in failed_runs])
            for d in days:
                at = AT[d]
                assert set(store.fields(OUT, at - 1000, at + 1000)) == expected[d], (n, d)
        _sound(store)
        _ended_runs_keep_no_first_run_cell_but_their_sets_first(store, ended)
    # and the whole history once more, over all time
    assert set(store.fields(OUT, 0, MAX_TIME)) == set().union(*expected.values())
