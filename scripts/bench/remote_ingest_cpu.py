"""The server's CPU per OpenLineage event on Bigtable (the emulator) or HBase
(fll's Thrift double), in-process: `ingest_cpu.py`'s measure for the backends
without transactions, split by thread (the event loop: HTTP, parsing,
building; the writers: the store calls and what they build).

    PYTHONPATH=. .venv/bin/python scripts/bench/remote_ingest_cpu.py \\
        [--backend bigtable|hbase] [--datasets 200] [--runs-per-day 1] \\
        [--rtt-ms 1] [--connections 16] [--profile PREFIX]

The app (`fll.server.create_app` over the store, reached through
`fll.testing.latency.ProxyProcess` as `warehouse.py --backend` does) is called
as uvicorn would call it, with ``--connections`` concurrent clients each
sending a run's START then its COMPLETE (`warehouse.Warehouse`, same seed).
Prints the events, this process's CPU per event (the clients' share is a few
microseconds), the event loop's and the writer threads' CPU per event
(``time.thread_time``), the store round trips per event and the answers'
statuses. ``--profile PREFIX``: cProfile of the event loop (PREFIX.loop) and
of the writer threads (PREFIX.writers), top functions printed (the profiler
about triples the CPU: read the shares, not the times).
"""
from __future__ import annotations

import asyncio
import cProfile
import os
import pstats
import sys
import tempfile
import threading
import time

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ingest_cpu import send_events  # noqa: E402
from warehouse import Backend, Warehouse, _cpu_seconds  # noqa: E402

from fll import open_store  # noqa: E402
from fll.server import create_app  # noqa: E402
from fll.server.set_builder import SetBuilder  # noqa: E402


@click.command()
@click.option("--backend", "kind", type=click.Choice(["bigtable", "hbase"]), default="bigtable",
              show_default=True)
@click.option("--datasets", default=200, show_default=True, type=click.IntRange(52))
@click.option("--runs-per-day", default=1, show_default=True, type=click.IntRange(1, 48))
@click.option("--rtt-ms", default=1.0, show_default=True, type=click.FloatRange(0, 100))
@click.option("--connections", default=16, show_default=True, type=click.IntRange(1, 64),
              help="clients sending at once (16: the ingests fll serve takes at once here)")
@click.option("--build-processes", default=0, show_default=True, type=click.IntRange(0, 8),
              help="new sets built in this many processes (fll serve --build-processes)")
@click.option("--profile", "prefix", default=None, metavar="PREFIX")
def main(kind: str, datasets: int, runs_per_day: int, rtt_ms: float, connections: int,
         build_processes: int, prefix: str | None) -> None:
    wh = Warehouse(datasets, 5, runs_per_day, 7, "half")
    bodies = [(wh.event(r, "START"), wh.event(r, "COMPLETE")) for r in wh.runs]
    directory = tempfile.mkdtemp(prefix="fll-remote-ingest-cpu-")
    backend = Backend(kind, directory, rtt_ms)
    url = backend.start()
    writers: dict[int, float] = {}
    profilers: list[cProfile.Profile] = []
    try:
        store = open_store(url, cache_size=32_768)
        app = create_app(store, checkpoint_every=None, gc_freeze=True)
        builder = app.state.ingest.builder = SetBuilder(
            build_processes, store.cache_budget.ingest) if build_processes else None
        if builder is not None:  # started before the clock
            asyncio.run(builder.build(b"[[], []]", "warm-up", None))
        writer = app.state.writer
        local = threading.local()

        def timed(fn):
            def call(*args, **kwargs):
                t = time.thread_time()
                prof = None
                if prefix:
                    prof = getattr(local, "prof", None)
                    if prof is None:
                        prof = local.prof = cProfile.Profile(time.thread_time)
                        profilers.append(prof)
                    prof.enable()
                try:
                    return fn(*args, **kwargs)
                finally:
                    if prof is not None:
                        prof.disable()
                    me = threading.get_ident()
                    writers[me] = writers.get(me, 0.0) + time.thread_time() - t
            return call
        writer._grouped = timed(writer._grouped)
        statuses: dict[int, int] = {}
        loop_prof = cProfile.Profile(time.thread_time) if prefix else None
        turns0 = backend.turns() or 0
        cpu0, loop0, t0 = time.process_time(), time.thread_time(), time.monotonic()
        n = asyncio.run(send_events(app, bodies, connections, statuses, loop_prof))
        cpu, loop_cpu = time.process_time() - cpu0, time.thread_time() - loop0
        took = time.monotonic() - t0
        built = sum(_cpu_seconds(pid) for pid in builder.pids) if builder else 0.0
        if builder is not None:
            builder.close()
        turns = (backend.turns() or 0) - turns0
        app.state.writer.close()
        store.close()
        click.echo(f"{kind}, {rtt_ms:g} ms per round trip: {n:,} events in {took:.1f} s "
                   f"({n / took:.0f}/s); CPU {cpu / n * 1000:.2f} ms per event: event loop "
                   f"{loop_cpu / n * 1000:.2f}, writers {sum(writers.values()) / n * 1000:.2f}, "
                   f"the rest (on Bigtable gRPC's threads) "
                   f"{(cpu - loop_cpu - sum(writers.values())) / n * 1000:.2f}; "
                   f"{turns / n:.2f} round trips per event; "
                   f"{f'builders {built / n * 1000:.2f} ms per event; ' if builder else ''}"
                   f"answers "
                   f"{dict(sorted(statuses.items()))}; load average "
                   f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if prefix and loop_prof is not None:
            loop_prof.dump_stats(prefix + ".loop")
            stats = pstats.Stats(profilers[0])
            for p in profilers[1:]:
                stats.add(p)
            stats.dump_stats(prefix + ".writers")
            for what in ("loop", "writers"):
                click.echo(f"--- {what}")
                pstats.Stats(prefix + "." + what).sort_stats("cumulative").print_stats(30)
    finally:
        backend.stop()
        for name in os.listdir(directory):
            os.remove(os.path.join(directory, name))
        os.rmdir(directory)


if __name__ == "__main__":
    main()
