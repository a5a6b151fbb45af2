"""`fll serve --workers N`: several processes on one listening socket, one store.

The server is a real subprocess on a free loopback port, stopped by its process
id. What must hold with N processes as with one: every run sent is recorded
exactly once, however many clients send it at the same moment and whichever
worker takes each request; the ingest cap is the server's, not each worker's;
a store failure answers 503; SIGTERM to the parent stops every worker.
"""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from fll import EndPoint, open_store
from fll.testing.serving import wait_until_serving

from .test_ingest import ol_event

ROUNDS = 3  # the race below runs this many times on one server
RUNS_PER_ROUND = 24
CLIENTS = 32  # at once: each worker's ingests meet in batches (fll.server.ingest)
SENDERS_PER_RUN = 3  # clients sending the same run's COMPLETE event at once


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def serve_two(tmp_path, monkeypatch):
    """Start `fll serve --workers 2` over a fresh SQLite store with ``max_ingests``
    slots and ``ingest_wait`` seconds of waiting for one: returns (base URL, store
    URL, process); every process started is stopped by pid afterwards."""
    started: list[subprocess.Popen] = []

    def start(max_ingests: int, ingest_wait: float) -> tuple[str, str, subprocess.Popen]:
        port = _free_port()
        url = f"sqlite:///{tmp_path}/served.db"
        (tmp_path / "fll.yaml").write_text(f"serve:\n  ingest_wait: {ingest_wait}\n")
        monkeypatch.setenv("FLL_CONFIG", str(tmp_path / "fll.yaml"))
        proc = subprocess.Popen(
            [sys.executable, "-c", "from fll.server.cli import serve; serve()", "--store", url,
             "--port", str(port), "--workers", "2", "--max-ingests", str(max_ingests),
             "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started.append(proc)
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base, proc, 60)
        return base, url, proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for child in _children(proc.pid):
                    os.kill(child, signal.SIGKILL)
                proc.kill()
                proc.wait()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_two_workers_record_concurrent_ingests_exactly_once_and_stop_by_pid(serve_two):
    base, url, proc = serve_two(max_ingests=CLIENTS, ingest_wait=30)
    workers = _children(proc.pid)
    assert len(workers) == 2, workers

    def send(run_id: str) -> int:
        # a client of its own: a new connection, so the kernel may hand it to either worker
        with httpx.Client(base_url=base, timeout=60) as client:
            return client.post("/api/v1/lineage", json=ol_event(run_id=run_id)).status_code

    sent: list[str] = []
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        for r in range(ROUNDS):
            ids = [f"00000000-0000-4000-8000-{r:04d}{i:08d}" for i in range(RUNS_PER_ROUND)]
            sent += ids
            statuses = list(pool.map(send, [i for i in ids for _ in range(SENDERS_PER_RUN)]))
            per_run = [statuses[k:k + SENDERS_PER_RUN]
                       for k in range(0, len(statuses), SENDERS_PER_RUN)]
            # one sender recorded it (201), the others found it already there (200)
            assert all(sorted(s) == [200] * (SENDERS_PER_RUN - 1) + [201] for s in per_run), \
                per_run

    # neither worker died and was replaced under the race
    assert _children(proc.pid) == workers

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers)

    with open_store(url) as store:
        recorded = [r.run_id for r in store.runs(EndPoint("s3://lake", "marts/customer_totals"),
                                                  0, 2 ** 62)]
        assert sorted(recorded) == sorted(sent)  # each once: none lost, none doubled
        assert all(store.run(r) is not None for r in sent)


