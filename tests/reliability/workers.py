"""Child processes of the reliability suite, run as
``python -m tests.reliability.workers <role> …`` (a fresh interpreter starts in
well under a second; forking a pytest process that has live threads can
deadlock the child, so the suite never forks).

Roles:
- ``writer URL WRITER RUNS BATCH``: record RUNS runs (`record()` when BATCH is 1,
  else `record_many` in batches), then print ``DONE RUNS``.
- ``crash-writer URL SEED``: print ``READY``, then record runs forever, printing
  each run id only after `record()` returned; the parent SIGKILLs it.

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


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    if role == "writer":
        writer(args[0], int(args[1]), int(args[2]), int(args[3]))
    elif role == "crash-writer":
        crash_writer(args[0], int(args[1]))
    else:
        raise SystemExit(f"unknown role {role!r}")
