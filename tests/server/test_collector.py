"""A server process's garbage collector and its pauses (fll.server.collector, fll.server.stalls).

What must hold: after a freeze turn, the objects the process held are in the
permanent generation, so no later collection walks them; a cycle dropped
before a turn is collected by that turn, not kept; a cycle among frozen
objects is what the accounting collection at shutdown finds; every pause
over the threshold is logged with its cause.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time

import pytest

from fll.server.collector import FreezeOld
from fll.server.stalls import StallLog


class Node:
    """An object that can take part in a reference cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> Node:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a


@pytest.fixture
def thawed():
    """Whatever a test froze is given back to the collector afterwards."""
    yield
    gc.unfreeze()
    gc.collect()


def tracked(obj: object) -> bool:
    """Whether a collection would walk ``obj`` (the permanent generation is not walked)."""
    return any(o is obj for o in gc.get_objects())


def test_a_turn_freezes_what_the_process_holds_so_collections_no_longer_walk_it(thawed):
    held = [Node() for _ in range(1000)]
    assert tracked(held[0])
    frozen_before = gc.get_freeze_count()
    FreezeOld().turn()
    assert not tracked(held[0]) and not tracked(held)
    assert gc.get_freeze_count() >= frozen_before + len(held)
    fresh = Node()
    assert tracked(fresh)  # what comes after the turn is collected as before


def test_a_cycle_dropped_before_a_turn_is_collected_by_it_not_frozen(thawed):
    freezer = FreezeOld()
    freezer.turn()
    dropped = cycle()
    ref = dropped.other
    del dropped, ref
    freezer.turn()
    # nothing frozen by the turn is garbage: a full collection now frees no cycle
    gc.unfreeze()
    assert gc.collect() == 0


def test_a_cycle_among_frozen_objects_is_kept_until_the_accounting_collection(thawed):
    freezer = FreezeOld()
    kept = [cycle() for _ in range(50)]
    freezer.turn()
    del kept  # 50 cycles of 2 nodes (and their attribute dicts) become garbage, frozen
    assert gc.collect() == 0
    leaked = freezer.stop(account=True)
    assert leaked is not None and leaked >= 100


def test_the_event_loop_task_takes_a_turn_every_period(thawed):
    async def run() -> int:
        freezer = FreezeOld(period=0.02)
        freezer.start()
        await asyncio.sleep(0.2)
        assert freezer.stop() is None
        return freezer.turns

    assert asyncio.run(run()) >= 4


def test_while_turns_run_young_collections_wait_for_more_objects_and_then_as_before(thawed):
    from fll.server.collector import YOUNG

    before = gc.get_threshold()

    async def run() -> tuple[int, ...]:
        freezer = FreezeOld(period=0.02)
        freezer.start()
        freezer.start()  # a second start changes nothing more
        during = gc.get_threshold()
        freezer.stop()
        return during

    during = asyncio.run(run())
    assert during == (YOUNG, *before[1:]) and YOUNG > before[0]
    assert gc.get_threshold() == before


def test_a_timed_section_over_the_threshold_is_logged_with_its_cause(caplog):
    log = StallLog(5)
    with caplog.at_level(logging.WARNING, "fll.server"):
        with log.timed("commit", "3 events"):
            time.sleep(0.02)
        with log.timed("commit", "1 event"):
            pass  # under the threshold: not logged
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("stall commit ")
    assert "(3 events)" in lines[0]
    assert log.counts == {"commit": 1}


def test_a_collection_and_a_held_event_loop_are_logged_as_gc_and_loop(caplog):
    held = [cycle() for _ in range(200_000)]  # a full collection walks these: milliseconds

    async def run(log: StallLog) -> None:
        log.start()
        try:
            await asyncio.sleep(0.06)
            gc.collect()
            time.sleep(0.15)  # the loop held: its watcher wakes late
            await asyncio.sleep(0.06)
        finally:
            log.stop()

    log = StallLog(1)
    with caplog.at_level(logging.WARNING, "fll.server"):
        asyncio.run(run(log))
    del held
    assert log.counts.get("gc", 0) >= 1 and log.counts.get("loop", 0) >= 1
    assert any("stall gc" in r.getMessage() and "generation 2" in r.getMessage()
               for r in caplog.records)
    assert gc.callbacks.count(log._on_gc) == 0  # stop() removed its callback
