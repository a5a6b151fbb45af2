"""Normal ingests and reads beside hundreds of slow-body and idle connections.

    .venv/bin/python scripts/bench/slow_bodies.py [--slow 500] [--idle 500]
        [--requests 200] [--seconds 0] [--workers 1] [--token T] [--json]

Starts ``fll serve`` on 127.0.0.1 over a fresh SQLite store (default limits:
8 ingest slots, 60 s body timeout, 10 s header timeout), seeds it with a few
runs, then has one normal client send ``--requests`` ingests (each a new run,
on a new connection, so with ``--workers`` they reach every worker) and as
many reads (``GET …/lineage/fields/{field}?direction=both``), one after the
other, twice:

- quiet: nothing else on the server;
- held: beside ``--slow`` connections that each declare a 1 MB ingest body and
  send 14 bytes of it, and ``--idle`` connections that send nothing
  (`fll.testing.holders`: each one the server closes is opened again);
  with ``--seconds S`` the held phase goes on for at least S seconds (past the
  10 s header timeout and the 60 s body timeout, so every held connection is
  closed by the server and opened again meanwhile).

It prints, per phase, the answers' statuses and p50/p99/max latency of the
ingests and the reads, and checks that every run answered 201 is in the store.
Before fll took an ingest slot only once the body had arrived, 17 slow bodies
held all 8 slots and every normal ingest waited 10 s for a 503.

This script must never talk to anything but 127.0.0.1 and always stops the
server it started (by its process id).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import click
import httpx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from fll import EndPoint, open_store  # noqa: E402
from fll.testing.holders import Holders, percentile  # noqa: E402
from fll.testing.serving import wait_until_serving  # noqa: E402

COLUMNS = ("id", "name", "email", "total", "country")


def event(run_id: str) -> dict:
    """A COMPLETE RunEvent: shop.orders -> mart.customers, five columns."""
    fields = {c: {"inputFields": [{"namespace": "shop", "name": "orders", "field": c,
                                   "transformations": [{"type": "DIRECT",
                                                        "subtype": "IDENTITY"}]}]}
              for c in COLUMNS}
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z",
            "run": {"runId": run_id}, "job": {"namespace": "bench", "name": "customers"},
            "producer": "https://example.com/fll-bench",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "inputs": [{"namespace": "shop", "name": "orders"}],
            "outputs": [{"namespace": "mart", "name": "customers",
                         "facets": {"columnLineage": {"fields": fields}}}]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def phase(base: str, token: str | None, requests: int, seconds: float = 0.0) -> dict:
    """``requests`` ingests and as many reads, alternating; their statuses and times."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    read = "/v3/namespaces/mart/datasets/customers/lineage/fields/email"
    params = {"direction": "both", "start": 0, "end": "now"}
    ingests: list[float] = []
    reads: list[float] = []
    statuses: dict[str, int] = {}
    recorded: list[str] = []
    # no keep-alive: each request a new connection, which the kernel may give any worker
    with httpx.Client(base_url=base, headers=headers, timeout=30,
                      limits=httpx.Limits(max_keepalive_connections=0)) as client:
        until = time.monotonic() + seconds
        done = 0
        while done < requests or time.monotonic() < until:
            done += 1
            rid = str(uuid.uuid4())
            began = time.monotonic()
            r = client.post("/api/v1/lineage", json=event(rid))
            ingests.append(time.monotonic() - began)
            statuses[f"ingest {r.status_code}"] = statuses.get(f"ingest {r.status_code}", 0) + 1
            if r.status_code == 201:
                recorded.append(rid)
            began = time.monotonic()
            r = client.get(read, params=params)
            reads.append(time.monotonic() - began)
            statuses[f"read {r.status_code}"] = statuses.get(f"read {r.status_code}", 0) + 1
    return {"statuses": statuses, "recorded": recorded, "requests": done,
            **{f"{what}_{name}_ms": round(fn(times) * 1000, 1)
               for what, times in (("ingest", ingests), ("read", reads))
               for name, fn in (("p50", lambda t: percentile(t, 0.5)),
                                ("p99", lambda t: percentile(t, 0.99)), ("max", max))}}


@click.command()
@click.option("--slow", default=500, show_default=True, help="Half-sent ingest bodies.")
@click.option("--idle", default=500, show_default=True, help="Connections that send nothing.")
@click.option("--requests", default=200, show_default=True,
              help="Ingests (and as many reads) per phase.")
@click.option("--seconds", default=0.0, show_default=True,
              help="Make the held phase last at least this long.")
@click.option("--workers", default=1, show_default=True, help="fll serve --workers.")
@click.option("--token", default=None, help="fll serve --token (the holders send it too).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def main(slow: int, idle: int, requests: int, seconds: float, workers: int,
         token: str | None, as_json: bool) -> None:
    workdir = tempfile.mkdtemp(prefix="fll-bench-")
    port = free_port()
    store = f"sqlite:///{workdir}/slow.db"
    args = [sys.executable, "-m", "fll.cli", "serve", "--store", store, "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning", "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("FLL_TOKEN", None)
    if token:
        args += ["--token", token]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, 60)
        phase(base, token, 20)  # warm-up: the set is built and cached once
        quiet = phase(base, token, requests)
        with Holders(port, slow=slow, idle=idle, token=token) as holders:
            opened = holders.open_now()
            held = phase(base, token, requests, seconds)
            reopened, failed = holders.reopened, holders.failed
        with open_store(store) as s:
            runs = {r.run_id for r in s.runs(EndPoint("mart", "customers"), 0, 2**62)}
        lost = [rid for p in (quiet, held) for rid in p["recorded"] if rid not in runs]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    for p in (quiet, held):
        p["recorded"] = len(p["recorded"])
    result = {"slow": slow, "idle": idle, "workers": workers, "token": bool(token),
              "requests": requests, "held_open_at_start": opened,
              "reopened_by_holders": reopened, "failed_to_open": failed,
              "confirmed_lost": len(lost), "quiet": quiet, "held": held}
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(f"fll serve --workers {workers}{' --token' if token else ''}: {requests} "
               f"ingests + {requests} reads quiet, {held['requests']} + {held['requests']} "
               f"held; held: {slow} slow-body + {idle} idle "
               f"connections ({opened} open at start, {reopened} reopened after the server "
               f"closed them, {failed} failed to open)")
    for name, p in (("quiet", quiet), ("held", held)):
        click.echo(f"  {name:<5} ingest p50 {p['ingest_p50_ms']:7.1f} ms  p99 "
                   f"{p['ingest_p99_ms']:7.1f} ms  max {p['ingest_max_ms']:7.1f} ms | read p50 "
                   f"{p['read_p50_ms']:6.1f} ms  p99 {p['read_p99_ms']:6.1f} ms  max "
                   f"{p['read_max_ms']:6.1f} ms | {p['statuses']}")
    click.echo(f"  runs answered 201 and not in the store: {len(lost)}")


if __name__ == "__main__":
    main()
