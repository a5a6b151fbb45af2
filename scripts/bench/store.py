"""Store benchmark: write throughput and how field queries scale with runs.

    .venv/bin/python scripts/bench/store.py [--runs 1000000] [--dir /tmp/fll-bench]

Prints runs/s recorded (batched, and one commit per run) and the latency of
field-lineage queries (incoming summary, field list) as the number of runs of
the same operation set in the range grows from 1k to 100k to 1M, with the
ratio to the 1k figure. Target: >= 20,000 runs/s batched and the 1M query
within 2x of the 1k one.
"""
from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField,  # noqa: E402
                 ReadOperation, TransformOperation, WriteOperation, open_store)

SRC, DST = EndPoint("bench", "hr_file"), EndPoint("bench", "employee")


def operation_set(width: int = 10) -> FieldLineageInfo:
    fields = [f"f{i}" for i in range(width)]
    ops = [ReadOperation("read", "read", SRC, fields)]
    ops += [TransformOperation(f"t_{f}", "upper", [InputField("read", f)], [f]) for f in fields]
    ops.append(WriteOperation("write", "write", DST, [InputField(f"t_{f}", f) for f in fields]))
    return FieldLineageInfo(ops)


def timed(fn, repeat: int = 30) -> float:
    fn()  # warm the operation-set cache, as a long-running server would be
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


@click.command()
@click.option("--runs", default=1_000_000, show_default=True, help="largest number of runs")
@click.option("--dir", "workdir", default=None, help="where to put the bench store")
def main(runs: int, workdir: str | None) -> None:
    workdir = workdir or tempfile.mkdtemp(prefix="fll-bench-")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    info = operation_set()
    target = EndPointField(DST, "f3")

    single = open_store(f"sqlite:///{workdir}/single.db")
    n = 2000
    t0 = time.perf_counter()
    for i in range(n):
        single.record(info, f"s{i}", i)
    single_rate = n / (time.perf_counter() - t0)
    single.close()

    store = open_store(f"sqlite:///{workdir}/bench.db")
    checkpoints = [c for c in (1_000, 10_000, 100_000, 1_000_000) if c <= runs]
    if runs not in checkpoints:
        checkpoints.append(runs)
    recorded, write_time, batch = 0, 0.0, 5000
    results = []
    with click.progressbar(length=max(checkpoints), label="recording runs") as bar:
        for goal in checkpoints:
            while recorded < goal:
                k = min(batch, goal - recorded)
                items = [(info, f"run-{recorded + i}", 1_000 + recorded + i, "bench")
                         for i in range(k)]
                t0 = time.perf_counter()
                store.record_many(items)
                write_time += time.perf_counter() - t0
                recorded += k
                bar.update(k)
            end = 1_000 + recorded
            results.append((goal, timed(lambda end=end: store.incoming(target, 0, end)),
                            timed(lambda end=end: store.fields(DST, 0, end))))
    batched_rate = recorded / write_time

    print()
    print(f"recorded (batched, {batch} runs per commit): {batched_rate:,.0f} runs/s")
    print(f"recorded (one commit per run):              {single_rate:,.0f} runs/s")
    print()
    print(f"{'runs in range':>14} {'incoming (ms)':>14} {'ratio':>7} {'fields (ms)':>12} {'ratio':>7}")
    base_in, base_f = results[0][1], results[0][2]
    for goal, t_in, t_f in results:
        print(f"{goal:>14,} {t_in * 1000:>14.3f} {t_in / base_in:>7.2f} "
              f"{t_f * 1000:>12.3f} {t_f / base_f:>7.2f}")
    size = sum(os.path.getsize(os.path.join(workdir, f)) for f in os.listdir(workdir))
    print(f"\nstore size: {size / 2**20:,.1f} MiB for {recorded + n:,} runs")
    store.close()
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
