"""New operation sets built in builder processes (`fll.server.set_builder`):
the store holds byte for byte what a server building them itself writes, the
server builds none of them, an invalid event is refused as before, and a
builder ends with its server, however that ends."""
from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import time

import pytest
from fastapi.testclient import TestClient

from fll import open_store
from fll import openlineage as ol
from fll import rowkeys as rk
from fll.openlineage import ingest
from fll.server import create_app
from fll.store.emulator import free_port
from fll.store import writer as writer_module
from fll.testing.hbase_thrift import HBaseThriftServer
from fll.testing.serving import wait_until_serving

from ..openlineage.test_ingest_memo import _forget

ROUTE = "/api/v1/lineage"


def _event(run: str, state: str, job: str, columns: list[str], sources: int = 2,
           when: str = "2024-05-01T10:00:00Z") -> dict:
    fields = {c: {"inputFields": [
        {"namespace": "pg", "name": f"{job}_src{k}", "field": f"f_{c}",
         "transformations": [{"type": "DIRECT", "subtype": "TRANSFORMATION"}]}
        for k in range(sources)]} for c in columns}
    return {"eventType": state, "eventTime": when, "producer": "urn:test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run}, "job": {"namespace": "jobs", "name": job},
            "inputs": [{"namespace": "pg", "name": f"{job}_src{k}"} for k in range(sources)],
            "outputs": [{"namespace": "pg", "name": f"{job}_out",
                         "facets": {"columnLineage": {"fields": fields}}}]}


def _events() -> list[dict]:
    """A day of runs as producers send them: START with part of the lineage
    and COMPLETE with all of it (the union is COMPLETE's set); a COMPLETE
    naming part of its START's and more (the union is a third set), and one
    naming less (the union is START's: nothing new); the same lineage
    again in another run; a run without column lineage; a FAIL."""
    cols = [f"c{i:02d}" for i in range(12)]
    u = "0190a0b0-0000-7000-8000-0000000000{:02d}".format
    return [
        _event(u(1), "START", "orders", cols[:6]),
        _event(u(1), "COMPLETE", "orders", cols, when="2024-05-01T10:05:00Z"),
        _event(u(2), "START", "users", cols[:8]),
        _event(u(2), "COMPLETE", "users", cols[4:], when="2024-05-01T10:06:00Z"),
        _event(u(6), "START", "subset", cols),
        _event(u(6), "COMPLETE", "subset", cols[:4], when="2024-05-01T10:07:00Z"),
        _event(u(3), "START", "orders", cols[:6], when="2024-05-02T10:00:00Z"),
        _event(u(3), "COMPLETE", "orders", cols, when="2024-05-02T10:05:00Z"),
        {**_event(u(4), "COMPLETE", "empty", []), "outputs": [{"namespace": "pg",
                                                                "name": "plain"}]},
        _event(u(5), "START", "broken", cols[:3]),
        _event(u(5), "FAIL", "broken", cols, when="2024-05-01T11:00:00Z"),
    ]


def _rows(store) -> dict:
    """Every row of the store but the writer rows (named by host and process)."""
    writer = rk.meta(writer_module.WRITER_PREFIX)
    return {k: v for k, v in store.table.scan() if not k.startswith(writer)}


