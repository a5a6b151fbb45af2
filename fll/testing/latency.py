"""A TCP proxy on 127.0.0.1 that puts a network between a client and a server.

The Bigtable emulator and the HBase Thrift double answer on loopback in a
fraction of a millisecond, so a walk that asks the store once per dataset
looks cheap there and is not on a real network (1-2 ms per round trip). This
proxy delays every byte by half the configured round-trip time in each
direction, keeping order and never holding one direction for the other (bytes
in flight overlap, as on a wire), and counts the **turns** of each
connection: a turn is a burst a client sends after the server last answered
on that connection, which is what a round trip costs a synchronous client.

    with LatencyProxy(("127.0.0.1", emulator_port), rtt_ms=1.0) as proxy:
        store = open_store(f"bigtable://p/i/t?emulator=127.0.0.1:{proxy.port}")
        before = proxy.turns
        ...
        print(proxy.turns - before, "round trips")

It listens on 127.0.0.1 only and stops with `stop()` (or the ``with``).
"""
from __future__ import annotations

import asyncio
import socket
import threading
import time


class LatencyProxy:
    """Forward 127.0.0.1:``port`` to ``target`` with ``rtt_ms`` of round-trip time."""

    def __init__(self, target: tuple[str, int], rtt_ms: float = 1.0, port: int = 0):
        self.target = target
        self.delay = max(rtt_ms, 0.0) / 2000.0  # one way, seconds
        self._port = port
        self._lock = threading.Lock()
        self._turns = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

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
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(asyncio.start_server(
                self._connection, "127.0.0.1", self._port, family=socket.AF_INET))
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
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _connection(self, client_r: asyncio.StreamReader,
                          client_w: asyncio.StreamWriter) -> None:
        try:
            await self._relay(client_r, client_w)
        except asyncio.CancelledError:  # the proxy stopping: the sockets close below
            client_w.close()

    async def _relay(self, client_r: asyncio.StreamReader,
                     client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        turn = {"answered": True}  # a first burst is a turn
        tasks = [asyncio.ensure_future(self._pipe(client_r, server_w, turn, upstream=True)),
                 asyncio.ensure_future(self._pipe(server_r, client_w, turn, upstream=False))]
        try:
            # each side's end of stream reaches the other through its pipe
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for task in tasks:
                task.cancel()
            for w in (client_w, server_w):
                w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    turn: dict, *, upstream: bool) -> None:
        """Copy ``reader`` to ``writer``, each chunk delivered ``delay`` after it arrived."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    else:
                        writer.close()
                    return
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                try:
                    data = await reader.read(65536)
                except ConnectionError:
                    data = b""
                if upstream and data and turn["answered"]:
                    turn["answered"] = False
                    with self._lock:
                        self._turns += 1
                elif not upstream and data:
                    turn["answered"] = True
                queue.put_nowait((time.monotonic() + self.delay, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
