"""Bounded load on a live `fll serve`: concurrent clients ingesting and querying at once.

    .venv/bin/python scripts/bench/server_load.py [--clients 50] [--seconds 30]
        [--workers 2] [--runs 100000] [--variants 100] [--ingest-share 0.2]
        [--dir DIR] [--json]

Builds a SQLite store holding ``--runs`` recorded runs (``--variants``
distinct operation sets per dataset pair, 200 pairs: by default 100, i.e.
20,000 sets, as jobs with dated inputs make: the history that hurts, since
every question over all time meets 100 sets), starts ``fll serve --workers N``
on 127.0.0.1 at a free port, then runs ``--clients`` asyncio clients for
``--seconds``, each on one keep-alive connection: each request is an
OpenLineage ingest of a new run (share ``--ingest-share``) or one of five
field-lineage queries. With ``--dir`` the store is kept and reused.

The clients speak HTTP/1.1 over asyncio streams themselves (a few tens of µs
per request, where an HTTP library costs several hundred and would be the
bottleneck on a 2-core machine); the generator's own CPU and the server's
(all its processes, from /proc) are measured and printed, so a figure limited
by the generator shows as such. Reports requests/s, p50/p95/p99/max latency
overall and per kind with the targets beside them, and errors (any exception,
timeout or unexpected status). Afterwards every run answered 201 is checked
in the store: its run row, and exactly one entry in the index of the dataset
it wrote (none lost, none doubled). Exit status 1 if there was any error, lost
or doubled run.

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
import threading
import time
from typing import Any

import click

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation,  # noqa: E402
                 TransformOperation, WriteOperation, open_store)
from fll.openlineage import info_to_event  # noqa: E402
from fll.testing.loopback import LoopbackConnection  # noqa: E402

PAIRS = 200
VARIANTS = 100  # distinct operation sets per dataset pair: the history that hurts
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


def start_server(url: str, port: int, workers: int = 1, timeout: float = 60,
                 log: Any = subprocess.PIPE, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    code = "import sys; from fll.cli import main; sys.exit(main(sys.argv[1:], prog_name='fll'))"
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("FLL_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--store", url, "--host",
                             "127.0.0.1", "--port", str(port), "--log-level", "warning"]
                            # only when asked: the script also measures servers without it
                            + (["--workers", str(workers)] if workers > 1 else []) + list(extra),
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    from fll.testing.serving import wait_until_serving
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc, timeout)
    except RuntimeError:
        proc.kill()
        proc.wait()
        raise
    return proc


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its live children (Linux /proc; 0 elsewhere)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0.0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


# the dataset pairs whose operation sets the ingests send
INGEST_PAIRS = range(0, PAIRS, 10)


def event_templates() -> list[str]:
    """One JSON body per operation set, its run id a marker replaced per request."""
    out = []
    for p in INGEST_PAIRS:
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


async def _client(n: int, port: int, until: float, ingest_share: float, templates: list[str],
                  samples: dict[str, list[float]], errors: list[str], accepted: list[str],
                  session: str, timeline: list[tuple[float, float, str]] | None = None
                  ) -> None:
    rnd = random.Random(f"{session}-{n}")
    i = 0
    conn = LoopbackConnection(port, 30)
    try:
        while time.monotonic() < until:
            i += 1
            if rnd.random() < ingest_share:
                kind, run_id = "ingest", f"load-{session}-{n}-{i}"
                method, path = "POST", "/api/v1/lineage"
                body = rnd.choice(templates).replace(_RUN_MARK, run_id).encode()
                ok = (201,)
            else:
                kind = rnd.choice(QUERY_KINDS)
                method, path, body, ok = "GET", query_path(kind, rnd), b"", (200,)
            began = time.perf_counter()
            try:
                status, data = await conn.request(method, path, body)
            except Exception as e:  # a timeout or dropped connection is an error too
                errors.append(f"{kind}: {type(e).__name__}: {e}")
                conn.close()
                continue
            took = time.perf_counter() - began
            samples.setdefault(kind, []).append(took)
            if timeline is not None:
                timeline.append((began, took, kind))
            if status not in ok:
                errors.append(f"{kind}: {status} {data[:200]!r}")
            elif kind == "ingest":
                accepted.append(run_id)
    finally:
        conn.close()


def verify_ingested(url: str, accepted: list[str]) -> tuple[list[str], list[str]]:
    """(runs answered 201 that the store does not have, runs it has more than
    once): each must have its run row and exactly one run in the index of the
    dataset its event wrote."""
    from collections import Counter

    from fll.rowkeys import MAX_TIME

    store = open_store(url)
    try:
        listed: Counter[str] = Counter()
        for p in INGEST_PAIRS:
            listed.update(r.run_id for r in store.runs(EndPoint("load", f"dst{p}"), 0,
                                                       MAX_TIME, "incoming"))
        lost = [r for r in accepted if store.run(r) is None or not listed[r]]
        doubled = [r for r in accepted if listed[r] > 1]
    finally:
        store.close()
    return lost, doubled


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _stats(values: list[float], seconds: float) -> dict[str, float]:
    return {"requests": len(values), "rps": round(len(values) / seconds, 1),
            "p50_ms": round(_percentile(values, 0.50) * 1000, 1),
            "p95_ms": round(_percentile(values, 0.95) * 1000, 1),
            "p99_ms": round(_percentile(values, 0.99) * 1000, 1),
            "max_ms": round(max(values) * 1000, 1) if values else float("nan"),
            "mean_ms": round(statistics.fmean(values) * 1000, 1) if values else float("nan")}


TARGET_RPS = 1000
TARGET_P99_MS = 150
# 1,000 requests/s on 2 cores leaves 2 ms of server CPU per request
TARGET_CPU_MS = 2.0


def _load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def worst_second(timeline: list[tuple[float, float, str]], began: float, wall0: float,
                 target_s: float) -> dict[str, Any] | None:
    """The second (by answer time) with the most requests slower than ``target_s``,
    and the slowest request: when a whole process stalls, every kind it serves
    shows its maximum in the same second."""
    if not timeline:
        return None
    seconds: dict[int, list[tuple[float, str]]] = {}
    for start, took, kind in timeline:
        seconds.setdefault(int(start + took - began), []).append((took, kind))
    worst = max(seconds, key=lambda k: (sum(t > target_s for t, _ in seconds[k]),
                                        max(t for t, _ in seconds[k])))
    slow = [(t, k) for t, k in seconds[worst] if t > target_s]
    top = max(timeline, key=lambda x: x[1])
    return {"second": worst, "utc": _utc(wall0 + worst), "requests": len(seconds[worst]),
            "over_target": len(slow), "kinds_over_target": len({k for _, k in slow}),
            "max_ms": round(max(t for t, _ in seconds[worst]) * 1000, 1),
            "slowest_ms": round(top[1] * 1000, 1), "slowest_kind": top[2],
            "slowest_answered_s": round(top[0] + top[1] - began, 2),
            "slowest_answered_utc": _utc(wall0 + top[0] + top[1] - began)}


def _utc(at: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(at)) + f".{int(at * 1000) % 1000:03d}Z"


def server_stalls(log_path: str, top: int = 8) -> tuple[int, list[str], dict[str, int]]:
    """(pauses the server logged, the longest few, how many per cause) from its
    ``--log-stalls`` lines."""
    lines = []
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.startswith("stall ")]
    except OSError:
        pass
    causes: dict[str, int] = {}
    for line in lines:
        causes[line.split()[1]] = causes.get(line.split()[1], 0) + 1

    def ms(line: str) -> float:
        try:
            return float(line.split()[2])
        except (IndexError, ValueError):
            return 0.0
    return len(lines), sorted(lines, key=ms, reverse=True)[:top], causes


class _WalWatch(threading.Thread):
    """The largest size the store's ``-wal`` file reaches, sampled every 0.1 s."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path = path
        self.largest = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.1):
            try:
                self.largest = max(self.largest, os.path.getsize(self.path))
            except OSError:
                pass

    def stop(self) -> None:
        self._done.set()
        self.join()


