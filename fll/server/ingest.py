"""OpenLineage ingest inside one server process: the body parsed once, the
writes of the ingests that wait at the same moment committed together.

`parse_json`: orjson where it reads the body exactly as the standard library
would (it is several times faster), the standard library otherwise, so the
values and the error messages are those documented.

`GroupCommit`: an ingest is checked and turned into lineage on the event loop
before it waits for anything (nothing about it is left to find out once it
writes); what is left is its write, a function of the store. The first
ingest to write on an event loop leads: it takes the workers' write lock
(at once when it is free; held by another worker, whose commit is about a
millisecond, it waits for it on the loop up to `TURN_SPIN`, within
`SPIN_BUDGET` a second, then polls; while ingests stream in, it first lets
the loop turn twice, `STREAM_GAP`, unless such turns lately spent their time
on other requests, `GATHER_COST`) and records its write with every write
queued meanwhile by other ingests of the loop, in ONE transaction
(`SQLiteTable.atomic`: nested writes join it), and answers each request only
after the commit. The reads and writes of every write in a batch see one
state of the store and nobody writes between them, so a run's read-merge-write
is exact across workers and servers, and each request's answer (201, 200,
202, 409) is the one it would get alone. A write that fails for its own
reason (a conflict, bad input the store refuses) rolls the whole batch back,
and then each write of the batch runs alone in its own transaction and gets
its own answer: one event never fails another. A store error fails the
batch: every request in it answers 503 and none of them is half-written.

A backend without transactions (HBase, Bigtable) writes each event alone,
off the event loop, in a bounded pool of writer threads (`WRITERS`), several
events at once: its writes are round trips, and the store's check-and-puts
keep each run's read-merge-write exact whoever writes beside it (as between
servers). The table is wrapped in `fll.store.grouped.GroupedTable`, so the
puts, multi-gets and column deletes of the writers that ask at the same
moment go out as one call; the events of one run keep their order (one
connection sends a run's START, waits, then its COMPLETE; the ingest's run
locks serialize the rest). On SQLite the transaction serializes writers
across processes and servers sharing the file, so the answers are exact
there too.

`IngestRoute`: ``POST /api/v1/lineage`` answered by the route's own function
straight from the ASGI messages, inside the token check and the ingest slots
(which stay middleware around it), without the router and exception layers
of the framework (about 0.15 ms of an ingest's 1 ms of CPU). Errors get
the bodies the app's exception handlers give; anything unexpected goes on to
the outer catch-all (a generic 500), as from the route.

This module must never answer a request before its write committed, and
never let the error of one event be the answer to another.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import orjson
from fastapi.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from ..errors import StoreError
from ..store.base import transactional
from ..store.grouped import GroupedTable, grouping
from .errors import KNOWN_ERRORS, ApiError, known_error_response
from .guard import INGEST_PATH
from .stalls import StallLog

log = logging.getLogger("fll.server")

#: one ingest's write: the store calls it makes, and the response
Write = Callable[[], Any]

# events written at once on a backend without transactions: each is a dozen
# round trips, and the writers' calls go out grouped (fll.store.grouped)
WRITERS = 16

# calls of one kind (puts, multi-gets, column deletes) on the wire at once
# for the writers; a call arriving meanwhile joins the next group (the
# warehouse bench on the emulator, 1 ms per round trip: 1, 2 and 4 gave the
# same events/s within its noise, 2 and 4 more calls)
FLIGHTS = 1

# at most this many events per transaction: a batch runs on the event loop,
# so this bounds how long reads wait for it (about 0.4 ms of CPU per event)
MAX_BATCH = 32

# a commit that ends less than this after the previous one: ingests stream in,
# and the next leader lets the event loop turn twice to gather its batch
# (`GroupCommit._gather`); a lone ingest still commits at once
STREAM_GAP = 0.005
# but only while those turns are the ingests' own work: two turns of a loop
# that also answers reads are those reads' time (tens of milliseconds under
# load), and every ingest of the batch waits them out. A gather whose turns
# spent more than this per ingest they brought on anything but preparing
# ingests (`prepared`: the HTTP of an ingest is a fraction of it) stops the
# gathering, tried again after `GATHER_RETRY` (the server_load bench, 20%
# ingests among reads: ingest p99 417 ms gathering, 72-96 ms not; the
# warehouse bench, ingests alone: 839/s gathering, 713/s not; a new set can
# take tens of milliseconds to prepare, which is the ingests' own work)
GATHER_COST = 0.002
GATHER_RETRY = 1.0

# a number of 19 digits or more may be an integer beyond 64 bits, which orjson
# reads as a float where json keeps it an int. Found by mapping every digit to
# "0" and anything else to "." and looking for 19 zeros: a tenth of the cost of
# a regular expression, which cost more than parsing the body
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_LONG_NUMBER = b"0" * 19


def _has_long_number(raw: bytes) -> bool:
    return _LONG_NUMBER in raw.translate(_DIGITS)


def parse_json(raw: bytes) -> Any:
    """The JSON value of a request body, or `ApiError` 400 naming what is wrong."""
    if not _has_long_number(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # json has the words, and takes what orjson does not (NaN, a BOM, UTF-16)
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the body is not JSON: {e}") from None
    except RecursionError:  # json nests by recursion: "[[[[…" within the size limit
        raise ApiError(400, "the body nests JSON arrays/objects too deeply") from None


async def _chunks(receive: Any) -> Any:
    """The request body as it arrives (what Starlette's ``Request.stream`` gives)."""
    while True:
        message = await receive()
        if message["type"] == "http.request":
            body = message.get("body", b"")
            if body:
                yield body
            if not message.get("more_body", False):
                return
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()


class IngestRoute:
    """``POST /api/v1/lineage`` in front of the router (see the module doc);
    ``answer(content-length, content-encoding, body chunks)`` is the route's."""

    def __init__(self, app: Any, answer: Callable[..., Any]):
        self.app = app
        self.answer = answer

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" \
                or scope["path"] != INGEST_PATH:
            await self.app(scope, receive, send)
            return
        declared = encoding = None
        for name, value in scope["headers"]:
            if name == b"content-length" and declared is None:
                declared = value.decode("latin-1")
            elif name == b"content-encoding" and encoding is None:
                encoding = value.decode("latin-1")
        try:
            response = await self.answer(declared, encoding or "", _chunks(receive))
        except KNOWN_ERRORS as e:
            response = known_error_response(e)
        await response(scope, receive, send)


# how long the writer waits for the workers' write lock before writing without
# it: the lock only spares the event loop SQLite's busy waits (the store is
# what keeps writes safe), so a lock left held by a killed worker costs this
# once per batch, never an ingest
TURN_WAIT = 2.0


# how long the event loop itself waits for the write lock before it polls: the
# other worker holds it for one commit (about 1 ms, 6 ms at p99), and a poll
# comes back only after a whole turn of the loop, which under load is tens of
# milliseconds of other requests, all that time holding this ingest's slot
TURN_SPIN = 0.01
# but at most this much of each second: while the loop waits, no other ingest
# of the worker can queue to share the commit. When ingests keep both workers
# taking turns (half the requests ingests), waiting on the loop left a core
# idle; polling lets writes queue into batches
SPIN_BUDGET = 0.05


async def take_turn(lock: Any, spin: float = 0.0) -> bool:
    """Take ``lock``: waiting up to ``spin`` seconds on the event loop, then
    polled without blocking it; False when there is none or it stayed taken
    for `TURN_WAIT` seconds."""
    if lock is None:
        return False
    if lock.acquire(True, spin) if spin > 0 else lock.acquire(False):
        return True
    give_up = time.monotonic() + TURN_WAIT
    while not lock.acquire(False):
        if time.monotonic() >= give_up:
            return False
        await asyncio.sleep(0.0005)
    return True


class _Queue:
    """The writes waiting on one event loop, and whether its writer task runs."""

    __slots__ = ("pending", "running")

    def __init__(self) -> None:
        self.pending: list[tuple[Write, asyncio.Future]] = []
        self.running = False


class GroupCommit:
    """The ingests of one process, committed in batches (see the module doc).

    ``lock``: taken around every commit (``fll serve --workers`` shares one
    between processes so no event loop waits inside SQLite for another
    worker); ``max_batch``: events per transaction."""

    def __init__(self, store: Any, lock: Any, *, max_batch: int = MAX_BATCH,
                 stalls: StallLog | None = None):
        self.store = store
        self.lock = lock
        self.max_batch = max_batch
        self.stalls = stalls
        # one queue per event loop: a future is answered on the loop it belongs to
        self._queues: dict[asyncio.AbstractEventLoop, _Queue] = {}
        #: batches committed and events in them (benchmarks and tests read these)
        self.batches = 0
        self.events = 0
        # seconds spent waiting for the lock on the loop in the current second
        self._spun = 0.0
        self._spin_second = 0.0
        # a backend without transactions: events written concurrently by a pool
        # of threads, their calls grouped (the module doc)
        table = getattr(store, "table", None)
        self._pool: ThreadPoolExecutor | None = None  # made on first use
        self._concurrent = table is not None and not transactional(table)
        if self._concurrent and not isinstance(table, GroupedTable):
            store.table = GroupedTable(table, FLIGHTS)
        # when the last batch committed (`_gather`); whether the store has transactions
        self._last_commit = 0.0
        # until when gathering is off: its last turns went to other requests
        self._no_gather_until = 0.0
        # seconds the event loop spent preparing ingests (`prepared`)
        self._preparing = 0.0
        self._batched = table is not None and not self._concurrent

    async def _take_turn(self) -> bool:
        """The write lock, waited for on the loop within `SPIN_BUDGET`."""
        now = time.monotonic()
        if now - self._spin_second >= 1.0:
            self._spin_second, self._spun = now, 0.0
        spin = min(TURN_SPIN, SPIN_BUDGET - self._spun)
        if spin <= 0:
            return await take_turn(self.lock)
        got = await take_turn(self.lock, spin)
        self._spun += min(time.monotonic() - now, spin)
        return got

    def _gather(self, queue: _Queue) -> bool:
        """Whether a leader lets the loop turn before it commits, so the ingests
        arriving meanwhile join its transaction: only while ingests stream in
        (the last commit ended under `STREAM_GAP` ago), and only on a backend
        with transactions (without, each write goes alone anyway). With the
        write lock free nothing else makes a batch: every event was its own
        transaction, BEGIN and COMMIT about a tenth of its CPU."""
        now = time.monotonic()
        return len(queue.pending) < self.max_batch and self._batched and \
            now - self._last_commit < STREAM_GAP and now >= self._no_gather_until

    def prepared(self, seconds: float) -> None:
        """Count ``seconds`` the event loop spent preparing an ingest (parsing
        and checking it, building its lineage): a gather's own work."""
        self._preparing += seconds

    def close(self) -> None:
        """Let the writer threads end once their writes are done (the app's end)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    @property
    def concurrent(self) -> bool:
        """Whether events are written several at once (a backend without
        transactions): the ingest then keeps events of one output apart."""
        return self._concurrent

    def waiting(self) -> int:
        """Writes queued and not yet taken into a batch, on every loop."""
        return sum(len(q.pending) for q in list(self._queues.values()))

    async def submit(self, write: Write) -> Any:
        """Run ``write`` in the next batch; its result once committed (or its error)."""
        loop = asyncio.get_running_loop()
        if self._concurrent:
            return await self._beside(loop, write)
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        done: asyncio.Future = loop.create_future()
        queue.pending.append((write, done))
        if not queue.running:
            # nobody writes on this loop: this request leads the batch itself, so a
            # lone ingest with the lock free commits at once, with no task to start
            # and no turn of the loop lost (under load a turn is many reads long)
            queue.running = True
            await self._lead(loop, queue, done)
        return await done

    async def _beside(self, loop: asyncio.AbstractEventLoop, write: Write) -> Any:
        """``write`` in a writer thread, beside the others (no transactions)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="fll-writer")
        outcome = await loop.run_in_executor(self._pool, self._grouped, write)
        self.batches += 1
        self.events += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _grouped(self, write: Write) -> Any:
        with grouping():
            return self._alone(write)

    async def alone(self, write: Write) -> Any:
        """Run ``write`` by itself in a worker thread, under the lock: for an event
        whose write takes long (a wide event), so reads go on beside it."""
        got = await self._take_turn()
        try:
            outcome = await run_in_threadpool(self._alone, write)
        finally:
            if got:
                self.lock.release()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def _lead(self, loop: asyncio.AbstractEventLoop, queue: _Queue,
                    own: asyncio.Future | None) -> None:
        """Commit what is queued, batch after batch, until ``own`` is answered (a
        leading request) or the queue is empty (a writer task); what is left then
        goes on in a writer task, the queue still marked as running."""
        try:
            while queue.pending and not (own is not None and own.done()):
                if self._gather(queue):
                    # a turn runs the requests ready now up to their submit; the
                    # second, those whose bytes the first turn's poll read
                    began, preparing = time.monotonic(), self._preparing
                    waiting = len(queue.pending)
                    await asyncio.sleep(0)
                    await asyncio.sleep(0)
                    now = time.monotonic()
                    if now - began - (self._preparing - preparing) > \
                            GATHER_COST * max(len(queue.pending) - waiting, 1):
                        self._no_gather_until = now + GATHER_RETRY
                # writes queued while the lock is awaited join this batch
                got = await self._take_turn()
                try:
                    batch = queue.pending[:self.max_batch]
                    del queue.pending[:len(batch)]
                    if self.stalls is None:
                        outcomes = self._commit([w for w, _ in batch])
                    else:
                        with self.stalls.timed("commit", f"{len(batch)} events"):
                            outcomes = self._commit([w for w, _ in batch])
                finally:
                    if got:
                        self.lock.release()
                self.batches += 1
                self.events += len(batch)
                self._last_commit = time.monotonic()
                for (_, done), outcome in zip(batch, outcomes, strict=True):
                    if done.done():
                        continue  # the request went away; its write stands
                    if isinstance(outcome, BaseException):
                        done.set_exception(outcome)
                    else:
                        done.set_result(outcome)
        finally:
            if queue.pending:
                loop.create_task(self._lead(loop, queue, None))
            else:
                queue.running = False
                self._queues.pop(loop, None)

    def _commit(self, writes: list[Write]) -> list[Any]:
        """Each write's result or exception, the batch in one transaction when the
        backend has them."""
        atomic = getattr(self.store.table, "atomic", None)
        if not callable(atomic) or len(writes) == 1:
            return [self._alone(w) for w in writes]
        try:
            # retried whole by the store while SQLite is busy: the writes have
            # no effect but the store's, and build their answers afresh
            return list(atomic(lambda _table: [w() for w in writes]))
        except StoreError as e:
            return [e] * len(writes)  # rolled back: none of them is recorded
        except Exception:  # noqa: BLE001 - one event's own failure: rolled back, each alone
            return [self._alone(w) for w in writes]

    def _alone(self, write: Write) -> Any:
        atomic = getattr(self.store.table, "atomic", None)
        try:
            return atomic(lambda _table: write()) if callable(atomic) else write()
        except Exception as e:  # noqa: BLE001 - handed to the request it belongs to
            return e
