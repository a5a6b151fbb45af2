"""Spark plan capture benchmark: how long `fll.spark.capture` takes as plans grow.

    .venv/bin/python scripts/bench/spark_plan.py [--repeat 5] [--job-rows 1000000]

Builds DataFrame plans over a small parquet file: a small one (a filter and a
projection) and chains of N operators (alternating withColumn/filter/join)
over W columns, from 10 operators x 10 columns up to 200 operators x 200
columns (the "wide/deep" case is 100 x 200). For each it prints the plan
size, the median capture time, the share spent in the one toJSON() call, and
the number of py4j calls. With --job-rows it also times a job on that many
rows and prints capture time as a fraction of it.
Targets: <= 50 ms for a 50-operator plan; <= 5% of a one-minute job.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from fll.spark import capture  # noqa: E402


def _session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("fll-bench-spark-plan")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _plan(spark, path: str, operators: int, columns: int):
    from pyspark.sql import functions as F

    base = spark.read.parquet(path)
    df = base.select(["id"] + [(F.col("v") + i).alias(f"c{i}") for i in range(columns - 1)])
    other = base.select(F.col("id").alias("k"), F.col("v").alias("w"))
    for i in range(operators):
        kind = i % 3
        if kind == 0:
            df = df.withColumn(f"c{i % (columns - 1)}", F.col(f"c{(i + 1) % (columns - 1)}") * 2)
        elif kind == 1:
            df = df.filter(F.col("id") > -i)
        else:
            df = df.join(other, df["id"] == other["k"], "left").drop("k", "w")
    return df


def _measure(df, repeat: int) -> tuple[float, float, int, int]:
    times, shares = [], []
    cap = None
    for _ in range(repeat):
        cap = capture(df)
        times.append(cap.seconds)
        shares.append(cap.tojson_seconds / cap.seconds)
    assert cap is not None
    return statistics.median(times), statistics.median(shares), cap.jvm_calls, cap.plan_nodes


@click.command()
@click.option("--repeat", default=5, show_default=True, help="captures per plan (median)")
@click.option("--job-rows", default=0, show_default=True,
              help="also time a job over this many rows (0: skip)")
def main(repeat: int, job_rows: int) -> None:
    spark = _session()
    tmp = tempfile.mkdtemp(prefix="fll-bench-")
    path = os.path.join(tmp, "base.parquet")
    spark.range(1000).selectExpr("id", "id * 1.5 AS v").write.parquet(path)

    small = spark.read.parquet(path).filter("v > 1").selectExpr("id", "v * 2 AS v2")
    capture(small)  # warm up py4j and the analyzer
    t, share, calls, nodes = _measure(small, repeat)
    click.echo(f"{'plan':>22} {'nodes':>6} {'capture ms':>11} {'toJSON %':>9} {'py4j calls':>11}")
    click.echo(f"{'small':>22} {nodes:>6} {t * 1000:>11.1f} {share * 100:>8.0f}% {calls:>11}")
    for operators, columns in [(10, 10), (50, 10), (50, 200), (100, 200), (200, 10),
                               (200, 200), (50, 500)]:
        df = _plan(spark, path, operators, columns)
        t, share, calls, nodes = _measure(df, repeat)
        label = f"{operators} ops x {columns} cols"
        click.echo(f"{label:>22} {nodes:>6} {t * 1000:>11.1f} {share * 100:>8.0f}% {calls:>11}")

    if job_rows:
        from pyspark.sql import functions as F

        data = os.path.join(tmp, "job.parquet")
        spark.range(job_rows).selectExpr("id", "id % 97 AS g", "rand() AS v").write.parquet(data)
        job = (spark.read.parquet(data).filter("v > 0.1").groupBy("g")
               .agg(F.sum("v").alias("s"), F.countDistinct("id").alias("n")))
        start = time.perf_counter()
        job.write.mode("overwrite").parquet(os.path.join(tmp, "out.parquet"))
        run = time.perf_counter() - start
        t, _, _, _ = _measure(job, repeat)
        click.echo(f"job on {job_rows} rows: {run:.2f} s; capture {t * 1000:.1f} ms "
                   f"= {t / run * 100:.2f}% of it")
    spark.stop()


if __name__ == "__main__":
    main()