def run_load(clients: int = 50, seconds: float = 30, runs: int = 100_000,
             ingest_share: float = 0.2, directory: str | None = None,
             workers: int = 2, variants: int | None = None, warmup: float = 0,
             log_stalls: float | None = None, serve_args: tuple[str, ...] = ()
             ) -> dict[str, Any]:
    """Populate, serve, load and verify; returns the report (see module docstring)."""
    global VARIANTS
    VARIANTS = variants or VARIANTS
    own = directory is None
    directory = directory or tempfile.mkdtemp(prefix="fll-load-")
    path = os.path.join(os.path.abspath(directory), "fll.db")
    url = f"sqlite:///{path}"
    try:
        # a kept store (--dir) is reused as it is: populating takes a minute
        populate_s = 0.0 if os.path.exists(path) else populate(url, runs)
        load_before = _load_average()
        port = free_port()
        log_path = os.path.join(os.path.abspath(directory), "server.log")
        # a file, not a pipe nobody reads: a full pipe would block the server
        server_log = open(log_path, "w")
        server = start_server(url, port, workers, log=server_log,
                              extra=(("--log-stalls", f"{log_stalls:g}") if log_stalls else ())
                              + tuple(serve_args))
        timeline: list[tuple[float, float, str]] = []
        try:
            samples: dict[str, list[float]] = {}
            errors: list[str] = []
            accepted: list[str] = []
            templates = event_templates()
            # run ids unique to this run: a kept store (--dir) already holds earlier ones
            session = os.urandom(4).hex()

            async def drive(seconds: float, into: dict, errs: list, runs_ok: list) -> None:
                until = time.monotonic() + seconds
                await asyncio.gather(*[
                    _client(n, port, until, ingest_share, templates, into, errs, runs_ok,
                            f"{session}{'w' if into is not samples else ''}",
                            timeline if into is samples else None)
                    for n in range(clients)])

            if warmup:
                # the same load, not measured: a long-running server's caches are warm
                # (their cold cost is printed as the warm-up's rate)
                warm_samples: dict[str, list[float]] = {}
                asyncio.run(drive(warmup, warm_samples, errors, accepted))
                warm_rps = sum(map(len, warm_samples.values())) / warmup
            server_cpu0, own_cpu0 = _cpu_seconds(server.pid), time.process_time()
            # the server's stall lines from here on are the measured run's
            measured_from = os.path.getsize(log_path) if os.path.exists(log_path) else 0
            wall0, perf0 = time.time(), time.perf_counter()
            began = time.monotonic()
            wal = _WalWatch(path + "-wal")
            wal.start()
            try:
                asyncio.run(drive(seconds, samples, errors, accepted))
            finally:
                wal.stop()
            took = time.monotonic() - began
            own_cpu = time.process_time() - own_cpu0
            server_cpu = _cpu_seconds(server.pid) - server_cpu0
            alive = server.poll() is None
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            server_log.close()
        with open(log_path, "rb") as f:
            f.seek(measured_from)
            measured_log = log_path + ".measured"
            with open(measured_log, "wb") as out:
                out.write(f.read())
        n_stalls, longest, causes = server_stalls(measured_log)
        lost, doubled = verify_ingested(url, accepted)
        every = [v for vs in samples.values() for v in vs]
        load = _load_average()
        return {"clients": clients, "workers": workers, "seconds": round(took, 1),
                "serve_args": list(serve_args),
                "warmup_s": warmup, "warmup_rps": round(warm_rps, 1) if warmup else None,
                "stored_runs_at_start": runs, "variants": VARIANTS,
                "populate_s": round(populate_s, 1), "ingest_share": ingest_share,
                "overall": _stats(every, took),
                "per_kind": {k: _stats(v, took) for k, v in sorted(samples.items())},
                "errors": len(errors), "error_samples": errors[:10],
                "ingested_201": len(accepted), "ingested_lost": len(lost),
                "ingested_doubled": len(doubled),
                "server_alive": alive,
                "server_cpu_cores": round(server_cpu / took, 2),
                "server_cpu_ms_per_request": round(server_cpu / max(len(every), 1) * 1000, 2),
                "generator_cpu_cores": round(own_cpu / took, 2),
                "generator_us_per_request": round(own_cpu / max(len(every), 1) * 1e6),
                "load_average": load, "load_average_before": load_before,
                "worst_second": worst_second(timeline, perf0, wall0, TARGET_P99_MS / 1000),
                "wal_largest_mb": round(wal.largest / 2**20, 1),
                "log_stalls_ms": log_stalls, "server_stalls": n_stalls,
                "server_stall_causes": causes, "server_longest_stalls": longest,
                "target": {"rps": TARGET_RPS, "p99_ms": TARGET_P99_MS,
                           "cpu_ms_per_request": TARGET_CPU_MS}}
    finally:
        if own:
            shutil.rmtree(directory, ignore_errors=True)


