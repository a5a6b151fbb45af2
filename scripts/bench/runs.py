"""The run model's two listings on SQLite: a job's latest 100 runs and an hour of events.

    .venv/bin/python scripts/bench/runs.py [--runs 100000] [--jobs 1000]

With ``--ingest``: only the run model's share of an ingest's CPU.

Writes ``--runs`` runs (a START and a COMPLETE event each, 86.4 s apart, over
``--jobs`` jobs) straight through the store API in batches (`fll.store.runs.model_rows`,
one put per batch, progress shown), then a store 10x smaller with the same
density (a tenth of the jobs, a tenth of the time): each question has the
same answer in both. Prints the median and 95th percentile of each question
over 50 random picks, as Marquez's routes build them (the runs route's
answer with its totalCount; the events route's page), and the cost ratio big/small: it should stay near 1
(cost follows the answer, not the store). Targets: each <= 20 ms.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fll import open_store  # noqa: E402
from fll import rowkeys as rk  # noqa: E402
from fll.server.runs import job_runs_json  # noqa: E402
from fll.store import runs as rm  # noqa: E402

T0 = 1_700_000_000_000
GAP = 86_400  # ms between two runs' starts: 1,000 runs a day whatever the store's size
HOUR = 3_600_000
BATCH = 5_000


def event(run_id: str, job: int, state: str, at: int) -> dict:
    return {"eventType": state, "eventTime": str(at), "producer": "urn:bench",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run_id, "facets": {"nominalTime": {
                "nominalStartTime": "2024-05-01T00:00:00Z"}}},
            "job": {"namespace": "bench", "name": f"job-{job:04d}",
                    "facets": {"documentation": {"description": f"job {job}"}}},
            "inputs": [{"namespace": "postgres://db:5432", "name": f"public.t{job}"}],
            "outputs": [{"namespace": "s3://lake", "name": f"out{job}"}]}


def build(url: str, runs: int, jobs: int) -> None:
    store = open_store(url)
    rows: dict[bytes, dict[str, bytes]] = {}
    started = time.perf_counter()
    for i in range(runs):
        rid = f"run-{i:07d}"
        job = i % jobs
        start = T0 + i * GAP
        rows[rk.run(rid)] = {"t": struct.pack(">q", start)}
        for state, at in (("START", start), ("COMPLETE", start + 60_000)):
            for key, cols in rm.model_rows(rm.event_facts(event(rid, job, state, at), rid, at),
                                           start).items():
                rows.setdefault(key, {}).update(cols)
        if (i + 1) % BATCH == 0 or i + 1 == runs:
            store.table.put(rows)
            rows = {}
            rate = (i + 1) / (time.perf_counter() - started)
            print(f"\r  {i + 1:,}/{runs:,} runs written ({rate:,.0f}/s)", end="", flush=True)
    print()
    store.close()


Q_RUNS, Q_EVENTS = "latest 100 runs of a job", "an hour of events"


def measure(url: str, runs: int, jobs: int, rng: random.Random
            ) -> dict[str, list[tuple[float, float]]]:
    """(wall ms, CPU ms) of each pick of each question."""
    store = open_store(url)
    out: dict[str, list[tuple[float, float]]] = {Q_RUNS: [], Q_EVENTS: []}
    span = runs * GAP

    def timed(q: str, fn):
        w, c = time.perf_counter(), time.process_time()
        answer = fn()
        out[q].append(((time.perf_counter() - w) * 1000, (time.process_time() - c) * 1000))
        return answer

    for _ in range(50):
        job = rng.randrange(jobs)
        answer = timed(Q_RUNS, lambda job=job: job_runs_json(store, "bench", f"job-{job:04d}",
                                                             100, 0))
        assert len(answer["runs"]) == min(100, runs // jobs), len(answer["runs"])
        lo = T0 + rng.randrange(max(span - HOUR, 1))
        events, total = timed(Q_EVENTS, lambda lo=lo: rm.events(store, lo, lo + HOUR, 1000, 0))
        assert len(events) == total and total > 0
    store.close()
    return out


def ingest_share(work: str, n: int = 1_000) -> None:
    """CPU per event of a whole ingest (check, build, lineage, run model; each
    event its own transaction) and of its run-model part alone
    (`fll.store.runs.event_facts` and `record_event`), best of 3."""
    from fll.server import create_app

    whole, model = [], []
    for rep_ in range(3):
        store = open_store(f"sqlite:///{work}/ingest{rep_}.db")
        prepare = create_app(store).state.prepare_ingest
        evs = []
        for i in range(n // 2):
            rid = f"ingest-{rep_}-{i}"
            for state, at in (("START", T0 + i * GAP), ("COMPLETE", T0 + i * GAP + 60_000)):
                e = event(rid, i % 50, state, at)
                e["eventTime"] = rm_iso(at)
                e["outputs"][0]["facets"] = {"columnLineage": {"fields": {f: {"inputFields": [
                    {"namespace": "postgres://db:5432", "name": f"public.t{i % 50}",
                     "field": f}]} for f in "abcdefgh"}}}
                evs.append(e)
        t = time.process_time()
        for e in evs:
            prepare(e)()
        whole.append((time.process_time() - t) / len(evs) * 1000)
        again = open_store(f"sqlite:///{work}/model{rep_}.db")
        t = time.process_time()
        for e in evs:
            rm.record_event(again, rm.event_facts(e, e["run"]["runId"], T0), T0)
        model.append((time.process_time() - t) / len(evs) * 1000)
        store.close()
        again.close()
    print(f"ingest: {min(whole):.3f} ms CPU per event with column lineage (each its own "
          f"transaction), of which the run model {min(model):.3f} ms "
          f"({min(model) / min(whole):.0%})")


def rm_iso(ms: int) -> str:
    from fll.openlineage import _iso

    return _iso(ms)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=100_000)
    p.add_argument("--jobs", type=int, default=1_000)
    p.add_argument("--ingest", action="store_true",
                   help="only the run model's share of an ingest's CPU")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="fll-runs-bench-")
    if args.ingest:
        ingest_share(work)
        return
    stores = {"big": (args.runs, args.jobs), "small": (args.runs // 10, args.jobs // 10)}
    figures = {}
    for name, (runs, jobs) in stores.items():
        url = f"sqlite:///{work}/{name}.db"
        print(f"{name}: {runs:,} runs over {jobs:,} jobs ({runs // jobs} runs each)")
        build(url, runs, jobs)
        size = os.path.getsize(f"{work}/{name}.db")
        print(f"  file {size / 1e6:,.1f} MB ({size / runs:,.0f} bytes per run of 2 events)")
        figures[name] = measure(url, runs, jobs, random.Random(7))
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; medians of 50 "
          f"picks (wall: elapsed; CPU: this process's time, what the machine's load does "
          f"not inflate)")
    print(f"{'question':<26}{'big wall':>10}{'p95':>9}{'big CPU':>9}{'small wall':>12}"
          f"{'small CPU':>11}{'CPU ratio':>11}")
    for q in figures["big"]:
        big, small = figures["big"][q], figures["small"][q]
        bw, bc = (statistics.median(x[i] for x in big) for i in (0, 1))
        sw, sc = (statistics.median(x[i] for x in small) for i in (0, 1))
        p95 = sorted(x[0] for x in big)[int(len(big) * 0.95)]
        print(f"{q:<26}{bw:>8.2f}ms{p95:>7.2f}ms{bc:>7.2f}ms{sw:>10.2f}ms{sc:>9.2f}ms"
              f"{bc / sc:>11.2f}")
    print("targets: each <= 20 ms; CPU ratio near 1 (cost follows the answer, not the store)")


if __name__ == "__main__":
    main()
