"""The listener's events, analysed without Spark: the route, the spool, bad input.

``data/listener_event.json`` is an event the JVM listener sent for
``spark.read.parquet(src).selectExpr("id", "v + 1 AS w").write.parquet(out1)``.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint, EndPointField
from fll.errors import BadRequest, StoreError
from fll.server import create_app
from fll.spark.events import analyse_event, record_spool, spool_servers
from fll.spark.listener import LISTENER_CLASS, ROUTE, SOURCE

EVENT = json.loads((Path(__file__).parent / "data" / "listener_event.json").read_text())
SRC, OUT = EndPoint("file", "/tmp/sprobe/d/src"), EndPoint("file", "/tmp/sprobe/d/out1")
TOKEN = {"Authorization": "Bearer tok"}


def _event(**changes):
    ev = copy.deepcopy(EVENT)
    ev.update(changes)
    return ev


def _tags(info, out_field: str) -> set[tuple]:
    ops = info.to_dict()["operations"]
    return {(i["name"], t["type"], t["subtype"], t["masking"]) for op in ops
            if op["name"].endswith(out_field) for i in op.get("inputs", [])
            for t in i.get("transformations", [])}


def test_an_event_is_analysed_by_the_same_rules_as_track_without_spark():
    ev = analyse_event(EVENT)
    assert ev.destination == ("file", "/tmp/sprobe/d/out1")
    assert ev.program == "probe" and ev.run_id == EVENT["run_id"]
    summary = ev.info.incoming_summary()
    assert summary[EndPointField(OUT, "id")] == {EndPointField(SRC, "id")}
    assert summary[EndPointField(OUT, "w")] == {EndPointField(SRC, "v")}
    assert _tags(ev.info, "w") == {("v", "DIRECT", "TRANSFORMATION", False)}
    assert _tags(ev.info, "id") == {("id", "DIRECT", "IDENTITY", False)}


def test_the_java_and_python_sides_agree_on_the_route_and_the_class():
    java = SOURCE.read_text()
    assert f'ROUTE = "{ROUTE}"' in java
    assert "package fll.spark;" in java and LISTENER_CLASS == "fll.spark.LineageListener"


@pytest.mark.parametrize("change, path", [
    ({"format": 2}, "$.format"),
    ({"run_id": ""}, "$.run_id"),
    ({"start_ms": "yesterday"}, "$.start_ms"),
    ({"destination": {"where": "x"}}, "$.destination"),
    ({"leaves": []}, "$.leaves"),
    ({"leaves": [{"number": 2, "first_id": 2, "datasets": [{"location": 3}]}]},
     "$.leaves[0].datasets[0]"),
    ({"plan": [{"not": "a plan"}]}, "$.plan"),
])
def test_an_event_that_cannot_be_analysed_is_refused_naming_the_json_path(change, path):
    with pytest.raises(BadRequest) as err:
        analyse_event(_event(**change))
    assert path in str(err.value)


def test_the_route_records_once_needs_the_token_and_answers_422_for_bad_events(store):
    with TestClient(create_app(store, token="tok")) as c:
        assert c.post(ROUTE, json=EVENT).status_code == 401
        first = c.post(ROUTE, json=EVENT, headers=TOKEN)
        assert first.status_code == 201, first.text
        assert first.json()["recorded"] is True
        assert c.post(ROUTE, json=EVENT, headers=TOKEN).status_code == 200
        bad = c.post(ROUTE, json=_event(format=9), headers=TOKEN)
        assert bad.status_code == 422 and "$.format" in bad.json()["error"]
        assert c.post(ROUTE, content=b"{nope", headers=TOKEN).status_code == 400
        other = _event(destination={"location": "file:/tmp/elsewhere"})
        assert c.post(ROUTE, json=other, headers=TOKEN).status_code == 409
    run = store.run(EVENT["run_id"])
    assert run is not None and run.start_ms == EVENT["start_ms"] and run.program == "probe"


def test_the_route_refuses_a_body_over_the_app_s_limit_and_records_nothing(store):
    body = json.dumps(EVENT).encode()
    assert len(body) > 1024
    with TestClient(create_app(store, max_body=1024)) as c:
        r = c.post(ROUTE, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert r.json() == {"error": "request body is larger than 1024 bytes", "status": 413}
    assert store.run(EVENT["run_id"]) is None
    with TestClient(create_app(store, max_body=len(body))) as c:  # the limit is inclusive
        assert c.post(ROUTE, content=body).status_code == 201


def test_a_write_of_inline_rows_is_taken_but_records_nothing(store):
    ev = copy.deepcopy(EVENT)
    ev["run_id"] = "inline"
    ev["leaves"][0]["datasets"] = []
    with TestClient(create_app(store)) as c:
        r = c.post(ROUTE, json=ev)
    assert r.status_code == 202 and r.json()["recorded"] is False
    assert store.run("inline") is None


def test_a_write_of_rows_built_from_an_rdd_says_its_lineage_is_unknown(store):
    # the listener sends only relation leaves; an RDD leaf is in the plan alone
    ev = copy.deepcopy(EVENT)
    ev["run_id"] = "from-rdd"
    leaf = next(n for n in ev["plan"] if n["class"].endswith("LogicalRelation"))
    leaf.clear()
    leaf.update({"class": "org.apache.spark.sql.execution.LogicalRDD", "num-children": 0,
                 "output": copy.deepcopy(EVENT["plan"][-1]["output"]), "rdd": None,
                 "isStreaming": False, "session": None, "fromCheckpoint": False})
    ev["leaves"] = []
    with TestClient(create_app(store)) as c:
        r = c.post(ROUTE, json=ev)
    assert r.status_code == 202
    assert r.json()["reason"] == "unknown: built from an RDD (LogicalRDD)"
    assert store.run("from-rdd") is None


def test_a_write_recorded_with_part_of_its_lineage_unknown_says_why(store):
    ev = copy.deepcopy(EVENT)
    ev["run_id"] = "half-known"
    # a node this fll does not know, between the projection and the file it reads
    ev["plan"].insert(2, {"class": "org.apache.spark.sql.catalyst.plans.logical.SomeFutureNode",
                          "num-children": 1, "child": 0})
    with TestClient(create_app(store)) as c:
        r = c.post(ROUTE, json=ev, headers=TOKEN)
    assert r.status_code == 201, r.text
    assert r.json()["reason"] == "unknown: plan node SomeFutureNode is not understood"
    assert store.run("half-known") is not None


def test_a_store_failure_is_a_503_so_the_listener_keeps_the_event(store, monkeypatch):
    def broken(*_a, **_k):
        raise StoreError("disk full")
    monkeypatch.setattr(store, "record", broken)
    with TestClient(create_app(store), raise_server_exceptions=False) as c:
        assert c.post(ROUTE, json=EVENT).status_code == 503


def test_the_spool_is_recorded_oldest_first_and_bad_files_are_set_aside(store, tmp_path):
    tmp_path = tmp_path / "spool"
    tmp_path.mkdir()
    (tmp_path / "0001-a.json").write_text(json.dumps(EVENT))
    (tmp_path / "0002-b.json").write_text(json.dumps(_event(run_id="second")))
    (tmp_path / "0003-c.json").write_text("{broken")
    done = record_spool(store, tmp_path)
    assert done["recorded"] == 2 and len(done["rejected"]) == 1
    assert done["rejected"][0]["file"] == "0003-c.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0003-c.json.rejected"]
    assert store.run("second") is not None
    with pytest.raises(BadRequest, match="does not exist"):
        record_spool(store, tmp_path / "missing")


def test_a_store_failure_leaves_the_spool_in_place(store, tmp_path, monkeypatch):
    tmp_path = tmp_path / "spool"
    tmp_path.mkdir()
    (tmp_path / "0001-a.json").write_text(json.dumps(EVENT))
    monkeypatch.setattr(store, "record", lambda *a, **k: (_ for _ in ()).throw(
        StoreError("down")))
    with pytest.raises(StoreError):
        record_spool(store, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["0001-a.json"]


def _server_spool(root: Path, key: str, url: str, *events) -> Path:
    """A per-server spool sub-directory as the listener writes it."""
    sub = root / key
    sub.mkdir(parents=True)
    (sub / "server").write_text(url + "\n")
    for i, ev in enumerate(events):
        (sub / f"000{i}-{key}.json").write_text(json.dumps(ev))
    return sub


def test_spooled_events_are_recorded_only_for_the_server_they_were_captured_for(store,
                                                                               tmp_path):
    spool = tmp_path / "spool"
    a = _server_spool(spool, "aaaa", "http://a:8080", _event(run_id="for-a"))
    b = _server_spool(spool, "bbbb", "http://b:8080", _event(run_id="for-b"))
    # which store is A's is the caller's word: without --server nothing is recorded
    with pytest.raises(BadRequest, match="http://a:8080 .1 event.*http://b:8080 .1 event"):
        record_spool(store, spool)
    with pytest.raises(BadRequest, match="no event .* was captured for http://c:8080"):
        record_spool(store, spool, "http://c:8080")
    assert store.run("for-a") is None and store.run("for-b") is None
    done = record_spool(store, spool, "http://a:8080/")
    assert done["server"] == "http://a:8080" and done["recorded"] == 1
    assert store.run("for-a") is not None and store.run("for-b") is None
    assert not list(a.glob("*.json")) and len(list(b.glob("*.json"))) == 1
    # one server's own sub-directory names its server too
    assert spool_servers(b)[0]["server"] == "http://b:8080"


def test_fll_record_spool_names_the_server_events_wait_for(tmp_path):
    from click.testing import CliRunner

    from fll.cli import main

    spool = tmp_path / "spool"
    _server_spool(spool, "aaaa", "http://a:8080", EVENT)
    store_url = f"sqlite:///{tmp_path}/a.db"
    r = CliRunner().invoke(main, ["--store", store_url, "record", "--spool", str(spool)])
    assert r.exit_code != 0 and "http://a:8080 (1 event)" in r.output
    assert "--server" in r.output
    assert not (tmp_path / "a.db").exists()  # refused before a store is made
    r = CliRunner().invoke(main, ["--store", store_url, "record", "--spool", str(spool),
                                  "--server", "http://a:8080"])
    assert r.exit_code == 0, r.output
    assert "recorded 1 new run(s)" in r.output and "captured for http://a:8080" in r.output
    assert not list(spool.rglob("*.json"))


def test_spark_conf_prints_the_flags_for_the_installed_spark():
    from click.testing import CliRunner

    from fll.cli import main
    from fll.spark.listener import jar_path, spark_version

    r = CliRunner().invoke(main, ["spark-conf", "--url", "http://127.0.0.1:9", "--token", "t"])
    assert r.exit_code == 0, r.output
    assert r.output.split() == [
        "--jars", str(jar_path()), "--conf", f"spark.sql.queryExecutionListeners={LISTENER_CLASS}",
        "--conf", "spark.fll.url=http://127.0.0.1:9", "--conf", "spark.fll.token=t"]
    assert spark_version() in jar_path().name and jar_path().is_file()
    r = CliRunner().invoke(main, ["spark-conf", "--format", "defaults", "--spool", "/s"])
    assert r.output.splitlines()[1:] == [
        f"spark.sql.queryExecutionListeners {LISTENER_CLASS}",
        "spark.fll.url http://127.0.0.1:8080", "spark.fll.spool /s"]


@pytest.mark.slow
def test_the_jar_is_rebuilt_only_when_its_inputs_change(tmp_path, monkeypatch):
    from fll.spark import listener

    import shutil

    built_jar = listener.ensure_jar()  # set-up built it: one compile below, not two
    monkeypatch.setenv("FLL_JVM_BUILD", str(tmp_path))
    shutil.copy2(built_jar, listener.jar_path())
    shutil.copy2(built_jar.with_suffix(".stamp"), listener.jar_path().with_suffix(".stamp"))
    jar = listener.jar_path()
    built = jar.stat().st_mtime_ns
    assert listener.ensure_jar().stat().st_mtime_ns == built  # up to date: not rebuilt
    stamp = jar.with_suffix(".stamp")
    stamp.write_text(stamp.read_text().replace("spark ", "spark 0.0-"))
    assert listener.ensure_jar().stat().st_mtime_ns != built  # another Spark: rebuilt
    import zipfile

    assert "fll/spark/LineageListener.class" in zipfile.ZipFile(jar).namelist()


@pytest.mark.parametrize("plan", [
    [{"class": 3, "num-children": 0}],
    [{"class": "x.y.Project", "num-children": 2}],
    [{"class": "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand",
      "num-children": 1, "query": 0}],
])
def test_a_plan_that_is_json_but_not_spark_s_is_a_422_never_a_500(store, plan):
    with TestClient(create_app(store), raise_server_exceptions=False) as c:
        r = c.post(ROUTE, json=_event(plan=plan))
    assert r.status_code == 422, r.text
    assert "$.plan" in r.json()["error"]