def render(report: dict[str, Any]) -> str:
    warm = (f" after a {report['warmup_s']:g} s warm-up at {report['warmup_rps']} req/s"
            if report.get("warmup_s") else "")
    lines = [f"{report['clients']} clients for {report['seconds']} s{warm} against "
             f"{report['stored_runs_at_start']:,} recorded runs, {report['variants']} sets per "
             f"dataset (populated in {report['populate_s']} s), "
             f"{int(report['ingest_share'] * 100)}% ingest, server workers: {report['workers']}"
             + (f", fll serve {' '.join(report['serve_args'])}" if report.get("serve_args") else ""),
             f"{'kind':<16}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}"
             f"{'p99 ms':>9}{'max ms':>9}   p99 <= {report['target']['p99_ms']} ms"]
    for kind, s in [("ALL", report["overall"]), *report["per_kind"].items()]:
        lines.append(f"{kind:<16}{s['requests']:>9}{s['rps']:>9}{s['p50_ms']:>9}"
                     f"{s['p95_ms']:>9}{s['p99_ms']:>9}{s['max_ms']:>9}   "
                     f"{'met' if s['p99_ms'] <= report['target']['p99_ms'] else 'MISSED'}")
    o, t = report["overall"], report["target"]
    lines.append(f"req/s {o['rps']} (target >= {t['rps']}: "
                 f"{'met' if o['rps'] >= t['rps'] else 'MISSED'})   p99 {o['p99_ms']} ms "
                 f"(target <= {t['p99_ms']}: {'met' if o['p99_ms'] <= t['p99_ms'] else 'MISSED'})")
    lines.append(f"errors: {report['errors']} (target 0)  ingested (201): "
                 f"{report['ingested_201']}  lost: {report['ingested_lost']}, doubled: "
                 f"{report['ingested_doubled']} (target 0)  "
                 f"server alive: {report['server_alive']}")
    cpu_ms = report["server_cpu_ms_per_request"]
    lines.append(f"CPU: server {report['server_cpu_cores']} cores, {cpu_ms} ms per request "
                 f"(target <= {t['cpu_ms_per_request']:g} for {t['rps']} req/s on 2 cores: "
                 f"{'met' if cpu_ms <= t['cpu_ms_per_request'] else 'MISSED'}); load generator "
                 f"{report['generator_cpu_cores']} cores ({report['generator_us_per_request']} "
                 f"µs/request)")
    lines.append(f"load average before {report['load_average_before']}, after "
                 f"{report['load_average']} (on a shared machine the server gets fewer cores: "
                 f"compare CPU per request)")
    lines.append(f"the store's WAL file: at most {report['wal_largest_mb']} MB during the run")
    w = report.get("worst_second")
    if w:
        lines.append(f"worst second: {w['second']}–{w['second'] + 1} s ({w['utc']}): "
                     f"{w['over_target']} of {w['requests']} requests over "
                     f"{t['p99_ms']} ms, of {w['kinds_over_target']} kinds, max {w['max_ms']} ms; "
                     f"slowest request {w['slowest_ms']} ms ({w['slowest_kind']}), answered at "
                     f"{w['slowest_answered_s']} s ({w['slowest_answered_utc']})")
    if report.get("log_stalls_ms"):
        causes = ", ".join(f"{k} {v}" for k, v in sorted(report["server_stall_causes"].items()))
        lines.append(f"server pauses >= {report['log_stalls_ms']:g} ms (fll serve --log-stalls): "
                     f"{report['server_stalls']}{f' ({causes})' if causes else ''}; longest:")
        lines += [f"  {line}" for line in report["server_longest_stalls"]]
    lines += [f"  {e}" for e in report["error_samples"]]
    return "\n".join(lines)


