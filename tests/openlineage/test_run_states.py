"""A run's state (fll.store.runs): the rule that fixes it whatever order events
arrive in, FAIL/ABORT runs kept out of field questions unless asked, two
servers racing on one run, and export → import keeping the state."""
from __future__ import annotations

import itertools
import json
import threading
import uuid
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from fll import EndPointField, open_store
from fll import rowkeys as rk
from fll.cli import main
from fll.openlineage import export_events
from fll.rowkeys import MAX_TIME
from fll.server import create_app
from fll.store import admin
from fll.store import runs as rm

from .test_run_cycle import OUT, SRC, event

T0, T1, T2, T3 = ("2024-05-01T10:00:00Z", "2024-05-01T10:01:00Z", "2024-05-01T10:02:00Z",
                  "2024-05-01T10:03:00Z")
MAY = 1714557600000
FIELDS = f"/v3/namespaces/{quote(OUT.namespace, safe='')}/datasets/{OUT.name}/lineage/fields"


@pytest.fixture
def client(store):
    with TestClient(create_app(store)) as c:
        yield c


def with_facets(body: dict, run: dict | None = None, job: dict | None = None) -> dict:
    if run:
        body["run"]["facets"] = run
    if job:
        body["job"]["facets"] = job
    return body


def test_the_state_rule_failed_wins_then_complete_then_the_latest():
    t = rm.Transition
    assert rm.final_state([t(1, "START", "a"), t(2, "RUNNING", "b")]) == ("RUNNING", None)
    assert rm.final_state([t(1, "START", "a"), t(3, "COMPLETE", "b")]) == ("COMPLETE", 3)
    # a FAIL wins over a later COMPLETE; between FAIL and ABORT the latest
    assert rm.final_state([t(1, "START", "a"), t(2, "FAIL", "b"),
                           t(5, "COMPLETE", "c")]) == ("FAIL", 2)
    assert rm.final_state([t(2, "FAIL", "b"), t(4, "ABORT", "c")]) == ("ABORT", 4)
    assert rm.final_state([]) == ("OTHER", None)


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_any_arrival_order_gives_the_same_run_state_times_and_lineage(tmp_path, order):
    rid = str(uuid.uuid4())
    events = [event(rid, "START", ["a"], T0), event(rid, "RUNNING", ["b"], T1),
              with_facets(event(rid, "FAIL", ["c"], T2),
                          run={"errorMessage": {"message": "boom", "programmingLanguage": "SQL"}}),
              event(rid, "COMPLETE", [], T3)]
    with open_store(f"sqlite:///{tmp_path}/s.db") as store, \
            TestClient(create_app(store)) as c:
        for i in order:
            assert c.post("/api/v1/lineage", json=events[i]).status_code in (200, 201, 202)
        m = rm.run_model(store, rid)
        # the start is the first event the store saw (as before); the rest is fixed
        assert (m.state, m.end_ms, m.start_ms) == ("FAIL", MAY + 120_000,
                                                  store.run(rid).start_ms)
        assert store.fields(OUT, 0, MAX_TIME) == []
        assert store.including_failed().fields(OUT, 0, MAX_TIME) == ["a", "b", "c"]
        run = c.get(f"/api/v1/jobs/runs/{rid}").json()
        assert run["state"] == "FAILED" and run["endedAt"] == "2024-05-01T10:02:00.000Z"
        assert run["startedAt"] == "2024-05-01T10:00:00.000Z" and run["durationMs"] == 120_000
        assert run["facets"]["errorMessage"]["message"] == "boom"
        # the sets the union superseded stay, reclaimable: nothing is wrong
        report = admin.fsck(store.table)
        assert report.sound and report.exit_code == 0, report.to_dict()
        assert report.reclaimable == len(report.orphans) > 0, report.to_dict()


def test_a_fail_before_the_run_s_lineage_lands_it_in_the_failed_index(client, store):
    rid = str(uuid.uuid4())
    assert client.post("/api/v1/lineage", json=event(rid, "FAIL", [], T2)).status_code == 202
    assert client.post("/api/v1/lineage", json=event(rid, "RUNNING", ["a"], T1)
                       ).status_code == 201
    assert store.fields(OUT, 0, MAX_TIME) == []
    assert store.including_failed().fields(OUT, 0, MAX_TIME) == ["a"]
    # no cell of the run in the default index, its run row only
    rows = dict(store.table.scan(rk.BACKWARD + rk.SEP, rk.prefix_end(rk.BACKWARD + rk.SEP)))
    assert not any(rid in cols for cols in rows.values())
    assert store.run(rid) is not None


