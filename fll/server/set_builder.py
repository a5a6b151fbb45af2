"""New operation sets built in a process of their own (``fll serve
--build-processes``).

A server answers from one process, and Python runs one thread of it at a
time (the GIL). Building the operation set of lineage it has not seen (facets
→ operations → canonical bytes → checksum, then the set's data rows:
summaries, shape, deflate) is pure CPU, and on a warehouse's ingest it was
the largest share of the process's time while a second core idled. A
`SetBuilder` sends the JSON of such an event's inputs and outputs to a
builder process, which builds the set and its rows and sends back its
checksum, destinations, endpoints and rows, and, when it built the run's
set too, their union. The server remembers these (`fll.openlineage.adopt`,
`fll.store.writer.Writer.adopt`) and the event goes on as a repeated one
does: its write takes a `DeferredSet`, and the set's operations are never
built in the server. What the builder gives is what the server would have
built, byte for byte (the same code), and anything it does not give (an
error, a union it cannot make, a builder gone) is done in the server as
before.

A builder is one spawned process, reached through a pipe that a thread of
the server feeds one event at a time; the events of a run go to the same
builder (its union needs the run's earlier set). It ends when its end of the
pipe closes: when the server closes it, and when the server dies.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import multiprocessing
import queue
import threading
import time
from typing import Any, Callable

from .. import openlineage as ol
from ..opset import FieldLineageInfo
from ..store.datarows import set_endpoints, set_rows
from .collector import PERIOD, YOUNG

log = logging.getLogger("fll.server")

#: what a builder gives for one set: (checksum, destinations, endpoints, rows)
Made = tuple[str, frozenset, tuple[list, list], dict]


class SetBuilder:
    """``processes`` builder processes; each keeps the lineage of the sets it
    built within ``budget`` bytes (`fll.openlineage.memo_budget`)."""

    def __init__(self, processes: int, budget: int):
        self._lanes = [_Lane(budget, i) for i in range(processes)]

    async def build(self, raw: bytes, run_id: str, prior: str | None) -> tuple | None:
        """(the set ``raw`` builds: `Made`, or None without column lineage;
        its union with the set ``prior``: `Made`, a checksum when it is one
        of the two, or None) as a builder made them; None when none could."""
        lane = self._lanes[hash(run_id) % len(self._lanes)]
        return await lane.call(raw, prior)

    def close(self) -> None:
        for lane in self._lanes:
            lane.close()

    @property
    def pids(self) -> list[int]:
        """The builder processes' ids (tests)."""
        return [lane.pid for lane in self._lanes if lane.pid is not None]


class _Lane:
    """One builder process and the thread that talks to it."""

    def __init__(self, budget: int, number: int):
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(target=serve, args=(child, budget), daemon=True,
                                    name=f"fll-set-builder-{number}")
        self._process.start()
        child.close()
        self.pid = self._process.pid
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._broken = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"fll-set-builder-{number}")
        self._thread.start()

    async def call(self, raw: bytes, prior: str | None) -> tuple | None:
        if self._broken:
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()

        def done(result: Any) -> None:
            loop.call_soon_threadsafe(_settle, future, result)
        self._jobs.put(((raw, prior), done))
        return await future

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            args, done = job
            result = None
            if not self._broken:
                try:
                    self._conn.send(args)
                    result = self._conn.recv()
                except (EOFError, OSError) as e:
                    self._broken = True
                    log.warning("the set builder process %s is gone (%s): new sets are "
                                "built in the server from now on", self.pid, e)
            done(result)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(10)
        self._conn.close()  # the builder reads the end of its pipe, and exits
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)


def _settle(future: asyncio.Future, result: Any) -> None:
    if not future.done():  # an ingest given up on (its client went) takes nothing
        future.set_result(result)


# -- the builder process ---------------------------------------------------------

def serve(conn: Any, budget: int) -> None:
    """A builder process's loop: one event's (inputs and outputs JSON, the
    run's set) in, `build` out, until the server's end of the pipe closes."""
    ol.memo_budget(budget)
    shapes: dict[str, bytes] = {}
    # the server's garbage-collector policy (`fll.server.collector`): what
    # survives a period is frozen, so no collection walks the lineage kept
    # (without it, a third of a build went to collections)
    gc.set_threshold(YOUNG, *gc.get_threshold()[1:])
    gc.freeze()
    turned = time.monotonic()
    while True:
        try:
            raw, prior = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        try:
            conn.send(build(raw, prior, shapes))
        except (BrokenPipeError, OSError):
            return
        if time.monotonic() - turned >= PERIOD:
            gc.collect()
            gc.freeze()
            turned = time.monotonic()


def build(raw: bytes, prior: str | None, shapes: dict[str, bytes]) -> tuple | None:
    """What `SetBuilder.build` gives, made in this process; None when the
    event is not valid, or anything else failed (the server builds it again,
    and says why): an event never ends its builder."""
    try:
        return _build(raw, prior, shapes)
    except Exception:  # noqa: BLE001
        return None


def _build(raw: bytes, prior: str | None, shapes: dict[str, bytes]) -> tuple:
    info = ol.build_json(raw)
    if info is None:
        return None, None
    union: Any = None
    if prior is not None:
        merged = ol.union_built(prior, info, raw)
        if merged is not None:
            union = merged.checksum if merged.checksum in (prior, info.checksum) \
                else _made(merged, shapes)
    return _made(info, shapes), union


def _made(info: FieldLineageInfo, shapes: dict[str, bytes]) -> Made:
    return info.checksum, info.destinations, set_endpoints(info), set_rows(info, shapes)


def adopt(lineage: Any, raw: bytes, prior: str | None, made: tuple,
          keep: Callable[[str], None]) -> None:
    """Remember in this process what a builder made of ``raw`` (`SetBuilder.build`);
    ``keep``: told the checksum of the set the run has after the event."""
    mine, union = made
    if mine is None:
        ol.adopt(raw, None, None)
        return
    checksum, destinations, endpoints, rows = mine
    lineage.adopt(checksum, endpoints, rows)
    ol.adopt(raw, checksum, destinations)
    if union is None or prior is None:
        keep(checksum)
        return
    if not isinstance(union, str):
        lineage.adopt(union[0], union[2], union[3])
        union = union[0]
    ol.adopt_union(prior, checksum, union)
    keep(union)
