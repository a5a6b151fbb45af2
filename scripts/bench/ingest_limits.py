"""What one very wide OpenLineage event costs `fll serve`, with and without the field cap.

    .venv/bin/python scripts/bench/ingest_limits.py [--fields 40000] [--json]

Builds a COMPLETE event whose one output has ``--fields`` columns, each read from
one input column (two column-lineage fields counted per column; ~7.8 MB of JSON
at 40,000 columns, under the 10 MiB body limit), starts ``fll serve`` on
127.0.0.1 twice on a fresh SQLite store: once with the cap lifted (what every
server did before the cap) and once with the default ``--max-fields``; posts
the event once to each and prints the answer, the seconds it took and how much
the server's peak resident memory (VmHWM) grew, in MB and in MB per MB of body.

This script must never talk to anything but 127.0.0.1 and always stops the
servers it started.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import click
import httpx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from fll.server.guard import DEFAULT_MAX_FIELDS  # noqa: E402
from fll.testing.serving import wait_until_serving  # noqa: E402


def wide_event(fields: int) -> dict:
    lineage = {f"column_{i:06d}_with_a_long_descriptive_name": {"inputFields": [
        {"namespace": "in", "name": "a", "field": f"source_column_{i:06d}",
         "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]}]}
        for i in range(fields)}
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z",
            "run": {"runId": "wide-run"}, "job": {"namespace": "ns", "name": "job"},
            "producer": "https://example.com/fll-bench",
            "inputs": [{"namespace": "in", "name": "a"}],
            "outputs": [{"namespace": "out", "name": "wide",
                         "facets": {"columnLineage": {"fields": lineage}}}]}


def peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one(body: bytes, max_fields: int, workdir: str) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = f"sqlite:///{workdir}/cap{max_fields}.db"
    proc = subprocess.Popen([sys.executable, "-m", "fll.cli", "serve", "--store", store,
                             "--host", "127.0.0.1", "--port", str(port), "--log-level",
                             "warning", "--max-fields", str(max_fields)],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, 60)
        before = peak_mb(proc.pid)
        began = time.monotonic()
        r = httpx.post(base + "/api/v1/lineage", content=body, timeout=600,
                       headers={"Content-Type": "application/json"})
        took = time.monotonic() - began
        grew = peak_mb(proc.pid) - before
    finally:
        proc.kill()
        proc.wait(timeout=10)
    mb = len(body) / 1e6
    return {"max_fields": max_fields, "status": r.status_code, "seconds": round(took, 2),
            "peak_rss_growth_mb": round(grew, 1), "mb_per_body_mb": round(grew / mb, 1)}


@click.command()
@click.option("--fields", default=40_000, show_default=True, help="Output columns.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def main(fields: int, as_json: bool) -> None:
    body = json.dumps(wide_event(fields)).encode()
    workdir = tempfile.mkdtemp(prefix="fll-bench-")
    try:
        rows = [one(body, 10**9, workdir), one(body, DEFAULT_MAX_FIELDS, workdir)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if as_json:
        click.echo(json.dumps({"body_mb": len(body) / 1e6, "fields": 2 * fields, "runs": rows}))
        return
    click.echo(f"event: {2 * fields} column-lineage fields, {len(body) / 1e6:.1f} MB body")
    for row in rows:
        cap = "no cap" if row["max_fields"] == 10**9 else f"--max-fields {row['max_fields']}"
        click.echo(f"  {cap:<22} HTTP {row['status']}  {row['seconds']:>6.2f} s  peak RSS "
                   f"+{row['peak_rss_growth_mb']:.0f} MB ({row['mb_per_body_mb']:.1f} MB per "
                   f"MB of body)")


if __name__ == "__main__":
    main()
