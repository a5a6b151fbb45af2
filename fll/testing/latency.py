"""A TCP proxy on 127.0.0.1 that puts a network between a client and a server.

The Bigtable emulator and the HBase Thrift double answer on loopback in a
fraction of a millisecond, so a walk that asks the store once per dataset
looks cheap there and is not on a real network (1-2 ms per round trip). This
proxy delays every byte by half the configured round-trip time in each
direction, keeping order and never holding one direction for the other (bytes
in flight overlap, as on a wire), and counts the **turns** of each
connection: a turn is a burst a client sends after the server last answered
on that connection, which is what a round trip costs a synchronous client.
It is written on asyncio's protocols (one timer per burst each way, no
task or queue per chunk): it shares the benchmark's cores with the server
it measures, so its own CPU per round trip is kept small. Its loop waits
with ``select()``, whose timeout has microseconds: epoll's and poll's are
whole milliseconds, rounded up, which turned each half-millisecond delay
into one of at least a millisecond (a 1 ms round trip cost over 2).

    with LatencyProxy(("127.0.0.1", emulator_port), rtt_ms=1.0) as proxy:
        store = open_store(f"bigtable://p/i/t?emulator=127.0.0.1:{proxy.port}")
        before = proxy.turns
        ...
        print(proxy.turns - before, "round trips")

It listens on 127.0.0.1 only and stops with `stop()` (or the ``with``).
"""
from __future__ import annotations

import asyncio
import collections
import multiprocessing
import os
import selectors
import signal
import socket
import threading
from typing import Any


class LatencyProxy:
    """Forward 127.0.0.1:``port`` to ``target`` with ``rtt_ms`` of round-trip time."""

    def __init__(self, target: tuple[str, int], rtt_ms: float = 1.0, port: int = 0,
                 counter: Any = None):
        self.target = target
        self.delay = max(rtt_ms, 0.0) / 2000.0  # one way, seconds
        self._port = port
        self._lock = threading.Lock()
        self._turns = 0
        # a shared counter (``multiprocessing.Value``) the turns also go to
        self._counter = counter
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._sides: set[_Side] = set()  # open sockets, closed on stop

    @property
    def port(self) -> int:
        return self._port

    @property
    def turns(self) -> int:
        """Round trips clients made through the proxy so far (all connections)."""
        with self._lock:
            return self._turns

    def start(self) -> "LatencyProxy":
        self._thread = threading.Thread(target=self._run, name="latency-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise RuntimeError("latency proxy did not start within 10 s")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
        self._thread = None

    def __enter__(self) -> "LatencyProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the proxy's own event loop, in its thread -----------------------------------
    def _run(self) -> None:
        # select(): a sub-millisecond timeout (the module doc); the proxy has
        # few sockets, far below select's limit of 1,024 descriptors
        loop = self._loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(loop.create_server(
                self._accepted, "127.0.0.1", self._port, family=socket.AF_INET))
            self._port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:  # noqa: BLE001 - handed to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for side in list(self._sides):
                side.close()
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    def _accepted(self) -> "_Side":
        """A client connected: its side of a pair, the server's side connecting."""
        assert self._loop is not None
        pair = _Pair(self)
        client = _Side(pair, upstream=True)
        server = _Side(pair, upstream=False)
        pair.sides = (client, server)
        self._sides.update(pair.sides)

        async def connect() -> None:
            try:
                await self._loop.create_connection(  # type: ignore[union-attr]
                    lambda: server, *self.target)
            except OSError:
                client.close()
        self._loop.create_task(connect())
        return client

    def _count_turn(self) -> None:
        with self._lock:
            self._turns += 1
            if self._counter is not None:
                self._counter.value = self._turns


class ProxyProcess:
    """A `LatencyProxy` in a process of its own, for a benchmark whose client
    is Python: in the client's process the proxy's timers wait for the GIL
    behind the client's own work (up to its 5 ms switch interval), so a 1 ms
    round trip cost several; a network costs no client CPU. Same ``port``,
    ``turns``, ``start``/``stop``; the process is stopped by its pid, and
    ends by itself when its parent does (its end of a pipe closes)."""

    def __init__(self, target: tuple[str, int], rtt_ms: float = 1.0):
        self.target, self.rtt_ms = target, rtt_ms
        self.port = 0
        self._proc: Any = None
        self._turns: Any = None
        self._pipe: Any = None  # held while the proxy serves: closing it stops it

    @property
    def turns(self) -> int:
        return 0 if self._turns is None else int(self._turns.value)

    def start(self) -> "ProxyProcess":
        ctx = multiprocessing.get_context("spawn")
        self._turns = ctx.Value("q", 0, lock=False)  # one writer: the proxy's loop
        mine, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_proxy, daemon=True, name="latency-proxy",
                                 args=(self.target, self.rtt_ms, self._turns, theirs))
        self._proc.start()
        if not mine.poll(30):
            self.stop()
            raise RuntimeError("latency proxy process did not start within 30 s")
        answer = mine.recv()
        if isinstance(answer, str):
            self.stop()
            raise RuntimeError(f"latency proxy process: {answer}")
        self.port, self._pipe = answer, mine
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close()
        if proc is not None and proc.is_alive():
            os.kill(proc.pid, signal.SIGTERM)
            proc.join(10)
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGKILL)
                proc.join(10)

    def __enter__(self) -> "ProxyProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serve_proxy(target: tuple[str, int], rtt_ms: float, counter: Any, pipe: Any) -> None:
    """The proxy process: serves until its parent closes the pipe (or dies),
    or a signal ends it."""
    try:
        proxy = LatencyProxy(target, rtt_ms, counter=counter).start()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        pipe.send(f"{type(exc).__name__}: {exc}")
        return
    pipe.send(proxy.port)
    try:
        pipe.recv()  # nothing is ever sent: this returns when the parent's end closes
    except (EOFError, OSError):
        pass
    proxy.stop()


