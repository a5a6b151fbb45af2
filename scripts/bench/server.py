"""Field-lineage query throughput of `fll serve` with 100k recorded runs.

    .venv/bin/python scripts/bench/server.py [--clients 8] [--seconds 20] [--runs 100000]
    .venv/bin/python scripts/bench/server.py --wide 2000,14000

`--wide` measures instead the dataset-wide Marquez column lineage
(`nodeId=dataset:…`) of one OpenLineage run writing N columns, each from its
own input column plus a dataset-wide FILTER column (the workload that made it
quadratic): seconds per request, ms per 1,000 columns, and the ratio of the
widest to the narrowest (linear when it tracks the width ratio).

Queries only (no ingest), driven from this process against a server in a
second process over 127.0.0.1: requests/s and p50/p99 per query kind. The
mixed ingest-and-query load lives in `server_load.py`, whose machinery this
reuses.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_load import render, run_load  # noqa: E402


def wide_event(width: int) -> dict:
    src = {"namespace": "postgres://db:5432", "name": "public.wide"}
    return {
        "eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z", "producer": "urn:bench",
        "run": {"runId": "00000000-0000-4000-8000-%012d" % width},
        "job": {"namespace": "bench", "name": f"wide{width}"},
        "inputs": [src],
        "outputs": [{"namespace": "s3://lake", "name": f"wide{width}", "facets": {
            "columnLineage": {
                "fields": {f"c{i}": {"inputFields": [{**src, "field": f"c{i}"}]}
                           for i in range(width)},
                "dataset": [{**src, "field": "status", "transformations": [
                    {"type": "INDIRECT", "subtype": "FILTER"}]}]}}}]}


def bench_wide(widths: list[int], repeat: int) -> list[dict]:
    from fastapi.testclient import TestClient

    from fll import open_store
    from fll.server import create_app

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/wide.db")
        with TestClient(create_app(store)) as client:
            for width in widths:
                r = client.post("/api/v1/lineage", json=wide_event(width))
                assert r.status_code == 201, r.text
                walls, cpus = [], []
                for _ in range(repeat):
                    # wall time moves with the load on a shared machine; CPU time
                    # (client and server share this process) shows the work done
                    w0, c0 = time.perf_counter(), time.process_time()
                    got = client.get("/api/v1/column-lineage", params={
                        "nodeId": f"dataset:s3://lake:wide{width}", "depth": 1})
                    walls.append(time.perf_counter() - w0)
                    cpus.append(time.process_time() - c0)
                    assert got.status_code == 200, got.text
                nodes = len(got.json()["graph"])
                assert nodes == 2 * width + 1, nodes
                cpu = statistics.median(cpus)
                rows.append({"width": width, "cold": walls[0], "seconds": statistics.median(walls),
                             "cpu": cpu, "nodes": nodes, "ms_per_1k": 1000 * cpu / (width / 1000)})
        store.close()
    return rows


@click.command()
@click.option("--wide", metavar="N,N", help="Measure dataset-wide column lineage at these "
              "widths instead of the query load.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(1, 50),
              help="Requests per width with --wide (median reported).")
@click.option("--clients", default=8, show_default=True, type=click.IntRange(1, 200))
@click.option("--seconds", default=20.0, show_default=True, type=click.FloatRange(1, 300))
@click.option("--runs", default=100_000, show_default=True, type=click.IntRange(1))
def main(wide: str | None, repeat: int, clients: int, seconds: float, runs: int) -> None:
    if wide:
        widths = sorted(int(w) for w in wide.split(","))
        rows = bench_wide(widths, repeat)
        click.echo(f"{'columns':>8} {'cold s':>7} {'wall s':>7} {'cpu s':>7} "
                   f"{'cpu ms/1k cols':>15} {'nodes':>7}")
        for r in rows:
            click.echo(f"{r['width']:>8} {r['cold']:>7.2f} {r['seconds']:>7.2f} {r['cpu']:>7.2f} "
                       f"{r['ms_per_1k']:>15.0f} {r['nodes']:>7}")
        if len(rows) > 1:
            click.echo(f"cpu time ratio {rows[-1]['cpu'] / rows[0]['cpu']:.1f} for a width "
                       f"ratio of {rows[-1]['width'] / rows[0]['width']:.1f}")
        return
    report = run_load(clients=clients, seconds=seconds, runs=runs, ingest_share=0.0)
    click.echo(render(report))
    if report["errors"] or not report["server_alive"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
