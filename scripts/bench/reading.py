"""Reading benchmark: what the edge tags, aliases and per-hop runs cost a lineage walk.

    .venv/bin/python scripts/bench/reading.py [--width 60] [--hops 4] [--sets 20] [--dir D]

Builds a chain of ``hops`` datasets, each field of one built from every field of
the one before (all-to-all: the workload that hurts, one edge per field pair),
written by ``sets`` distinct operation sets per hop (each one more run), every
input tagged (DIRECT/AGGREGATION for one, INDIRECT/FILTER for the rest). Prints
the time of an incoming walk from the last dataset's first field: the bare walk
(the store's summaries only), the walk with every edge tagged (`fll lineage
--format json`), with INDIRECT hidden, and with each hop's runs (the tree), plus
the ratios to the bare walk. Then the REST walk ``GET …/lineage/fields/{f}``
(``level`` = hops), on a store opened afresh (cold) and again on the same store (warm), with the
ratios to the bare walk.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField,  # noqa: E402
                 ReadOperation, TransformOperation, WriteOperation, open_store)
from fll.model import Transformation  # noqa: E402
from fll.render import render_tree, walk_lineage  # noqa: E402
from fll.rowkeys import MAX_TIME  # noqa: E402
from fll.server.views import field_summary  # noqa: E402


def hop(src: EndPoint, dst: EndPoint, width: int, variant: int) -> FieldLineageInfo:
    fields = [f"f{i}" for i in range(width)]
    reads = [InputField("read", f) for f in fields]
    ops: list = [ReadOperation("read", f"read v{variant}", src, fields)]
    for i, f in enumerate(fields):
        tags = {r: ((Transformation("DIRECT", "AGGREGATION"),) if j == i else
                    (Transformation("INDIRECT", "FILTER"),)) for j, r in enumerate(reads)}
        ops.append(TransformOperation(f"t_{f}", f"agg {f} v{variant}", reads, [f], tags))
    ops.append(WriteOperation("write", "write", dst, [InputField(f"t_{f}", f) for f in fields]))
    return FieldLineageInfo(ops)


def timed(fn, repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def bare_walk(store, root: EndPointField, depth: int) -> int:
    seen, frontier, edges = {root}, [root], 0
    for _ in range(depth):
        nxt = []
        for f in frontier:
            for g in store.incoming(f, 0, MAX_TIME):
                edges += 1
                if g not in seen:
                    seen.add(g)
                    nxt.append(g)
        frontier = nxt
    return edges


@click.command()
@click.option("--width", default=60, show_default=True)
@click.option("--hops", default=4, show_default=True)
@click.option("--sets", default=20, show_default=True, help="distinct operation sets per hop")
@click.option("--dir", "folder", default=None)
def main(width: int, hops: int, sets: int, folder: str | None) -> None:
    folder = folder or tempfile.mkdtemp(prefix="fll-reading-bench-")
    url = f"sqlite:///{folder}/bench.db"
    eps = [EndPoint("bench", f"d{i}") for i in range(hops + 1)]
    with open_store(url) as store:
        runs = [(hop(eps[i], eps[i + 1], width, v), f"r{i}-{v}", 1_000_000 + i * 1000 + v, "b")
                for i in range(hops) for v in range(sets)]
        store.record_many(runs)
        root = EndPointField(eps[-1], "f0")
        edges = bare_walk(store, root, hops)
        bare = timed(lambda: bare_walk(store, root, hops))
        tagged = timed(lambda: walk_lineage(store, root, "incoming", hops, 0, MAX_TIME)
                       .to_dict())
        hidden = timed(lambda: walk_lineage(store, root, "incoming", hops, 0, MAX_TIME,
                                            show_indirect=False).to_dict())
        tree = timed(lambda: render_tree(walk_lineage(store, root, "incoming", hops, 0,
                                                      MAX_TIME, with_operations=True),
                                         ops=True, runs=True), repeat=3)

        def rest(st):
            return field_summary(st, root, 0, MAX_TIME, "incoming", hops, True)

        def rest_cold():
            with open_store(url) as fresh:  # a new process's first request: nothing decoded
                return rest(fresh)
        # interleaved, so load on a shared machine hits each alike
        cold_s, warm_s = [], []
        rest(store)
        for _ in range(3):
            cold_s.append(timed(rest_cold, repeat=1))
            warm_s.append(timed(lambda: rest(store), repeat=1))
        cold, warm = (statistics.median(x) for x in (cold_s, warm_s))
    print(f"chain of {hops} hops x {width} fields all-to-all, {sets} operation sets per hop "
          f"({hops * sets} runs); walk from {root.endpoint.name}.{root.field}: {edges} edges")
    print(f"bare walk (summaries only)       {bare * 1000:9.1f} ms   1.00x")
    print(f"tagged walk (--format json)      {tagged * 1000:9.1f} ms  {tagged / bare:5.2f}x")
    print(f"tagged, INDIRECT hidden          {hidden * 1000:9.1f} ms  {hidden / bare:5.2f}x")
    print(f"tree with --ops --runs           {tree * 1000:9.1f} ms  {tree / bare:5.2f}x")
    print(f"REST lineage/fields/{root.field}?level={hops}&direction=incoming (tags stored with "
          f"each set: no question rebuilds operations)")
    print(f"  store opened afresh (cold)       {cold * 1000:9.1f} ms  {cold / bare:5.2f}x")
    print(f"  same store again (warm)          {warm * 1000:9.1f} ms  {warm / bare:5.2f}x")

if __name__ == "__main__":
    main()