class _Pair:
    """One client's connection and its connection to the target; ``answered``:
    the server answered since the client last sent (a first burst is a turn)."""

    __slots__ = ("proxy", "sides", "answered")

    def __init__(self, proxy: LatencyProxy):
        self.proxy = proxy
        self.sides: tuple[_Side, _Side] = ()  # type: ignore[assignment]
        self.answered = True


class _Side(asyncio.Protocol):
    """One socket of a pair: what it receives is written to the other side
    ``delay`` after it arrived, in order (one timer per burst, not one per
    chunk); a full write buffer on the other side pauses reading here."""

    def __init__(self, pair: _Pair, *, upstream: bool):
        self.pair = pair
        self.upstream = upstream  # bytes read here go to the server
        self.transport: asyncio.Transport | None = None
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False
        self.ended = False  # its end of stream was passed on

    @property
    def other(self) -> "_Side":
        a, b = self.pair.sides
        return b if self is a else a

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        # bytes the other side received before this one connected
        other = self.other
        if other.queue and other.timer is None:
            other._schedule()

    def data_received(self, data: bytes) -> None:
        pair = self.pair
        if self.upstream:
            if pair.answered:
                pair.answered = False
                pair.proxy._count_turn()
        else:
            pair.answered = True
        self._enqueue(data)

    def eof_received(self) -> bool:
        self._enqueue(b"")
        return True  # keep the transport open: the other direction may still carry bytes

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self.pair.proxy._sides.discard(self)
        if not self.ended:
            self._enqueue(b"")

    def pause_writing(self) -> None:
        if self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        other = self.other
        if other.transport is not None and not other.closed:
            other.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.closed = True

    def _enqueue(self, data: bytes) -> None:
        loop = self.pair.proxy._loop
        assert loop is not None
        self.queue.append((loop.time() + self.pair.proxy.delay, data))
        if self.timer is None:
            self._schedule()

    def _schedule(self) -> None:
        loop = self.pair.proxy._loop
        assert loop is not None
        if self.queue and self.other.transport is not None:
            self.timer = loop.call_at(self.queue[0][0], self._deliver)

    def _deliver(self) -> None:
        """Write to the other side what is due, in order."""
        self.timer = None
        target = self.other.transport
        loop = self.pair.proxy._loop
        assert loop is not None and target is not None
        now = loop.time()
        out: list[bytes] = []
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.popleft()
            if not data:  # end of stream
                if out:
                    target.write(b"".join(out))
                    out = []
                self.queue.clear()
                self.ended = True
                if not self.closed and not self.other.ended and target.can_write_eof():
                    target.write_eof()
                else:  # closed here, or both directions ended
                    target.close()
                    if self.transport is not None:
                        self.transport.close()
                return
            out.append(data)
        if out and not target.is_closing():
            target.write(out[0] if len(out) == 1 else b"".join(out))
        self._schedule()
