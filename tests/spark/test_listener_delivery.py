"""End to end: the listener's delivery at JVM exit, and a spool shared by two servers.

- A one-shot ``spark-sql -e "CREATE TABLE … AS SELECT …"`` and a short
  ``spark-submit`` job (which never stops its session: Spark does so in its
  shutdown hook) are recorded by their server by the time the command exits:
  the store is read right after ``wait()``, with no sleep or poll, and nothing
  is left in the spool.
- A server that takes an event and never answers: the command still exits
  within ``spark.fll.exitTimeout`` of the listener's post, not the post's own
  read timeout, and the event is spooled, not lost.
- Two servers, A and B, and one spool directory: an application for A runs
  while A is down (its event is spooled), then an application for B starts
  with the same spool: B records its own writes and never A's, which stays
  spooled; ``fll record --spool`` names A; the next application for A, once A
  is back, delivers it. B's statements are Hive ones (CTAS, INSERT, INSERT
  OVERWRITE DIRECTORY), each recorded once at its destination.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fll import EndPoint, open_store
from fll.spark.listener import ensure_jar, spark_conf

from .test_listener_e2e import _confs, _free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]

BIN = Path(sys.executable).parent
TOKEN = "delivery-token"

# plain PySpark, no fll, no spark.stop(): the session is stopped by Spark's own
# shutdown hook, after which the listener's flush runs
SHORT_JOB = """
import sys
from pyspark.sql import SparkSession

root = sys.argv[1]
spark = SparkSession.builder.appName("fll-short-job").getOrCreate()
(spark.read.parquet(root + "/src/orders").selectExpr("order_id", "amount * 2 AS doubled")
 .write.parquet(root + "/out/short"))
