"""A generated warehouse sent to a live `fll serve` as OpenLineage events: every
answer checked against a plain walk of the generated graph, and timed.

    PYTHONPATH=. .venv/bin/python scripts/bench/warehouse.py [--datasets 2000]
        [--runs-per-day 3] [--days 5] [--seed 7] [--workers 1] [--cache-sets 32768] [--cache-mb 512]
        [--rss-budget-mb 1024] [--one-hop 300] [--deep 60] [--candidates 300]
        [--start-lineage half|all|none] [--schemas] [--connections N] [--dir DIR] [--fll PATH]

The warehouse (seeded, so the same arguments give the same events): ``--datasets``
datasets in three namespaces (``postgres://db:5432``, ``s3://lake``,
``bigquery``), each with 20–200 columns (most narrow, a few 200 wide), in 26
layers: layer 0 are sources, every other dataset is written by one job that
reads 1–3 datasets of earlier layers (always one of the layer just before), so
there are chains of 25 hops. Each output column comes from 1–4 input columns
(DIRECT/IDENTITY, TRANSFORMATION or AGGREGATION), some also from an INDIRECT
FILTER or JOIN column; some jobs add a dataset-wide INDIRECT/FILTER input (the
facet's ``dataset`` list, which applies to every output column). Every job runs
``--runs-per-day`` times a day over ``--days`` days; one job in ten changes
its column lineage from day 3 on (other inputs for a fifth of its columns), so
answers over a time range differ by range. Each run is a START event (the
column lineage of the first half of the output columns; ``--start-lineage
all|none`` for all of it or none) then a COMPLETE event (all of it), run ids UUIDs, eventTime advancing; the totals are printed. With ``--schemas`` every dataset an
event names carries its schema facet (a type per column), as Spark's and
dbt's producers send them, and every deep answer's ``fieldType`` is checked.

Then: starts ``fll serve`` (an SQLite store in a temp dir, or ``--dir``; the
``fll`` next to this Python unless ``--fll``; ``--cache-sets``, ``--cache-mb`` and
``--workers`` passed on) on 127.0.0.1 at a free port; sends every event over
HTTP/1.1 keep-alive with ``--connections`` concurrent connections (by default
as many as the server takes ingests at once on the store; a run's
START and COMPLETE on one connection, in that order, so its start time is its
START's); reports events/s and the store's bytes. Then asks, and checks each
answer against a walk of the generated graph (the runs whose start falls in
the range asked, as fll's ranges are ``[start, end)`` on a run's start):

* one hop: ``GET /v3/namespaces/{ns}/datasets/{ds}/lineage/fields/{field}
  ?direction=incoming&level=1&start=..&end=..`` over whole days (all days,
  days before the change, days after it, one day): the set of input fields;
* deep: ``GET /api/v1/column-lineage?nodeId=datasetField:ns:ds:f&depth=25``
  (all time): the graph's nodes and its edges (each node's inEdges), as a
  breadth-first walk of 25 hops gives them;

each list asked twice on one keep-alive connection per pass, the second
pass the warm figure (the first pass's timings are printed too; with
``--workers`` above 1 the kernel may give the second pass's connection to
another worker, whose caches are cold). Then the server is restarted (SIGTERM, same store)
and the largest deep question (of ``--candidates`` fields of the top layers,
the one whose 25-hop walk has the most edges) is the first request, timed and
checked; then ``fll --store URL lineage NS:NAME:FIELD --depth 25 --format
json`` is timed as a whole process. The server's RSS (all its processes,
from /proc, sampled every 0.2 s, and their VmHWM) is compared with
``--rss-budget-mb`` (the caches' share is ``--cache-mb`` per process).

Prints a table of figures, targets and ratios. Exit status 1 if any answer
was wrong (or a request failed); a missed target only shows in the table.

This script must never talk to anything but 127.0.0.1; the server is stopped
by its pid in a ``finally``; every request has a timeout.
"""
from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import click

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from fll.testing.loopback import LoopbackConnection  # noqa: E402

NAMESPACES = ("postgres://db:5432", "s3://lake", "bigquery")
LAYERS = 26  # layer 0 = sources: chains of 25 hops
DEPTH = 25
# 2026-01-05T00:00:00Z: five whole days, well in the past (column-lineage's default end is now)
DAY0_S = 1_767_571_200
DAY_S = 86_400
CHANGE_DAY = 2  # 0-based: lineage of the changing jobs differs from day 3 on
DIRECT_TAGS = (("DIRECT", "IDENTITY"), ("DIRECT", "TRANSFORMATION"), ("DIRECT", "AGGREGATION"))
INDIRECT_TAGS = (("INDIRECT", "FILTER"), ("INDIRECT", "JOIN"))

TARGET_ONE_HOP_P95_MS = 50
TARGET_DEEP_P95_MS = 300
TARGET_RESTART_S = 1.0
TARGET_CLI_S = 1.5
TARGET_INGEST_EPS = 800
# on Bigtable and HBase (a round trip added per store call): deep p95, the
# largest after a restart, and ingest have targets of their own
REMOTE_TARGETS = {"deep_ms": 500, "restart_s": 2.0, "ingest_eps": 300}
REQUEST_TIMEOUT = 120.0
PROGRESS_S = 30.0  # seconds between two progress lines of the ingest

#: column types of the schema facets (``--schemas``): each column has one, for good
TYPES = ("bigint", "string", "double", "timestamp", "boolean", "decimal(18,2)", "date")

_RUN_MARK = b"@@RUN-ID@@"
_TIME_MARK = b"@@EVENT-TIME@@"

Field = tuple[int, str]  # (dataset index, column)


# -- the warehouse -------------------------------------------------------------

