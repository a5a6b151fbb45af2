"""Bucket levels x64 against x16 (format 4 otherwise), on the store bench's workloads:

    .venv/bin/python scripts/bench/store_levels.py

Prints bytes per run after checkpoint + VACUUM, the whole-range field
question (fastest of 15), and how many row keys the cover asks for and how
many rows come back, for an odd-edged whole range and on average over 200
random ranges. Levels are switched by rebinding `fll.rowkeys.LEVELS4` (and
its top level) before each store is written: a measurement only, never a
store to keep.
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

# both from 64 ms run rows up to about 2.2 years
CONFIGS = {"x64 (5 bucket levels)": tuple(1 << b for b in range(6, 37, 6)),
           "x16 (8 bucket levels)": tuple(1 << b for b in range(6, 39, 4))}


class Counting:
    """A table proxy counting the keys the cover asks for and the rows it gets."""

    def __init__(self, inner) -> None:
        self.inner, self.keys, self.rows = inner, 0, 0

    def get_many(self, keys):
        out = self.inner.get_many(keys)
        self.keys += len(keys)
        self.rows += len(out)
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def main() -> None:
    work = tempfile.mkdtemp(prefix="fll-levels-")
    rng = random.Random(1)
    saved = rk.LEVELS4, rk.TOP
    try:
        for label, levels in CONFIGS.items():
            rk.LEVELS4, rk.TOP = levels, len(levels) - 1
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
                whole = timed(lambda s=store, t=target, e=end: s.incoming(t, T0, e),
                              repeat=15) * 1000
                counting.keys = counting.rows = 0
                store.checksums(DST, T0 + 7, end - 13)
                odd = (counting.keys, counting.rows)
                counting.keys = counting.rows = 0
                for _ in range(200):
                    lo = T0 + rng.randrange(0, n * span)
                    store.checksums(DST, lo, lo + rng.randrange(1, n * span))
                store.table = counting.inner
                store.close()
                print(f"  {name}: {file_bytes(path) / n:,.0f} B/run, whole-range incoming "
                      f"{whole:.2f} ms; keys asked / rows found: odd-edged whole range "
                      f"{odd[0]} / {odd[1]}, 200 random ranges {counting.keys / 200:.0f} / "
                      f"{counting.rows / 200:.0f} on average")
        print(f"(load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())})")
    finally:
        rk.LEVELS4, rk.TOP = saved
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
