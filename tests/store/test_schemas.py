"""A schema is stored once however many runs report it (format 6): each run's
``s|`` row names it by digest, its fields are in one ``q|`` row. Answers stay
time-ranged; purge drops a schema no run names any more; fsck reports (and
repairs) a run's row naming a missing schema and a schema no row names; a
corrupt schema is a store error, never cached."""
from __future__ import annotations

import pytest

from fll import StoreError
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.store.layout import SCHEMA_REF

WIDE = [("id", "bigint")] + [(f"c{i}", "string") for i in range(200)]


BACKENDS = pytest.mark.parametrize("table_url", ["sqlite", "bigtable", "hbase-thrift"],
                                   indirect=True)


def _rows(table, kind: bytes) -> list:
    return list(table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)))


@BACKENDS
def test_a_schema_reported_by_many_runs_is_stored_once_and_answers_by_range(open_table_for):
    store = LineageStore(open_table_for())
    for i in range(50):
        store.record_schema("n", "wide", f"r{i}", 1_000 + i, WIDE)
    store.record_schema("n", "wide", "changed", 2_000, WIDE[:3])
    assert len(_rows(store.table, rk.SCHEMA_BODY)) == 2
    refs = _rows(store.table, rk.SCHEMA)
    assert len(refs) == 51 and all(list(cols) == [SCHEMA_REF] and len(cols[SCHEMA_REF]) == 16
                                   for _, cols in refs)
    fresh = LineageStore(store.table)  # nothing cached
    assert fresh.schema("n", "wide", 0, 2_000) == dict(WIDE)
    assert fresh.schema("n", "wide", 0, 3_000) == dict(WIDE[:3])
    assert fresh.schema("n", "wide", 1_010, 1_011) == dict(WIDE)
    assert fresh.schema("n", "wide", 3_000, 4_000) is None
    assert admin.fsck(store.table).clean


@BACKENDS
def test_purge_drops_a_schema_once_no_run_names_it(open_table_for):
    store = LineageStore(open_table_for())
    store.record_schema("n", "a", "old", 1_000, WIDE)
    store.record_schema("n", "a", "new", 5_000, WIDE[:2])
    store.record_schema("n", "b", "shared", 6_000, WIDE)  # the same schema, another dataset
    admin.purge(store, 2_000)
    assert len(_rows(store.table, rk.SCHEMA_BODY)) == 2  # b still names WIDE
    assert store.schema("n", "b", 0, 10_000) == dict(WIDE)
    admin.purge(store, 7_000)
    assert _rows(store.table, rk.SCHEMA_BODY) == [] and _rows(store.table, rk.SCHEMA) == []
    assert admin.fsck(store.table).clean


@BACKENDS
def test_fsck_reports_and_repairs_a_missing_or_unused_schema(open_table_for):
    store = LineageStore(open_table_for())
    store.record_schema("n", "a", "r1", 1_000, WIDE)
    store.record_schema("n", "b", "r2", 2_000, WIDE[:5])
    body_a = next(k for k, c in _rows(store.table, rk.SCHEMA_BODY) if len(c["f"]) > 100)
    store.table.delete([body_a])
    store.table.delete([rk.schema("n", "b", 2_000, "r2")])
    report = admin.fsck(store.table)
    assert report.dangling_schemas == [rk.schema("n", "a", 1_000, "r1")]
    assert len(report.unused_schemas) == 1 and not report.clean
    fresh = LineageStore(store.table)
    with pytest.raises(StoreError, match="schema whose row is missing.*fsck"):
        fresh.schema("n", "a", 0, 5_000)
    admin.fsck(store.table, repair=True)
    assert admin.fsck(store.table).clean
    assert LineageStore(store.table).schema("n", "a", 0, 5_000) is None


@BACKENDS
def test_a_corrupt_schema_is_a_store_error_and_never_cached(open_table_for):
    store = LineageStore(open_table_for())
    store.record_schema("n", "a", "r1", 1_000, WIDE)
    (key, cols), = _rows(store.table, rk.SCHEMA_BODY)
    store.table.put({key: {"f": cols["f"][:-3] + b"xyz"}})
    fresh = LineageStore(store.table)
    for _ in range(2):
        with pytest.raises(StoreError, match=r"q\|.*is corrupt"):
            fresh.schema("n", "a", 0, 5_000)
    assert admin.fsck(store.table).corrupt == [key]
    store.table.put({key: cols})
    assert fresh.schema("n", "a", 0, 5_000) == dict(WIDE)
