"""Backends side by side: records/s and field-query latency with the same runs.

    .venv/bin/python scripts/bench/backends.py [--runs 100000] [--sets 1000] [--hbase host:port]

Two workloads per backend: ``--runs`` runs of one operation set (plus a few
others), queried over the whole range; and ``--sets`` distinct sets (a daily
job reading a dated path) with a query over the last 10 runs only, whose cost
must follow the range, not the history (target on the Bigtable emulator:
<= 30 ms per field query at 1,000 sets).

Records ``--runs`` runs of one operation set (plus a few other sets) into
every available backend (SQLite always; the Bigtable emulator when
``cbtemulator`` is installed, started here on a free 127.0.0.1 port; HBase
when ``--hbase`` or ``FLL_TEST_HBASE`` names a Thrift server; and always
fll's HBase Thrift 1 test server, a test double on 127.0.0.1 that shows the
wire cost of happybase and Thrift, not HBase's speed) and prints, per
backend, runs/s recorded in batches and the median latency of field
questions over the whole range, plus the ratio to SQLite.

Round trips: ``table calls/q`` counts `Table` method calls (gets, puts, scan
pages) one ``incoming`` question makes, on every backend; ``thrift calls/q``
counts the Thrift requests the test server answered for the same question.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fll import EndPointField  # noqa: E402
from fll.store import LineageStore, open_table  # noqa: E402
from fll.store.emulator import Emulator, find_emulator  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from store import DST, dated, operation_set  # noqa: E402


def median_ms(fn, repeat: int = 20) -> float:
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


class CountingTable:
    """A `Table` proxy counting calls; a scan counts once per page it reads."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0
        self.url = inner.url

    def scan(self, *args, **kw):
        page = getattr(self.inner, "page_rows", 500)
        self.calls += 1
        for i, row in enumerate(self.inner.scan(*args, **kw), 1):
            if i % page == 0:
                self.calls += 1
            yield row

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args, **kw):
            self.calls += 1
            return attr(*args, **kw)
        return counted


def round_trips(table: CountingTable, ask, wire=None) -> tuple[float, float]:
    before, before_wire = table.calls, wire() if wire else 0
    ask()
    return table.calls - before, (wire() - before_wire) if wire else float("nan")


def measure(name: str, url: str, runs: int, batch: int, wire=None) -> dict:
    table = CountingTable(open_table(url))
    store = LineageStore(table)
    infos = [operation_set(10)] + [operation_set(w) for w in (3, 5, 7)]
    recorded, elapsed = 0, 0.0
    with click.progressbar(length=runs, label=f"{name:>9}: recording") as bar:
        while recorded < runs:
            k = min(batch, runs - recorded)
            items = [(infos[0] if (recorded + i) % 100 else infos[1 + (recorded + i) % 3],
                      f"run-{recorded + i}", 1_000 + recorded + i, "bench") for i in range(k)]
            t0 = time.perf_counter()
            store.record_many(items)
            elapsed += time.perf_counter() - t0
            recorded += k
            bar.update(k)
    end = 1_000 + runs
    target = EndPointField(DST, "f1")
    result = {
        "backend": name, "runs/s": runs / elapsed,
        "incoming ms": median_ms(lambda: store.incoming(target, 0, end)),
        "fields ms": median_ms(lambda: store.fields(DST, 0, end)),
        "runs(limit 100) ms": median_ms(lambda: store.runs(DST, 0, end, limit=100)),
    }
    result["table calls/q"], result["thrift calls/q"] = round_trips(
        table, lambda: store.incoming(target, 0, end), wire)
    store.close()
    return result


def measure_distinct(name: str, url: str, sets: int, wire=None) -> dict:
    """Field questions over the last 10 runs after ``sets`` distinct sets (and
    over all time: the cover's widest shape), with their round trips."""
    from store import HOUR, T0

    from fll.rowkeys import MAX_TIME

    store = LineageStore(open_table(url))
    items = [dated(i) for i in range(sets + 10)]
    with click.progressbar(length=len(items), label=f"{name:>9}: distinct sets") as bar:
        for i in range(0, len(items), 500):
            store.record_many(items[i:i + 500])
            bar.update(len(items[i:i + 500]))
    start, end = T0 + sets * HOUR, T0 + (sets + 10) * HOUR
    target = EndPointField(DST, "f1")

    def cold(shapes_too: bool = False) -> None:
        # the sets of the range are read too, not only found (and with shapes_too
        # their shape: one for the bench's daily job)
        store.clear_caches(shapes=shapes_too)
        store.incoming(target, start, end)
    result = {"backend": name, "warm ms": median_ms(lambda: store.incoming(target, start, end)),
              "cold ms": median_ms(cold), "cold shapes ms": median_ms(lambda: cold(True))}
    counting = CountingTable(store.table)
    store.table = counting
    for label, lo, hi in (("range", start, end), ("all time", 0, MAX_TIME),
                          ("shapes cold", 0, MAX_TIME)):
        store.clear_caches(shapes=label == "shapes cold")
        result[f"table calls/q {label}"], result[f"thrift calls/q {label}"] = round_trips(
            counting, lambda lo=lo, hi=hi: store.incoming(target, lo, hi), wire)
    store.table = counting.inner
    store.close()
    return result


