"""Store benchmark: does a field question cost what is in its range?

    .venv/bin/python scripts/bench/store.py [--quick] [--dir /tmp/fll-bench]

Prints, in one run, on the embedded SQLite store:

1. distinct sets: a daily job whose source path is dated, so every run is a
   new operation set; a query over a range holding the last 10 runs, with 100
   and with 100,000 (``--quick``: 10,000) sets recorded before the range, and
   the ratio (target <= 1.5); plus a wide range holding every set, per set;
2. repeated set: one set re-run 1k -> 1M (``--quick``: 100k) times, a query
   over the whole range, and the ratio to 1k (target <= 2); the cost depends
   on where a range's edges fall against the buckets, so also the mean over
   40 whole ranges with random edges (the same 40 at every size) and the
   worst of their ratios;
3. bytes per run after checkpoint and VACUUM, for both workloads (targets
   <= 250 repeated, <= 600 distinct);
4. runs/s recorded in batches of 5,000 (target >= 20,000) and one per commit;
   the batched rate also per CPU second of this process, the figure a shared
   machine disturbs least;
5. converting a store of the previous SQLite layout (a SQLite row per
   column) on open: seconds per 100,000 runs;
6. the stored ``d|`` row of a 10-field set and of a 2,000-column set, in
   format 2 (operations and summaries, zlib) and format 3 (both in one deflate
   stream against a preset dictionary), and what computing the summaries on
   first read instead of storing them would cost per set.
"""
from __future__ import annotations

import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField,  # noqa: E402
                 ReadOperation, TransformOperation, WriteOperation, open_store)

SRC, DST = EndPoint("bench", "hr_file"), EndPoint("bench", "employee")
HOUR = 3_600_000
T0 = 1_600_000_000_000


def operation_set(width: int = 10, src: EndPoint = SRC) -> FieldLineageInfo:
    fields = [f"f{i}" for i in range(width)]
    ops = [ReadOperation("read", "read", src, fields)]
    ops += [TransformOperation(f"t_{f}", "upper", [InputField("read", f)], [f]) for f in fields]
    ops.append(WriteOperation("write", "write", DST, [InputField(f"t_{f}", f) for f in fields]))
    return FieldLineageInfo(ops)


def timed(fn, repeat: int = 30) -> float:
    """The fastest of ``repeat`` calls after a warm-up: the machine is shared, and the
    minimum is the figure least disturbed by other processes."""
    fn()  # warm the operation-set cache, as a long-running server would be
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return min(samples)


