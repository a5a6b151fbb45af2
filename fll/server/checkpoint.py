"""WAL checkpoints of a SQLite store, taken off the server's event loop.

In WAL mode SQLite appends every commit to the ``-wal`` file and, by default,
the commit that takes the WAL past 1,000 pages also copies it back into the
database file and syncs it: a checkpoint inside the commit. The server commits
ingests on its event loop (`fll.server.ingest`), so under the load benchmark
that was 16-20 ms about once a second in each worker during which nobody was
answered, and on a slower disk a sync alone can take longer.

`Checkpointer` turns the automatic checkpoints off for this process's
connections and runs a PASSIVE checkpoint every ``period`` seconds in a thread
of its own (SQLite does the copying and syncing without the GIL, so the loop
answers meanwhile). PASSIVE never waits for a reader or a writer: what a
reader still needs stays in the WAL until the next turn.

SQLite rewinds the WAL to its start only at a commit that begins while all of
the WAL is in the database file. Under a steady stream of ingests some commit
always lands while a checkpoint copies, so a checkpoint alone never catches
up and the WAL grew by 40 MB in 30 s of the load benchmark. So each turn
copies the bulk first, then takes the workers' write lock (the one ingests
commit under, `fll.server.ingest.GroupCommit`) for a second checkpoint of
the few pages committed meanwhile, well under a millisecond: the next commit
then finds the WAL copied and rewinds it, and the file stays about one period
of writes long. The largest WAL a turn found is kept (`largest_wal_pages`)
for tests and benchmarks.

Other processes on the same file (the CLI, a Spark job recording through the
store API) keep SQLite's default and checkpoint their own commits. A backend
without a WAL (HBase, Bigtable) has no `checkpoint`: nothing is started.

This module must never block the event loop, and never leave a store without
checkpoints: a turn that fails is logged and the next one tries again, and
stopping gives the connections SQLite's default back.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .stalls import StallLog

log = logging.getLogger("fll.server")

# seconds between two checkpoints: the WAL holds about this long of writes
# (some 500 pages at the load benchmark's 260 ingests/s)
PERIOD = 0.5
# how long a turn waits for the write lock for its catch-up checkpoint
LOCK_WAIT = 1.0
# SQLite's own auto-checkpoint, given back on stop
SQLITE_DEFAULT_PAGES = 1000


class Checkpointer:
    """PASSIVE checkpoints of ``table`` every ``period`` seconds from a thread."""

    def __init__(self, table: Any, period: float = PERIOD, stalls: StallLog | None = None,
                 lock: Any = None):
        self.table = table
        self.period = period
        self.stalls = stalls
        self.lock = lock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: turns that finished, turns that failed, the largest WAL a turn found (pages)
        self.turns = 0
        self.failures = 0
        self.largest_wal_pages = 0

    @staticmethod
    def supported(table: Any) -> bool:
        return callable(getattr(table, "checkpoint", None)) and \
            callable(getattr(table, "set_autocheckpoint", None))

    def turn(self) -> None:
        """A PASSIVE checkpoint, and another under the write lock (see the module
        doc); a failure is logged, the next turn tries again."""
        began = time.perf_counter()
        try:
            _busy, pages, done = self.table.checkpoint("PASSIVE")
            # a lock left held by a killed worker: the bulk is copied, the rewind
            # waits for a later turn
            if self.lock is not None and self.lock.acquire(True, LOCK_WAIT):
                try:
                    _busy, late, done = self.table.checkpoint("PASSIVE")
                    pages = max(pages, late)
                finally:
                    self.lock.release()
        except Exception as e:  # noqa: BLE001 - a turn must not end the checkpoints
            self.failures += 1
            if self.failures == 1 or self.failures % 100 == 0:
                log.warning("WAL checkpoint failed (%d so far; trying again every %g s): %s",
                            self.failures, self.period, e)
            return
        self.turns += 1
        self.largest_wal_pages = max(self.largest_wal_pages, pages)
        if self.stalls is not None:
            self.stalls.report("checkpoint", time.perf_counter() - began,
                               f"{pages} WAL pages, {done} copied; in a thread of its own")

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.turn()

    def start(self) -> None:
        """Before the server answers anything: no commit of this process
        checkpoints any more, this thread does."""
        self.table.set_autocheckpoint(0)
        self._thread = threading.Thread(target=self._run, name="fll-wal-checkpoint",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """After the server stopped answering: the thread ends, the connections
        checkpoint themselves again."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.table.set_autocheckpoint(SQLITE_DEFAULT_PAGES)