"""


def _serve(store_url: str, port: int) -> subprocess.Popen:
    from fll.testing.serving import wait_until_serving

    proc = subprocess.Popen([str(BIN / "fll"), "--store", store_url, "serve", "--port",
                             str(port), "--token", TOKEN, "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc, 60)
    except BaseException:
        _stop(proc)
        raise
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("listener_delivery")
    spark.createDataFrame(
        [(1, 1, 120.0, "paid"), (2, 1, 5.0, "open"), (3, 2, 40.0, "paid")],
        "order_id int, customer_id int, amount double, status string",
    ).coalesce(1).write.parquet(str(root / "src" / "orders"))
    return root


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def _spark_sql(root: Path, name: str, url: str, spool: Path, statements: list[str]
               ) -> subprocess.Popen:
    """``spark-sql -e`` with the listener, its own warehouse and metastore under root/name."""
    here = root / name
    here.mkdir()
    return subprocess.Popen(
        [str(BIN / "spark-sql"), "--master", "local[1]",
         *spark_conf(url, TOKEN, str(spool), ensure_jar()),
         *_confs({"spark.sql.warehouse.dir": str(here / "wh"),
                  "spark.hadoop.javax.jdo.option.ConnectionURL":
                      f"jdbc:derby:;databaseName={here}/metastore_db;create=true"}),
         "-e", "; ".join(statements) + ";"],
        cwd=here, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> str:
    """Waits for the command to exit; its stderr. Nothing is waited for after that."""
    try:
        _out, err = proc.communicate(timeout=1500)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    return err


def _runs(store_url: str, dest: tuple[str, str]) -> list:
    store = open_store(store_url)
    try:
        return store.runs(EndPoint(*dest), 0, 2**62, "incoming")
    finally:
        store.close()


def _ctas(table: str, src: Path) -> str:
    return (f"CREATE TABLE {table} USING parquet AS SELECT customer_id, amount * 2 AS doubled "
            f"FROM parquet.`{src}/orders` WHERE amount > 10")


@pytest.mark.covers("CreateDataSourceTableAsSelectCommand", "spark-sql -e CTAS", "listener")
@pytest.mark.covers("InsertIntoHadoopFsRelationCommand", "spark-submit: df.write.parquet",
                    "listener")
def test_a_one_shot_spark_sql_ctas_and_a_short_job_are_on_their_server_when_they_exit(
        workdir):
    root = workdir / "one_shot"
    root.mkdir()
    (root / "short_job.py").write_text(SHORT_JOB)
    port, spool = _free_port(), root / "spool"
    store_url = f"sqlite:///{root}/served.db"
    server = _serve(store_url, port)
    url = f"http://127.0.0.1:{port}"
    try:
        sql = _spark_sql(root, "sql", url, spool, [_ctas("one_shot_ctas", workdir / "src")])
        (root / "job").mkdir()
        job = subprocess.Popen(
            [str(BIN / "spark-submit"), "--master", "local[1]",
             *spark_conf(url, TOKEN, str(spool), ensure_jar()),
             *_confs({"spark.sql.warehouse.dir": str(root / "job" / "wh")}),
             str(root / "short_job.py"), str(workdir)],
            cwd=root / "job", env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        sql_err = _finish(sql)
        # the command has exited: the answer must be there already
        ctas = _runs(store_url, ("file", str(root / "sql" / "wh" / "one_shot_ctas")))
        job_err = _finish(job)
        short = _runs(store_url, ("file", str(workdir / "out" / "short")))
    finally:
        _stop(server)
    assert len(ctas) == 1 and ctas[0].program.startswith("SparkSQL"), ctas
    assert len(short) == 1 and short[0].program == "fll-short-job", short
    assert "fll: " not in sql_err and "fll: " not in job_err
    assert not list(spool.rglob("*.json"))  # nothing was left to re-send


@pytest.mark.covers("CreateHiveTableAsSelectCommand",
                    "spark-sql -e CREATE TABLE … STORED AS … AS SELECT", "listener")
@pytest.mark.covers("InsertIntoHiveTable", "spark-sql -e INSERT INTO a Hive table", "listener")
@pytest.mark.covers("InsertIntoHiveDirCommand",
                    "spark-sql -e INSERT OVERWRITE DIRECTORY … STORED AS", "listener")
@pytest.mark.covers("InsertIntoDataSourceDirCommand",
                    "spark-sql -e INSERT OVERWRITE DIRECTORY … USING (sent as the "
                    "InsertIntoHadoopFsRelationCommand it runs)", "listener")
def test_an_event_is_only_ever_delivered_to_the_server_it_was_captured_for(workdir):
    root = workdir / "two_servers"
    root.mkdir()
    src, spool = workdir / "src", root / "spool"  # ONE spool directory for both servers
    port_a, port_b = _free_port(), _free_port()
    url_a, url_b = f"http://127.0.0.1:{port_a}", f"http://127.0.0.1:{port_b}"
    store_a, store_b = f"sqlite:///{root}/a.db", f"sqlite:///{root}/b.db"

    # 1. A is down: its application's event waits in A's part of the spool
    err = _finish(_spark_sql(root, "a1", url_a, spool, [_ctas("a1", src)]))
    assert "cannot reach fll server " + url_a in err
    assert f"--server {url_a}" in err  # the warning gives the whole command
    waiting = [p for p in spool.iterdir() if p.is_dir()]
    assert len(waiting) == 1 and (waiting[0] / "server").read_text().strip() == url_a
    assert len(list(waiting[0].glob("*.json"))) == 1

    # 2. B's application starts next, with the same spool, while A is still down
    hive = root / "b1"
    server_b = _serve(store_b, port_b)
    try:
        err = _finish(_spark_sql(root, "b1", url_b, spool, [
            f"CREATE TABLE b_hive STORED AS TEXTFILE AS SELECT order_id, status "
            f"FROM parquet.`{src}/orders`",
            f"INSERT INTO b_hive SELECT order_id + 10, upper(status) FROM parquet.`{src}/orders`",
            f"INSERT OVERWRITE DIRECTORY '{hive}/hive_dir' STORED AS TEXTFILE "
            f"SELECT customer_id FROM parquet.`{src}/orders`",
            f"INSERT OVERWRITE DIRECTORY '{hive}/ds_dir' USING parquet "
            f"SELECT amount FROM parquet.`{src}/orders`"]))
    finally:
        _stop(server_b)
    assert "fll: " not in err, err[-3000:]
    # once each: not the CTAS's own nested InsertIntoHiveTable, nor the DIRECTORY … USING
    # command beside the InsertIntoHadoopFsRelationCommand it runs
    assert len(_runs(store_b, ("file", str(hive / "wh" / "b_hive")))) == 2  # CTAS + INSERT
    assert len(_runs(store_b, ("file", str(hive / "hive_dir")))) == 1
    assert len(_runs(store_b, ("file", str(hive / "ds_dir")))) == 1
    a1_dest = ("file", str(root / "a1" / "wh" / "a1"))
    assert _runs(store_b, a1_dest) == []  # A's event was never sent to B
    assert len(list(waiting[0].glob("*.json"))) == 1  # still spooled, for A

    # 3. fll record --spool names A's server, and records nothing into B's store
    done = subprocess.run([str(BIN / "fll"), "--store", store_b, "record", "--spool",
                           str(spool), "--server", url_b], capture_output=True, text=True,
                          timeout=120, env=_env())
    assert done.returncode != 0 and f"{url_a} (1 event)" in done.stderr, done.stderr
    assert _runs(store_b, a1_dest) == []

    # 4. A is back: its next application delivers the waiting event, then its own
    server_a = _serve(store_a, port_a)
    try:
        err = _finish(_spark_sql(root, "a2", url_a, spool, [_ctas("a2", src)]))
        a1, a2 = _runs(store_a, a1_dest), _runs(store_a, ("file", str(root / "a2" / "wh" / "a2")))
    finally:
        _stop(server_a)
    assert "fll: " not in err, err[-3000:]
    assert len(a1) == 1 and len(a2) == 1
    assert not list(spool.rglob("*.json"))


class _Hanging(BaseHTTPRequestHandler):
    """Reads an event and answers only after a minute: a server stuck on its store."""

    received: list[float] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append(time.monotonic())
        time.sleep(60)
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_the_exit_flush_is_bounded_and_spools_the_event_it_could_not_finish(workdir):
    root = workdir / "hanging"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hanging)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url, spool = f"http://127.0.0.1:{server.server_address[1]}", root / "spool"
    here = root / "sql"
    here.mkdir()
    try:
        proc = subprocess.Popen(
            [str(BIN / "spark-sql"), "--master", "local[1]",
             *spark_conf(url, TOKEN, str(spool), ensure_jar()),
             *_confs({"spark.sql.warehouse.dir": str(here / "wh"),
                      "spark.fll.exitTimeout": "2s",
                      "spark.hadoop.javax.jdo.option.ConnectionURL":
                          f"jdbc:derby:;databaseName={here}/metastore_db;create=true"}),
             "-e", _ctas("hanging_ctas", workdir / "src") + ";"],
            cwd=here, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _finish(proc)
        exited = time.monotonic()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert len(_Hanging.received) == 1
    # the post's read timeout is 15 s: the JVM was let go well before it
    assert exited - _Hanging.received[0] < 12, exited - _Hanging.received[0]
    waiting = list(spool.glob("*/*.json"))
    assert len(waiting) == 1 and "hanging_ctas" in waiting[0].read_text()