@click.command()
@click.option("--sets", default=1_000, show_default=True,
              help="distinct sets recorded before the range of the second workload")
@click.option("--runs", default=100_000, show_default=True)
@click.option("--batch", default=1000, show_default=True, help="runs per record_many call")
@click.option("--hbase", default=lambda: os.environ.get("FLL_TEST_HBASE"),
              help="host:port of an HBase Thrift server")
def main(sets: int, runs: int, batch: int, hbase: str | None) -> None:
    results, distinct = [], []
    with tempfile.TemporaryDirectory() as d:
        results.append(measure("sqlite", f"sqlite:///{d}/bench.db", runs, batch))
        distinct.append(measure_distinct("sqlite", f"sqlite:///{d}/distinct.db", sets))
    binary = find_emulator()
    if binary:
        emu = Emulator(binary).start()
        try:
            results.append(measure("bigtable", f"bigtable://bench/bench/fll?emulator={emu.host}",
                                   runs, batch))
            distinct.append(measure_distinct(
                "bigtable", f"bigtable://bench/bench/distinct?emulator={emu.host}", sets))
        finally:
            emu.stop()
    else:
        print("bigtable: cbtemulator not installed, skipped")
    if hbase:
        table = f"fllbench_{uuid.uuid4().hex[:8]}"
        results.append(measure("hbase", f"hbase://{hbase}/{table}", runs, batch))
        distinct.append(measure_distinct("hbase", f"hbase://{hbase}/{table}_d", sets))
    from fll.testing.hbase_thrift import HBaseThriftServer
    with HBaseThriftServer(transport="framed") as server:
        results.append(measure("hbase-td", server.url("bench"), runs, batch,
                               wire=server.total_calls))
        distinct.append(measure_distinct("hbase-td", server.url("distinct"), sets,
                                         wire=server.total_calls))
    cols = ["runs/s", "incoming ms", "fields ms", "runs(limit 100) ms", "table calls/q",
            "thrift calls/q"]
    print(f"\n{runs:,} runs per backend, {batch} runs per batch; hbase-td is fll's HBase "
          f"Thrift test double, not HBase\n")
    print(f"{'backend':>9} " + " ".join(f"{c:>20}" for c in cols))
    base = results[0]
    for r in results:
        print(f"{r['backend']:>9} " + " ".join(
            f"{r[c]:>12,.2f} ({r[c] / base[c]:>4.1f}x)" if base[c] == base[c] and base[c]
            else f"{r[c]:>20,.0f}" if r[c] == r[c] else f"{'-':>20}" for c in cols))
    print(f"\n{sets:,} distinct sets recorded, field question over the last 10 runs "
          f"(target on Bigtable: <= 30 ms)\n")
    print("round trips of one cold-cache question (target: <= 3 plus the d| multi-get; "
          "Thrift calls on the test double); cold: the sets not cached, their shape cached; "
          "+shapes: neither\n")
    print(f"{'backend':>9} {'warm (ms)':>10} {'cold (ms)':>10} {'+shapes (ms)':>13} "
          f"{'calls, range':>13} {'all time':>9} {'+shapes':>8} {'thrift, range':>14} "
          f"{'all time':>9} {'+shapes':>8}")
    for r in distinct:
        thrift = [r[f"thrift calls/q {x}"] for x in ("range", "all time", "shapes cold")]
        print(f"{r['backend']:>9} {r['warm ms']:>10,.2f} {r['cold ms']:>10,.2f} "
              f"{r['cold shapes ms']:>13,.2f} {r['table calls/q range']:>13,.0f} "
              f"{r['table calls/q all time']:>9,.0f} {r['table calls/q shapes cold']:>8,.0f} " +
              " ".join(f"{t:>{w},.0f}" if t == t else f"{'-':>{w}}"
                       for t, w in zip(thrift, (14, 9, 8), strict=True)))
    print(f"(load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