class Warehouse:
    """Datasets, jobs, their column lineage (one or two versions) and runs."""

    def __init__(self, n_datasets: int, days: int, runs_per_day: int, seed: int,
                 start_lineage: str = "half", schemas: bool = False):
        rnd = random.Random(seed)
        self.start_lineage = start_lineage
        self.schemas = schemas
        self.days = days
        self.ns: list[str] = []
        self.name: list[str] = []
        self.cols: list[list[str]] = []
        self.layer: list[int] = []
        per_layer = max(1, n_datasets // LAYERS)
        for i in range(n_datasets):
            layer = min(i // per_layer, LAYERS - 1)
            ns = NAMESPACES[(i * 7 + layer) % len(NAMESPACES)]
            self.ns.append(ns)
            prefix = "raw" if layer == 0 else f"l{layer:02d}"
            self.name.append(f"public.{prefix}_t{i:05d}" if ns.startswith("postgres")
                             else f"warehouse/{prefix}/t{i:05d}")
            r = rnd.random()
            if rnd.random() < 0.02:
                width = 200  # a few wide tables
            else:
                width = 20 + int(180 * r ** 3)
            self.cols.append([f"c{j:03d}" for j in range(width)])
            self.layer.append(layer)
        by_layer: dict[int, list[int]] = defaultdict(list)
        for i, layer in enumerate(self.layer):
            by_layer[layer].append(i)
        # jobs: one per dataset of layer >= 1
        self.job_of: dict[int, str] = {}
        self.inputs: dict[int, list[int]] = {}
        # versions[d] = [lineage] or [v1, v2]; lineage: out col -> {input field: tags}
        self.versions: dict[int, list[dict[str, dict[Field, tuple]]]] = {}
        self.wide: dict[int, list[dict[Field, tuple]]] = {}
        for d in range(n_datasets):
            layer = self.layer[d]
            if layer == 0:
                continue
            lane = by_layer[layer].index(d)
            prev = by_layer[layer - 1]
            primary = prev[lane % len(prev)]
            ins = [primary]
            extra = rnd.choices((0, 1, 2), (0.5, 0.35, 0.15))[0]
            for _ in range(extra):
                lay = max(0, layer - rnd.randint(1, 3))
                cand = by_layer[lay]
                near = cand[(lane + rnd.randint(-2, 2)) % len(cand)]
                if near not in ins:
                    ins.append(near)
            self.inputs[d] = ins
            self.job_of[d] = f"etl.{self.name[d].replace('/', '.')}"
            v1 = self._lineage(rnd, d, ins)
            self.versions[d] = [v1]
            wide: dict[Field, tuple] = {}
            if rnd.random() < 0.1:
                src = rnd.choice(ins)
                wide[(src, rnd.choice(self.cols[src]))] = (INDIRECT_TAGS[0],)
            self.wide[d] = [wide]
            if rnd.random() < 0.1:
                v2 = {c: dict(v) for c, v in v1.items()}
                outs = sorted(v2)
                for c in rnd.sample(outs, max(1, len(outs) // 5)):
                    v2[c] = self._column_inputs(rnd, ins, outs.index(c), len(outs))
                self.versions[d].append(v2)
                self.wide[d].append(wide)
        # runs: (start_s, complete_s, dataset, version, run id)
        self.runs: list[tuple[int, int, int, int, str]] = []
        for d in sorted(self.versions):
            for day in range(days):
                for k in range(runs_per_day):
                    start = DAY0_S + day * DAY_S + int((k + rnd.random() * 0.8) * DAY_S
                                                      / runs_per_day)
                    v = 1 if len(self.versions[d]) > 1 and day >= CHANGE_DAY else 0
                    rid = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
                    self.runs.append((start, start + rnd.randint(60, 3000), d, v, rid))
        self.runs.sort()
        self._templates: dict[tuple[int, int, str], bytes] = {}

    def _column_inputs(self, rnd: random.Random, ins: list[int], j: int, width: int
                       ) -> dict[Field, tuple]:
        """1–4 inputs near the same relative position of the primary input
        (pass-through with transforms), some from another input, some INDIRECT."""
        k = rnd.choices((1, 2, 3, 4), (0.45, 0.3, 0.15, 0.1))[0]
        found: dict[Field, tuple] = {}
        for n in range(k):
            src = ins[0] if (n == 0 or len(ins) == 1 or rnd.random() < 0.7) else rnd.choice(ins[1:])
            cols = self.cols[src]
            pos = int(j * len(cols) / width) + rnd.randint(-2, 2)
            col = cols[max(0, min(len(cols) - 1, pos))]
            tag = DIRECT_TAGS[0] if k == 1 and n == 0 else rnd.choice(DIRECT_TAGS)
            found[(src, col)] = (tag,)
        if rnd.random() < 0.08:
            src = rnd.choice(ins)
            found.setdefault((src, rnd.choice(self.cols[src][:5])), (rnd.choice(INDIRECT_TAGS),))
        return found

    def _lineage(self, rnd: random.Random, d: int, ins: list[int]) -> dict[str, dict]:
        outs = self.cols[d]
        return {c: self._column_inputs(rnd, ins, j, len(outs)) for j, c in enumerate(outs)}

    # -- what a run says -----------------------------------------------------
    def edges(self, d: int, v: int) -> dict[str, dict[Field, tuple]]:
        """Output column -> inputs (with tags) of version ``v``, wide inputs included."""
        wide = self.wide[d][v]
        out = {}
        for c, ins in self.versions[d][v].items():
            merged = dict(ins)
            for f, t in wide.items():
                merged[f] = merged.get(f, ()) + tuple(x for x in t if x not in merged.get(f, ()))
            out[c] = merged
        return out

    def event(self, run: tuple[int, int, int, int, str], kind: str) -> bytes:
        """The run's event: its job's template (built once per version and kind)
        with the run id and time put in."""
        start, complete, d, v, rid = run
        key = (d, v, kind)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._event(d, v, kind)
        at = start if kind == "START" else complete
        return template.replace(_RUN_MARK, rid.encode()).replace(
            _TIME_MARK, datetime.fromtimestamp(at, timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.000Z").encode())

    def _event(self, d: int, v: int, kind: str) -> bytes:
        lineage = self.versions[d][v]
        outs = self.cols[d]
        shown = (outs if kind == "COMPLETE" or self.start_lineage == "all"
                 else outs[:max(1, len(outs) // 2)])
        fields = {}
        for c in shown:
            fields[c] = {"inputFields": [
                {"namespace": self.ns[s], "name": self.name[s], "field": col,
                 "transformations": [{"type": t, "subtype": st, "description": "",
                                      "masking": False} for t, st in tags]}
                for (s, col), tags in sorted(lineage[c].items())]}
        facet: dict[str, Any] = {
            "_producer": "urn:fll-bench:warehouse",
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": fields}
        wide = self.wide[d][v]
        if wide:
            facet["dataset"] = [
                {"namespace": self.ns[s], "name": self.name[s], "field": col,
                 "transformations": [{"type": t, "subtype": st, "description": "",
                                      "masking": False} for t, st in tags]}
                for (s, col), tags in sorted(wide.items())]
        def named(i: int, **more: Any) -> dict[str, Any]:
            facets = dict(more)
            if self.schemas:  # as producers send them: every dataset's schema
                facets["schema"] = {
                    "_producer": "urn:fll-bench:warehouse",
                    "_schemaURL": "https://openlineage.io/spec/facets/1-1-1/"
                                  "SchemaDatasetFacet.json",
                    "fields": [{"name": c, "type": self.col_type(i, c)} for c in self.cols[i]]}
            return {"namespace": self.ns[i], "name": self.name[i]} | (
                {"facets": facets} if facets else {})
        ev = {
            "eventType": kind,
            "eventTime": _TIME_MARK.decode(),
            "producer": "urn:fll-bench:warehouse",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": _RUN_MARK.decode()},
            "job": {"namespace": "warehouse", "name": self.job_of[d]},
            "inputs": [named(s) for s in self.inputs[d]],
            "outputs": [named(d, **({} if kind == "START" and self.start_lineage == "none"
                                    else {"columnLineage": facet}))],
        }
        return json.dumps(ev, separators=(",", ":")).encode()

    # -- the plain walk -----------------------------------------------------
    def graph(self, start_s: int | None = None, end_s: int | None = None
              ) -> dict[Field, set[Field]]:
        """Field -> its input fields, over the runs whose start is in [start, end)."""
        versions: dict[int, set[int]] = defaultdict(set)
        for s, _c, d, v, _r in self.runs:
            if (start_s is None or s >= start_s) and (end_s is None or s < end_s):
                versions[d].add(v)
        g: dict[Field, set[Field]] = {}
        for d, vs in versions.items():
            for v in vs:
                for c, ins in self.edges(d, v).items():
                    g.setdefault((d, c), set()).update(ins)
        return g

    @staticmethod
    def walk(g: dict[Field, set[Field]], root: Field, depth: int
             ) -> tuple[set[Field], set[tuple[Field, Field]]]:
        """(nodes, (upstream, downstream) edges) of a breadth-first walk of ``depth`` hops."""
        nodes, edges = {root}, set()
        seen, frontier = {root}, [root]
        for _ in range(depth):
            nxt = []
            for f in frontier:
                for up in g.get(f, ()):
                    edges.add((up, f))
                    nodes.add(up)
                    if up not in seen:
                        seen.add(up)
                        nxt.append(up)
            frontier = nxt
            if not frontier:
                break
        return nodes, edges

    def column_edges(self) -> int:
        return sum(len(ins) for d in self.versions for v in range(len(self.versions[d]))
                   for ins in self.edges(d, v).values())

    def node_id(self, f: Field) -> str:
        return f"datasetField:{self.ns[f[0]]}:{self.name[f[0]]}:{f[1]}"

    def col_type(self, d: int, c: str) -> str:
        """The type every schema facet gives column ``c`` of dataset ``d``."""
        return TYPES[(d * 31 + int(c[1:])) % len(TYPES)]

    @functools.cached_property
    def _by_node(self) -> dict[str, Field]:
        return {self.node_id((d, c)): (d, c) for d, cols in enumerate(self.cols) for c in cols}

    def field_of(self, node_id: str) -> Field | None:
        """The field a node id names (None: none of the warehouse's)."""
        return self._by_node.get(node_id)


# -- the server --------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def same_fll_env() -> dict[str, str]:
    """The environment for a server or CLI process that runs this checkout's fll
    (as the other benchmarks do), whatever fll the virtualenv installed."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {**os.environ, "PYTHONPATH": root}


def fll_command(given: str | None) -> list[str]:
    if given:
        return [given]
    beside = os.path.join(os.path.dirname(sys.executable), "fll")
    if os.path.exists(beside):
        return [beside]
    return [sys.executable, "-c",
            "import sys; from fll.cli import main; sys.exit(main(sys.argv[1:], prog_name='fll'))"]


#: more options of every `fll serve` this benchmark starts (set from the command line)
SERVE_ARGS: list[str] = []


def start_server(fll: list[str], url: str, port: int, workers: int, cache_sets: int, cache_mb: int,
                 log: Any) -> subprocess.Popen:
    env = same_fll_env()
    env.pop("FLL_TOKEN", None)
    env["NO_PROXY"] = "127.0.0.1"
    proc = subprocess.Popen(fll + ["--store", url, "serve", "--host", "127.0.0.1", "--port",
                                   str(port), "--log-level", "warning", "--cache-sets",
                                   str(cache_sets), "--cache-mb", str(cache_mb),
                                   "--workers", str(workers)] + SERVE_ARGS,
                            env=env, stdout=subprocess.DEVNULL, stderr=log)
    from fll.testing.serving import wait_until_serving
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc, 120)
    except RuntimeError:
        stop_server(proc)
        raise
    return proc


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Backend:
    """Where the store lives: ``sqlite`` (a file in the bench's directory), or
    ``bigtable`` (Google's emulator) and ``hbase`` (fll's Thrift test double,
    framed) started here on 127.0.0.1 and reached through a `LatencyProxy`
    that adds ``rtt_ms`` to every round trip and counts them, in a process
    of its own (`ProxyProcess`: in this one its timers would wait for this
    client's GIL). Stopped by pid."""

    def __init__(self, kind: str, directory: str, rtt_ms: float):
        self.kind, self.directory, self.rtt_ms = kind, directory, rtt_ms
        self.proxy: Any = None
        self._emulator: Any = None
        self._double: subprocess.Popen | None = None

    def start(self) -> str:
        """The store URL."""
        if self.kind == "sqlite":
            if self.rtt_ms:
                raise click.UsageError("--rtt-ms: SQLite is embedded, it has no round trips")
            return f"sqlite:///{os.path.join(self.directory, 'fll.db')}"
        from fll.testing.latency import ProxyProcess
        if self.kind == "bigtable":
            from fll.store.emulator import Emulator, find_emulator
            binary = find_emulator()
            if binary is None:
                raise click.UsageError("--backend bigtable: cbtemulator is not installed")
            self._emulator = Emulator(binary).start()
            host, port = self._emulator.host.rsplit(":", 1)
            self.proxy = ProxyProcess((host, int(port)), self.rtt_ms).start()
            return f"bigtable://warehouse/warehouse/fll?emulator=127.0.0.1:{self.proxy.port}"
        self._double = subprocess.Popen(
            [sys.executable, "-m", "fll.testing.hbase_thrift", "--framed", "--port", "0"],
            env=same_fll_env(), stdout=subprocess.PIPE, text=True)
        assert self._double.stdout is not None
        line = self._double.stdout.readline()
        if not line.startswith("port "):
            self.stop()
            raise RuntimeError(f"the HBase Thrift double did not start: {line!r}")
        self.proxy = ProxyProcess(("127.0.0.1", int(line.split()[1])), self.rtt_ms).start()
        return f"hbase://127.0.0.1:{self.proxy.port}/fll?transport=framed"

    def pid(self) -> int | None:
        """The store's own process (the emulator, the double); None: embedded."""
        proc = self._double if self._emulator is None else self._emulator.proc
        return None if proc is None else proc.pid

    def turns(self) -> int | None:
        """Round trips made to the store so far (None: embedded)."""
        return None if self.proxy is None else self.proxy.turns

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        if self._emulator is not None:
            self._emulator.stop()
        if self._double is not None and self._double.poll() is None:
            self._double.terminate()
            try:
                self._double.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._double.kill()
                self._double.wait()


def hop_levels(g: dict[Field, set[Field]], root: Field, depth: int) -> int:
    """How many hops a breadth-first walk of ``depth`` hops goes before it runs out."""
    seen, frontier, levels = {root}, [root], 0
    for _ in range(depth):
        nxt = [up for f in frontier for up in g.get(f, ()) if up not in seen]
        nxt = list(dict.fromkeys(nxt))
        seen.update(nxt)
        if not nxt:
            break
        levels += 1
        frontier = nxt
    return levels


def _pids(pid: int) -> list[int]:
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    return pids


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class RssWatch(threading.Thread):
    """The largest sum of VmRSS over the server's processes, every 0.2 s, and
    the largest VmHWM (a process's own peak) seen."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.hwm_kb = 0
        self._done = threading.Event()

    def sample(self) -> None:
        pids = _pids(self.pid)
        self.peak_kb = max(self.peak_kb, sum(_status_kb(p, "VmRSS") for p in pids))
        self.hwm_kb = max(self.hwm_kb, sum(_status_kb(p, "VmHWM") for p in pids))

    def run(self) -> None:
        while not self._done.wait(0.2):
            self.sample()

    def stop(self) -> None:
        self.sample()
        self._done.set()
        self.join()


async def ingest(wh: Warehouse, port: int, connections: int, errors: list[str]
                 ) -> tuple[int, int]:
    """Every run's START then COMPLETE, runs in time order shared by the connections;
    returns (events sent, bytes sent)."""
    runs = iter(wh.runs)
    sent = [0, 0]

    async def worker() -> None:
        conn = LoopbackConnection(port, REQUEST_TIMEOUT)
        try:
            for run in runs:  # one iterator, shared: each run goes to one connection
                for kind in ("START", "COMPLETE"):
                    body = wh.event(run, kind)
                    try:
                        status, data = await conn.request("POST", "/api/v1/lineage", body)
                    except Exception as e:
                        errors.append(f"ingest {run[4]} {kind}: {type(e).__name__}: {e}")
                        continue
                    sent[0] += 1
                    sent[1] += len(body)
                    # a START without column lineage is "nothing to record" (202)
                    ok = ((200, 201, 202) if kind == "START" and wh.start_lineage == "none"
                          else (200, 201))
                    if status not in ok:
                        errors.append(f"ingest {run[4]} {kind}: {status} {data[:300]!r}")
        finally:
            conn.close()
    async def progress() -> None:
        """A line on stderr every `PROGRESS_S` seconds: a full ingest takes minutes."""
        total, began = 2 * len(wh.runs), time.monotonic()
        while True:
            await asyncio.sleep(PROGRESS_S)
            took = time.monotonic() - began
            print(f"  ingesting: {sent[0]:,} of {total:,} events in {took:.0f} s "
                  f"({sent[0] / took:.0f}/s)", file=sys.stderr, flush=True)

    shown = asyncio.ensure_future(progress())
    try:
        await asyncio.gather(*[worker() for _ in range(connections)])
    finally:
        shown.cancel()
    return sent[0], sent[1]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _dir_bytes(directory: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(directory):
        for f in files:
            if f.startswith("fll.db"):
                try:
                    total += os.path.getsize(os.path.join(dirpath, f))
                except OSError:
                    pass
    return total


# -- questions and their checks -------------------------------------------------

def one_hop_path(wh: Warehouse, f: Field, start_s: int, end_s: int) -> str:
    d, col = f
    return (f"/v3/namespaces/{quote(wh.ns[d], safe='')}/datasets/{quote(wh.name[d], safe='')}"
            f"/lineage/fields/{quote(col, safe='')}?direction=incoming&start={start_s}"
            f"&end={end_s}&level=1")


def deep_path(wh: Warehouse, f: Field) -> str:
    return (f"/api/v1/column-lineage?nodeId={quote(wh.node_id(f), safe='')}&depth={DEPTH}"
            f"&withDownstream=false")


def check_one_hop(wh: Warehouse, expected: set[Field], data: bytes) -> str | None:
    body = json.loads(data)
    got = set()
    for group in body.get("incoming") or []:
        ds = group["dataset"]
        for name in group["fields"]:
            got.add((ds["namespace"], ds["dataset"], name))
    want = {(wh.ns[d], wh.name[d], c) for d, c in expected}
    if got != want:
        return (f"missing {sorted(want - got)[:5]} ({len(want - got)}), "
                f"extra {sorted(got - want)[:5]} ({len(got - want)})")
    return None


def check_deep(wh: Warehouse, nodes: set[Field], edges: set[tuple[Field, Field]],
               data: bytes) -> str | None:
    body = json.loads(data)
    got_nodes, got_edges = set(), set()
    types = []
    for node in body.get("graph", []):
        got_nodes.add(node["id"])
        f = wh.field_of(node["id"]) if wh.schemas else None
        if f is not None and node["data"].get("fieldType") != wh.col_type(*f):
            types.append(f"{node['id']} {node['data'].get('fieldType')!r}")
        for e in node.get("inEdges", []):
            if e["origin"] != node["id"]:
                return f"inEdge {e} of {node['id']} does not have the node as origin"
            got_edges.add((e["destination"], e["origin"]))
    want_nodes = {wh.node_id(f) for f in nodes}
    want_edges = {(wh.node_id(u), wh.node_id(d)) for u, d in edges}
    problems = []
    if got_nodes != want_nodes:
        problems.append(f"nodes: missing {sorted(want_nodes - got_nodes)[:3]} "
                        f"({len(want_nodes - got_nodes)}), extra "
                        f"{sorted(got_nodes - want_nodes)[:3]} ({len(got_nodes - want_nodes)})")
    if got_edges != want_edges:
        problems.append(f"edges: missing {sorted(want_edges - got_edges)[:3]} "
                        f"({len(want_edges - got_edges)}), extra "
                        f"{sorted(got_edges - want_edges)[:3]} ({len(got_edges - want_edges)})")
    if types:
        problems.append(f"fieldType not the schema's: {types[:3]} ({len(types)})")
    return "; ".join(problems) or None


def check_cli(wh: Warehouse, nodes: set[Field], edges: set[tuple[Field, Field]],
              out: bytes) -> str | None:
    """`fll lineage --format json`: its nodes and (source, destination) edges."""
    body = json.loads(out)
    got_nodes = {n["id"] for n in body.get("nodes", [])} | {body["field"]["id"]}
    got_edges = {(e["source"], e["destination"]) for e in body.get("edges", [])}
    want_nodes = {wh.node_id(f)[len("datasetField:"):] for f in nodes}
    want_edges = {(wh.node_id(u)[len("datasetField:"):], wh.node_id(d)[len("datasetField:"):])
                  for u, d in edges}
    problems = []
    if got_nodes != want_nodes:
        problems.append(f"nodes: missing {sorted(want_nodes - got_nodes)[:3]} "
                        f"({len(want_nodes - got_nodes)}), extra "
                        f"{sorted(got_nodes - want_nodes)[:3]} ({len(got_nodes - want_nodes)})")
    if got_edges != want_edges:
        problems.append(f"edges: missing {sorted(want_edges - got_edges)[:3]} "
                        f"({len(want_edges - got_edges)}), extra "
                        f"{sorted(got_edges - want_edges)[:3]} ({len(got_edges - want_edges)})")
    return "; ".join(problems) or None


def _store_cpu(ingest: dict) -> str:
    """", the store's N s" where the store is a process of its own."""
    cpu = ingest.get("store_cpu_s")
    return "" if cpu is None else f", the store's {cpu} s"


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its live children (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for p in _pids(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def run_bench(n_datasets: int, days: int, runs_per_day: int, seed: int, workers: int,
              cache_sets: int, cache_mb: int, rss_budget_mb: float, n_one_hop: int, n_deep: int,
              n_candidates: int, connections: int, directory: str | None,
              fll_path: str | None, start_lineage: str = "half",
              reuse: bool = False, backend_kind: str = "sqlite",
              rtt_ms: float = 0.0, schemas: bool = False) -> dict[str, Any]:
    t_all = time.monotonic()
    t0 = time.monotonic()
    wh = Warehouse(n_datasets, days, runs_per_day, seed, start_lineage, schemas)
    totals = {"datasets": n_datasets, "jobs": len(wh.versions),
              "changing_jobs": sum(len(v) > 1 for v in wh.versions.values()),
              "runs": len(wh.runs), "events": 2 * len(wh.runs),
              "column_edges": wh.column_edges(),
              "columns": sum(len(c) for c in wh.cols)}
    generate_s = time.monotonic() - t0
    print(f"generated in {generate_s:.1f} s: " + ", ".join(f"{k} {v:,}" for k, v in totals.items()),
          flush=True)

    own = directory is None
    directory = os.path.abspath(directory or tempfile.mkdtemp(prefix="fll-warehouse-"))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "fll.db")
    if os.path.exists(path) and not reuse:
        raise click.UsageError(f"{path} exists: give an empty --dir (the bench ingests "
                               f"anew), or --reuse it (same generation options)")
    if reuse and (backend_kind != "sqlite" or not os.path.exists(path)):
        raise click.UsageError(f"--reuse: {path} does not exist" if backend_kind == "sqlite"
                               else "--reuse: only an SQLite store outlives the bench")
    backend = Backend(backend_kind, directory, rtt_ms)
    url = backend.start()
    fll = fll_command(fll_path)
    log_path = os.path.join(directory, "server.log")
    server_log = open(log_path, "w")
    errors: list[str] = []
    wrong: list[str] = []
    report: dict[str, Any] = {"totals": totals, "generate_s": round(generate_s, 1),
                              "start_lineage": start_lineage, "schemas": schemas,
                              "workers": workers, "cache_sets": cache_sets, "cache_mb": cache_mb,
                              "rss_budget_mb": rss_budget_mb, "fll": " ".join(fll),
                              "backend": backend_kind, "rtt_ms": rtt_ms,
                              "connections": connections}
    server: subprocess.Popen | None = None
    watch: RssWatch | None = None
    try:
        port = free_port()
        server = start_server(fll, url, port, workers, cache_sets, cache_mb, server_log)
        watch = RssWatch(server.pid)
        watch.start()

        # -- ingest (with --reuse: the store holds it already; the figures say so)
        t0, cpu0, own0 = time.monotonic(), _cpu_seconds(server.pid), time.process_time()
        turns0, store_pid = backend.turns(), backend.pid()
        store0 = None if store_pid is None else _cpu_seconds(store_pid)
        events, sent_bytes = (0, 0) if reuse else asyncio.run(ingest(wh, port, connections,
                                                                      errors))
        took = time.monotonic() - t0
        server_cpu, own_cpu = _cpu_seconds(server.pid) - cpu0, time.process_time() - own0
        store_cpu = None if store0 is None else _cpu_seconds(store_pid) - store0
        report["ingest"] = {"events": events, "seconds": round(took, 1),
                            "events_per_s": round(events / took, 1) if events else None,
                            "mb_sent": round(sent_bytes / 2**20, 1),
                            "store_mb": (round(_dir_bytes(directory) / 2**20, 1)
                                         if backend_kind == "sqlite" else None),
                            "server_cpu_s": round(server_cpu, 1),
                            "server_ms_per_event": round(server_cpu / max(events, 1) * 1000, 2),
                            "client_cpu_s": round(own_cpu, 1),
                            # the emulator's or the double's: a real store's is elsewhere
                            "store_cpu_s": None if store_cpu is None else round(store_cpu, 1),
                            "round_trips_per_event": (
                                None if turns0 is None or not events
                                else round((backend.turns() - turns0) / events, 1)),
                            "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg())}
        report["rss_after_ingest_mb"] = round(watch.peak_kb / 1024, 1)
        print(f"ingested {events:,} events in {took:.1f} s ({events / took:.0f}/s), "
              f"{sent_bytes / 2**20:.1f} MB sent, store {report['ingest']['store_mb']} MB, "
              f"{len(errors)} errors; server CPU {server_cpu:.1f} s "
              f"({report['ingest']['server_ms_per_event']} ms/event), this script's "
              f"{own_cpu:.1f} s{_store_cpu(report['ingest'])}; "
              f"{report['ingest']['round_trips_per_event']} store round "
              f"trips per event; load {report['ingest']['load_average']}", flush=True)

        # -- the expected graphs
        rnd = random.Random(seed + 1)
        ranges = {"all days": (DAY0_S, DAY0_S + days * DAY_S),
                  "before the change": (DAY0_S, DAY0_S + CHANGE_DAY * DAY_S),
                  "after the change": (DAY0_S + CHANGE_DAY * DAY_S, DAY0_S + days * DAY_S),
                  "day 2": (DAY0_S + DAY_S, DAY0_S + 2 * DAY_S)}
        graphs = {name: wh.graph(*r) for name, r in ranges.items()}
        g_all = wh.graph()
        outputs = [(d, c) for d in sorted(wh.versions) for c in wh.cols[d]]
        changed = [(d, c) for d, vs in wh.versions.items() if len(vs) > 1
                   for c in wh.cols[d] if vs[0][c] != vs[1][c]]
        one_hop: list[tuple[Field, str]] = []
        names = list(ranges)
        for i in range(n_one_hop):
            pool = changed if (changed and i % 3 == 0) else outputs
            one_hop.append((rnd.choice(pool), names[i % len(names)]))
        deep_pool = [f for f in outputs if wh.layer[f[0]] >= LAYERS - 4]
        deep = [rnd.choice(deep_pool) for _ in range(n_deep)]
        t0 = time.monotonic()
        expected_deep = {f: wh.walk(g_all, f, DEPTH) for f in set(deep)}
        cands = set(rnd.sample(deep_pool, min(n_candidates, len(deep_pool))))
        sizes = {f: wh.walk(g_all, f, DEPTH) for f in cands}
        sizes.update(expected_deep)
        largest = max(sizes, key=lambda f: (len(sizes[f][1]), f))
        report["walk_s"] = round(time.monotonic() - t0, 1)
        deep_edges = [len(expected_deep[f][1]) for f in deep]
        report["deep_edges"] = {"min": min(deep_edges), "median": sorted(deep_edges)[len(deep_edges) // 2],
                                "max": max(deep_edges)}
        report["largest"] = {"node": wh.node_id(largest), "nodes": len(sizes[largest][0]),
                             "edges": len(sizes[largest][1])}
        print(f"expected walks in {report['walk_s']} s; deep questions reach "
              f"{report['deep_edges']} edges; largest {report['largest']}", flush=True)

        # -- ask, check, time
        async def ask_all() -> dict[str, list[float]]:
            conn = LoopbackConnection(port, REQUEST_TIMEOUT)
            times: dict[str, list[float]] = defaultdict(list)
            try:
                for f, rname in one_hop:
                    began = time.perf_counter()
                    try:
                        status, data = await conn.request("GET", one_hop_path(wh, f, *ranges[rname]))
                    except Exception as e:
                        errors.append(f"one-hop {f}: {type(e).__name__}: {e}")
                        continue
                    times["one-hop"].append(time.perf_counter() - began)
                    if status != 200:
                        wrong.append(f"one-hop {wh.node_id(f)} {rname}: {status} {data[:200]!r}")
                        continue
                    problem = check_one_hop(wh, graphs[rname].get(f, set()), data)
                    if problem:
                        wrong.append(f"one-hop {wh.node_id(f)} {rname}: {problem}")
                for f in deep:
                    cpu0 = _cpu_seconds(server.pid)
                    began, turns = time.perf_counter(), backend.turns()
                    try:
                        status, data = await conn.request("GET", deep_path(wh, f))
                    except Exception as e:
                        errors.append(f"deep {f}: {type(e).__name__}: {e}")
                        continue
                    times["deep"].append(time.perf_counter() - began)
                    times["deep cpu"].append(_cpu_seconds(server.pid) - cpu0)
                    if turns is not None:
                        trips[False].append((backend.turns() - turns, levels[f]))
                    if status != 200:
                        wrong.append(f"deep {wh.node_id(f)}: {status} {data[:200]!r}")
                        continue
                    problem = check_deep(wh, *expected_deep[f], data)
                    if problem:
                        wrong.append(f"deep {wh.node_id(f)}: {problem}")
            finally:
                conn.close()
            return times

        levels = {f: hop_levels(g_all, f, DEPTH) for f in set(deep)}
        trips: dict[bool, list[tuple[int, int]]] = {False: [], True: []}
        t0 = time.monotonic()
        cold = asyncio.run(ask_all())
        trips[True], trips[False] = trips[False], []  # the first pass's, kept apart
        warm = asyncio.run(ask_all())
        report["ask_s"] = round(time.monotonic() - t0, 1)
        for kind in ("one-hop", "deep"):
            for label, times in (("first", cold), ("warm", warm)):
                v = times.get(kind, [])
                report[f"{kind}_{label}"] = {
                    "n": len(v), "p50_ms": round(_percentile(v, 0.5) * 1000, 1),
                    "p95_ms": round(_percentile(v, 0.95) * 1000, 1),
                    "max_ms": round(max(v) * 1000, 1) if v else float("nan")}
        for label, got in (("first", trips[True]), ("warm", trips[False])):
            if got:
                per_level = [t / max(lv, 1) for t, lv in got]
                report[f"round_trips_{label}"] = {
                    "p50": sorted(t for t, _ in got)[len(got) // 2],
                    "max": max(t for t, _ in got),
                    "max_per_level": round(max(per_level), 2),
                    "levels_max": max(lv for _, lv in got)}
        for label, times in (("first", cold), ("warm", warm)):
            v = times.get("deep cpu", [])
            if v:  # CPU does not wait for a loaded machine as wall-clock does
                report[f"deep_cpu_{label}"] = {
                    "p50_ms": round(_percentile(v, 0.5) * 1000),
                    "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
                    "p95_ms": round(_percentile(v, 0.95) * 1000)}
        print(f"asked {len(one_hop)} one-hop and {len(deep)} deep questions twice in "
              f"{report['ask_s']} s; wrong so far: {len(wrong)}", flush=True)

        # -- restart, the largest deep question first
        watch.stop()
        peak_kb, hwm_kb = watch.peak_kb, watch.hwm_kb
        stop_server(server)
        server = start_server(fll, url, port, workers, cache_sets, cache_mb, server_log)
        watch = RssWatch(server.pid)
        watch.start()

        async def largest_first() -> tuple[float, int, bytes]:
            conn = LoopbackConnection(port, REQUEST_TIMEOUT)
            try:
                began = time.perf_counter()
                status, data = await conn.request("GET", deep_path(wh, largest))
                return time.perf_counter() - began, status, data
            finally:
                conn.close()
        try:
            turns = backend.turns()
            took, status, data = asyncio.run(largest_first())
            report["restart_largest_s"] = round(took, 3)
            if turns is not None:
                report["restart_largest_round_trips"] = {
                    "round_trips": backend.turns() - turns,
                    "levels": hop_levels(g_all, largest, DEPTH)}
            if status != 200:
                wrong.append(f"largest after restart: {status} {data[:200]!r}")
            else:
                problem = check_deep(wh, *sizes[largest], data)
                if problem:
                    wrong.append(f"largest after restart {wh.node_id(largest)}: {problem}")
        except Exception as e:
            errors.append(f"largest after restart: {type(e).__name__}: {e}")
            report["restart_largest_s"] = float("nan")

        # -- the CLI as a whole process
        d, col = largest
        env = same_fll_env()
        began = time.perf_counter()
        try:
            done = subprocess.run(fll + ["--store", url, "lineage",
                                         f"{wh.ns[d]}:{wh.name[d]}:{col}", "--depth",
                                         str(DEPTH), "--format", "json"],
                                  env=env, capture_output=True, timeout=300)
            report["cli_s"] = round(time.perf_counter() - began, 3)
            if done.returncode != 0:
                errors.append(f"fll lineage exit {done.returncode}: {done.stderr[-500:]!r}")
            else:
                try:
                    problem = check_cli(wh, *sizes[largest], done.stdout)
                except (ValueError, KeyError, TypeError) as e:
                    problem = f"not the JSON expected: {type(e).__name__}: {e}"
                if problem:
                    wrong.append(f"fll lineage {wh.node_id(largest)}: {problem}")
        except subprocess.TimeoutExpired:
            report["cli_s"] = float("nan")
            errors.append("fll lineage: no answer within 300 s")
        watch.stop()
        report["rss_peak_mb"] = round(max(peak_kb, watch.peak_kb) / 1024, 1)
        report["rss_hwm_mb"] = round(max(hwm_kb, watch.hwm_kb) / 1024, 1)
        report["server_alive"] = server.poll() is None
    finally:
        if watch is not None and watch.is_alive():
            watch.stop()
        if server is not None:
            stop_server(server)
        backend.stop()
        server_log.close()
        try:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                report["server_log_tail"] = f.read()[-3000:]
        except OSError:
            report["server_log_tail"] = ""
        if own:
            shutil.rmtree(directory, ignore_errors=True)
    report["errors"] = errors
    report["wrong"] = wrong
    report["total_s"] = round(time.monotonic() - t_all, 1)
    return report


def render(r: dict[str, Any]) -> str:
    t = r["totals"]
    lines = [f"warehouse: {t['datasets']:,} datasets, {t['columns']:,} columns, {t['jobs']:,} "
             f"jobs ({t['changing_jobs']} change on day 3), {t['runs']:,} runs, "
             f"{t['events']:,} events, {t['column_edges']:,} column edges (both versions)",
             f"store: {r['backend']}" + (f", {r['rtt_ms']} ms added per round trip"
                                         if r['backend'] != "sqlite" else " (embedded)"),
             f"fll serve --workers {r['workers']} --cache-sets {r['cache_sets']} "
             f"--cache-mb {r['cache_mb']} ({r['fll']}); "
             f"START events carry {r['start_lineage']} of the column lineage"
             + ("; every dataset with its schema facet" if r.get("schemas") else "")
             + f"; {r['connections']} producers sending at once",
             f"{'figure':<44}{'value':>12}{'target':>12}{'ratio':>8}  "]

    def row(name: str, value: float | None, target: float, unit: str,
            more_is_better: bool = False) -> None:
        if value is None or value != value:  # not measured (--reuse), or nan
            lines.append(f"{name:<44}{'n/a':>12}{target:>10g} {unit}")
            return
        ratio = value / target
        met = value >= target if more_is_better else value <= target
        lines.append(f"{name:<44}{value:>10g} {unit}{('>= ' if more_is_better else '<= ') + f'{target:g}':>10} "
                     f"{ratio:>8.2f}  {'met' if met else 'MISSED'}")

    remote = r["backend"] != "sqlite"
    ing = r.get("ingest", {})
    if ing:
        row("ingest events/s", ing["events_per_s"],
            REMOTE_TARGETS["ingest_eps"] if remote else TARGET_INGEST_EPS, "/s", True)
    deep_target = REMOTE_TARGETS["deep_ms"] if remote else TARGET_DEEP_P95_MS
    for kind, target in (("one-hop", TARGET_ONE_HOP_P95_MS), ("deep", deep_target)):
        for label in ("first", "warm"):
            s = r.get(f"{kind}_{label}")
            if s:
                row(f"{kind} p95 ({label}, n={s['n']}, p50 {s['p50_ms']} ms)", s["p95_ms"],
                    target, "ms")
    if "restart_largest_s" in r:
        row("largest deep, first after restart", r["restart_largest_s"],
            REMOTE_TARGETS["restart_s"] if remote else TARGET_RESTART_S, "s")
    if "cli_s" in r:
        row("fll lineage --depth 25, whole process", r["cli_s"], TARGET_CLI_S, "s")
    if "rss_peak_mb" in r:
        row("server RSS peak (sum of processes)", r["rss_peak_mb"], r["rss_budget_mb"], "MB")
    if ing:
        lines.append(f"ingest: {ing['events']:,} events, {ing['mb_sent']} MB in "
                     f"{ing['seconds']} s; store {ing['store_mb']} MB; RSS after ingest "
                     f"{r.get('rss_after_ingest_mb')} MB; VmHWM {r.get('rss_hwm_mb')} MB; "
                     f"server CPU {ing['server_cpu_s']} s ({ing['server_ms_per_event']} "
                     f"ms/event), this script's {ing['client_cpu_s']} s{_store_cpu(ing)}; "
                     f"load average "
                     f"{ing['load_average']}")
    for label in ("first", "warm"):
        rt = r.get(f"round_trips_{label}")
        if rt:
            lines.append(f"store round trips per deep question ({label} pass): p50 {rt['p50']}, "
                         f"max {rt['max']}, at most {rt['max_per_level']} per hop level "
                         f"(target <= 3; up to {rt['levels_max']} levels)")
    for label in ("first", "warm"):
        c = r.get(f"deep_cpu_{label}")
        if c:
            lines.append(f"server CPU per deep question ({label} pass): p50 {c['p50_ms']} ms, "
                         f"p95 {c['p95_ms']} ms; load average {c['load']}")
    if r.get("restart_largest_round_trips"):
        rt = r["restart_largest_round_trips"]
        lines.append(f"largest deep question after restart: {rt['round_trips']} round trips "
                     f"over {rt['levels']} hop levels")
    if "largest" in r:
        lines.append(f"largest deep question: {r['largest']['node']} ({r['largest']['nodes']:,} "
                     f"fields, {r['largest']['edges']:,} edges); deep questions: "
                     f"{r['deep_edges']} edges")
    lines.append(f"generate {r['generate_s']} s, walks {r.get('walk_s')} s, asking "
                 f"{r.get('ask_s')} s, whole run {r['total_s']} s; server alive at the end: "
                 f"{r.get('server_alive')}")
    lines.append(f"wrong answers: {len(r['wrong'])}, errors: {len(r['errors'])}")
    lines += [f"  WRONG {w}" for w in r["wrong"][:20]]
    lines += [f"  ERROR {e}" for e in r["errors"][:20]]
    if (r["wrong"] or r["errors"]) and r.get("server_log_tail"):
        lines.append("server log (tail):\n" + r["server_log_tail"])
    return "\n".join(lines)


@click.command()
@click.option("--datasets", "n_datasets", default=2000, show_default=True,
              type=click.IntRange(LAYERS * 2))
@click.option("--days", default=5, show_default=True, type=click.IntRange(CHANGE_DAY + 1, 30))
@click.option("--runs-per-day", default=3, show_default=True, type=click.IntRange(1, 48))
@click.option("--seed", default=7, show_default=True)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 8),
              help="fll serve --workers")
@click.option("--build-processes", default=None, type=click.IntRange(0, 8),
              help="fll serve --build-processes [default: fll serve's]")
@click.option("--cache-sets", default=32768, show_default=True, type=click.IntRange(1),
              help="fll serve --cache-sets")
@click.option("--cache-mb", default=512, show_default=True, type=click.IntRange(16),
              help="fll serve --cache-mb (per server process)")
@click.option("--rss-budget-mb", default=1024.0, show_default=True, type=click.FloatRange(1),
              help="the server's RSS (all its processes) is held to this")
@click.option("--one-hop", "n_one_hop", default=300, show_default=True, type=click.IntRange(1))
@click.option("--deep", "n_deep", default=60, show_default=True, type=click.IntRange(1))
@click.option("--candidates", default=300, show_default=True, type=click.IntRange(1),
              help="top-layer fields walked to find the largest deep question")
@click.option("--start-lineage", type=click.Choice(["half", "all", "none"]), default="half",
              show_default=True,
              help="the column lineage a START event carries (COMPLETE carries all of it)")
@click.option("--schemas/--no-schemas", default=False, show_default=True,
              help="every dataset an event names carries its schema facet, as Spark's and "
                   "dbt's producers send them (every node's fieldType is then checked); "
                   "off: the figures of docs/benchmarks.md before it existed")
@click.option("--connections", default=None, type=click.IntRange(1, 64),
              help="producers sending events at once [default: the ingests `fll serve` "
                   "takes at once on the store: 8 on SQLite, 16 on Bigtable and HBase]")
@click.option("--dir", "directory", default=None, help="Put the store here (must not hold one).")
@click.option("--fll", "fll_path", default=None, help="The fll executable to serve with.")
@click.option("--backend", "backend_kind", type=click.Choice(["sqlite", "bigtable", "hbase"]),
              default="sqlite", show_default=True,
              help="the store: SQLite in --dir, or the Bigtable emulator / the HBase Thrift "
                   "double started on 127.0.0.1 behind a proxy counting round trips")
@click.option("--rtt-ms", default=0.0, show_default=True, type=click.FloatRange(0, 100),
              help="time added to every store round trip (bigtable, hbase): a real network")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--reuse", is_flag=True,
              help="Ask the questions of a store this bench ingested into --dir before "
                   "(the same generation options), without ingesting again.")
def cli(n_datasets: int, days: int, runs_per_day: int, seed: int, workers: int,
        build_processes: int | None, cache_sets: int, cache_mb: int, rss_budget_mb: float, n_one_hop: int, n_deep: int,
        candidates: int,
        start_lineage: str, schemas: bool, connections: int, directory: str | None,
        fll_path: str | None, backend_kind: str, rtt_ms: float, as_json: bool,
        reuse: bool) -> None:
    """Run the warehouse benchmark and print the table."""
    if build_processes is not None:
        SERVE_ARGS.extend(["--build-processes", str(build_processes)])
    if connections is None:
        from fll.server.guard import DEFAULT_MAX_INGESTS, REMOTE_MAX_INGESTS
        connections = DEFAULT_MAX_INGESTS if backend_kind == "sqlite" else REMOTE_MAX_INGESTS
    report = run_bench(n_datasets, days, runs_per_day, seed, workers, cache_sets, cache_mb,
                       rss_budget_mb,
                       n_one_hop, n_deep, candidates, connections, directory, fll_path,
                       start_lineage, reuse, backend_kind, rtt_ms, schemas)
    click.echo(json.dumps(report, indent=2) if as_json else render(report))
    if report["wrong"] or report["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    cli()
