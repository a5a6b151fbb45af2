"""Google's Bigtable emulator (`cbtemulator`) as a local process on loopback.

Used by the contract tests and the backend benchmark: finds the binary where
Debian's ``google-cloud-cli-bigtable-emulator`` package puts it (or
``$FLL_CBTEMULATOR``), starts it on a free 127.0.0.1 port and stops it. It must
never listen on anything but 127.0.0.1.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

EMULATOR_PATHS = (
    "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
    "/usr/share/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
    "/opt/google-cloud-sdk/platform/bigtable-emulator/cbtemulator",
)

def find_emulator() -> str | None:
    """``$FLL_CBTEMULATOR``, ``cbtemulator`` on PATH, or where Debian's package puts it."""
    for candidate in (os.environ.get("FLL_CBTEMULATOR"), shutil.which("cbtemulator"),
                      *EMULATOR_PATHS):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """One ``cbtemulator`` process on 127.0.0.1; restartable on the same port."""

    def __init__(self, binary: str, port: int | None = None):
        self.binary = binary
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Emulator":
        self.proc = subprocess.Popen([self.binary, "-host", "127.0.0.1", "-port", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(f"cbtemulator exited at start on port {self.port}: {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"cbtemulator did not listen on port {self.port} within 15 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None
