"""Crash safety: writers and servers killed with SIGKILL lose nothing they confirmed.

A run counts as confirmed when `record()` returned (the writer prints its id
only then) or when the server answered 201. After the kills the store is
checked with `fll admin fsck` (the real command, through click's runner).
"""
from __future__ import annotations

import json
import random
import signal
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from fll.cli import main as fll_main
from fll.openlineage import info_to_event
from fll.store import open_store
from tests.lineage_examples import chain

from .conftest import finish, running_server, spawn_worker
from .workers import FIELDS, SOURCES, TARGETS

KILLS = 50


def fsck_json(url: str) -> dict:
    result = CliRunner().invoke(fll_main, ["--store", url, "admin", "fsck", "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def confirmed_lines(out: str) -> list[str]:
    """Complete lines only: a SIGKILL may cut the last one."""
    lines = out.split("\n")[:-1]
    return [x for x in lines if x and x != "READY"]


@pytest.mark.reliability(f"a writer process SIGKILLed at a random point, {KILLS} times, "
                         "one SQLite file")
def test_a_writer_killed_fifty_times_leaves_fsck_clean_and_every_returned_run_readable(
        tmp_path, figures):
    """After 50 SIGKILLs at random moments (0-250 ms into writing), `fll admin fsck`
    finds no dangling index row, no lost run row and no corrupt data row, and every
    run whose record() had returned is readable with its operation set."""
    url = f"sqlite:///{tmp_path}/fll.db"
    rnd = random.Random(10)
    returned: list[str] = []
    began = time.monotonic()
    for attempt in range(KILLS):
        p = spawn_worker("crash-writer", url, attempt)
        assert p.stdout is not None
        ready = p.stdout.readline().strip()
        assert ready == "READY", finish(p, 10)[1][-2000:]
        time.sleep(rnd.uniform(0, 0.25))
        p.send_signal(signal.SIGKILL)
        out, _ = finish(p, 10)
        assert p.returncode == -signal.SIGKILL
        returned += confirmed_lines(out)
    took = time.monotonic() - began
    assert len(returned) > KILLS * 5, "the writers barely wrote: the kills tested nothing"
    report = fsck_json(url)
    assert report["clean"], report
    store = open_store(url)
    for run_id in returned:
        run = store.run(run_id)
        assert run is not None, f"{run_id} returned from record() but is not readable"
        store.operation_set(run.checksum)
    store.close()
    figures["kills"] = KILLS
    figures["confirmed_runs"] = len(returned)
    figures["seconds"] = took


def event(n: int) -> dict:
    info = chain(SOURCES[n % 8], TARGETS[(n * 5) % 8], FIELDS + ([f"e{n}"] if n % 4 == 0 else []))
    return info_to_event(info, f"srv-{n}", 1_700_000_000_000 + n, "ingest/job")


@pytest.mark.reliability("`fll serve` (uvicorn) SIGKILLed while 8 clients POST events")
def test_a_server_killed_mid_ingest_has_stored_every_event_it_answered_201(tmp_path, figures):
    """Every OpenLineage event the server answered 201 before it was SIGKILLed is
    stored with the same checksum, and fsck is clean afterwards."""
    url = f"sqlite:///{tmp_path}/fll.db"
    accepted: dict[str, str] = {}
    failures: list[str] = []
    lock = threading.Lock()
    counter = iter(range(10**9))

    def client(base: str, stop: threading.Event) -> None:
        with httpx.Client(base_url=base, timeout=5) as c:
            while not stop.is_set():
                with lock:
                    n = next(counter)
                try:
                    r = c.post("/api/v1/lineage", json=event(n))
                except httpx.HTTPError:
                    return  # the server is gone
                if r.status_code == 201:
                    with lock:
                        accepted[f"srv-{n}"] = r.json()["checksum"]
                else:
                    failures.append(f"{r.status_code} {r.text[:200]}")

    with running_server(url) as server:
        stop = threading.Event()
        threads = [threading.Thread(target=client, args=(server.base, stop)) for _ in range(8)]
        for t in threads:
            t.start()
        # kill once enough were answered (a busy machine may take a while to
        # answer the first ones), while the clients are still posting
        deadline = time.monotonic() + 60
        while len(accepted) < 40 and not failures and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()  # SIGKILL mid-stream
        stop.set()
        for t in threads:
            t.join(timeout=20)
        assert not any(t.is_alive() for t in threads)
    assert not failures, failures[:5]
    assert len(accepted) > 20, "too few events were accepted to test anything"
    store = open_store(url)
    for run_id, checksum in accepted.items():
        run = store.run(run_id)
        assert run is not None and run.checksum == checksum, f"{run_id} answered 201, stored {run}"
    store.close()
    report = fsck_json(url)
    assert report["clean"], report
    figures["events_answered_201"] = len(accepted)
