"""`fll serve`: the real server under uvicorn on a free loopback port, and the
refusal to bind a network address without a token."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from urllib.parse import quote

import click
import httpx
import pytest
from click.testing import CliRunner

from fll.server.cli import check_bind, is_loopback, serve
from fll.testing.serving import wait_until_serving

from .test_ingest import ol_event


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_real_server_starts_answers_and_stops(tmp_path):
    port = _free_port()
    url = f"sqlite:///{tmp_path}/served.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", "from fll.server.cli import serve; serve()", "--store", url,
         "--port", str(port), "--token", "tok", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, 60)
        assert httpx.post(base + "/api/v1/lineage", json=ol_event()).status_code == 401
        r = httpx.post(base + "/api/v1/lineage", json=ol_event(),
                       headers={"Authorization": "Bearer tok"})
        assert r.status_code == 201, r.text
        # uvicorn hands over the raw path: an encoded "/" stays inside the dataset name
        path = (f"/v3/namespaces/{quote('s3://lake', safe='')}/datasets/"
                f"{quote('marts/customer_totals', safe='')}/lineage/fields?start=0&end=now")
        assert httpx.get(base + path).status_code == 401  # reads need the token too
        r = httpx.get(base + path, headers={"Authorization": "Bearer tok"})
        assert r.status_code == 200 and r.json() == ["customer", "tax id", "total"]
        assert httpx.get(base + "/openapi.json").json()["info"]["title"] == "fll"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert proc.returncode is not None


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("::1", True), ("localhost", True), ("[::1]", True),
    ("0.0.0.0", False), ("10.1.2.3", False), ("::", False)])
def test_loopback_detection(host, loopback):
    assert is_loopback(host) is loopback


def test_a_network_bind_without_a_token_is_refused_unless_insecure():
    with pytest.raises(click.UsageError, match="--insecure"):
        check_bind("0.0.0.0", None, False)
    check_bind("0.0.0.0", "tok", False)
    check_bind("0.0.0.0", None, True)
    check_bind("127.0.0.1", None, False)
    result = CliRunner().invoke(serve, ["--host", "0.0.0.0", "--store", "sqlite:///:memory:"],
                                env={"FLL_TOKEN": ""})
    assert result.exit_code == 2 and "refusing to listen on 0.0.0.0" in result.output


def test_a_worker_logs_its_pauses_and_freezes_its_heap_with_log_stalls(tmp_path):
    """`--log-stalls` reaches every worker: a pause over the threshold is logged
    with its cause, and at shutdown the accounting collection of `--gc-freeze`
    reports what freezing kept (nothing, for ingests and questions)."""
    port = _free_port()
    url = f"sqlite:///{tmp_path}/served.db"
    log = tmp_path / "server.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from fll.server.cli import serve; serve()", "--store", url,
             "--port", str(port), "--workers", "2", "--log-stalls", "0.01",
             "--checkpoint-every", "0.05", "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=err)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(base, proc, 60)
            with httpx.Client(base_url=base, timeout=30) as client:
                for i in range(20):
                    r = client.post("/api/v1/lineage",
                                    json=ol_event(run_id=f"00000000-0000-4000-8000-0000000ee{i:03d}"))
                    assert r.status_code == 201, r.text
            time.sleep(0.3)  # a few checkpoint turns
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    causes = {line.split()[1] for line in text.splitlines() if line.startswith("stall ")}
    assert {"commit", "checkpoint", "gc"} <= causes, text[-2000:]
    shutdown = [line for line in text.splitlines() if line.startswith("garbage collector:")]
    assert len(shutdown) == 2, text[-2000:]  # one per worker
    assert all(line.endswith(" freed 0") for line in shutdown), shutdown
