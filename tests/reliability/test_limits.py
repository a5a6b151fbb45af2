"""Resource limits of `fll serve`: header and body deadlines, the ingest cap, the
column-lineage field cap.

The tests share one real ``fll serve`` on 127.0.0.1 (its limits made small so
the tests are quick; starting a server costs seconds) and play the client that hurts: idle and half-open sockets,
a head or body sent a byte at a time, more ingests than slots, an event wider
than the cap. Every socket is closed and every server killed by the test.
"""
from __future__ import annotations

import asyncio
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import httpx
import pytest

from fll import EndPoint
from fll.openlineage import info_to_event
from fll.server import guard
from fll.server.guard import IngestLimitMiddleware, count_fields
from fll.testing.serving import wait_until_serving
from tests.lineage_examples import chain

from .conftest import ROOT, SERVE, Server

HEALTH = b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"


def event(run_id: str, fields: int = 1) -> dict:
    return info_to_event(chain(EndPoint("in", "a"), EndPoint("out", "b"),
                               [f"column_{i:06d}" for i in range(fields)]),
                         run_id, 1_700_000_000_000, "ns/job")


def wide_event(run_id: str, fields: int) -> dict:
    """A COMPLETE event whose one output has ``fields`` columns, each from one input
    column (built directly: the model round trip takes seconds at this width)."""
    lineage = {f"column_{i:06d}_with_a_long_descriptive_name": {"inputFields": [
        {"namespace": "in", "name": "a", "field": f"source_column_{i:06d}",
         "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]}]}
        for i in range(fields)}
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z",
            "run": {"runId": run_id}, "job": {"namespace": "ns", "name": "job"},
            "producer": "https://example.com/fll-tests",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "inputs": [{"namespace": "in", "name": "a"}],
            "outputs": [{"namespace": "out", "name": "wide",
                         "facets": {"columnLineage": {"fields": lineage}}}]}


class LimitedServer(Server):
    """`Server` with extra `fll serve` options and an optional config file."""

    def __init__(self, store_url: str, options: list[str], config: str | None = None):
        super().__init__(store_url)
        self.options = options
        self.config = config

    def start(self, timeout: float = 60.0) -> "LimitedServer":
        args = [sys.executable, "-c", SERVE, "serve", "--store", self.store_url, "--host",
                "127.0.0.1", "--port", str(self.port), "--log-level", "warning", *self.options]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("FLL_TOKEN", None)
        if self.config:
            env["FLL_CONFIG"] = self.config
        self.proc = subprocess.Popen(args, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        try:
            wait_until_serving(self.base, self.proc, timeout)
        except RuntimeError:
            self.kill()
            raise
        return self


@contextmanager
def serving(tmp_path, *options: str, config: dict | None = None) -> Iterator[LimitedServer]:
    path = None
    if config is not None:
        path = str(tmp_path / "fll.yaml")
        with open(path, "w") as f:
            json.dump(config, f)  # JSON is YAML
    server = LimitedServer(f"sqlite:///{tmp_path}/fll.db", list(options), path).start()
    try:
        yield server
    finally:
        server.kill()


LIMITS = ("--header-timeout", "1.5", "--body-timeout", "2", "--max-ingests", "2",
          "--max-fields", "100")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LimitedServer]:
    with serving(tmp_path_factory.mktemp("limits"), *LIMITS,
                 config={"serve": {"ingest_wait": 0.5}}) as running:
        yield running


def connect(server: Server) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.setblocking(False)
    return s


def closed_by_peer(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (EOF or reset), reading any answer first."""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


def wait_all_closed(socks: list[socket.socket], within: float) -> tuple[int, float]:
    """(how many of ``socks`` the server closed, seconds it took) waiting at most ``within``."""
    began = time.monotonic()
    sel = selectors.DefaultSelector()  # epoll: select() stops at descriptor 1023
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = 0
    try:
        while closed < len(socks) and time.monotonic() - began < within:
            for key, _ in sel.select(timeout=0.2):
                s = key.fileobj
                assert isinstance(s, socket.socket)
                if closed_by_peer(s):
                    sel.unregister(s)
                    closed += 1
    finally:
        sel.close()
    return closed, time.monotonic() - began


def answer_of(s: socket.socket, timeout: float) -> bytes:
    """Everything the server sends on ``s`` until it closes it (or ``timeout``)."""
    s.setblocking(True)
    s.settimeout(timeout)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


# -- header deadline: idle, half-open and slowloris connections ---------------------

@pytest.mark.slow
@pytest.mark.reliability("1,000 idle or half-open sockets (500 silent, 500 with half a "
                         "request head) + 20 sockets trickling a head byte by byte, "
                         "header timeout 1.5 s")
def test_a_thousand_idle_and_half_open_sockets_neither_stop_the_server_nor_stay_open(
        server, figures):
    """While 1,000 sockets hold connections without finishing a request head, the
    server still answers /health at once; the header deadline then closes every one
    of them, also those that keep sending a byte every 0.3 s."""
    guard.raise_open_file_limit()  # this process holds the 1,020 client sockets
    socks: list[socket.socket] = []
    trickle: list[socket.socket] = []
    try:
        for i in range(1000):
            s = connect(server)
            if i % 2:
                s.send(b"POST /api/v1/lineage HTTP/1.1\r\nHost: t\r\nContent-")
            socks.append(s)
        trickle = [connect(server) for _ in range(20)]
        began = time.monotonic()
        latencies = []
        for _ in range(20):
            t = time.monotonic()
            assert httpx.get(server.base + "/health", timeout=5).status_code == 200
            latencies.append(time.monotonic() - t)
        head = b"GET /health HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 1000
        sent = 0
        while time.monotonic() - began < 4 and sent < len(head):
            for s in trickle:
                try:
                    s.send(head[sent:sent + 1])
                except OSError:
                    pass
            sent += 1
            time.sleep(0.3)
        closed, took = wait_all_closed(socks + trickle, within=8)
        figures["health_p_max_ms_with_1000_idle"] = max(latencies) * 1000
        figures["idle_sockets_closed"] = closed
        figures["seconds_to_close_all"] = took
        assert closed == len(socks) + len(trickle), f"{closed} of {len(socks) + 20} closed"
        assert max(latencies) < 5  # generous: CI machines are shared
        assert httpx.get(server.base + "/health", timeout=2).status_code == 200
    finally:
        for s in socks + trickle:
            s.close()


def test_a_keep_alive_connection_serves_several_requests_within_the_deadline(server):
    """The deadline is per request head: a client that keeps sending whole requests
    on one connection for longer than the header timeout is not cut off."""
    with httpx.Client(base_url=server.base, timeout=3) as client:
        began = time.monotonic()
        while time.monotonic() - began < 3.5:
            assert client.get("/health").status_code == 200
            time.sleep(0.4)


# -- body deadline ---------------------------------------------------------------------

@pytest.mark.reliability("an ingest whose body stops after 10 of 1,000 bytes, and one "
                         "trickling it a byte every 0.2 s; body timeout 2 s")
def test_a_body_that_does_not_arrive_in_time_gets_408_and_the_connection_is_closed(server, figures):
    """Both slow bodies get 408 in the error shape after ~2 s and the server closes the
    connection; nothing is stored and the server keeps answering."""
    stalled, trickling = connect(server), connect(server)
    head = (b"POST /api/v1/lineage HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
            b"\r\nContent-Length: 1000\r\n\r\n")
    began = time.monotonic()
    stalled.send(head + b'{"run": {"')
    trickling.send(head)
    for _ in range(20):
        try:
            trickling.send(b" ")
        except OSError:
            break
        time.sleep(0.2)
    answers = [answer_of(s, timeout=5) for s in (stalled, trickling)]
    took = time.monotonic() - began
    for raw in answers:
        status, _, rest = raw.partition(b"\r\n")
        assert status.startswith(b"HTTP/1.1 408"), raw[:200]
        body = json.loads(rest.split(b"\r\n\r\n", 1)[1])
        assert body == {"error": "the request body did not arrive within 2 s", "status": 408}
    figures["seconds_to_408"] = took
    assert took < 10
    for s in (stalled, trickling):
        s.close()
    assert httpx.get(server.base + "/health", timeout=2).status_code == 200


# -- the ingest cap --------------------------------------------------------------------

@pytest.mark.reliability("--max-ingests 2; 20 ingests whose bodies stop after 5 bytes, "
                         "then a whole ingest")
def test_ingests_whose_bodies_are_still_arriving_hold_no_slot(server, figures):
    """A slot is taken once the body has arrived: twenty half-sent ingests (ten
    times the slots) hold their connections, not the work, so a whole ingest is
    recorded at once (it used to wait ingest_wait for a 503); a held ingest that
    finishes its body is recorded too, and reads answer meanwhile."""
    body = json.dumps(event("held")).encode()
    head = (b"POST /api/v1/lineage HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    held = [connect(server) for _ in range(20)]
    try:
        for s in held:
            s.send(head + body[:5])
        time.sleep(0.2)  # every request has reached the app and is reading its body
        began = time.monotonic()
        r = httpx.post(server.base + "/api/v1/lineage", json=event("whole"), timeout=5)
        took = time.monotonic() - began
        assert r.status_code == 201, r.text
        assert took < 0.4  # under ingest_wait: it never waited for a slot
        assert httpx.get(server.base + "/health", timeout=2).status_code == 200
        held[0].send(body[5:])
        assert answer_of(held[0], timeout=5).split(b"\r\n", 1)[0].startswith(b"HTTP/1.1 201")
        figures["seconds_for_a_whole_ingest_beside_20_half_sent"] = took
    finally:
        for s in held:
            s.close()


def _asgi_ingest(body: bytes, chunks: int = 1, *, declared: bool = True,
                 then_wait: asyncio.Event | None = None):
    """(scope, receive) of an ingest whose body arrives in ``chunks`` parts; with
    ``then_wait`` the last part is held back until that event is set."""
    size = -(-len(body) // chunks)
    parts = [body[i:i + size] for i in range(0, len(body), size)] or [b""]
    headers = [(b"content-length", str(len(body)).encode())] if declared else []
    scope = {"type": "http", "method": "POST", "path": "/api/v1/lineage", "headers": headers}
    given = 0

    async def receive():
        nonlocal given
        if then_wait is not None and given == len(parts) - 1:
            await then_wait.wait()
        if given >= len(parts):
            await asyncio.Event().wait()  # the client stays: never a disconnect
        given += 1
        return {"type": "http.request", "body": parts[given - 1],
                "more_body": given < len(parts)}
    return scope, receive


class _Answers:
    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: dict[bytes, bytes] = {}
        self.body = b""

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = dict(message["headers"])
        else:
            self.body += message.get("body", b"")


async def _recorder(scope, receive, send):
    """An app that answers 201 with the body it was given."""
    message = await receive()
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": message["body"]})


@pytest.mark.reliability("--max-ingests 2 held by two ingests at work, a third "
                         "(ingest_wait 0.3 s), then the two let go")
def test_ingests_beyond_the_cap_wait_then_get_503_with_retry_after():
    """The cap is on ingests at work: two whose bodies arrived and whose work has
    not finished hold both slots, a third waits ingest_wait and gets 503 +
    Retry-After in the error shape; once the two finish, they answer 201."""
    release = None

    async def working(scope, receive, send):
        await receive()
        assert release is not None
        await release.wait()
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> list[_Answers]:
        nonlocal release
        release = asyncio.Event()
        limited = IngestLimitMiddleware(working, max_ingests=2, ingest_wait=0.3)
        answers = [_Answers() for _ in range(3)]
        tasks = [asyncio.create_task(limited(*_asgi_ingest(b"{}"), a.send))
                 for a in answers[:2]]
        await asyncio.sleep(0.01)
        assert limited.active == 2
        began = time.monotonic()
        await limited(*_asgi_ingest(b"{}"), answers[2].send)
        assert 0.25 < time.monotonic() - began < 5
        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        assert limited.active == 0
        return answers

    first, second, third = asyncio.run(main())
    assert (first.status, second.status, third.status) == (201, 201, 503)
    assert third.headers[b"retry-after"] == b"1"
    assert json.loads(third.body) == {"error": "the server is busy: 2 ingests are in "
                                               "progress (the configured maximum); retry "
                                               "later", "status": 503}


def test_an_ingest_body_is_bounded_by_max_body_before_and_while_it_is_read():
    """413 from the declared length before a byte is read, and while reading a body
    that declares nothing (chunked); neither takes a slot, and the connection is
    closed (the rest of the body is never read)."""
    async def main() -> list[_Answers]:
        limited = IngestLimitMiddleware(_recorder, max_ingests=1, max_body=1000)
        out = []
        for body, declared in ((b"x" * 1001, True), (b"x" * 1001, False), (b"x" * 1000, False)):
            a = _Answers()
            await limited(*_asgi_ingest(body, 4, declared=declared), a.send)
            out.append(a)
        assert limited.active == 0 and limited.held == 0
        return out

    too_big, too_long, fits = asyncio.run(main())
    for a in (too_big, too_long):
        assert a.status == 413 and a.headers[b"connection"] == b"close"
        assert json.loads(a.body) == {"error": "request body is larger than 1000 bytes",
                                      "status": 413}
    assert fits.status == 201 and fits.body == b"x" * 1000


@pytest.mark.reliability("body memory 100 KiB: one 150 KiB body held half-sent, a 140 KiB "
                         "body, a 1 KiB body")
def test_the_bodies_a_process_holds_are_bounded_in_total_but_a_usual_event_always_fits():
    """Bytes of ingest bodies beyond each body's first 64 KiB count against the
    process's body memory from the first byte until the answer: a big body that
    would go beyond it is 503 + Retry-After and closed, while a body within its
    first 64 KiB (a usual event) is never refused for it. The count goes back to
    zero once the held body is done."""
    async def main() -> tuple[list[_Answers], int]:
        limited = IngestLimitMiddleware(_recorder, max_ingests=4,
                                        body_memory=100 * 1024)
        gate = asyncio.Event()
        held = _Answers()
        task = asyncio.create_task(limited(*_asgi_ingest(b"a" * 150 * 1024, 3, then_wait=gate),
                                           held.send))
        await asyncio.sleep(0.01)
        counted = limited.held  # the 2 parts read so far, beyond their first 64 KiB
        big, small = _Answers(), _Answers()
        await limited(*_asgi_ingest(b"b" * 140 * 1024, 2), big.send)
        await limited(*_asgi_ingest(b"c" * 1024), small.send)
        gate.set()
        await asyncio.wait_for(task, 5)
        assert limited.held == 0 and limited.active == 0
        return [held, big, small], counted

    (held, big, small), counted = asyncio.run(main())
    assert counted == 100 * 1024 - 64 * 1024
    assert big.status == 503 and big.headers[b"retry-after"] == b"1"
    assert big.headers[b"connection"] == b"close"
    assert json.loads(big.body) == {"error": "the server is busy: request bodies of 100 KiB "
                                             "are arriving or waiting (the configured "
                                             "maximum); retry later", "status": 503}
    assert small.status == 201 and held.status == 201 and held.body == b"a" * 150 * 1024


@pytest.mark.reliability("40 concurrent ingests through a 3-slot cap (4 failing), 10 times")
def test_the_ingest_cap_never_lets_more_ingests_run_at_once_than_configured():
    """The slot counter under a race: many ingests at once never run more than
    ``max_ingests`` together, every one finishes (waiting its turn), and the
    counter returns to zero, also when the app fails."""
    peak = 0
    running = 0

    async def app(scope, receive, send):
        nonlocal peak, running
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001)
        running -= 1
        if scope["fail"]:
            raise RuntimeError("boom")
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    limited = IngestLimitMiddleware(app, max_ingests=3, ingest_wait=30, body_timeout=5)

    async def one(i: int) -> int:
        statuses = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "method": "POST", "path": "/api/v1/lineage", "headers": [],
                 "fail": i % 10 == 0}
        try:
            await limited(scope, receive, send)
        except RuntimeError:
            return -1
        return statuses[0]

    async def burst() -> list[int]:
        return await asyncio.gather(*(one(i) for i in range(40)))

    for _ in range(10):
        statuses = asyncio.run(burst())
        assert statuses.count(201) == 36 and statuses.count(-1) == 4
        assert limited.active == 0
    assert peak == 3


# -- the field cap ---------------------------------------------------------------------

def test_the_field_count_is_output_fields_plus_their_input_fields():
    assert count_fields(event("c", fields=7)) == 14
    assert count_fields({"outputs": [{"facets": {"columnLineage": {"fields": {
        "a": {"inputFields": [{}, {}, {}]}, "b": {}}}}}, {"facets": {}}, "junk"]}) == 5
    assert count_fields({"outputs": "junk"}) == 0 and count_fields([]) == 0


@pytest.mark.reliability("--max-fields 100: events of 49 and 51 fields (98 and 102 counted)")
def test_an_event_wider_than_the_field_cap_gets_413_and_stores_nothing(server):
    r = httpx.post(server.base + "/api/v1/lineage", json=event("wide", 51), timeout=10)
    assert r.status_code == 413
    assert r.json() == {"error": "the event carries 102 column-lineage fields (output "
                                 "fields plus their inputFields); this server accepts at "
                                 "most 100 per event", "status": 413}
    r = httpx.post(server.base + "/api/v1/lineage", json=event("narrow", 49), timeout=10)
    assert r.status_code == 201, r.text
    r = httpx.get(server.base + "/v3/namespaces/out/datasets/b/lineage/fields",
                  params={"start": 0, "end": "now"}, timeout=10)
    assert len(r.json()) == 49


@pytest.mark.slow
@pytest.mark.reliability("a 9.5 MB event with 80,000 column-lineage fields at the default "
                         "cap")
def test_a_huge_event_under_the_body_limit_is_refused_cheaply_by_the_field_cap(
        server, figures):
    """The event that used to cost ~65 MB per MB of body and seconds of CPU is refused
    with 413 after parsing only: the server's peak memory grows by a small multiple
    of the body, not tens of times it."""
    big_event = wide_event("huge", 40_000)
    big = json.dumps(big_event).encode()
    assert len(big) < 10 * 1024 * 1024
    assert count_fields(big_event) > guard.DEFAULT_MAX_FIELDS  # refused at the default too
    before = server.rss_peak_mb()
    began = time.monotonic()
    r = httpx.post(server.base + "/api/v1/lineage", content=big, timeout=60,
                   headers={"Content-Type": "application/json"})
    took = time.monotonic() - began
    grew = server.rss_peak_mb() - before
    assert r.status_code == 413, r.text[:200]
    figures["body_mb"] = len(big) / 1e6
    figures["peak_rss_growth_mb"] = grew
    figures["seconds"] = took
    assert grew < 15 * len(big) / 1e6, f"{grew:.0f} MB for a {len(big) / 1e6:.1f} MB body"
    assert took < 30