def file_bytes(path: str) -> int:
    """The store file's size after a WAL checkpoint and VACUUM."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


CPU = {"s": 0.0}  # process CPU seconds spent recording the repeated set


def record(store, items, bar=None, batch: int = 5000, cpu: dict | None = None) -> float:
    """Record in batches; returns seconds spent writing (and adds CPU seconds to ``cpu``)."""
    spent = 0.0
    for i in range(0, len(items), batch):
        chunk = items[i:i + batch]
        t0, c0 = time.perf_counter(), time.process_time()
        store.record_many(chunk)
        spent += time.perf_counter() - t0
        if cpu is not None:
            cpu["s"] += time.process_time() - c0
        if bar is not None:
            bar.update(len(chunk))
    return spent


def dated(i: int) -> tuple[FieldLineageInfo, str, int, str]:
    return (operation_set(src=EndPoint("bench", f"raw/day={i}")), f"day-{i}", T0 + i * HOUR,
            "daily")


def distinct_sets(workdir: str, before: int) -> tuple[float, float, int, float]:
    """(query ms over the last 10 runs, wide-range ms per set, file bytes, runs/s)."""
    path = f"{workdir}/distinct-{before}.db"
    store = open_store(f"sqlite:///{path}")
    items = [dated(i) for i in range(before + 10)]
    with click.progressbar(length=len(items), label=f"{before:>9,} distinct sets") as bar:
        spent = record(store, items, bar)
    target = EndPointField(DST, "f3")
    start, end = T0 + before * HOUR, T0 + (before + 10) * HOUR
    narrow = timed(lambda: store.incoming(target, start, end))
    assert len(store.checksums(DST, start, end)) == 10
    wide = timed(lambda: store.checksums(DST, 0, end), repeat=3) / (before + 10)
    store.close()
    return narrow * 1000, wide * 1000, file_bytes(path), len(items) / spent


EDGES = [(random.Random(i).randrange(0, 60_000), random.Random(-i).randrange(1, 60_000))
         for i in range(40)]


def random_edged(store, target, end: int) -> list[float]:
    """ms of the field question over [T0 + a, end - b) for each of `EDGES`."""
    return [timed(lambda a=a, b=b: store.incoming(target, T0 + a, end - b), repeat=5) * 1000
            for a, b in EDGES]


def repeated_set(workdir: str, checkpoints: list[int]
                 ) -> tuple[list[tuple[int, float, float, list[float]]], int, float]:
    path = f"{workdir}/repeated.db"
    store = open_store(f"sqlite:///{path}")
    info = operation_set()
    target = EndPointField(DST, "f3")
    results, recorded, spent = [], 0, 0.0
    with click.progressbar(length=max(checkpoints), label="   one set re-run") as bar:
        for goal in checkpoints:
            items = [(info, f"run-{i}", T0 + i * 1000, "bench") for i in range(recorded, goal)]
            spent += record(store, items, bar, cpu=CPU)
            recorded = goal
            end = T0 + recorded * 1000
            results.append((goal, timed(lambda end=end: store.incoming(target, T0, end)) * 1000,
                            timed(lambda end=end: store.fields(DST, T0, end)) * 1000,
                            random_edged(store, target, end)))
    store.close()
    return results, file_bytes(path), recorded / spent


def data_rows() -> list[tuple[str, int, int, float]]:
    """(set, format-2 bytes, format-3 bytes, ms to compute summaries on first read)."""
    from fll.codec import canonical_bytes, decode_canonical, summaries_of, summaries_to_bytes
    from fll.store.lineage import data_row
    from fll.store.sqlite import pack

    out = []
    for label, info in (("10-field set, dated source", dated(123)[0]),
                        ("2,000-column set", operation_set(2000))):
        old = len(pack({"o": canonical_bytes(info.operations), "s": summaries_to_bytes(info)}))
        new = len(pack(data_row(info)))
        ops = canonical_bytes(info.operations)
        t0 = time.perf_counter()
        summaries_of(decode_canonical(ops))
        out.append((label, old, new, (time.perf_counter() - t0) * 1000))
    return out


def convert_legacy(workdir: str, runs: int = 100_000) -> float:
    """Seconds to open (and so convert) a store of the previous SQLite layout
    holding ``runs`` runs of one set, per 100,000 runs."""
    path = f"{workdir}/packed.db"
    store = open_store(f"sqlite:///{path}")
    info = operation_set()
    record(store, [(info, f"run-{i}", T0 + i * 1000, "bench") for i in range(runs)])
    legacy = f"{workdir}/legacy.db"
    conn = sqlite3.connect(legacy)
    conn.execute("CREATE TABLE cells (row BLOB NOT NULL, col TEXT NOT NULL, val BLOB NOT NULL, "
                 "PRIMARY KEY (row, col)) WITHOUT ROWID")
    conn.executemany("INSERT INTO cells VALUES (?, ?, ?)",
                     ((k, c, v) for k, cols in store.table.scan() for c, v in cols.items()))
    conn.commit()
    conn.close()
    store.close()
    t0 = time.perf_counter()
    open_store(f"sqlite:///{legacy}").close()
    return (time.perf_counter() - t0) * 100_000 / runs


@click.command()
@click.option("--quick", is_flag=True, help="10,000 distinct sets and 100k runs, not 100k/1M")
@click.option("--dir", "workdir", default=None, help="where to put the bench stores")
def main(quick: bool, workdir: str | None) -> None:
    workdir = workdir or tempfile.mkdtemp(prefix="fll-bench-")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    many = 10_000 if quick else 100_000
    top = 100_000 if quick else 1_000_000

    small = distinct_sets(workdir, 100)
    large = distinct_sets(workdir, many)
    reps, rep_bytes, rep_rate = repeated_set(
        workdir, [c for c in (1_000, 10_000, 100_000, 1_000_000) if c <= top])

    single = open_store(f"sqlite:///{workdir}/single.db")
    info = operation_set()
    n = 2000
    t0 = time.perf_counter()
    for i in range(n):
        single.record(info, f"s{i}", T0 + i)
    single_rate = n / (time.perf_counter() - t0)
    single.close()
    convert = convert_legacy(workdir, 20_000 if quick else 100_000)

    print()
    print("1. distinct sets (a dated source path), query over the last 10 runs")
    print(f"   {'sets before':>12} {'incoming (ms)':>14} {'ratio':>7}")
    print(f"   {100:>12,} {small[0]:>14.3f} {1.0:>7.2f}")
    print(f"   {many:>12,} {large[0]:>14.3f} {large[0] / small[0]:>7.2f}   (target <= 1.5)")
    print(f"   wide range holding all {many + 10:,} sets: {large[1] * 1000:.2f} us per set")
    print("2. one set re-run, query over the whole range")
    print(f"   {'runs':>12} {'incoming (ms)':>14} {'ratio':>7} {'fields (ms)':>12} {'ratio':>7}")
    for goal, t_in, t_f, _ in reps:
        print(f"   {goal:>12,} {t_in:>14.3f} {t_in / reps[0][1]:>7.2f} {t_f:>12.3f} "
              f"{t_f / reps[0][2]:>7.2f}")
    print(f"   {len(EDGES)} whole ranges with random edges (each timed as above):")
    print(f"   {'runs':>12} {'mean (ms)':>14} {'ratio':>7} {'worst ratio':>12}")
    first = reps[0][3]
    for goal, _, _, edged in reps:
        mean = sum(edged) / len(edged)
        worst = max(e / f for e, f in zip(edged, first, strict=True))
        print(f"   {goal:>12,} {mean:>14.3f} {mean / (sum(first) / len(first)):>7.2f} "
              f"{worst:>12.2f}")
    print("   (target: the largest within 2x of 1k)")
    print("3. bytes per run after checkpoint + VACUUM")
    print(f"   repeated set: {rep_bytes / reps[-1][0]:,.0f} B/run   (target <= 250)")
    print(f"   distinct sets: {large[2] / (many + 10):,.0f} B/run   (target <= 600)")
    print("4. recording")
    print(f"   batched (5,000 runs per commit), repeated set: {rep_rate:,.0f} runs/s "
          f"(target >= 20,000)")
    print(f"   same, per CPU second of this process:          {reps[-1][0] / CPU['s']:,.0f} "
          f"runs/s")
    print(f"   batched, distinct sets:                        {large[3]:,.0f} runs/s")
    print(f"   one commit per run:                            {single_rate:,.0f} runs/s")
    print("5. opening a store of the previous SQLite layout (converts it)")
    print(f"   {convert:.2f} s per 100,000 runs")
    print("6. d| row bytes as SQLite stores them (format 2 -> format 3)")
    for label, old, new, ms in data_rows():
        print(f"   {label:<28} {old:>7,} B -> {new:>7,} B   (computing its summaries instead: "
              f"{ms:.1f} ms on first read)")
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
