"""End to end: Spark applications that never import fll, captured by the JVM listener.

One ``fll serve`` (127.0.0.1, a token) takes the events; two applications run
at once to keep the wall time down:

- ``spark-submit`` of a Python job writing parquet files, ``saveAsTable``,
  ``insertInto`` and DataSource V2 ``writeTo(...)`` ``append()``, ``overwrite()``
  and ``create()`` (a JDBC catalog
  over Derby's in-memory database, shipped with Spark);
- ``spark-sql -e "CREATE TABLE … AS SELECT …; INSERT …"`` with a WRONG token:
  the job still succeeds, one warning line names the problem, the events wait
  in the spool, and ``fll record --spool`` records them;
- a Python job whose listener points at a URL where nothing listens, with a
  second session whose listener posts to a server that answers 503 to every
  event: the same promise, one warning line per problem however many writes.

For every statement the recorded operations equal what ``track()`` records
for the same statement in this process (same operations, types, masking).
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fll import EndPoint, open_store
from fll.spark import track
from fll.spark.listener import ensure_jar, spark_conf

# two Spark applications start here: about a minute on an idle 2-core machine, far
# longer when it is shared, hence a timeout above the suite's default
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]

BIN = Path(sys.executable).parent
V2_CATALOG = {
    "spark.sql.catalog.e2e": "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog",
    "spark.sql.catalog.e2e.url": "jdbc:derby:memory:flle2e;create=true",
    "spark.sql.catalog.e2e.driver": "org.apache.derby.iapi.jdbc.AutoloadedDriver",
}
MASKED = ("SELECT customer_id, sha2(email, 256) AS email_hash, upper(name) AS name "
          "FROM e2e_customers WHERE city = 'Paris'")
TOTALS = ("SELECT customer_id, sum(amount) AS total, count(*) AS n FROM e2e_orders "
          "WHERE status = 'paid' GROUP BY customer_id")
V2_ROWS = "SELECT customer_id, amount * 2 AS doubled FROM e2e_orders"
V2_TABLE = "e2e.app.fll_e2e_v2"
V2_DDL = f"CREATE TABLE {V2_TABLE} (customer_id INT, doubled DOUBLE)"
V2_CREATED = "e2e.app.fll_e2e_v2_created"

# The application under test: plain PySpark, no fll anywhere.
JOB = f'''
import sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import lit

root = sys.argv[1]
spark = SparkSession.builder.appName("fll-e2e-job").getOrCreate()
spark.read.parquet(root + "/src/orders").createOrReplaceTempView("e2e_orders")
spark.read.parquet(root + "/src/customers").createOrReplaceTempView("e2e_customers")
spark.sql({MASKED!r}).write.mode("overwrite").parquet(root + "/out/masked")
spark.sql({TOTALS!r}).write.saveAsTable("fll_e2e_totals")
spark.sql({TOTALS!r}).write.insertInto("fll_e2e_totals")
spark.sql({V2_DDL!r})
spark.sql({V2_ROWS!r}).writeTo({V2_TABLE!r}).append()
spark.sql({V2_ROWS!r}).writeTo({V2_TABLE!r}).overwrite(lit(True))
spark.sql({V2_ROWS!r}).writeTo({V2_CREATED!r}).create()
spark.stop()
'''


# Bad settings: the application's listener (from --conf) points at a port where
# nothing listens; a second session's listener, registered by hand, at a server
# that answers 503. Two writes each: a problem is logged once, not per event.
BAD_JOB = """
import sys
from py4j.java_gateway import JavaClass
from pyspark.sql import SparkSession

root, failing_url = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("fll-e2e-bad").getOrCreate()
for i in range(2):
    (spark.read.parquet(root + "/src/orders").selectExpr("order_id", "amount * 2 AS doubled")
     .write.parquet(root + "/bad/unreachable%d" % i))
other = spark.newSession()
manager = other._jsparkSession.listenerManager()
manager.clear()  # not the --conf listener: only the one posting to the failing server
conf = (spark.sparkContext._jsc.sc().getConf().clone().set("spark.fll.url", failing_url)
        .set("spark.fll.spool", root + "/spool-failing"))
manager.register(JavaClass("fll.spark.LineageListener", spark._jvm._gateway_client)(conf))
for i in range(2):
    (other.read.parquet(root + "/src/orders").selectExpr("order_id", "amount + 1 AS more")
     .write.parquet(root + "/bad/failing%d" % i))
