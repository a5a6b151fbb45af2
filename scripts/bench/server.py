"""Field-lineage query throughput of `fll serve` with 100k recorded runs.

    .venv/bin/python scripts/bench/server.py [--clients 8] [--seconds 20] [--runs 100000]

Queries only (no ingest), driven from this process against a server in a
second process over 127.0.0.1: requests/s and p50/p99 per query kind. The
mixed ingest-and-query load lives in `server_load.py`, whose machinery this
reuses.
"""
from __future__ import annotations

import os
import sys

import click

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_load import render, run_load  # noqa: E402


@click.command()
@click.option("--clients", default=8, show_default=True, type=click.IntRange(1, 200))
@click.option("--seconds", default=20.0, show_default=True, type=click.FloatRange(1, 300))
@click.option("--runs", default=100_000, show_default=True, type=click.IntRange(1))
def main(clients: int, seconds: float, runs: int) -> None:
    report = run_load(clients=clients, seconds=seconds, runs=runs, ingest_share=0.0)
    click.echo(render(report))
    if report["errors"] or not report["server_alive"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
