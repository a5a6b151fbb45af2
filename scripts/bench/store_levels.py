"""Bucket levels x16 against x64 (format 3 otherwise), on the store bench's workloads:

    .venv/bin/python scripts/bench/store_levels.py

Prints bytes per run after checkpoint + VACUUM, the whole-range field question
(fastest of 15), and how many rows the bucket read returns for an odd-edged
whole range and on average over 200 random ranges. Levels are switched by
rebinding `fll.rowkeys.LEVELS` before each store is written: a measurement
only, never a store to keep.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from store import DST, HOUR, T0, dated, file_bytes, operation_set, record, timed  # noqa: E402

from fll import EndPointField, open_store  # noqa: E402
from fll import rowkeys as rk  # noqa: E402

CONFIGS = {"x16 (7 levels)": tuple(1 << b for b in range(12, 37, 4)),
           "x64 (5 levels)": tuple(1 << b for b in range(12, 37, 6))}


class Counting:
    """A table proxy counting the rows bucket reads return."""

    def __init__(self, inner) -> None:
        self.inner, self.rows = inner, 0

    def scan_ranges(self, ranges):
        out = self.inner.scan_ranges(ranges)
        self.rows += len(out)
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def main() -> None:
    work = tempfile.mkdtemp(prefix="fll-levels-")
    rng = random.Random(1)
    try:
        for label, levels in CONFIGS.items():
            rk.LEVELS = levels
            print(label)
            for name, items, span in (
                    ("distinct", [dated(i) for i in range(5000)], HOUR),
                    ("repeated", [(operation_set(), f"run-{i}", T0 + i * 1000, "bench")
                                  for i in range(50_000)], 1000)):
                path = os.path.join(work, f"{label[:3]}-{name}.db")
                store = open_store(f"sqlite:///{path}")
                record(store, items)
                n, end = len(items), T0 + len(items) * span
                target = EndPointField(DST, "f3")
                counting = Counting(store.table)
                store.table = counting
                whole = timed(lambda s=store, t=target, e=end: s.incoming(t, T0, e), repeat=15) * 1000
                counting.rows = 0
                store.checksums(DST, T0 + 7, end - 13)
                odd = counting.rows
                total = 0
                for _ in range(200):
                    lo = T0 + rng.randrange(0, n * span)
                    counting.rows = 0
                    store.checksums(DST, lo, lo + rng.randrange(1, n * span))
                    total += counting.rows
                store.table = counting.inner
                store.close()
                print(f"  {name}: {file_bytes(path) / n:,.0f} B/run, whole-range incoming "
                      f"{whole:.2f} ms, bucket rows read: odd-edged whole range {odd}, "
                      f"200 random ranges {total / 200:.0f} on average")
        print(f"(load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
