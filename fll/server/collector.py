"""Python's garbage collector kept off the serving path of a long-lived process.

A server process keeps big caches (decoded operation sets, merged answers):
on the load benchmark's history about 1.9 million objects the collector
tracks. CPython collects its oldest generation whenever it has grown by a
quarter, and such a collection walks every tracked object on the thread that
holds the GIL: 0.1 s at 120,000 objects, 1 s at 1.6 million, during which the
process answers nobody (`fll serve --log-stalls` shows them as ``gc``). The
collections freed nothing there: the caches hold no reference cycles, and
what they drop is freed by its reference count at once.

`FreezeOld` runs, on the event loop every `PERIOD` seconds, a full collection
(which only walks the objects not frozen yet: those that arrived since the
previous turn, a few milliseconds' worth) and then ``gc.freeze()``, which
moves every object that survived into the permanent generation no collection
walks (constant time). So no collection ever walks more than a period's
survivors, and the automatic collections stay as they were for young objects.

While it runs, the automatic young collections wait for `YOUNG` new
objects instead of CPython's 700: a turn every period collects anyway, and an
ingest parses its event into thousands of containers that live until its
answer, which the default threshold walked several times per event (about a
tenth of an ingest's CPU on the warehouse benchmark). The threshold is
restored when it stops.

The price: a reference cycle formed among objects older than the last freeze
is never collected (nothing else changes: frozen objects are still freed by
reference counting). With ``fll serve --log-stalls`` a full collection over
everything (``gc.unfreeze(); gc.collect()``) at shutdown logs what such
cycles held, so a test and the benchmark can show it stays near zero. This
module must never run a collection over the frozen objects while the process
serves.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger("fll.server")

# seconds between two freezes: a turn walks what survived since the previous one
# (0.1 ms once warm). While the caches fill, a worker decodes sets fast and a
# longer period let a collection meet more: in the first 20 s of the load
# benchmark, pauses of 50 ms or more were 39 (longest 337 ms) at 1 s, 25 (172 ms)
# at 0.25 s, 14 (198 ms, right at start) at 0.1 s
PERIOD = 0.1
# container allocations (net) between two automatic young collections while
# turns run: at 800 ingests a second, one or two between turns
YOUNG = 100_000


class FreezeOld:
    """The freeze policy of one server process (see the module doc)."""

    def __init__(self, period: float = PERIOD):
        self.period = period
        self._task: asyncio.Task | None = None
        #: turns taken, and the longest one in seconds (tests and benchmarks read these)
        self.turns = 0
        self.longest = 0.0
        self._thresholds: tuple[int, ...] | None = None  # CPython's, while started

    def turn(self) -> None:
        """Collect what arrived since the previous turn, then freeze the survivors."""
        began = time.perf_counter()
        gc.collect()
        gc.freeze()
        self.turns += 1
        self.longest = max(self.longest, time.perf_counter() - began)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            self.turn()

    def start(self) -> None:
        """Freeze what the process holds now (its imports, the store) and then
        every period (call on the event loop)."""
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            gc.set_threshold(YOUNG, *self._thresholds[1:])
        self.turn()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self, account: bool = False) -> int | None:
        """Stop freezing. With ``account``: collect over everything and return
        what that freed (cycles among frozen objects: what freezing kept alive)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        if not account:
            return None
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        leaked = gc.collect()
        log.warning("garbage collector: %d turns, longest %.1f ms; a full collection at "
                    "shutdown over %d frozen objects freed %d", self.turns,
                    self.longest * 1000, frozen, leaked)
        return leaked
