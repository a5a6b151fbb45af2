"""`fll serve` at start: a busy port is one line and exit 3, `--port 0` prints the
port it got, and a store that does not exist is announced, never served silently.

The server runs as a real subprocess on 127.0.0.1 and is stopped by its pid.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import build_store

SERVE = "import sys; from fll.cli import main; sys.argv[0] = 'fll'; main()"


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SERVE, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FLL_STORE": ""})


def _first_line(proc: subprocess.Popen, pattern: str, timeout: float = 30) -> re.Match:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m
    raise AssertionError(f"no line matching {pattern!r}: {seen}")


def _stop(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _datasets(port: int) -> httpx.Response:
    """GET /api/v1/datasets on the printed port, waiting up to 20 s for it to answer."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/v1/datasets", timeout=2)
        except httpx.TransportError:
            assert time.monotonic() < deadline, "the printed port never answered"
            time.sleep(0.1)


def test_a_busy_port_is_one_line_and_exit_3(tmp_path):
    url = build_store(f"sqlite:///{tmp_path}/s.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-c", SERVE, "--store", url, "serve",
                               "--port", str(port)], capture_output=True, text=True,
                              timeout=60)
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        f"fll serve: error: cannot listen on 127.0.0.1:{port}: the port is already in use"]
    assert proc.stdout == ""


@pytest.mark.slow
def test_port_0_prints_the_port_it_listens_on(tmp_path):
    url = build_store(f"sqlite:///{tmp_path}/s.db")
    proc = _start("--store", url, "serve", "--port", "0", "--log-level", "warning")
    try:
        m = _first_line(proc, r"serving .* on http://127\.0\.0\.1:(\d+) ")
        port = int(m.group(1))
        assert port != 0
        r = _datasets(port)
        assert r.status_code == 200 and r.json()["datasets"]
    finally:
        _stop(proc)


@pytest.mark.slow
def test_a_store_that_does_not_exist_is_announced_as_new_and_empty(tmp_path):
    typo = f"sqlite:///{tmp_path}/fll-dta.db"
    proc = _start("--store", typo, "serve", "--port", "0", "--log-level", "warning")
    try:
        m = _first_line(proc, r"does not exist: serving a NEW, EMPTY store")
        assert "fll-dta.db" in m.string
    finally:
        _stop(proc)


@pytest.mark.slow
def test_without_store_serve_uses_the_config_files_store_as_every_command_does(tmp_path):
    url = build_store(f"sqlite:///{tmp_path}/from-config.db")
    config = tmp_path / "fll.yaml"
    config.write_text(f"store: {url}\n")
    proc = subprocess.Popen([sys.executable, "-c", SERVE, "serve", "--port", "0",
                             "--log-level", "warning"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FLL_STORE": "", "FLL_CONFIG": str(config)})
    try:
        m = _first_line(proc, r"serving (.*) on http://127\.0\.0\.1:(\d+) ")
        assert "from-config.db" in m.group(1)
        port = int(m.group(2))
        r = _datasets(port)
        assert r.status_code == 200 and {"namespace": "ns", "name": "A"} in r.json()["datasets"]
    finally:
        _stop(proc)


def test_a_store_whose_directory_does_not_exist_is_refused_in_one_line(tmp_path):
    """A typo in a directory of the store path builds no tree and serves nothing."""
    url = f"sqlite:///{tmp_path}/typo/nope.db"
    proc = subprocess.run([sys.executable, "-c", SERVE, "serve", "--store", url, "--port", "0"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FLL_STORE": ""})
    assert proc.returncode == 3
    assert proc.stderr.splitlines() == [
        f"fll serve: error: store {url}: directory {tmp_path}/typo does not exist (a typo in "
        f"the store path?); give --create to create it and a new store"]
    assert not (tmp_path / "typo").exists()


@pytest.mark.slow
@pytest.mark.parametrize("where", ["serve --create", "fll --create"])
def test_create_lets_serve_make_the_directory_and_a_new_store_announced_once(tmp_path, where):
    url = f"sqlite:///{tmp_path}/new/dir/fll.db"
    args = (["--store", url, "serve", "--create"] if where == "serve --create"
            else ["--create", "--store", url, "serve"])
    proc = _start(*args, "--port", "0", "--log-level", "warning")
    try:
        new = _first_line(proc, r"does not exist: serving a NEW, EMPTY store")
        assert "new/dir/fll.db" in new.string
        m = _first_line(proc, r"serving .* on http://127\.0\.0\.1:(\d+) ")
        assert _datasets(int(m.group(1))).json() == {"datasets": []}
    finally:
        _stop(proc)
    assert "NEW, EMPTY" not in proc.stderr.read()  # said once
    assert (tmp_path / "new" / "dir" / "fll.db").exists()
