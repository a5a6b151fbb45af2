"""What stops a server process from answering, written down as it happens.

Under load every request waits for the event loop; anything that holds the
loop (a commit, a WAL checkpoint, Python's garbage collector) delays every
request of the process by as long. `StallLog` (``fll serve --log-stalls MS``)
logs each such pause of at least MS milliseconds on the ``fll.server`` logger
at WARNING, with its cause and wall-clock time, so a slow tail in a load test
can be matched to what the server was doing:

- ``gc``: a collection of generation N (``gc.callbacks``), how long, how many
  objects it found to free;
- ``commit``: a batch of ingest writes (`fll.server.ingest.GroupCommit`);
- ``checkpoint``: a WAL checkpoint (`fll.server.checkpoint`), in a thread of
  its own: it holds up nobody unless the disk does;
- ``loop``: the event loop did not get back to a timer for MS or more (the
  sum of whatever ran on it meanwhile; the lines above say what that was).

Off by default: the timing costs a few microseconds per collection and
commit. This module must never change what a request is answered, nor hold
a lock.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from contextlib import contextmanager
from typing import Any, Iterator

log = logging.getLogger("fll.server")

# how often the loop watcher wakes: its own cost is one timer per period
_LOOP_PERIOD = 0.05


def _stamp() -> str:
    now = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


class StallLog:
    """Log pauses of at least ``threshold_ms`` (see the module doc)."""

    def __init__(self, threshold_ms: float):
        self.threshold = threshold_ms / 1000
        self._gc_began = 0.0
        self._loop_task: asyncio.Task | None = None
        #: pauses logged per cause (tests and benchmarks read these)
        self.counts: dict[str, int] = {}

    def report(self, cause: str, seconds: float, detail: str = "") -> None:
        if seconds < self.threshold:
            return
        self.counts[cause] = self.counts.get(cause, 0) + 1
        log.warning("stall %s %.1f ms at %s in pid %d%s", cause, seconds * 1000, _stamp(),
                    os.getpid(), f" ({detail})" if detail else "")

    @contextmanager
    def timed(self, cause: str, detail: str = "") -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.report(cause, time.perf_counter() - began, detail)

    # -- the garbage collector --------------------------------------------
    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
            return
        took = time.perf_counter() - self._gc_began
        if took >= self.threshold:
            # the frozen count, not a count of tracked objects: listing them all
            # (`gc.get_objects`) would lengthen the very pause being reported
            self.report("gc", took, f"generation {info.get('generation')}, "
                                    f"{info.get('collected', 0)} objects freed, "
                                    f"{gc.get_freeze_count()} frozen")

    # -- the event loop ---------------------------------------------------
    async def _watch_loop(self) -> None:
        while True:
            due = time.perf_counter() + _LOOP_PERIOD
            await asyncio.sleep(_LOOP_PERIOD)
            self.report("loop", time.perf_counter() - due, "the event loop was held")

    def start(self) -> None:
        """Watch the collector and the running event loop (call on the loop)."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._watch_loop())

    def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._loop_task is not None:
            self._loop_task.cancel()
            self._loop_task = None
