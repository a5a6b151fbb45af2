"""Waiting for a `fll serve` process that a test or a benchmark started.

Every caller starts its own server (its own options, store and port) and stops
it by its process id; this module only answers "is it up yet?", the same way
for all of them. It must never start or stop a process itself."""
from __future__ import annotations

import subprocess
import time

import httpx


def wait_until_serving(base: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Poll ``base + "/health"`` until it answers 200.

    Raises RuntimeError naming what the server printed if ``proc`` exits first,
    or saying how long it waited if ``timeout`` seconds pass; the caller still
    owns ``proc`` and stops it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(base + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"fll serve exited at start: {err[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"fll serve did not answer at {base} within {timeout:g} s")
        time.sleep(0.1)