spark.stop()
"""


class _Failing(BaseHTTPRequestHandler):
    """Answers every request 503, as a server whose store is down does; counts them."""

    posts: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).posts.append(self.path)
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "the store is unavailable"}')

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def failing_server():
    """A 127.0.0.1 server answering 503; shut down after the module."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Failing.posts
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _sql_statements(src: str) -> list[str]:
    return [f"CREATE TABLE fll_e2e_ctas USING parquet AS SELECT customer_id, "
            f"xxhash64(status) AS status_key, amount FROM parquet.`{src}/orders` "
            f"WHERE amount > 10",
            f"INSERT INTO fll_e2e_ctas SELECT customer_id, xxhash64(status), "
            f"coalesce(amount, 0) FROM parquet.`{src}/orders`"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _confs(extra: dict[str, str]) -> list[str]:
    out = []
    for k, v in {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                 "spark.driver.bindAddress": "127.0.0.1", "spark.sql.shuffle.partitions": "2",
                 **extra}.items():
        out += ["--conf", f"{k}={v}"]
    return out


def _normal(info, names: dict[str, str]) -> str:
    """An operation set as canonical JSON, with destination names mapped."""
    text = json.dumps(info.to_dict(), sort_keys=True)
    for old, new in names.items():
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    data = json.loads(text)
    data.pop("checksum", None)  # of the names before mapping: compared via the operations
    data["operations"] = sorted(data["operations"], key=lambda o: o["name"])
    return json.dumps(data, sort_keys=True)


def _recorded(store, dest: tuple[str, str]) -> set[str]:
    ep = EndPoint(*dest)
    return {_normal(store.operation_set(c), {})
            for c in store.checksums(ep, 0, 2**62, "incoming")}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``fll serve`` on a free 127.0.0.1 port with a token; stopped by its pid after."""
    from fll.testing.serving import wait_until_serving

    root = tmp_path_factory.mktemp("listener_e2e")
    port = _free_port()
    store_url = f"sqlite:///{root}/served.db"
    proc = subprocess.Popen([str(BIN / "fll"), "--store", store_url, "serve", "--port",
                             str(port), "--token", "e2e-token", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, 60)
        yield root, base, store_url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def applications(served, failing_server, spark):
    """Runs the three applications at once; returns their completed processes and paths."""
    root, base, store_url = served
    src = root / "src"
    spark.createDataFrame(
        [(1, 1, 120.0, "paid"), (2, 1, 5.0, "open"), (3, 2, 40.0, "paid")],
        "order_id int, customer_id int, amount double, status string",
    ).coalesce(1).write.parquet(str(src / "orders"))
    spark.createDataFrame(
        [(1, "Ann", "ann@x.org", "Paris"), (2, "Bob", "bob@x.org", "Lyon")],
        "customer_id int, name string, email string, city string",
    ).coalesce(1).write.parquet(str(src / "customers"))
    (root / "job.py").write_text(JOB)
    jar = ensure_jar()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    (root / "bad_job.py").write_text(BAD_JOB)
    job_dir, sql_dir, bad_dir = root / "job", root / "sql", root / "bad"
    job_dir.mkdir()
    sql_dir.mkdir()
    bad_dir.mkdir()
    job = subprocess.Popen(
        [str(BIN / "spark-submit"), "--master", "local[1]",
         *spark_conf(base, "e2e-token", str(root / "spool-job"), jar),
         *_confs({"spark.sql.warehouse.dir": str(job_dir / "wh"), **V2_CATALOG}),
         str(root / "job.py"), str(root)],
        cwd=job_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sql = subprocess.Popen(
        [str(BIN / "spark-sql"), "--master", "local[1]",
         *spark_conf(base, "a-wrong-token", str(root / "spool-sql"), jar),
         *_confs({"spark.sql.warehouse.dir": str(sql_dir / "wh"),
                  "spark.hadoop.javax.jdo.option.ConnectionURL":
                      f"jdbc:derby:;databaseName={sql_dir}/metastore_db;create=true"}),
         "-e", "; ".join(_sql_statements(str(src))) + ";"],
        cwd=sql_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    unreachable = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    bad = subprocess.Popen(
        [str(BIN / "spark-submit"), "--master", "local[1]",
         *spark_conf(unreachable, None, str(root / "spool-unreachable"), jar),
         *_confs({"spark.sql.warehouse.dir": str(bad_dir / "wh")}),
         str(root / "bad_job.py"), str(root), failing_server[0]],
        cwd=bad_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        job_out = job.communicate(timeout=1500)
        sql_out = sql.communicate(timeout=1500)
        bad_out = bad.communicate(timeout=1500)
    finally:
        for p in (job, sql, bad):
            if p.poll() is None:
                p.kill()
    return {"root": root, "src": src, "store_url": store_url, "base": base,
            "job": (job.returncode, *job_out), "sql": (sql.returncode, *sql_out),
            "bad": (bad.returncode, *bad_out), "unreachable": unreachable,
            "failing": failing_server,
            "job_wh": job_dir / "wh", "sql_wh": sql_dir / "wh"}


def _tracked(spark, root: Path, statements) -> list:
    store = open_store(f"sqlite:///{root}/tracked-{len(statements)}.db")
    try:
        with track(spark, store, program="fll-e2e-job", strict=True) as t:
            for run in statements:
                run()
        return list(t.runs)
    finally:
        store.close()


@pytest.mark.covers("InsertIntoHadoopFsRelationCommand", "spark-submit: df.write.parquet, insertInto",
                    "listener")
@pytest.mark.covers("CreateDataSourceTableAsSelectCommand", "spark-submit: df.write.saveAsTable",
                    "listener")
@pytest.mark.covers("AppendData", "spark-submit: df.writeTo(t).append()", "listener")
@pytest.mark.covers("OverwriteByExpression", "spark-submit: df.writeTo(t).overwrite(condition)",
                    "listener")
@pytest.mark.covers("CreateTableAsSelect", "spark-submit: df.writeTo(t).create()", "listener")
def test_a_python_job_that_never_imports_fll_is_recorded_like_track(applications, spark,
                                                                     tmp_path):
    from pyspark.sql import functions as F

    app = applications
    rc, _out, err = app["job"]
    assert rc == 0, err[-3000:]
    assert "fll: " not in err  # every event was taken: no warning
    src, here = app["src"], tmp_path
    spark.read.parquet(str(src / "orders")).createOrReplaceTempView("e2e_orders")
    spark.read.parquet(str(src / "customers")).createOrReplaceTempView("e2e_customers")
    for k, v in V2_CATALOG.items():
        spark.conf.set(k, v)
    spark.sql(f"DROP TABLE IF EXISTS {V2_TABLE}")
    spark.sql(f"DROP TABLE IF EXISTS {V2_CREATED}")
    spark.sql(V2_DDL)
    spark.sql("DROP TABLE IF EXISTS fll_e2e_totals")
    try:
        runs = _tracked(spark, here, [
            lambda: spark.sql(MASKED).write.mode("overwrite").parquet(str(here / "masked")),
            lambda: spark.sql(TOTALS).write.saveAsTable("fll_e2e_totals"),
            lambda: spark.sql(TOTALS).write.insertInto("fll_e2e_totals"),
            # the same DataFrameWriterV2 writes: track() names their table as the listener
            lambda: spark.sql(V2_ROWS).writeTo(V2_TABLE).append(),
            lambda: spark.sql(V2_ROWS).writeTo(V2_TABLE).overwrite(F.lit(True)),
            lambda: spark.sql(V2_ROWS).writeTo(V2_CREATED).create(),
        ])
    finally:
        spark.sql("DROP TABLE IF EXISTS fll_e2e_totals")
        spark.sql(f"DROP TABLE IF EXISTS {V2_TABLE}")
        spark.sql(f"DROP TABLE IF EXISTS {V2_CREATED}")
    assert len(runs) == 6
    assert [r.method for r in runs[3:]] == ["DataFrameWriterV2.append",
                                            "DataFrameWriterV2.overwrite",
                                            "DataFrameWriterV2.create"]
    # a JDBC table has no location: the listener and track() both name it by its name, so
    # finding the listener's run at track's destination proves the names agree
    listener_dest = [("file", str(src.parent / "out" / "masked")),
                     ("file", str(app["job_wh"] / "fll_e2e_totals")),
                     ("file", str(app["job_wh"] / "fll_e2e_totals")),
                     *(("spark", r.destination.name) for r in runs[3:])]
    assert all(r.destination.namespace == "spark" for r in runs[3:])
    store = open_store(app["store_url"])
    try:
        for run, dest in zip(runs, listener_dest, strict=True):
            mapped = _normal(run.info, {run.destination.name: dest[1],
                                        run.destination.namespace: dest[0]})
            assert mapped in _recorded(store, dest), (run.method, dest)
        # program = the application's name; the masked hash is kept
        masked = EndPoint(*listener_dest[0])
        runs_ = store.runs(masked, 0, 2**62, "incoming")
        assert [r.program for r in runs_] == ["fll-e2e-job"]
        info = store.operation_set(runs_[0].checksum)
        tags = {t["masking"] for op in info.to_dict()["operations"]
                for i in op.get("inputs", []) for t in i.get("transformations", [])
                if op["name"].endswith("email_hash") and i["name"] == "email"}
        assert tags == {True}
    finally:
        store.close()


@pytest.mark.covers("CreateDataSourceTableAsSelectCommand", "spark-sql -e CTAS (spooled, fll record --spool)",
                    "listener")
@pytest.mark.covers("InsertIntoHadoopFsRelationCommand", "spark-sql -e INSERT INTO (spooled, fll record --spool)",
                    "listener")
def test_spark_sql_with_a_wrong_token_finishes_spools_and_records_later(applications, spark,
                                                                        tmp_path):
    app = applications
    rc, _out, err = app["sql"]
    assert rc == 0, err[-3000:]
    warnings = [line for line in err.splitlines() if "fll: " in line]
    assert len(warnings) == 1, warnings
    assert "token" in warnings[0] and "401" in warnings[0]
    spool = app["root"] / "spool-sql"
    # the CTAS and the INSERT, nothing else, in the part of the spool of this server
    assert len(list(spool.glob("*/*.json"))) == 2
    assert f"--server {app['base']}" in warnings[0]

    done = subprocess.run([str(BIN / "fll"), "--store", app["store_url"], "record", "--spool",
                           str(spool), "--server", app["base"]], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"recorded 2 new run(s) from {spool} (captured for {app['base']})" in done.stderr
    assert not list(spool.rglob("*.json"))

    statements = _sql_statements(str(app["src"]))
    spark.sql("DROP TABLE IF EXISTS fll_e2e_ctas")
    try:
        runs = _tracked(spark, tmp_path, [lambda s=s: spark.sql(s) for s in statements])
    finally:
        spark.sql("DROP TABLE IF EXISTS fll_e2e_ctas")
    assert len(runs) == 2
    dest = ("file", str(app["sql_wh"] / "fll_e2e_ctas"))
    store = open_store(app["store_url"])
    try:
        recorded = _recorded(store, dest)
        for run in runs:
            assert _normal(run.info, {run.destination.name: dest[1]}) in recorded
        programs = {r.program for r in store.runs(EndPoint(*dest), 0, 2**62, "incoming")}
        assert len(programs) == 1 and programs.pop().startswith("SparkSQL")
    finally:
        store.close()


def test_a_wrong_url_and_a_failing_server_leave_the_job_alone_and_the_events_spooled(
        applications, tmp_path):
    app = applications
    rc, _out, err = app["bad"]
    assert rc == 0, err[-3000:]
    root = app["root"]
    for name in ("unreachable0", "unreachable1", "failing0", "failing1"):
        assert list((root / "bad" / name).glob("*.parquet")), name  # every write finished
    warnings = [line for line in err.splitlines() if "fll: " in line]
    assert len(warnings) == 2, warnings  # one per problem, not one per event
    unreachable = [w for w in warnings if "cannot reach" in w]
    failing = [w for w in warnings if "HTTP 503" in w]
    assert len(unreachable) == 1 and app["unreachable"] in unreachable[0]
    assert "spark.fll.url" in unreachable[0]
    assert len(failing) == 1 and app["failing"][0] in failing[0]
    assert app["failing"][1] and set(app["failing"][1]) == {"/api/v1/spark/events"}
    store_url = f"sqlite:///{tmp_path}/spooled.db"
    for spool, url in (("spool-unreachable", app["unreachable"]),
                       ("spool-failing", app["failing"][0])):
        assert len(list((root / spool).glob("*/*.json"))) == 2, spool
        done = subprocess.run([str(BIN / "fll"), "--store", store_url, "record", "--spool",
                               str(root / spool), "--server", url], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "recorded 2 new run(s)" in done.stderr, done.stderr
