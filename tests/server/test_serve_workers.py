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
def two_workers(tmp_path):
    """A `fll serve --workers 2` over a fresh SQLite store: (base URL, store URL, process)."""
    port = _free_port()
    url = f"sqlite:///{tmp_path}/served.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from fll.server.cli import serve; serve()", "--store", url,
         "--port", str(port), "--workers", "2", "--max-ingests", "4", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, 60)
        yield base, url, proc
    finally:
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
def test_two_workers_record_concurrent_ingests_exactly_once_and_stop_by_pid(two_workers):
    base, url, proc = two_workers
    workers = _children(proc.pid)
    assert len(workers) == 2, workers

    def send(run_id: str) -> int:
        # a client of its own: a new connection, so the kernel may hand it to either worker
        with httpx.Client(base_url=base, timeout=60) as client:
            return client.post("/api/v1/lineage", json=ol_event(run_id=run_id)).status_code

    sent: list[str] = []
    with ThreadPoolExecutor(max_workers=12) as pool:
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


def test_with_two_workers_a_store_failure_is_a_503(two_workers, tmp_path):
    base, url, _ = two_workers
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