def test_failed_runs_are_left_out_by_default_and_answer_when_asked_on_every_route(client,
                                                                                  store):
    good, bad = str(uuid.uuid4()), str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(good, "COMPLETE", ["a"], T0))
    client.post("/api/v1/lineage", json=event(bad, "ABORT", ["a", "b"], T1))
    q = "?start=0&end=now"
    assert client.get(FIELDS + q).json() == ["a"]
    assert client.get(FIELDS + q + "&includeFailed=true").json() == ["a", "b"]
    field_b = FIELDS + "/b?direction=incoming&start=0&end=now"
    assert client.get(field_b).status_code == 404
    inc = client.get(field_b + "&includeFailed=true").json()["incoming"]
    assert [f["fields"] for f in inc] == [["b"]]
    ops = FIELDS + "/a/operations?direction=incoming&start=0&end=now"
    runs = lambda body: sorted((r["run"], r["state"])  # noqa: E731
                               for g in body["incoming"] for r in g["programs"])
    assert runs(client.get(ops).json()) == [(good, "COMPLETE")]
    assert runs(client.get(ops + "&includeFailed=true").json()) == sorted(
        [(good, "COMPLETE"), (bad, "ABORT")])
    node = quote(f"datasetField:{OUT.namespace}:{OUT.name}:b", safe="")
    assert client.get(f"/api/v1/column-lineage?nodeId={node}").status_code == 404
    got = client.get(f"/api/v1/column-lineage?nodeId={node}&includeFailed=true")
    assert got.status_code == 200 and got.json()["graph"]
    detail = client.get(FIELDS.replace("/lineage/fields", "/fields/a/lineage") + q
                        + "&direction=backward&includeFailed=true").json()
    assert sorted((r, st) for p in detail["paths"]
                  for r, st in zip(p["runs"], p["runStates"], strict=True)) == \
        sorted([(good, "COMPLETE"), (bad, "ABORT")])
    props = client.get(FIELDS.replace("/lineage/fields", "/properties") + q
                       + "&includeFailed=true").json()
    assert sorted((p["programRun"], p["state"]) for p in props) == \
        sorted([(good, "COMPLETE"), (bad, "ABORT")])
    assert [p["programRun"] for p in client.get(
        FIELDS.replace("/lineage/fields", "/properties") + q).json()] == [good]
    # the same answers from the framework's routes (fast_reads off)
    with TestClient(create_app(store, fast_reads=False)) as slow:
        assert slow.get(FIELDS + q).json() == ["a"]
        assert slow.get(FIELDS + q + "&includeFailed=true").json() == ["a", "b"]


def test_two_servers_racing_on_one_run_end_failed_whichever_event_lands_first(tmp_path):
    """COMPLETE with lineage to one server, FAIL without to another, at once, on
    one store, many times: every run ends FAIL with its lineage in the failed
    index and none in the default one."""
    url = f"sqlite:///{tmp_path}/shared.db"
    with open_store(url) as s1, open_store(url) as s2, \
            TestClient(create_app(s1)) as c1, TestClient(create_app(s2)) as c2:
        run_ids = [str(uuid.uuid4()) for _ in range(60)]
        for i, rid in enumerate(run_ids):
            barrier = threading.Barrier(2)
            done: list[int] = []

            def send(c, body, barrier=barrier, done=done):
                barrier.wait()
                done.append(c.post("/api/v1/lineage", json=body).status_code)
            pair = [(c1, event(rid, "COMPLETE", ["a"], T1)), (c2, event(rid, "FAIL", [], T2))]
            if i % 2:
                pair = [(c1, pair[1][1]), (c2, pair[0][1])]  # each server gets each kind
            threads = [threading.Thread(target=send, args=p) for p in pair]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert sorted(done) == [201, 202], done
        assert s1.runs(OUT, 0, MAX_TIME) == []
        failed = s1.including_failed().runs(OUT, 0, MAX_TIME)
        assert sorted(r.run_id for r in failed) == sorted(run_ids)
        assert set(rm.run_states(s1, run_ids).values()) == {"FAIL"}
        assert s1.fields(OUT, 0, MAX_TIME) == []
        assert admin.fsck(s1.table).problems == 0


