"""A live `fll serve` on 127.0.0.1 for the end-to-end tests with real OpenLineage
producers: a subprocess on a free loopback port, with an API token, stopped by
its process id when the module is done."""
from __future__ import annotations

import socket
import subprocess
import sys
from typing import NamedTuple

import pytest

from fll.testing.serving import wait_until_serving

TOKEN = "e2e-secret-token"


class LiveServer(NamedTuple):
    url: str        # http://127.0.0.1:<port>
    store_url: str  # the SQLite store it serves
    token: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store_url: str, token: str | None = TOKEN) -> tuple[subprocess.Popen, str]:
    port = free_port()
    args = [sys.executable, "-c", "from fll.server.cli import serve; serve()",
            "--store", store_url, "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning"]
    if token:
        args += ["--token", token]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base, proc, 60)
    except RuntimeError:
        stop(proc)
        raise
    return proc, base


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory) -> LiveServer:
    store_url = f"sqlite:///{tmp_path_factory.mktemp('live')}/served.db"
    proc, base = start_server(store_url)
    try:
        yield LiveServer(base, store_url, TOKEN)
    finally:
        stop(proc)
