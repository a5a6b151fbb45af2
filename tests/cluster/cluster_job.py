"""The job the cluster test runs in its own process (it needs its own
SparkSession): the demo pipeline with a ``python`` stage whose UDF lives in a
user module, and a ``track()``-ed aggregate, both against ``--master``; then
every field's incoming lineage, as JSON, to ``--out``.

    python tests/cluster/cluster_job.py --work DIR --run MASTER STORE_URL OUT.json EXECUTORS …
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
sys.path.insert(0, ROOT)

# the user's own module: importable on the driver only, through the spec's directory
USER_MODULE = '''
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from fll.pipeline.demo import normalize_employees


def shout(value):
    return None if value is None else value.strip().upper() + "!"


def normalize_loudly(df):
    out = normalize_employees(df)
    return out.withColumn("Name", F.udf(shout, StringType())("Name"))
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", nargs=4, action="append", required=True,
                    metavar=("MASTER", "STORE", "OUT", "EXECUTORS"),
                    help="one run; several run one after the other in this process, one "
                         "SparkContext each, so the JVM starts once")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for master, store, out, executors in args.run:
        run_once(master, args.work, store, out, int(executors))


def run_once(master: str, work: str, store_url: str, out: str, want_executors: int) -> None:

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from fll import EndPointField, open_store
    from fll.pipeline.runner import run_pipeline
    from fll.pipeline.spec import parse_spec
    from fll.spark import track

    user_dir = os.path.join(work, "user")
    os.makedirs(user_dir, exist_ok=True)
    with open(os.path.join(user_dir, "cluster_udfs.py"), "w", encoding="utf-8") as fh:
        fh.write(USER_MODULE)
    if user_dir not in sys.path:
        sys.path.insert(0, user_dir)

    began = time.monotonic()
    spark = (SparkSession.builder.master(master).appName("fll-cluster-test")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.cores.max", "2")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    def executors() -> int:  # the driver counts as one
        return int(spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()) - 1
    give_up = time.monotonic() + 90
    while executors() < want_executors and time.monotonic() < give_up:
        time.sleep(0.5)
    seen_executors = executors()

    with open(os.path.join(ROOT, "conf", "pipelines", "employee.json"), encoding="utf-8") as fh:
        spec = json.load(fh)
    for stage in spec["stages"]:
        if stage["name"] == "Employee Data Writer":
            stage["properties"]["path"] = os.path.join(work, "employee-data")
    for stage in spec["stages"]:
        if stage["name"] == "Field Normalizer":
            stage["properties"]["function"] = "cluster_udfs:normalize_loudly"
    result = run_pipeline(parse_spec(spec, base_dir=os.path.join(ROOT, "conf", "pipelines")),
                          store_url=store_url, run_id="pipeline-run", spark=spark, echo=None)

    customers = os.path.join(ROOT, "conf", "data", "customers.csv")
    with track(spark, store_url, "tracked-aggregate", strict=True):
        df = spark.read.option("header", True).csv(customers)
        shout = F.udf(lambda s: (s or "").strip().upper())
        (df.withColumn("who", shout("name")).groupBy("country")
           .agg(F.count("customer_id").alias("customers"), F.max("who").alias("last_name"))
           .write.mode("overwrite").csv(os.path.join(work, "by-country")))

    rows_loud = sorted(r["Name"] for r in spark.read.option("header", True).csv(
        os.path.join(work, "employee-data")).collect())
    lineage = {}
    with open_store(store_url) as store:
        for ds in store.datasets():
            for field in store.fields(ds, 0, 2 ** 62):
                ef = EndPointField(ds, field)
                sources = store.incoming(ef, 0, 2 ** 62)
                lineage[f"{ds.namespace}:{ds.name}.{field}"] = sorted(
                    f"{s.endpoint.namespace}:{s.endpoint.name}.{s.field}" for s in sources)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"lineage": lineage, "loud": rows_loud, "executors": seen_executors,
                   "master": spark.sparkContext.master,
                   "seconds": round(time.monotonic() - began, 1),
                   "written": result.rows_written}, fh, indent=1, sort_keys=True)
    spark.stop()


if __name__ == "__main__":
    main()
