"""Child processes of the reliability suite, run as
``python -m tests.reliability.workers <role> …`` (a fresh interpreter starts in
well under a second; forking a pytest process that has live threads can
deadlock the child, so the suite never forks).

Roles:
- ``writer URL WRITER RUNS BATCH``: record RUNS runs (`record()` when BATCH is 1,
  else `record_many` in batches), then print ``DONE RUNS``.
- ``crash-writer URL SEED``: print ``READY``, then record runs forever, printing
  each run id only after `record()` returned; the parent SIGKILLs it.
- ``reuse-writer URL WRITER RUNS START_MS``: record RUNS runs at or after
  START_MS with the eight shared sets of `shared_set` (a few new ones too),
  printing each run id once `record()` returned (confirmed).
- ``same-runs URL WRITER RUNS``: record runs ``same-0`` … with one set but a start
  time of its own (as two servers seeing one run would), printing confirmed ids.
- ``admin URL ACTION ROUNDS [BEFORE_MS [RUN]]``: print ``READY``, wait until RUN is
  recorded, run ``purge`` (before BEFORE_MS) or ``fsck`` (with repair) ROUNDS
  times, then print ``DONE``.

This module must never write anywhere but the store URL it is given.
"""
from __future__ import annotations

import random
import sys

from fll import EndPoint
from fll.store import open_store
from tests.lineage_examples import chain

SOURCES = [EndPoint("ns", f"src{i}") for i in range(8)]
TARGETS = [EndPoint("ns", f"dst{i}") for i in range(8)]
FIELDS = ["id", "name", "amount"]
BASE_MS = 1_700_000_000_000


def operation_set(writer: int, i: int):
    """Shared sets most of the time and a set of its own every 10th run, so new
    data rows are written while readers follow index rows."""
    src, dst = SOURCES[(writer + i) % 8], TARGETS[(writer * 3 + i) % 8]
    if i % 10 == 0:
        return chain(src, dst, FIELDS + [f"w{writer}_{i}"])
    return chain(src, dst, FIELDS)


def writer(url: str, writer_no: int, runs: int, batch: int) -> None:
    store = open_store(url)
    pending = []
    for i in range(runs):
        item = (operation_set(writer_no, i), f"w{writer_no}-r{i}", BASE_MS + i, f"job{writer_no}")
        if batch == 1:
            store.record(*item)
        else:
            pending.append(item)
            if len(pending) == batch:
                store.record_many(pending)
                pending.clear()
    if pending:
        store.record_many(pending)
    store.close()
    print(f"DONE {runs}", flush=True)


def crash_writer(url: str, seed: int) -> None:
    rnd = random.Random(seed)
    store = open_store(url)
    print("READY", flush=True)
    i = 0
    while True:
        # a new operation set now and then: the crash may land between data and index rows
        fields = FIELDS + ([f"s{seed}_{i}"] if rnd.random() < 0.3 else [])
        info = chain(rnd.choice(SOURCES), rnd.choice(TARGETS), fields)
        run_id = f"k{seed}-r{i}"
        store.record(info, run_id, BASE_MS + seed * 100_000 + i, "crash")
        print(run_id, flush=True)
        i += 1


def gate() -> None:
    """Print READY, then wait for the file ``$FLL_TEST_GATE`` (when set), so that
    the parent releases every racer at the same moment."""
    import os
    import time

    path = os.environ.get("FLL_TEST_GATE")
    print("READY", flush=True)
    while path and not os.path.exists(path):
        time.sleep(0.001)


def shared_set(k: int):
    """Set ``k`` of a pool of 640 that the writers of the races reuse."""
    k %= 640
    return chain(SOURCES[k % 8], TARGETS[(k // 8) % 8], FIELDS + [f"p{k // 64}"])


def reuse_writer(url: str, writer_no: int, runs: int, start_ms: int) -> None:
    store = open_store(url)
    gate()
    batch = []
    for i in range(runs):
        # the shared sets of the pool in turn (each one's first use after the
        # cut-off), and now and then a new one
        info = shared_set(writer_no * 150 + i) if i % 7 else \
            chain(SOURCES[i % 8], TARGETS[i % 8], FIELDS + [f"n{writer_no}_{i}"])
        batch.append((info, f"u{writer_no}-r{i}", start_ms + writer_no * 10_000 + i, "reuse"))
        if len(batch) == 10 or i == runs - 1:
            store.record_many(batch)
            print("\n".join(run_id for _, run_id, _, _ in batch), flush=True)
            batch.clear()
    store.close()


def same_runs(url: str, writer_no: int, runs: int) -> None:
    store = open_store(url)
    gate()
    info = shared_set(0)
    for i in range(runs):
        store.record(info, f"same-{i}", BASE_MS + writer_no * 1_000 + i, f"server{writer_no}")
        print(f"same-{i}", flush=True)
    store.close()


def admin_loop(url: str, action: str, rounds: int, before_ms: int, wait_for: str = "") -> None:
    """Once run ``wait_for`` is recorded (the writers have started), run the
    admin action ROUNDS times back to back."""
    import time

    from fll.store import admin

    store = open_store(url)
    gate()
    while wait_for and store.run(wait_for) is None:
        time.sleep(0.001)
    for _ in range(rounds):
        if action == "purge":
            admin.purge(store, before_ms)
        else:
            admin.fsck(store.table, repair=True)
    store.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "writer":
        writer(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif role == "crash-writer":
        crash_writer(args[0], int(args[1]))
    elif role == "reuse-writer":
        reuse_writer(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif role == "same-runs":
        same_runs(args[0], int(args[1]), int(args[2]))
    elif role == "admin":
        admin_loop(args[0], args[1], int(args[2]), int(args[3]) if len(args) > 3 else 0,
                   args[4] if len(args) > 4 else "")
    else:
        raise SystemExit(f"unknown role {role!r}")