def test_with_two_workers_a_store_failure_is_a_503(serve_two):
    base, url, _ = serve_two(max_ingests=8, ingest_wait=10)
    assert httpx.post(base + "/api/v1/lineage",
                      json=ol_event(run_id="00000000-0000-4000-8000-00000000aaaa")).status_code == 201
    # the file replaced under the running server: every write must refuse, in every worker
    path = url.removeprefix("sqlite:///")
    os.rename(path, path + ".moved")
    for i in range(6):
        with httpx.Client(base_url=base, timeout=30) as client:  # new connections: any worker
            r = client.post("/api/v1/lineage",
                            json=ol_event(run_id=f"00000000-0000-4000-8000-0000000bbb{i:02d}"))
        assert r.status_code == 503, r.text
        assert set(r.json()) == {"error", "status"} and "store" in r.json()["error"]


def _wide_event(run_id: str, columns: int = 1_100) -> dict:
    """A COMPLETE event of ``columns`` output columns (two fields counted each):
    wider than the 2,000 fields an ingest handles on the event loop, so its write
    runs in a thread while the event loop goes on."""
    fields = {f"c{i:05d}": {"inputFields": [{"namespace": "in", "name": "wide",
                                             "field": f"s{i:05d}"}]} for i in range(columns)}
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z",
            "run": {"runId": run_id}, "job": {"namespace": "ns", "name": "wide"},
            "producer": "https://example.com/fll-tests",
            "inputs": [{"namespace": "in", "name": "wide"}],
            "outputs": [{"namespace": "out", "name": "wide",
                         "facets": {"columnLineage": {"fields": fields}}}]}


def test_max_ingests_caps_the_whole_server_not_each_worker(serve_two):
    """Two ingests at work hold both slots: wide events whose writes wait in a
    thread for SQLite's write lock, which the test holds. Whichever worker a
    third ingest reaches, it waits 0.5 s and gets 503. Once the lock is let go,
    both are recorded (201), and so is a new ingest. Ingests whose bodies never
    finish arriving hold no slot at all (a slot is taken once the body is in)."""
    base, url, _ = serve_two(max_ingests=2, ingest_wait=0.5)
    port = int(base.rsplit(":", 1)[1])
    half_sent = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /api/v1/lineage HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                  b"\r\nContent-Length: 1000\r\n\r\n{")
        half_sent.append(s)
    lock = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
    try:
        time.sleep(0.5)  # the half-sent requests have reached a worker
        r = httpx.post(base + "/api/v1/lineage", timeout=30,
                       json=ol_event(run_id="00000000-0000-4000-8000-0000000ccc99"))
        assert r.status_code == 201, r.text  # four half-sent bodies hold no slot
        lock.execute("BEGIN IMMEDIATE")  # every write of the server now waits
        with ThreadPoolExecutor(max_workers=2) as pool:
            wide = [pool.submit(httpx.post, base + "/api/v1/lineage",
                                json=_wide_event(f"00000000-0000-4000-8000-0000000eee{i:02d}"),
                                timeout=60) for i in range(2)]
            time.sleep(2.0)  # both have arrived, taken a slot and wait for the lock
            try:
                for i in range(6):  # new connections: the kernel hands them to either worker
                    with httpx.Client(base_url=base, timeout=30) as client:
                        r = client.post("/api/v1/lineage", json=ol_event(
                            run_id=f"00000000-0000-4000-8000-0000000ccc{i:02d}"))
                    assert r.status_code == 503, r.text
                    assert "2 ingests are in progress" in r.json()["error"]
                    assert r.headers["retry-after"] == "1"
            finally:
                lock.execute("ROLLBACK")
            assert [f.result().status_code for f in wide] == [201, 201]
    finally:
        lock.close()
        for s in half_sent:
            s.close()
    r = httpx.post(base + "/api/v1/lineage",
                   json=ol_event(run_id="00000000-0000-4000-8000-0000000ddd00"), timeout=30)
    assert r.status_code == 201, r.text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
def test_workers_do_not_outlive_a_killed_parent(serve_two):
    """SIGKILL (or the OOM killer) gives the parent no chance to stop its workers:
    they die with it instead of serving on as orphans nobody stops."""
    _, _, proc = serve_two(max_ingests=8, ingest_wait=10)
    workers = _children(proc.pid)
    assert len(workers) == 2
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(w) for w in workers)