@click.command()
@click.option("--clients", default=50, show_default=True, type=click.IntRange(1, 500))
@click.option("--seconds", default=30.0, show_default=True, type=click.FloatRange(1, 600))
@click.option("--runs", default=100_000, show_default=True, type=click.IntRange(0))
@click.option("--ingest-share", default=0.2, show_default=True, type=click.FloatRange(0, 1))
@click.option("--dir", "directory", default=None, help="Keep the store here (default: a temp dir).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--warmup", default=30.0, show_default=True, type=click.FloatRange(0, 600),
              help="seconds of the same load before measuring (reported apart): each worker "
                   "warms its own caches of the history's 20,000 sets")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="fll serve --workers")
@click.option("--variants", default=100, show_default=True, type=click.IntRange(1),
              help="distinct operation sets per dataset pair in the history")
@click.option("--log-stalls", default=50.0, show_default=True, type=click.FloatRange(0),
              help="fll serve --log-stalls MS: the server logs its pauses of at least MS ms "
                   "and the longest are printed (0: off)")
@click.option("--serve-arg", "serve_args", multiple=True, metavar="ARG",
              help="one more argument for fll serve (repeatable), e.g. --serve-arg=--no-gc-freeze")
def cli(clients: int, seconds: float, runs: int, ingest_share: float, directory: str | None,
        as_json: bool, warmup: float, workers: int, variants: int, log_stalls: float,
        serve_args: tuple[str, ...]) -> None:
    """Run the bounded server load and print the report."""
    report = run_load(clients, seconds, runs, ingest_share, directory, workers, variants, warmup,
                      log_stalls or None, serve_args)
    click.echo(json.dumps(report, indent=2) if as_json else render(report))
    if report["errors"] or report["ingested_lost"] or report["ingested_doubled"] \
            or not report["server_alive"]:
        sys.exit(1)


if __name__ == "__main__":
    cli()