def _ingest(url: str, build_processes: int, events: list[dict]) -> tuple[list, dict]:
    _forget()  # a process that never saw these events
    store = open_store(url)
    try:
        with TestClient(create_app(store, build_processes=build_processes)) as client:
            answers = [(r.status_code, r.json()) for r in
                       (client.post(ROUTE, json=copy.deepcopy(e)) for e in events)]
        return answers, _rows(store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def hbase():
    server = HBaseThriftServer().start()
    yield server
    server.stop()


@pytest.mark.parametrize("backend", ["sqlite", "hbase"])
def test_the_store_holds_byte_for_byte_what_a_server_building_sets_itself_writes(
        backend, tmp_path, hbase, monkeypatch):
    def url(name: str) -> str:
        return f"sqlite:///{tmp_path / name}.db" if backend == "sqlite" else hbase.url(name)
    events = _events()
    here_answers, here_rows = _ingest(url("here"), 0, events)
    # the server builds nothing itself when a builder does
    builds: list[int] = []
    real = ingest._lineage_info
    monkeypatch.setattr(ingest, "_lineage_info", lambda ev: builds.append(1) or real(ev))
    made_rows: list[int] = []
    real_rows = writer_module.set_rows
    monkeypatch.setattr(writer_module, "set_rows",
                        lambda info, shapes: made_rows.append(1) or real_rows(info, shapes))
    there_answers, there_rows = _ingest(url("there"), 1, events)
    assert there_answers == here_answers
    assert [s for s, _ in here_answers] == [201, 201, 201, 201, 201, 200, 201, 201, 202, 201, 201]
    assert there_rows == here_rows
    assert any(k.startswith(rk.data("")) for k in here_rows)  # sets were written
    assert builds == [] and made_rows == []


def test_an_invalid_event_is_refused_as_before_and_nothing_is_written(tmp_path, monkeypatch):
    bad = _event("0190a0b0-0000-7000-8000-000000000099", "COMPLETE", "bad", ["a", "b"])
    bad["outputs"][0]["facets"]["columnLineage"]["fields"]["b"]["inputFields"][0]["field"] = 7
    answers = {}
    for n in (0, 1):
        _forget()
        store = open_store(f"sqlite:///{tmp_path / str(n)}.db")
        try:
            app = create_app(store, build_processes=n)
            with TestClient(app) as client:
                r = client.post(ROUTE, json=bad)
                answers[n] = (r.status_code, r.json())
                assert not any(k.startswith(rk.data("")) for k, _ in store.table.scan())
                if n:  # the builder lives on, and builds the next event's set
                    builds: list[int] = []
                    real = ingest._lineage_info
                    monkeypatch.setattr(ingest, "_lineage_info",
                                        lambda ev, builds=builds, real=real: builds.append(1) or real(ev))
                    assert client.post(ROUTE, json=_events()[1]).status_code == 201
                    assert builds == [] and len(app.state.ingest.builder.pids) == 1
                    assert _gone(app.state.ingest.builder.pids[0], 0.1) is False
        finally:
            store.close()
    assert answers[1] == answers[0]
    assert answers[0][0] == 422 and "inputFields[0].field" in str(answers[0][1])


def test_a_builder_gone_leaves_the_server_building_its_sets_itself(tmp_path):
    _forget()
    store = open_store(f"sqlite:///{tmp_path / 'fll.db'}")
    try:
        app = create_app(store, build_processes=1)
        with TestClient(app) as client:
            events = _events()
            assert client.post(ROUTE, json=events[0]).status_code == 201
            (pid,) = app.state.ingest.builder.pids
            os.kill(pid, signal.SIGKILL)
            statuses = [client.post(ROUTE, json=e).status_code for e in events[1:]]
        assert statuses == [201, 201, 201, 201, 200, 201, 201, 202, 201, 201]
        assert store.run("0190a0b0-0000-7000-8000-000000000001") is not None
    finally:
        store.close()


def test_whatever_fails_in_a_builder_is_answered_none_for_the_server_to_build(monkeypatch):
    from fll.server import set_builder
    raw = ol.lineage_json(_events()[1])
    assert raw is not None
    made = set_builder.build(raw, None, {})
    assert made is not None and made[0][0] == ol.build_json(raw).checksum
    monkeypatch.setattr(ol, "build_json", lambda raw: (_ for _ in ()).throw(RecursionError()))
    assert set_builder.build(raw, None, {}) is None


def _builders(pid: int) -> list[int]:
    """The builder processes of the server ``pid`` (spawned: their command says so)."""
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        children = [int(p) for p in f.read().split()]
    found = []
    for child in children:
        with open(f"/proc/{child}/cmdline", "rb") as f:
            if b"spawn_main" in f.read():
                found.append(child)
    return found


def _gone(pid: int, within: float) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return True  # exited, not yet reaped
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("how,flag", [(signal.SIGTERM, []),
                                      (signal.SIGKILL, ["--build-processes", "1"])])
def test_a_builder_process_ends_with_its_server(how, flag, tmp_path):
    """SIGTERM closes the builder's pipe; SIGKILL leaves it to the kernel to
    close. Without the flag, ``fll serve`` starts one where there is a core
    more than its one worker."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "from fll.server.cli import serve; serve()", "--store",
         f"sqlite:///{tmp_path / 'fll.db'}", "--port", str(port), "--log-level", "warning",
         *flag], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    expected = 1 if flag else int((os.cpu_count() or 1) > 1)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", server)
        builders: list[int] = []
        end = time.monotonic() + 10
        while len(builders) < expected and time.monotonic() < end:
            builders = _builders(server.pid)
            time.sleep(0.05)
        assert len(builders) == expected
        server.send_signal(how)
        server.wait(30)
        assert all(_gone(pid, 10) for pid in builders)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
