"""Shared machinery of the reliability suite: figures for RELIABILITY.md, a live
server subprocess on a free loopback port, forked writers, and the Bigtable
emulator fixtures of the store suite.

Every test here carries ``@pytest.mark.reliability("<load or fault>")`` and a
docstring saying what it checks; `figures` records the numbers it measured.
`scripts/reliability.py` turns the three into the RELIABILITY.md table. This
module must never listen on anything but 127.0.0.1 and never leave a child
process running after a test.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

# the emulator fixtures of the store suite, reused (one emulator per session)
from tests.store.conftest import (  # noqa: F401
    Emulator,
    bigtable_emulator,
    emulator_binary,
    free_port,
)

ROOT = Path(__file__).resolve().parents[2]
#: ``FLL_RELIABILITY_FULL=1`` runs the load test for 30 s (CI: 5 s)
FULL = os.environ.get("FLL_RELIABILITY_FULL") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reliability(load): the load or fault a reliability "
                                       "test applies (a column of RELIABILITY.md)")


class Figures:
    """Numbers a test measured, kept as the test's ``user_properties`` (so they
    reach junit XML and the RELIABILITY.md collector alike)."""

    def __init__(self, node: pytest.Item):
        self._node = node

    def __setitem__(self, name: str, value: object) -> None:
        if isinstance(value, float):
            value = round(value, 3)
        self._node.user_properties.append((name, value))


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    return Figures(request.node)


# -- a real server --------------------------------------------------------------

SERVE = ("import sys; from fll.cli import main; "
         "sys.exit(main(sys.argv[1:], prog_name='fll'))")


class Server:
    """``fll serve`` in a subprocess on 127.0.0.1:<free port>."""

    def __init__(self, store_url: str, token: str | None = None):
        self.store_url = store_url
        self.token = token
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> "Server":
        args = [sys.executable, "-c", SERVE, "serve", "--store", self.store_url,
                "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("FLL_TOKEN", None)
        if self.token:
            env["FLL_TOKEN"] = self.token
        self.proc = subprocess.Popen(args, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"fll serve exited at start: {err[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"fll serve did not listen on port {self.port} within {timeout} s")

    def rss_peak_mb(self) -> float:
        """The server process's peak resident memory (VmHWM) in MB."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()


@contextmanager
def running_server(store_url: str, token: str | None = None) -> Iterator[Server]:
    server = Server(store_url, token).start()
    try:
        yield server
    finally:
        server.kill()


# -- child processes -------------------------------------------------------------

def spawn_worker(*args: object) -> subprocess.Popen:
    """``python -m tests.reliability.workers ARGS`` with stdout piped (text)."""
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.workers",
                             *[str(a) for a in args]], cwd=str(ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def release(procs: list[subprocess.Popen], gate: Path) -> None:
    """Wait for every worker's READY, then open their gate (``FLL_TEST_GATE``) at once."""
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY", \
            (p.stderr.read()[-2000:] if p.stderr else "")
    gate.touch()


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Wait for a child and return its (stdout, stderr); kill it and fail after ``timeout``."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"child {proc.args} still running after {timeout} s: killed"
                             ) from None


def dump(value: object) -> str:
    return json.dumps(value, sort_keys=True)
