"""Several writes run side by side in ONE thread, their store calls sent
together: the event-level batch of a backend without transactions (Bigtable,
HBase).

`run_batch(writes)` runs each write in a greenlet of the calling thread.
A write's grouped call (`fll.store.grouped`: a put, a multi-get, column
deletes, span reads) does not go on the wire at once: the write parks there
and the next write runs. Once every write of the batch is parked or done,
each kind of call goes out as ONE call carrying every parked write's part
(`GroupedTable` merges them and answers each part), and the parked writes
go on, each with its own answer, until they park again or end. So a batch of
n events costs about as many calls as one event, with no thread hand-off,
lock or condition wait per call: the writer threads of
`fll.store.grouped` did the same grouping with one thread per event, and the
hand-offs between them cost more CPU than the calls.

Every other call (a check-and-put, a scan, a call of a table that is not
grouped) runs at once in the write that makes it, the others waiting: so the
conditional writes that guard a run against another server stay one per row,
as the backends require, and within a write the calls keep their order (a
write's next call starts only after its previous one came back).

A write must not wait for a lock another write of the same batch holds (one
thread: it would wait forever): the caller puts writes that take the same
locks in different batches (`fll.server.ingest`). Locks held only across
code that does not park (every lock of the store's caches) are safe.

This module must never let one write's error answer another: a call that
fails for a group of several sends each part alone, from its own write
(`GroupedTable._through`), and a write's exception is its own outcome.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

try:
    import greenlet
except ImportError:  # pragma: no cover - an install without it writes in threads
    greenlet = None

_local = threading.local()

#: whether this install can run batches (greenlet, installed with the extras)
AVAILABLE = greenlet is not None


class Parked:
    """The parts of one kind of call waiting in a batch, and its outcome."""

    __slots__ = ("parts", "waiters", "error", "result")

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.waiters: list[Any] = []
        self.error: BaseException | None = None
        self.result: Any = None


class Batch:
    """The writes of one `run_batch` call: who runs, what is parked."""

    def __init__(self) -> None:
        assert greenlet is not None
        self.hub = greenlet.getcurrent()
        # lane -> its parked group, in the order lanes were first asked
        self.parked: dict[Any, Parked] = {}
        #: calls sent for parked parts, and the parts (tests read these)
        self.calls = 0
        self.parts = 0

    def park(self, lane: Any, part: Any) -> Parked:
        """Park the current write's ``part`` on ``lane`` until the batch sends it."""
        group = self.parked.get(lane)
        if group is None:
            group = self.parked[lane] = Parked()
        group.parts.append(part)
        group.waiters.append(greenlet.getcurrent())
        self.hub.switch()
        return group

    def flush(self) -> list[Any]:
        """Send every parked group (one call each); the writes to go on."""
        parked, self.parked = self.parked, {}
        ready: list[Any] = []
        for lane, group in parked.items():
            try:
                group.result = lane.send_parked(group.parts)
            except BaseException as e:  # noqa: BLE001 - each waiter gets it (or goes alone)
                group.error = e
            self.calls += 1
            self.parts += len(group.parts)
            ready += group.waiters
        return ready


def current() -> Batch | None:
    """The batch whose write runs now in this thread (None: none, or the
    batch's own loop, which never parks)."""
    batch: Batch | None = getattr(_local, "batch", None)
    if batch is None or greenlet.getcurrent() is batch.hub:
        return None
    return batch


def run_batch(writes: list[Callable[[], Any]]) -> list[Any]:
    """Each write's result, or the exception it raised, the writes run side by
    side in this thread (the module doc)."""
    if greenlet is None or len(writes) == 1:
        return [_outcome(w) for w in writes]
    if getattr(_local, "batch", None) is not None:
        raise RuntimeError("run_batch inside a batch")
    batch = _local.batch = Batch()
    outcomes: list[Any] = [None] * len(writes)

    def run(i: int, write: Callable[[], Any]) -> None:
        outcomes[i] = _outcome(write)

    try:
        ready = [greenlet.greenlet(lambda i=i, w=w: run(i, w)) for i, w in enumerate(writes)]
        while ready:
            for g in ready:
                g.switch()
            ready = batch.flush()
    finally:
        _local.batch = None
    return outcomes


def _outcome(write: Callable[[], Any]) -> Any:
    try:
        return write()
    except Exception as e:  # noqa: BLE001 - handed to the request it belongs to
        return e
