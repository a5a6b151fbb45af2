"""A superseded run's bucket cells: `unused_buckets` reading every level in
its first call (``at_once``, how the write path cleans up after a
supersede) finds exactly the cells the level-by-level walk finds, whichever
level another run of the set keeps it at; and superseding run after run
leaves a store fsck finds clean, whose questions answer the new sets."""
from __future__ import annotations

import pytest

from fll import EndPoint
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.store.layout import unused_buckets
from tests.lineage_examples import chain

from .conftest import BACKENDS

pytestmark = pytest.mark.parametrize("table_url", BACKENDS, indirect=True)

SRC, DST = EndPoint("s3://lake", "src"), EndPoint("s3://lake", "dst")
T0 = 1_700_000_000_000 - 1_700_000_000_000 % rk.LEVELS4[rk.TOP]  # a top bucket's start
# runs of one set, kept at level 1 (1 s later), 2 (2 min), 3 (2 h), 4 (3 days), 5 (90 days)
LATER = [0, 1_000, 120_000, 7_200_000, 3 * 86_400_000, 90 * 86_400_000]


def _wanted(checksum: str, start: int) -> list[tuple[bytes, str, str, str, int]]:
    return [(rk.BACKWARD_BUCKET, DST.namespace, DST.name, checksum, start),
            (rk.FORWARD_BUCKET, SRC.namespace, SRC.name, checksum, start)]


def test_every_level_read_at_once_finds_what_the_walk_finds(open_table_for):
    old = chain(SRC, DST, ["a"])
    found = []
    # r0 going, and another run of the set (none first) keeping it from its level up
    for other in [None, *LATER[1:]]:
        store = LineageStore(open_table_for())
        store.record(old, "first", T0 - 100 * 86_400_000)  # r0 is not the set's first run
        store.record(old, "r0", T0)
        if other is not None:
            store.record(old, "r1", T0 + other)
        walked = unused_buckets(store.table, _wanted(old.checksum, T0), ignore={"r0"})
        at_once = unused_buckets(store.table, _wanted(old.checksum, T0), ignore={"r0"},
                                 at_once=True)
        assert sorted(at_once) == sorted(walked)
        found.append(len(walked))
    # alone its cells go at every level (the first run is in another top
    # bucket), on both endpoints; else those below the level it shares
    assert found == [2 * rk.TOP, 0, 2, 4, 6, 8]


def test_superseding_run_after_run_leaves_a_clean_store(open_table_for):
    store = LineageStore(open_table_for())
    old, new = chain(SRC, DST, ["a"]), chain(SRC, DST, ["a", "b"])
    for i, later in enumerate(LATER):
        store.record(old, f"r{i}", T0 + later)
    for i in range(len(LATER)):  # in the order they ran, as their COMPLETEs come
        assert store.record(new, f"r{i}", 0, supersede=True)
        assert admin.fsck(store.table).problems == 0
        left = sorted(r.run_id for r in store.runs(DST, 0, rk.MAX_TIME)
                      if r.checksum == old.checksum)
        assert left == [f"r{j}" for j in range(i + 1, len(LATER))]
    assert store.fields(DST, 0, rk.MAX_TIME) == ["a", "b"]
    # no bucket cell of the old set is left anywhere
    for key, cols in store.table.scan():
        if key[:1] in (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET):
            assert not any(c == old.checksum for c in cols), key


class _ReadsKept:
    """A table that keeps the keys of every row read by key or span."""

    def __init__(self, table):
        self.table, self.read = table, []

    def __getattr__(self, name):
        return getattr(self.table, name)

    def get(self, row):
        self.read.append(bytes(row))
        return self.table.get(row)

    def get_many(self, rows):
        self.read.extend(map(bytes, rows))
        return self.table.get_many(rows)

    def read_spans(self, spans, names=(), values=()):
        self.read.extend(span.lo for span in (*spans, *names, *values))
        return self.table.read_spans(spans, names, values)


def test_a_run_superseded_while_under_way_is_cleaned_up_without_reading_its_index(
        open_table_for):
    table = _ReadsKept(open_table_for())
    store = LineageStore(table)
    old, new = chain(SRC, DST, ["a"]), chain(SRC, DST, ["a", "b"])
    store.record(old, "done", T0 - 86_400_000)  # the set is known: r0 is not its first run
    store.record(old, "r0", T0, under_way=True)  # a START: first-run cells, marked
    index = (rk.FIRST_BACKWARD, rk.FIRST_FORWARD, rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET)
    table.read.clear()
    assert store.record(new, "r0", 0, supersede=True)  # its COMPLETE, with more
    looked = [k for k in table.read if k[:1] in index]
    if store.first_runs:
        assert looked == []
    else:  # HBase writes no first-run rows: r0 has bucket cells, looked up
        assert looked
    # ...and it left nothing behind: r0's cells of the old set are gone
    assert admin.fsck(store.table).problems == 0
    for key, cols in store.table.scan():
        if key[:1] in (rk.FIRST_BACKWARD, rk.FIRST_FORWARD):
            assert "r0" not in cols or rk.checksum_of(cols["r0"][1:]) == new.checksum, key
    assert store.fields(DST, T0, T0 + 1) == ["a", "b"]
