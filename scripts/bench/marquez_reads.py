"""Marquez's read API (fll/server/marquez*.py) against the size of the store.

    .venv/bin/python scripts/bench/marquez_reads.py [--datasets 500,2000,8000] [--repeat 5]

Per store size: a chain of ``n`` datasets of 10 columns in 4 namespaces,
each written by its own job (``etl/job<i>`` reads dataset i-1 and writes
dataset i) in two runs, recorded in batches into a fresh SQLite store with a
schema report per run. Then each route is asked through the app in this
process (no network) and its median CPU time printed (the process's, the
app's threads included: wall time on a shared machine mostly measures the
neighbours), with the ratio of the
largest store to the smallest: the per-dataset routes should stay flat, the
routes that read every dataset (namespaces, lineage, search, stats) grow with
the store, and that growth is what the ratio shows.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fastapi.testclient import TestClient  # noqa: E402

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation,  # noqa: E402
                 TransformOperation, WriteOperation)
from fll.server import create_app  # noqa: E402
from fll.store import open_store  # noqa: E402

COLUMNS = [f"c{k}" for k in range(10)]


def dataset(i: int) -> EndPoint:
    return EndPoint(f"warehouse{i % 4}", f"table_{i:05d}")


def job_set(i: int) -> FieldLineageInfo:
    src, dst = dataset(i - 1), dataset(i)
    ops = [ReadOperation("read", "read", src, tuple(COLUMNS))]
    ops += [TransformOperation(f"t{c}", "copy", (InputField("read", c),), (c,)) for c in COLUMNS]
    ops.append(WriteOperation("write", "write", dst,
                              tuple(InputField(f"t{c}", c) for c in COLUMNS)))
    return FieldLineageInfo(ops)


def build(n: int, path: str):
    store = open_store(f"sqlite:///{path}")
    runs = []
    for i in range(1, n):
        info = job_set(i)
        for r in range(2):
            runs.append((info, f"run-{i}-{r}", 1_700_000_000_000 + (i * 2 + r) * 60_000,
                         f"etl/job{i}"))
    for k in range(0, len(runs), 2_000):
        store.record_many(runs[k:k + 2_000])
    for _, run_id, at, _ in runs:
        i = int(run_id.split("-")[1])
        ep = dataset(i)
        store.record_schema(ep.namespace, ep.name, run_id, at, [(c, "INT") for c in COLUMNS])
    return store


def routes(n: int) -> dict[str, str]:
    mid = dataset(n // 2)
    ds = f"/api/v1/namespaces/{mid.namespace}/datasets/{mid.name}"
    return {
        "namespaces": "/api/v1/namespaces",
        "datasets (page of 100)": f"/api/v1/namespaces/{mid.namespace}/datasets?limit=100",
        "dataset": ds,
        "versions": ds + "/versions",
        "lineage depth 20": f"/api/v1/lineage?nodeId=dataset:{mid.namespace}:{mid.name}"
                            f"&depth=20",
        "search": "/api/v1/search?q=table_001&limit=100",
        "stats datasets WEEK": "/api/v1/stats/datasets?period=WEEK&timezone=UTC",
    }


def median_ms(client: TestClient, url: str, repeat: int) -> float:
    """Median CPU ms of this process per answer (the app's threads included):
    on a shared machine wall time mostly measures the neighbours."""
    first = client.get(url)
    assert first.status_code == 200, (url, first.text)
    samples = []
    for _ in range(repeat):
        t0 = time.process_time()
        client.get(url)
        samples.append((time.process_time() - t0) * 1000)
    return statistics.median(samples)


@click.command()
@click.option("--datasets", default="500,2000,8000", show_default=True,
              help="store sizes (datasets), comma-separated")
@click.option("--repeat", default=5, show_default=True)
def main(datasets: str, repeat: int) -> None:
    sizes = [int(x) for x in datasets.split(",")]
    figures: dict[int, dict[str, float]] = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            store = build(n, os.path.join(tmp, "m.db"))
            built = time.perf_counter() - t0
            with TestClient(create_app(store)) as client:
                figures[n] = {name: median_ms(client, url, repeat)
                              for name, url in routes(n).items()}
            store.close()
        print(f"{n:,} datasets, {2 * (n - 1):,} runs (built in {built:.1f} s)")
    print(f"\n{'route':<24}" + "".join(f"{f'{n:,} ds (CPU ms)':>18}" for n in sizes)
          + f"{'ratio':>8}")
    for name in figures[sizes[0]]:
        row = [figures[n][name] for n in sizes]
        print(f"{name:<24}" + "".join(f"{v:>18.1f}" for v in row)
              + f"{row[-1] / row[0]:>7.2f}x")
    print(f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
