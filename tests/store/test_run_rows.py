"""The run-model rows (``n|``, ``e|``, ``j|``, ``J|``) and the failed-run index
(``x|``/``y|``) on every backend: range scans for a job's runs and a time
range of events, a FAIL racing the run's lineage on two stores, purge, fsck
and migrate."""
from __future__ import annotations

import threading
import uuid

import pytest

from fll import EndPoint
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.store import runs as rm
from tests.lineage_examples import chain

from .conftest import BACKENDS, open_url
from .test_store_apis import _writers_gone

pytestmark = pytest.mark.parametrize("table_url", BACKENDS, indirect=True)

SRC, DST = EndPoint("s3://lake", "src"), EndPoint("s3://lake", "dst")
HOUR = 3_600_000


def facts(run_id: str, state: str, at: int, job: str = "daily/totals") -> rm.RunEvent:
    body = {"eventType": state, "eventTime": "x", "run": {"runId": run_id},
            "job": {"namespace": "shop:prod", "name": job}, "producer": "urn:test"}
    return rm.event_facts(body | {"eventTime": str(at)}, run_id, at)


def keep(store: LineageStore, f: rm.RunEvent) -> None:
    rm.record_event(store, f, store.claim_run_start(f.run_id, f.at_ms))


def test_a_job_s_runs_and_events_are_range_scans_newest_first(open_table_for):
    store = LineageStore(open_table_for())
    for i in range(12):
        rid = f"run-{i:02d}"
        keep(store, facts(rid, "START", 1_000_000 + i * HOUR))
        keep(store, facts(rid, "FAIL" if i % 4 == 0 else "COMPLETE",
                          1_000_000 + i * HOUR + 60_000))
    keep(store, facts("other", "START", 5_000, job="weekly/totals"))
    assert rm.jobs(store.table, "shop:prod") == [("shop:prod", "daily/totals"),
                                                ("shop:prod", "weekly/totals")]
    assert rm.jobs(store.table, "shop") == []  # a namespace is a whole key part
    assert rm.job_run_ids(store.table, "shop:prod", "daily/totals", limit=3, offset=2) == \
        ["run-09", "run-08", "run-07"]
    assert rm.count_job_runs(store.table, "shop:prod", "daily/totals") == 12
    assert rm.first_run_start(store.table, "shop:prod", "daily/totals") == 1_000_000
    states = rm.run_states(store, [f"run-{i:02d}" for i in range(12)])
    assert [states[f"run-{i:02d}"] for i in range(4)] == ["FAIL", "COMPLETE", "COMPLETE",
                                                          "COMPLETE"]
    # two hours of events: 4 of them, newest first, the page and the total
    events, total = rm.events(store, 1_000_000 + 2 * HOUR, 1_000_000 + 4 * HOUR, 3, 0)
    assert total == 4 and [e["eventType"] for e in events] == ["COMPLETE", "START",
                                                               "COMPLETE"]
    events, total = rm.events(store, 1_000_000 + 2 * HOUR, 1_000_000 + 4 * HOUR, 3, 0,
                              descending=False)
    assert [e["run"]["runId"] for e in events] == ["run-02", "run-02", "run-03"]
    assert admin.fsck(store.table).problems == 0


def test_a_fail_racing_the_run_s_lineage_on_two_stores_always_ends_in_the_failed_index(
        open_table_for, table_url):
    url = table_url()
    first, second = LineageStore(open_url(url)), LineageStore(open_url(url))
    info = chain(SRC, DST, ["a", "b"])
    try:
        runs = [str(uuid.uuid4()) for _ in range(25)]
        for i, rid in enumerate(runs):
            barrier = threading.Barrier(2)
            errors: list[BaseException] = []

            def lineage(store, rid=rid, barrier=barrier, errors=errors, at=10_000 + i):
                try:
                    barrier.wait()
                    store.record(info, rid, at)
                except BaseException as e:  # pragma: no cover - reported below
                    errors.append(e)

            def fail(store, rid=rid, barrier=barrier, errors=errors, at=10_000 + i):
                try:
                    barrier.wait()
                    keep(store, facts(rid, "FAIL", at))
                except BaseException as e:  # pragma: no cover - reported below
                    errors.append(e)
            pair = (first, second) if i % 2 else (second, first)
            threads = [threading.Thread(target=lineage, args=(pair[0],)),
                       threading.Thread(target=fail, args=(pair[1],))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
        assert first.runs(DST, 0, 10**9) == [] and first.runs(SRC, 0, 10**9) == []
        assert first.fields(DST, 0, 10**9) == []
        assert sorted(r.run_id for r in first.including_failed().runs(DST, 0, 10**9,
                                                                      "incoming")) == \
            sorted(runs)
        assert first.including_failed().fields(DST, 0, 10**9) == ["a", "b"]
        assert admin.fsck(first.table).problems == 0
    finally:
        first.close()
        second.close()


def test_purge_and_migrate_carry_the_run_model_and_the_failed_index(open_table_for,
                                                                   tmp_path):
    store = LineageStore(open_table_for())
    info = chain(SRC, DST, ["a"])
    for i, state in enumerate(["FAIL", "COMPLETE", "ABORT", "COMPLETE"]):
        rid = f"r{i}"
        store.record(info, rid, 1_000 + i * HOUR)
        keep(store, facts(rid, state, 1_000 + i * HOUR))
    copy = LineageStore(open_url(f"sqlite:///{tmp_path}/copy.db"))
    admin.migrate(store.table, copy.table)
    for s in (store, copy):
        assert [r.run_id for r in s.runs(DST, 0, 10**9)] == ["r3", "r1"]
        assert [r.run_id for r in s.including_failed().runs(DST, 0, 10**9)] == \
            ["r3", "r2", "r1", "r0"]
        assert rm.run_states(s, ["r0", "r2"]) == {"r0": "FAIL", "r2": "ABORT"}
    _writers_gone(store.table)
    report = admin.purge(store, 1_000 + 2 * HOUR + 1)
    assert report.runs == 3
    assert [r.run_id for r in store.including_failed().runs(DST, 0, 10**9)] == ["r3"]
    assert rm.job_run_ids(store.table, "shop:prod", "daily/totals") == ["r3"]
    left = {k[:1] for k, _ in store.table.scan()}
    assert rk.FAILED_BACKWARD not in left and rk.FAILED_FORWARD not in left
    assert admin.fsck(store.table).problems == 0
    copy.close()
