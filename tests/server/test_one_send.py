"""`fll.server.guard._OneSend`: a response head goes out in one send with its
body, and is never held back or lost when no body follows."""
from __future__ import annotations

import asyncio
import socket

import httpx

from fll.server.guard import _OneSend


class _Recording:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"extra {name}"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


def _run(steps) -> _Recording:
    async def main() -> _Recording:
        real = _Recording()
        await steps(_OneSend(real, asyncio.get_running_loop()), real)
        return real
    return asyncio.run(main())


def test_a_head_and_the_body_after_it_go_in_one_send():
    async def steps(t, real):
        t.write(HEAD)
        assert real.sent == []  # held for the body
        t.write(b"{}")
        await asyncio.sleep(0)
    assert _run(steps).sent == [HEAD + b"{}"]


def test_a_head_without_a_body_is_sent_at_the_end_of_the_turn():
    async def steps(t, real):
        t.write(HEAD)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert real.sent == [HEAD]
        t.write(b"later")  # a streamed body: sent as it comes
    assert _run(steps).sent == [HEAD, b"later"]


def test_closing_sends_a_held_head_first_and_abort_drops_it():
    async def steps(t, real):
        t.write(HEAD)
        t.close()
        await asyncio.sleep(0)
    real = _run(steps)
    assert real.sent == [HEAD] and real.closed

    async def aborted(t, real):
        t.write(HEAD)
        t.abort()
        await asyncio.sleep(0)
    assert _run(aborted).sent == []


def test_a_100_continue_and_bodies_are_never_held():
    async def steps(t, real):
        t.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        assert real.sent == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        t.write(b"chunk")
        assert real.sent[-1] == b"chunk"
        assert t.get_extra_info("peername") == "extra peername"
    _run(steps)


def test_a_served_answer_arrives_whole_in_one_segment(tmp_path):
    """Through a real `fll serve`: the head and body of /health come in one read."""
    import subprocess
    import sys

    from fll.testing.serving import wait_until_serving

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from fll.server.cli import serve; serve()",
                             "--store", f"sqlite:///{tmp_path}/s.db", "--port", str(port),
                             "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc, 60)
        for method in ("GET", "HEAD"):
            with socket.create_connection(("127.0.0.1", port)) as c:
                c.sendall(f"{method} /health HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                c.settimeout(10)
                first = c.recv(65536)
            head, _, body = first.partition(b"\r\n\r\n")
            if method == "GET":
                assert head.startswith(b"HTTP/1.1 200") and body.startswith(b'{"status"'), first
            else:  # no body follows (405 here): the head is not held back
                assert head.startswith(b"HTTP/1.1 ") and body == b"", first
        assert httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
