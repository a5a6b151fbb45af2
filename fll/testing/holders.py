"""Clients that hold connections to a `fll serve` and never finish a request:
what a test or a benchmark puts beside its normal client to see whether held
connections hold the server's work too.

`Holders(port, slow=500, idle=500)` opens, from a thread of its own:

- ``slow`` connections that send an ingest's head declaring a body of
  ``declared`` bytes and then only its first 14 bytes (the body never
  completes: each waits for the server's body timeout);
- ``idle`` connections that send nothing at all (each waits for the header
  timeout).

A connection the server closes is opened again at once, so the numbers hold
for as long as the holders run. ``stop()`` closes every socket. Everything
talks to 127.0.0.1 only, and this module never starts or stops a process.
"""
from __future__ import annotations

import math
import selectors
import socket
import threading

from fll.server.guard import raise_open_file_limit


class Holders:
    """``slow`` half-sent ingests and ``idle`` silent connections, kept open."""

    def __init__(self, port: int, *, slow: int = 500, idle: int = 500,
                 token: str | None = None, declared: int = 1_000_000):
        self.port = port
        self.slow = slow
        self.idle = idle
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.head = (f"POST /api/v1/lineage HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
                     f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
                     ).encode() + b'{"eventType": '  # 14 bytes of a body that never ends
        #: connections the server closed (and that were opened again)
        self.reopened = 0
        #: connections that could not be opened (the server refused or timed out)
        self.failed = 0
        self._sel = selectors.DefaultSelector()  # epoll: select() stops at descriptor 1023
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self, kind: str) -> None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        except OSError:
            self.failed += 1
            return
        if kind == "slow":
            try:
                s.sendall(self.head)
            except OSError:
                s.close()
                self.failed += 1
                return
        s.setblocking(False)
        self._sel.register(s, selectors.EVENT_READ, kind)

    def start(self) -> "Holders":
        """Open every connection (returns once they are all open) and keep them open."""
        raise_open_file_limit()  # this process holds slow + idle sockets
        for i in range(max(self.slow, self.idle)):
            if i < self.slow:
                self.open("slow")
            if i < self.idle:
                self.open("idle")
        self._thread = threading.Thread(target=self._keep, name="fll-holders", daemon=True)
        self._thread.start()
        return self

    def open_now(self) -> int:
        return len(self._sel.get_map())

    def _keep(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.2):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    continue  # an answer (408): the close follows
                self._sel.unregister(s)
                s.close()
                if not self._stop.is_set():
                    self.reopened += 1
                    self.open(key.data)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for key in list(self._sel.get_map().values()):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            self._sel.unregister(s)
            s.close()
        self._sel.close()

    def __enter__(self) -> "Holders":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank (p99 of 200 values is
    the second largest)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered), max(1, math.ceil(q * len(ordered)))) - 1]
