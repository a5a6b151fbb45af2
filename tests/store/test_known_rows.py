"""Recording a run from rows read earlier in the same SQLite transaction
(`Writer.run_rows`, ``record(known=…, starts=…)``): what an OpenLineage event
does to read its run once. The rows are trusted only inside the transaction
that read them; outside one they are read again."""
from __future__ import annotations

import os

import pytest

from fll import EndPoint
from fll import rowkeys as rk
from fll.errors import InvalidLineageError
from fll.store import LineageStore, admin, open_table
from tests.lineage_examples import chain

SRC, DST = EndPoint("s3://lake", "src"), EndPoint("s3://lake", "dst")
HALF, FULL = chain(SRC, DST, ["a"]), chain(SRC, DST, ["a", "b"])


@pytest.fixture
def store(tmp_path):
    s = LineageStore(open_table(f"sqlite:///{os.path.join(tmp_path, 'fll.db')}"))
    yield s
    s.table.close()


def test_run_rows_are_the_run_model_and_data_rows_with_absent_ones_none(store):
    rows = store.run_rows("r1", HALF.checksum)
    assert rows == {rk.run("r1"): None, rk.run_model("r1"): None,
                    rk.data(HALF.checksum): None}
    store.claim_run_start("r1", 5_000)
    store.record(HALF, "r1", 9_000)
    rows = store.run_rows("r1", HALF.checksum)
    assert rows[rk.run("r1")]["c"] == HALF.checksum.encode()
    assert rows[rk.data(HALF.checksum)] is not None and rows[rk.run_model("r1")] is None
    # the run as `run` reads it, from the rows given (no read)
    assert store.run("r1", rows=rows) == store.run("r1")


def test_in_a_transaction_known_rows_give_the_same_store_and_the_stored_start(tmp_path,
                                                                             store):
    plain = LineageStore(open_table(f"sqlite:///{os.path.join(tmp_path, 'plain.db')}"))
    try:
        for s in (store, plain):
            s.claim_run_start("r1", 5_000)  # a START without lineage claimed it first

        def both(s: LineageStore, known: bool) -> tuple[bool, dict[str, int]]:
            starts: dict[str, int] = {}

            def write(_t: object) -> bool:
                assert s.table.in_transaction
                prior = s.run("r1")
                rows = s.run_rows("r1", FULL.checksum) if known else None
                return s.record(HALF if prior is None else FULL, "r1", 9_000,
                                "job", supersede=prior is not None, known=rows,
                                starts=starts)
            return s.table.atomic(write), starts

        for _ in range(2):  # the first event's set, then the second superseding it
            assert both(store, True) == both(plain, False)
        changed, starts = both(store, True)
        assert not changed and starts == {"r1": 5_000}
        assert store.run("r1").checksum == FULL.checksum and store.run("r1").start_ms == 5_000
        assert not store.table.in_transaction
        # the same rows: the known rows changed nothing of what was written
        assert dict(store.table.scan()) == dict(plain.table.scan())
        assert admin.fsck(store.table).sound
    finally:
        plain.table.close()


def test_known_rows_read_outside_a_transaction_are_read_again(store):
    rows = store.run_rows("r1", HALF.checksum)  # says: no run r1
    store.record(FULL, "r1", 9_000)  # another writer records it meanwhile
    # stale rows given outside a transaction are not trusted: the conflict is seen
    with pytest.raises(InvalidLineageError, match="already recorded"):
        store.record(HALF, "r1", 9_000, known=rows)
    assert store.run("r1").checksum == FULL.checksum
