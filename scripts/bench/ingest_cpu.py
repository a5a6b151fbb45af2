"""The server's CPU per OpenLineage event on the warehouse benchmark's events,
in-process: what `warehouse.py` measures from outside (its server's CPU over
the ingest), without HTTP, sockets or another process, so it holds on a busy
machine and can be profiled.

    PYTHONPATH=. .venv/bin/python scripts/bench/ingest_cpu.py [--datasets 300]
        [--runs N] [--connections 8] [--profile FILE] [--schemas]

The app (`fll.server.create_app` over an SQLite store in a temp dir) is
called as uvicorn would call it, with ``--connections`` concurrent clients
each sending a run's START then its COMPLETE (`warehouse.Warehouse`, same
seed, the first ``--runs`` runs in time order). The garbage collector is
handled as `fll serve` does (`fll.server.collector`: survivors frozen every
0.1 s). Prints the events, the CPU per
event (this process: the client's share is the events' templating, a few
microseconds), the answers' statuses and a digest of every stored row, which
two checkouts given the same arguments must print alike (same rows).
The transaction's CPU per event is printed too (the batches' commits,
BEGIN to COMMIT: the store's reads and writes, the new sets' data rows, and
the union of a run's events, given apart), so the store side's cost shows
whatever the events' parsing and building cost.
``--profile FILE``: cProfile (CPU time) of the ingest, written to FILE, the
top functions printed.
"""
from __future__ import annotations

import asyncio
import cProfile
import hashlib
import os
import pstats
import sqlite3
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from warehouse import Warehouse  # noqa: E402

from fll import open_store  # noqa: E402
from fll import openlineage as ol  # noqa: E402
from fll.server import create_app  # noqa: E402


def _scope(body: bytes) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/api/v1/lineage",
            "raw_path": b"/api/v1/lineage", "query_string": b"", "root_path": "",
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
            "headers": [(b"host", b"x"), (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode())]}


def rows_digest(path: str) -> str:
    """SHA-256 of every row and cell of the store file, in key order."""
    h = hashlib.sha256()
    con = sqlite3.connect(path)
    try:
        for sql in ("SELECT row, val FROM rows ORDER BY 1",
                    "SELECT row, col, val FROM wide ORDER BY 1, 2"):
            for r in con.execute(sql):
                h.update(repr(r).encode())
    finally:
        con.close()
    return h.hexdigest()[:16]


async def send_events(app, bodies: list[tuple[bytes, bytes]], connections: int,
                      statuses: dict[int, int], profiler: cProfile.Profile | None = None
                      ) -> int:
    """Post each run's START then its COMPLETE (``bodies``) to ``app`` as uvicorn
    calls it, from ``connections`` clients at once, with the collector's freeze
    turns on as `fll serve` runs them; counts the answers' statuses into
    ``statuses`` and returns the events sent. ``profiler``: on while they go."""
    sent = 0

    async def post(body: bytes) -> None:
        nonlocal sent
        messages: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict) -> None:
            messages.append(message)

        await app(_scope(body), receive, send)
        status = messages[0]["status"]
        statuses[status] = statuses.get(status, 0) + 1
        sent += 1

    queue = iter(bodies)
    if profiler is not None:
        profiler.enable()
    app.state.freezer.start()  # what fll serve's lifespan does

    async def client() -> None:
        for start, complete in queue:
            await post(start)
            await post(complete)
            await asyncio.sleep(0)  # another client's turn, as sockets give it
    await asyncio.gather(*[client() for _ in range(connections)])
    app.state.freezer.stop()
    if profiler is not None:
        profiler.disable()
    return sent


@click.command()
@click.option("--datasets", default=300, show_default=True, type=click.IntRange(30))
@click.option("--runs", default=0, type=click.IntRange(0),
              help="The first N runs only (0: all of them).")
@click.option("--connections", default=8, show_default=True, type=click.IntRange(1, 64))
@click.option("--profile", "profile_path", default=None, metavar="FILE")
@click.option("--schemas", is_flag=True,
              help="every dataset an event names carries its schema facet (warehouse.py --schemas)")
def main(datasets: int, runs: int, connections: int, profile_path: str | None,
         schemas: bool) -> None:
    wh = Warehouse(datasets, 5, 3, 7, "half", schemas)
    chosen = wh.runs[:runs] if runs else wh.runs
    bodies = [(wh.event(r, "START"), wh.event(r, "COMPLETE")) for r in chosen]
    directory = tempfile.mkdtemp(prefix="fll-ingest-cpu-")
    path = os.path.join(directory, "fll.db")
    store = open_store(f"sqlite:///{path}", cache_size=32_768)
    app = create_app(store, checkpoint_every=None, gc_freeze=True)
    statuses: dict[int, int] = {}
    spent = {"commit": 0.0, "union": 0.0}

    def timed(fn, what: str):
        def call(*args, **kwargs):
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[what] += time.process_time() - t
        return call
    # the store's transaction (every batch's commit) and the union inside it
    app.state.writer._commit = timed(app.state.writer._commit, "commit")
    ol.union = timed(ol.union, "union")

    profiler = cProfile.Profile(time.process_time) if profile_path else None
    cpu0, t0 = time.process_time(), time.monotonic()
    n = asyncio.run(send_events(app, bodies, connections, statuses, profiler))
    cpu, took = time.process_time() - cpu0, time.monotonic() - t0
    store.close()
    writer = app.state.writer
    click.echo(f"{n:,} events in {took:.1f} s; CPU {cpu:.2f} s: {cpu / n * 1000:.3f} ms per "
               f"event; {writer.events / max(writer.batches, 1):.1f} events per "
               f"transaction; answers {dict(sorted(statuses.items()))}; rows digest "
               f"{rows_digest(path)}; load average "
               f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    click.echo(f"transaction CPU {spent['commit'] / n * 1000:.3f} ms per event, of which "
               f"the union of a run's events {spent['union'] / n * 1000:.3f} ms")
    if profiler is not None and profile_path:
        profiler.dump_stats(profile_path)
        pstats.Stats(profile_path).sort_stats("cumulative").print_stats(25)
    for name in os.listdir(directory):
        os.remove(os.path.join(directory, name))
    os.rmdir(directory)


if __name__ == "__main__":
    main()
