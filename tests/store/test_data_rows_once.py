"""A set's data rows are sent once per process on the backends without
transactions (Bigtable, HBase): the write path reads them with the run rows,
and a run of a set whose ``d|`` row is there and whose put came back from
this process neither builds nor sends a data row again; one whose row went
(a purge, a repair) sends it again."""
from __future__ import annotations

from typing import Any

import pytest

from fll import EndPoint
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from tests.lineage_examples import chain

pytestmark = pytest.mark.parametrize("table_url", ["bigtable", "hbase-thrift"], indirect=True)

SRC, DST = EndPoint("s3://lake", "src"), EndPoint("s3://lake", "dst")


class _Puts:
    """The table, with the keys of every put kept."""

    def __init__(self, table: Any):
        self.table = table
        self.url = table.url
        self.keys: list[bytes] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)

    def put(self, rows: Any) -> None:
        self.keys.extend(rows)
        self.table.put(rows)


def test_a_set_s_data_rows_are_put_once_while_they_are_there(open_table_for):
    table = open_table_for()
    spy = _Puts(table)
    store = LineageStore(spy)  # type: ignore[arg-type]
    info = chain(SRC, DST, ["a", "b"])
    data = rk.data(info.checksum)
    store.record(info, "r1", 1_000)
    assert spy.keys.count(data) == 1
    store.record(info, "r2", 2_000)
    store.record(info, "r3", 3_000)
    assert spy.keys.count(data) == 1  # there, and put by this process
    # another process (no memory of the put) sends it again, once
    other_spy = _Puts(table)
    other = LineageStore(other_spy)  # type: ignore[arg-type]
    other.record(info, "r4", 4_000)
    assert other_spy.keys.count(data) == 1
    # gone from the store: sent again
    table.delete([data])
    store.record(info, "r5", 5_000)
    assert spy.keys.count(data) == 2
    assert [r.run_id for r in store.runs(DST, 0, 10_000)] == ["r5", "r4", "r3", "r2", "r1"]
    assert store.operation_set(info.checksum).checksum == info.checksum
    assert admin.fsck(store.table).problems == 0
