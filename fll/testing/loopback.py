"""A keep-alive HTTP/1.1 client for one `fll serve` on 127.0.0.1, for benchmarks.

Benchmarks that load a server from a 2-core machine speak HTTP over asyncio
streams themselves: a few tens of microseconds per request, where an HTTP
library costs several hundred and would be what is measured. It reads
Content-Length answers only (what uvicorn sends for every answer of fll) and
never talks to anything but 127.0.0.1.
"""
from __future__ import annotations

import asyncio


class LoopbackConnection:
    """One keep-alive connection, opened on the first request and again after
    the server closes it or a request fails."""

    def __init__(self, port: int, timeout: float | None = None):
        self.port = port
        self.timeout = timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """(status, body) of one request; POST bodies are sent as JSON."""
        try:
            return await asyncio.wait_for(self._request(method, path, body), self.timeout)
        except BaseException:
            self.close()
            raise

    async def _request(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + (f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                   if method == "POST" else "") + "\r\n")
        self.writer.write(head.encode() + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, close = None, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
            elif name == "transfer-encoding":
                raise RuntimeError(f"unexpected Transfer-Encoding: {value.strip()}")
        if length is None:
            raise RuntimeError("answer without Content-Length")
        data = await self.reader.readexactly(length)
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
