"""`LatencyProxy`: the network the benchmarks put in front of the emulator and
the Thrift double. It must delay every round trip, count each one once, carry
bytes unchanged both ways, and stop cleanly."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from fll.testing.latency import LatencyProxy, ProxyProcess


@pytest.fixture
def echo_server():
    """An RPC-like server on 127.0.0.1: it reads a whole framed request (4-byte
    length, payload) and answers it upper-cased, framed, as Thrift's framed
    transport and unary gRPC calls do: never before the request is complete."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while not stop.is_set():
                head = _read(conn, 4)
                if head is None:
                    return
                body = _read(conn, int.from_bytes(head, "big"))
                if body is None:
                    return
                conn.sendall(head + body.upper())

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield srv.getsockname()
    stop.set()
    srv.close()


def _read(sock: socket.socket, n: int) -> bytes | None:
    got = b""
    while len(got) < n:
        chunk = sock.recv(min(65536, n - len(got)))
        if not chunk:
            return None
        got += chunk
    return got


def _read_to_end(sock: socket.socket) -> bytes:
    """Everything ``sock`` receives until the other end closes its side."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    return got


def _ask(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(len(payload).to_bytes(4, "big") + payload)
    head = _read(sock, 4)
    assert head is not None
    body = _read(sock, int.from_bytes(head, "big"))
    assert body is not None
    return body


@pytest.mark.parametrize("kind", [LatencyProxy, ProxyProcess])
def test_each_round_trip_is_delayed_and_counted(echo_server, kind):
    # in this process, or in one of its own with the turns read across
    with kind(echo_server, rtt_ms=4.0) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            began = time.perf_counter()
            for i in range(10):
                assert _ask(sock, b"ping %d" % i) == b"PING %d" % i
            took = time.perf_counter() - began
        assert proxy.turns == 10
        assert took >= 10 * 0.004


def test_a_round_trip_costs_what_was_asked_not_a_whole_millisecond_more(echo_server):
    # a loop waiting on epoll rounds each 0.5 ms delay up to 1 ms or more: the
    # benchmarks' "1 ms per round trip" would then cost over 2 ms. In a process
    # of its own, as the benchmarks run it: beside this test's client and echo
    # threads its timers would wait for their GIL (a slow machine's median
    # passed 1.7 ms about once in seven runs)
    with ProxyProcess(echo_server, rtt_ms=1.0) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            took = []
            for i in range(60):
                began = time.perf_counter()
                assert _ask(sock, b"ping %d" % i) == b"PING %d" % i
                took.append(time.perf_counter() - began)
    took.sort()
    assert took[0] >= 0.001
    assert took[len(took) // 2] < 0.0017, f"median round trip {took[len(took) // 2] * 1000:.2f} ms"


def test_large_payloads_pass_unchanged_and_count_once(echo_server):
    payload = bytes(range(97, 123)) * 40_000  # ~1 MB, many chunks each way
    with LatencyProxy(echo_server, rtt_ms=0.0) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
            assert _ask(sock, payload) == payload.upper()
            assert _ask(sock, b"again") == b"AGAIN"
        assert proxy.turns == 2


def test_connections_are_counted_together(echo_server):
    with LatencyProxy(echo_server) as proxy:
        socks = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(3)]
        try:
            for s in socks:
                assert _ask(s, b"x") == b"X"
        finally:
            for s in socks:
                s.close()
        assert proxy.turns == 3


def test_it_listens_on_loopback_and_stops(echo_server):
    proxy = LatencyProxy(echo_server).start()
    port = proxy.port
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert sock.getpeername()[0] == "127.0.0.1"
        assert _ask(sock, b"a") == b"A"
    proxy.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_an_unreachable_target_closes_the_client():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()  # bound, not listening: connections are refused
        with LatencyProxy(dead) as proxy:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
                sock.sendall(b"hello")
                assert sock.recv(10) == b""


def test_an_end_of_stream_passes_through_and_the_other_way_still_answers():
    """A client that stops sending (half close) still gets the answer the
    server sends after seeing the end; then both ends close."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"read %d bytes" % len(_read_to_end(conn)))

    worker = threading.Thread(target=serve, daemon=True)
    worker.start()
    try:
        with LatencyProxy(srv.getsockname(), rtt_ms=2.0) as proxy:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
                sock.sendall(b"a" * 100_000)
                sock.shutdown(socket.SHUT_WR)
                answer = _read_to_end(sock)
            assert answer == b"read 100000 bytes"
            assert proxy.turns == 1
        worker.join(5)
    finally:
        srv.close()


def test_bursts_keep_their_order_under_many_concurrent_connections(echo_server):
    """Many clients at once, each with requests in flight back to back: every
    answer is its own request's, in order, and each request is one turn."""
    with LatencyProxy(echo_server, rtt_ms=1.0) as proxy:
        errors: list[str] = []

        def client(n: int) -> None:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
                for i in range(20):
                    want = b"C%d R%d " % (n, i) * (i * 50 + 1)
                    if _ask(sock, want.lower()) != want:
                        errors.append(f"client {n} request {i}")
        threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        assert proxy.turns == 16 * 20


def test_a_proxy_in_its_own_process_is_gone_once_stopped(echo_server):
    """The benchmarks run the proxy apart from their Python client, whose GIL
    would hold its timers up; its process is stopped by its pid."""
    proxy = ProxyProcess(echo_server).start()
    pid = proxy._proc.pid
    os.kill(pid, 0)  # serving
    proxy.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped


def test_a_proxy_process_ends_when_its_parent_lets_go(echo_server):
    """A benchmark that dies leaves no proxy listening: the process ends when
    its end of the pipe to the parent closes, before any signal."""
    proxy = ProxyProcess(echo_server).start()
    proc = proxy._proc
    proxy._pipe.close()  # what the parent's death does to it
    proc.join(10)
    assert proc.exitcode == 0
    proxy.stop()
