"""On a real Spark standalone cluster (a master and two workers started here
from the installed pyspark, on 127.0.0.1, with small memory), a pipeline whose
``python`` stage runs a UDF from the user's own module and a ``track()``-ed
aggregate record exactly the lineage they record on ``local[2]``.

Each job runs in its own process (it needs its own SparkSession, not the
shared local one); every process started here is stopped by its id.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "cluster_job.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> str:
    import pyspark
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _wait_for_port(port: int, proc: subprocess.Popen, log: str, seconds: float = 60) -> None:
    give_up = time.monotonic() + seconds
    while time.monotonic() < give_up:
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}: {open(log).read()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"nothing listened on {port} after {seconds}s: {open(log).read()[-2000:]}")


@pytest.fixture
def standalone_cluster(tmp_path):
    home = _spark_home()
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", SPARK_WORKER_DIR=str(tmp_path / "work"),
               SPARK_LOG_DIR=str(tmp_path / "logs"), PYSPARK_PYTHON=sys.executable)
    spark_class = os.path.join(home, "bin", "spark-class")
    started: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, str]:
        log = str(tmp_path / f"{name}.log")
        with open(log, "w") as out:
            proc = subprocess.Popen([spark_class, *args], env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc, log

    try:
        port = _free_port()
        master, log = start("master", "org.apache.spark.deploy.master.Master",
                            "--host", "127.0.0.1", "--port", str(port),
                            "--webui-port", str(_free_port()))
        _wait_for_port(port, master, log)
        url = f"spark://127.0.0.1:{port}"
        for n in (1, 2):
            start(f"worker{n}", "org.apache.spark.deploy.worker.Worker", url,
                  "--host", "127.0.0.1", "--cores", "1", "--memory", "700m",
                  "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"w{n}"))
        yield url
    finally:
        for proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # the group spark-class started
        for proc in started:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        assert all(p.poll() is not None for p in started)


def test_a_standalone_cluster_records_the_same_lineage_as_local(standalone_cluster, tmp_path):
    work = tmp_path / "job"  # the same output paths in both runs: datasets are named by path
    runs = [("local[2]", f"sqlite:///{tmp_path}/local.db", tmp_path / "local.json", "0"),
            (standalone_cluster, f"sqlite:///{tmp_path}/cluster.db", tmp_path / "cluster.json",
             "2")]
    proc = subprocess.run([sys.executable, JOB, "--work", str(work)] +
                          [a for run in runs for a in ("--run", *map(str, run))],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr[-3000:]
    local, cluster = (json.loads(run[2].read_text(encoding="utf-8")) for run in runs)
    print(f"local[2] {local['seconds']}s, cluster {cluster['seconds']}s")
    assert local["master"] == "local[2]" and cluster["master"] == standalone_cluster
    assert cluster["executors"] == 2, "both workers ran executors"
    # the UDF from the user's module ran on the executors
    assert cluster["loud"] == local["loud"] == ["ADA LOVELACE!", "ALAN TURING!", "GRACE HOPPER!"]
    assert cluster["written"] == local["written"] == {"Employee Data Writer": 3}
    assert any(k.endswith("by-country.last_name") for k in cluster["lineage"])
    assert cluster["lineage"] == local["lineage"]
