"""Bounded load on a live `fll serve`: concurrent clients ingesting and querying at once.

    .venv/bin/python scripts/bench/server_load.py [--clients 50] [--seconds 30]
        [--runs 100000] [--ingest-share 0.2] [--dir DIR] [--json]

Builds a SQLite store holding ``--runs`` recorded runs (``--variants``
distinct operation sets per dataset pair, 200 pairs: by default 100, i.e.
20,000 sets, as jobs with dated inputs make), starts ``fll serve`` on 127.0.0.1 at a
free port, then runs ``--clients`` asyncio clients (httpx, one connection
each) for ``--seconds``: each request is an OpenLineage ingest of a new run
(share ``--ingest-share``) or one of five field-lineage queries. Reports
requests/s, p50/p99/max latency overall and per kind, and errors (any
exception, timeout or unexpected status). Afterwards every run answered 201
is checked in the store. Exit status 1 if there was any error or lost run.

This script must never talk to anything but 127.0.0.1, and never run longer
than ``--seconds`` plus setup (every request has a timeout).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import click

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation,  # noqa: E402
                 TransformOperation, WriteOperation, open_store)
from fll.openlineage import info_to_event  # noqa: E402

PAIRS = 200
VARIANTS = 5
FIELDS = ["id", "name", "amount", "city", "ts"]
BASE_MS = 1_700_000_000_000
QUERY_KINDS = ("fields", "field", "operations", "allfieldlineage", "column-lineage")
# a UUID, so the exported event carries it as its run id and the replace hits both
# run.runId and the fllRun facet
_RUN_MARK = "00000000-0000-4000-8000-0000deadbeef"


def operation_set(pair: int, variant: int) -> FieldLineageInfo:
    src, dst = EndPoint("load", f"src{pair}"), EndPoint("load", f"dst{pair}")
    fields = FIELDS[:3 + variant % 3]
    ops = [ReadOperation("read", "read", src, fields)]
    ops += [TransformOperation(f"t_{f}", f"v{variant} {f}", [InputField("read", f)], [f])
            for f in fields]
    ops.append(WriteOperation("write", "write", dst, [InputField(f"t_{f}", f) for f in fields]))
    return FieldLineageInfo(ops)


def populate(url: str, runs: int) -> float:
    """Record ``runs`` runs over PAIRS × VARIANTS operation sets; returns seconds taken."""
    sets = [operation_set(p, v) for p in range(PAIRS) for v in range(VARIANTS)]
    began = time.monotonic()
    store = open_store(url)
    batch = []
    for i in range(runs):
        batch.append((sets[i % len(sets)], f"seed-{i}", BASE_MS + i * 1000, f"load/job{i % 50}"))
        if len(batch) == 5000:
            store.record_many(batch)
            batch.clear()
    if batch:
        store.record_many(batch)
    store.close()
    return time.monotonic() - began


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(url: str, port: int, timeout: float = 30) -> subprocess.Popen:
    code = "import sys; from fll.cli import main; sys.exit(main(sys.argv[1:], prog_name='fll'))"
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("FLL_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--store", url, "--host",
                             "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("fll serve exited: " + proc.stderr.read().decode()[-2000:])
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"fll serve did not listen on 127.0.0.1:{port} within {timeout} s")


def event_templates() -> list[str]:
    """One JSON body per operation set, its run id a marker replaced per request."""
    out = []
    for p in range(0, PAIRS, 10):
        ev = info_to_event(operation_set(p, p % VARIANTS), _RUN_MARK, BASE_MS, "load/ingest")
        out.append(json.dumps(ev))
    return out


def query_path(kind: str, rnd: random.Random) -> str:
    ds, f = f"dst{rnd.randrange(PAIRS)}", rnd.choice(FIELDS[:3])
    base = f"/v3/namespaces/load/datasets/{ds}"
    return {
        "fields": f"{base}/lineage/fields?start=0&end=now",
        "field": f"{base}/lineage/fields/{f}?direction=both&start=0&end=now&level=2",
        "operations": f"{base}/lineage/fields/{f}/operations?direction=incoming&start=now-1d"
                      f"&end=now",
        "allfieldlineage": f"{base}/lineage/allfieldlineage?direction=incoming&start=0&end=now",
        "column-lineage": f"/api/v1/column-lineage?nodeId=datasetField:load:{ds}:{f}&depth=5",
    }[kind]


async def _client(n: int, base: str, until: float, ingest_share: float, templates: list[str],
                  samples: dict[str, list[float]], errors: list[str], accepted: list[str]
                  ) -> None:
    import httpx

    rnd = random.Random(n)
    i = 0
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while time.monotonic() < until:
            i += 1
            if rnd.random() < ingest_share:
                kind, run_id = "ingest", f"load-{n}-{i}"
                body = rnd.choice(templates).replace(_RUN_MARK, run_id)
                began = time.perf_counter()
                try:
                    r = await client.post("/api/v1/lineage", content=body,
                                          headers={"content-type": "application/json"})
                except Exception as e:  # a timeout or dropped connection is an error too
                    errors.append(f"ingest: {type(e).__name__}: {e}")
                    continue
                if r.status_code == 201:
                    accepted.append(run_id)
                else:
                    errors.append(f"ingest: {r.status_code} {r.text[:200]}")
            else:
                kind = rnd.choice(QUERY_KINDS)
                began = time.perf_counter()
                try:
                    r = await client.get(query_path(kind, rnd))
                except Exception as e:
                    errors.append(f"{kind}: {type(e).__name__}: {e}")
                    continue
                if r.status_code != 200:
                    errors.append(f"{kind}: {r.status_code} {r.text[:200]}")
            samples.setdefault(kind, []).append(time.perf_counter() - began)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _stats(values: list[float], seconds: float) -> dict[str, float]:
    return {"requests": len(values), "rps": round(len(values) / seconds, 1),
            "p50_ms": round(_percentile(values, 0.50) * 1000, 1),
            "p99_ms": round(_percentile(values, 0.99) * 1000, 1),
            "max_ms": round(max(values) * 1000, 1) if values else float("nan"),
            "mean_ms": round(statistics.fmean(values) * 1000, 1) if values else float("nan")}


def run_load(clients: int = 50, seconds: float = 30, runs: int = 100_000,
             ingest_share: float = 0.2, directory: str | None = None) -> dict[str, Any]:
    """Populate, serve, load and verify; returns the report (see module docstring)."""
    own = directory is None
    directory = directory or tempfile.mkdtemp(prefix="fll-load-")
    url = f"sqlite:///{os.path.abspath(directory)}/fll.db"
    try:
        populate_s = populate(url, runs)
        port = free_port()
        server = start_server(url, port)
        try:
            samples: dict[str, list[float]] = {}
            errors: list[str] = []
            accepted: list[str] = []
            templates = event_templates()
            began = time.monotonic()
            until = began + seconds

            async def main() -> None:
                await asyncio.gather(*[
                    _client(n, f"http://127.0.0.1:{port}", until, ingest_share, templates,
                            samples, errors, accepted) for n in range(clients)])

            asyncio.run(main())
            took = time.monotonic() - began
            alive = server.poll() is None
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        store = open_store(url)
        lost = [r for r in accepted if store.run(r) is None]
        store.close()
        every = [v for vs in samples.values() for v in vs]
        return {"clients": clients, "seconds": round(took, 1), "stored_runs_at_start": runs,
                "populate_s": round(populate_s, 1), "ingest_share": ingest_share,
                "overall": _stats(every, took),
                "per_kind": {k: _stats(v, took) for k, v in sorted(samples.items())},
                "errors": len(errors), "error_samples": errors[:10],
                "ingested_201": len(accepted), "ingested_lost": len(lost),
                "server_alive": alive}
    finally:
        if own:
            shutil.rmtree(directory, ignore_errors=True)


def render(report: dict[str, Any]) -> str:
    lines = [f"{report['clients']} clients for {report['seconds']} s against "
             f"{report['stored_runs_at_start']:,} recorded runs (populated in "
             f"{report['populate_s']} s), {int(report['ingest_share'] * 100)}% ingest",
             f"{'kind':<16}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"]
    for kind, s in [("ALL", report["overall"]), *report["per_kind"].items()]:
        lines.append(f"{kind:<16}{s['requests']:>9}{s['rps']:>9}{s['p50_ms']:>9}"
                     f"{s['p99_ms']:>9}{s['max_ms']:>9}")
    lines.append(f"errors: {report['errors']}  ingested (201): {report['ingested_201']}  "
                 f"lost: {report['ingested_lost']}  server alive: {report['server_alive']}")
    lines += [f"  {e}" for e in report["error_samples"]]
    return "\n".join(lines)


@click.command()
@click.option("--clients", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option("--seconds", default=30.0, show_default=True, type=click.FloatRange(1, 600))
@click.option("--runs", default=100_000, show_default=True, type=click.IntRange(0))
@click.option("--ingest-share", default=0.2, show_default=True, type=click.FloatRange(0, 1))
@click.option("--dir", "directory", default=None, help="Keep the store here (default: a temp dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--variants", default=100, show_default=True, type=click.IntRange(1),
              help="distinct operation sets per dataset pair in the history")
def cli(clients: int, seconds: float, runs: int, ingest_share: float, directory: str | None,
        as_json: bool, variants: int) -> None:
    """Run the bounded server load and print the report."""
    global VARIANTS
    VARIANTS = variants
    report = run_load(clients, seconds, runs, ingest_share, directory)
    click.echo(json.dumps(report, indent=2) if as_json else render(report))
    if report["errors"] or report["ingested_lost"] or not report["server_alive"]:
        sys.exit(1)


if __name__ == "__main__":
    cli()