def test_a_failed_run_exported_and_imported_into_a_fresh_store_is_still_failed(client, store,
                                                                              tmp_path):
    rid = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(rid, "START", ["a"], T0))
    client.post("/api/v1/lineage", json=with_facets(
        event(rid, "FAIL", ["a", "b"], T3), run={"errorMessage": {"message": "disk full"}},
        job={"documentation": {"description": "nightly totals"}}))
    ok = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(ok, "COMPLETE", ["a"], "2024-05-02T10:00:00Z"))
    exported = export_events(store, OUT, 0, MAX_TIME)
    assert [e["eventType"] for e in exported] == ["FAIL", "COMPLETE"]
    assert exported[0]["run"]["facets"]["fllRun"]["endTime"] == "2024-05-01T10:03:00.000Z"
    path = tmp_path / "export.json"
    path.write_text(json.dumps(exported))
    for how in ("server", "cli"):
        url = f"sqlite:///{tmp_path}/{how}.db"
        if how == "server":
            with open_store(url) as fresh, TestClient(create_app(fresh)) as c:
                for e in exported:
                    assert c.post("/api/v1/lineage", json=e).status_code == 201
        else:
            r = CliRunner().invoke(main, ["--store", url, "record", str(path)])
            assert r.exit_code == 0, r.output
        with open_store(url) as fresh:
            m = rm.run_model(fresh, rid)
            assert (m.state, m.start_ms, m.end_ms) == ("FAIL", MAY, MAY + 180_000), how
            assert fresh.fields(OUT, 0, MAX_TIME) == ["a"]
            assert fresh.including_failed().fields(OUT, 0, MAX_TIME) == ["a", "b"]
            assert fresh.including_failed().run(rid).checksum == store.run(rid).checksum
            facets = rm.merged_facets(m, rm.events_of(fresh, [m]))
            assert facets[0]["errorMessage"] == {"message": "disk full"}
            assert facets[1]["documentation"] == {"description": "nightly totals"}
            assert rm.run_model(fresh, ok).state == "COMPLETE"


def test_fll_export_json_keeps_the_state_end_and_facets_and_fll_record_restores_them(
        client, store, tmp_path):
    rid = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(rid, "START", ["a"], T0))
    client.post("/api/v1/lineage", json=with_facets(
        event(rid, "ABORT", ["a"], T2), run={"errorMessage": {"message": "killed"}}))
    run = CliRunner()
    r = run.invoke(main, ["--store", store.url, "export", "--namespace", OUT.namespace,
                          "--dataset", OUT.name, "--start", "0", "--end", "now"])
    assert r.exit_code == 0, r.output
    [doc] = json.loads(r.output)
    assert (doc["state"], doc["end_time_ms"]) == ("ABORT", MAY + 120_000)
    assert doc["job"] == {"namespace": "shop", "name": "totals"}
    path = tmp_path / "runs.json"
    path.write_text(r.output)
    url = f"sqlite:///{tmp_path}/fresh.db"
    r = run.invoke(main, ["--store", url, "record", str(path)])
    assert r.exit_code == 0, r.output
    with open_store(url) as fresh:
        m = rm.run_model(fresh, rid)
        assert (m.state, m.start_ms, m.end_ms) == ("ABORT", MAY, MAY + 120_000)
        assert fresh.fields(OUT, 0, MAX_TIME) == []
        assert fresh.including_failed().fields(OUT, 0, MAX_TIME) == ["a"]
        assert rm.merged_facets(m, rm.events_of(fresh, [m]))[0]["errorMessage"] == \
            {"message": "killed"}
    doc["state"] = "DONE"
    path.write_text(json.dumps([doc]))
    r = run.invoke(main, ["--store", f"sqlite:///{tmp_path}/bad.db", "record", str(path)])
    assert r.exit_code != 0 and "state must be one of" in r.output


def test_the_cli_asks_for_failed_runs_with_include_failed_and_shows_states(client, store,
                                                                          tmp_path):
    good, bad = str(uuid.uuid4()), str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(good, "COMPLETE", ["a"], T0))
    client.post("/api/v1/lineage", json=event(bad, "FAIL", ["b"], T1))
    url = store.url
    run = CliRunner()
    base = ["--store", url, "lineage", "--namespace", OUT.namespace, "--dataset", OUT.name,
            "--field", "b", "--start", "0", "--end", "now"]
    r = run.invoke(main, base)
    assert r.exit_code != 0, r.output
    r = run.invoke(main, base + ["--include-failed"])
    assert r.exit_code == 0 and SRC.name in r.output, r.output
    assert f"{bad} (2024-05-01T10:01:00Z, shop/totals, FAIL)" in r.output  # the hop's run
    r = run.invoke(main, base + ["--include-failed", "--runs", "--format", "json"])
    [group] = json.loads(r.output)["operations"][f"{OUT.namespace}:{OUT.name}:b"]
    assert [(x["run_id"], x["state"]) for x in group["runs"]] == [(bad, "FAIL")]
    # the rows read back by `fll scan` and `fll get`, times shown
    r = run.invoke(main, ["--store", url, "scan", "--prefix", "e"])
    assert r.exit_code == 0, r.output
    key = next(line.split()[1] for line in r.output.splitlines() if bad in line)
    assert key.startswith(f"e|2024-05-01T10:01:00.000Z|{bad}|")
    r = run.invoke(main, ["--store", url, "get", key])
    assert r.exit_code == 0 and json.loads(r.output)["kind"] == "event", r.output
    runs = ["--store", url, "runs", "--namespace", OUT.namespace, "--dataset", OUT.name,
            "--start", "0", "--end", "now", "--format", "json"]
    r = run.invoke(main, runs)
    assert r.exit_code == 0, r.output
    assert {x["run_id"]: x["state"] for x in json.loads(r.output)} == {good: "COMPLETE"}
    r = run.invoke(main, runs + ["--include-failed"])
    assert {x["run_id"]: x["state"] for x in json.loads(r.output)} == {good: "COMPLETE",
                                                                      bad: "FAIL"}


def test_purge_removes_the_run_model_with_the_lineage_and_fsck_checks_it(client, store):
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(old, "FAIL", ["a"], T0))
    client.post("/api/v1/lineage", json=event(new, "COMPLETE", [], "2024-06-01T10:00:00Z"))
    assert admin.fsck(store.table).problems == 0
    report = admin.purge(store, MAY + 3_600_000)
    assert report.runs == 1
    assert rm.run_model(store, old) is None and rm.run_model(store, new) is not None
    assert rm.job_run_ids(store.table, "shop", "totals") == [new]
    for kind in (rk.FAILED_BACKWARD, rk.FAILED_FORWARD, rk.EVENT):
        left = [k for k, _ in store.table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP))]
        assert all(old.encode() not in k for k in left), left
    assert admin.fsck(store.table).problems == 0
    # an event row lost: reported, and the run row's reference dropped by --repair
    m = rm.run_model(store, new)
    store.table.delete(m.event_keys())
    report = admin.fsck(store.table)
    assert report.broken_event_refs == [(rk.run_model(new), m.transitions[0].at_ms.__format__(
        "016x") + m.transitions[0].digest)]
    assert admin.fsck(store.table, repair=True).fixed == 1
    assert admin.fsck(store.table).problems == 0
    # a job row left without runs (a crash in a purge) is stray too
    store.table.put({rk.job("shop", "gone"): {"x": b""}})
    assert admin.fsck(store.table).stray_run_rows == [rk.job("shop", "gone")]
    assert admin.fsck(store.table, repair=True).fixed == 1
    assert rm.jobs(store.table, "shop") == [("shop", "totals")]


def test_a_set_kept_only_by_a_failed_run_is_no_orphan(client, store):
    rid = str(uuid.uuid4())
    client.post("/api/v1/lineage", json=event(rid, "FAIL", ["q"], T0))
    report = admin.fsck(store.table)
    assert report.orphans == [] and report.problems == 0
    # a failed-run row whose run row is gone is reported, and dropped by --repair
    stray = rk.failed(rk.FAILED_BACKWARD, "s3://lake", "other", MAY, "gone-run")
    store.table.put({stray: {"c": store.run(rid).checksum.encode()}})
    assert admin.fsck(store.table).stray_failed == [stray]
    assert admin.fsck(store.table, repair=True).fixed == 1
    assert admin.fsck(store.table).problems == 0
    assert EndPointField(SRC, "q") in store.including_failed().incoming(
        EndPointField(OUT, "q"), 0, MAX_TIME)


def test_a_start_s_set_its_complete_superseded_is_reclaimable_not_a_problem(client, store):
    """START with part of the lineage, COMPLETE with all of it: the START's set
    has no run left. `fll admin fsck` calls the store sound (exit 0) and counts
    that row as reclaimable; --repair removes it and answers stay the same."""
    rid = str(uuid.uuid4())
    assert client.post("/api/v1/lineage", json=event(rid, "START", ["a"], T0)).status_code == 201
    assert client.post("/api/v1/lineage", json=event(rid, "COMPLETE", ["a", "b"], T1)
                       ).status_code == 201
    url = store.url
    runner = CliRunner()
    found = runner.invoke(main, ["--store", url, "admin", "fsck", "--format", "json"])
    assert found.exit_code == 0, found.output
    report = json.loads(found.stdout)
    assert report["sound"] is True and report["clean"] is False
    assert report["reclaimable"] == 1 and len(report["orphaned_data_rows"]) == 1
    text = runner.invoke(main, ["--store", url, "admin", "fsck"])
    assert text.exit_code == 0 and "sound:" in text.stdout and "reclaimable" in text.stdout
    fields = store.fields(OUT, 0, MAX_TIME)
    repaired = runner.invoke(main, ["--store", url, "admin", "fsck", "--repair"])
    assert repaired.exit_code == 0, repaired.output
    assert store.fields(OUT, 0, MAX_TIME) == fields == ["a", "b"]
    after = runner.invoke(main, ["--store", url, "admin", "fsck"])
    assert after.exit_code == 0 and after.stdout.startswith("clean:")
