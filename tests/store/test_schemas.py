"""A schema is stored once however many runs report it (format 6): each run's
column of its dataset's ``S|`` row (format 7) names it by digest, its fields
are in one ``q|`` row. Answers stay time-ranged, and the latest schema of many
datasets is one store call; purge drops a run's column and a schema no run
names any more; fsck reports (and repairs) a run's column naming a missing
schema and a schema nothing names; a corrupt schema is a store error, never
cached."""
from __future__ import annotations

import pytest

from fll import EndPoint, InvalidLineageError, StoreError
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.rowkeys import MAX_TIME

from .test_store_apis import _Counting

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
    (key, refs), = _rows(store.table, rk.SCHEMAS)
    assert key == rk.schemas("n", "wide") and _rows(store.table, rk.SCHEMA) == []
    assert len(refs) == 51 and all(len(d) == 16 for d in refs.values())
    assert refs[rk.schema_column(1_010, "r10")] == refs[rk.schema_column(1_020, "r20")]
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
    assert LineageStore(store.table).schema("n", "a", 0, 3_000) is None
    assert store.schema_history("n", "a", 0, 10_000) == [(5_000, "new", WIDE[:2])]
    admin.purge(store, 5_500)
    assert [(k, list(c)) for k, c in _rows(store.table, rk.SCHEMAS)] == [
        (rk.schemas("n", "b"), [rk.schema_column(6_000, "shared")])]  # a's row went whole
    assert len(_rows(store.table, rk.SCHEMA_BODY)) == 1
    admin.purge(store, 7_000)
    assert _rows(store.table, rk.SCHEMA_BODY) == [] and _rows(store.table, rk.SCHEMAS) == []
    assert admin.fsck(store.table).clean


@BACKENDS
def test_fsck_reports_and_repairs_a_missing_or_unused_schema(open_table_for):
    store = LineageStore(open_table_for())
    store.record_schema("n", "a", "r1", 1_000, WIDE)
    store.record_schema("n", "b", "r2", 2_000, WIDE[:5])
    body_a = next(k for k, c in _rows(store.table, rk.SCHEMA_BODY) if len(c["f"]) > 100)
    store.table.delete([body_a])
    store.table.delete([rk.schemas("n", "b")])
    report = admin.fsck(store.table)
    assert report.dangling_schemas == [(rk.schemas("n", "a"), rk.schema_column(1_000, "r1"))]
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


@BACKENDS
def test_the_latest_schemas_of_many_datasets_are_one_call_and_answer_as_one_at_a_time(
        open_table_for):
    """`schemas` reads each dataset's first column in the range's column range
    for every dataset at once: the same answers as `schema` for every range
    (its edges, a millisecond two runs share, none at all), and two store calls
    however many datasets (the latest reports, then the schemas not cached)."""
    store = LineageStore(open_table_for())
    datasets = [("n", f"d{i}") for i in range(30)] + [("n", "a|b%c"), ("other", "d1")]
    for i, (ns, name) in enumerate(datasets):
        for t in range(0, 5_000, 1_000 + 100 * (i % 4)):
            store.record_schema(ns, name, f"r{t}", 10_000 + t, [("x", f"{name}@{t}")])
    store.record_schema("n", "d0", "b-later-id", 10_000, [("x", "tie b")])
    store.record_schema("n", "d0", "a-first-id", 10_000, [("x", "tie a")])
    asked = datasets + [("n", "never")]
    ranges = [(0, MAX_TIME), (10_000, 10_001), (10_001, 12_000), (11_000, 11_001),
              (12_999, 13_301), (0, 10_000), (20_000, MAX_TIME), (5, 5), (0, MAX_TIME + 1)]
    counting = _Counting(store.table)
    for start, end in ranges:
        one = {d: LineageStore(store.table).schema(*d, start, end) for d in asked}
        counting.calls.clear()
        fresh = LineageStore(counting)
        counting.calls.clear()
        assert fresh.schemas(asked, start, end) == one, (start, end)
        assert counting.calls in (["first_cells", "get_many schemas"], ["first_cells"], []), \
            counting.calls
        # from the whole ``S|`` rows a level read brings (`schemas_in_rows`):
        # the same answers, and only the schemas not cached read
        rows = store.table.get_many([rk.schemas(*d) for d in asked])
        fresh = LineageStore(counting)
        counting.calls.clear()
        assert fresh.schemas_in_rows({d: rows.get(rk.schemas(*d)) for d in asked},
                                     start, end) == one, (start, end)
        assert counting.calls in (["get_many schemas"], []), counting.calls
    assert store.schema("n", "d0", 10_000, 10_001) == {"x": "tie a"}
    assert store.schema("n", "d1", 0, MAX_TIME) == {"x": "d1@4400"}
    assert store.schema("n", "d1", 11_000, 12_200) == {"x": "d1@1100"}
    assert store.schema("n", "never", 0, MAX_TIME) is None
    history = store.schema_history("n", "d0", 0, MAX_TIME)
    assert [(at, owner) for at, owner, _ in history] == [
        (10_000 + t, "a-first-id" if t == 0 else f"r{t}") for t in range(0, 5_000, 1_000)]
    assert store.schema_spans()[EndPoint("n", "a|b%c")] == (10_000, 14_800)


@BACKENDS
def test_the_schemas_one_event_reports_are_one_put_or_none(open_table_for):
    """An event names its inputs' and outputs' schemas: `record_schemas` writes
    them in one put, as `record_schema` one by one would answer them, and a
    bad one among them writes none."""
    counting = _Counting(open_table_for())
    store = LineageStore(counting)
    reported = [("n", f"d{i}", [("id", "bigint"), (f"c{i}", None)]) for i in range(5)]
    reported.append(("n", "d0", [("id", "string")]))  # reported twice: the later one
    counting.calls.clear()
    store.record_schemas(reported, "r1", 5_000)
    assert counting.calls == ["put"]
    one_by_one = LineageStore(open_table_for())
    for ns, name, fields in reported:
        one_by_one.record_schema(ns, name, "r1", 5_000, fields)
    for ns, name, _ in reported:
        assert store.schema(ns, name, 0, MAX_TIME) == one_by_one.schema(ns, name, 0, MAX_TIME)
    assert store.schema("n", "d0", 0, MAX_TIME) == {"id": "string"}
    checked = LineageStore(open_table_for())
    checked.record_schemas(reported, "r1", 5_000, checked=True)  # pairs already
    assert all(checked.schema(ns, n, 0, MAX_TIME) == store.schema(ns, n, 0, MAX_TIME)
               for ns, n, _ in reported)
    counting.calls.clear()
    with pytest.raises(InvalidLineageError, match="schema of n:bad, field 2"):
        store.record_schemas([("n", "new", [("a", "int")]), ("n", "bad", [("a", "int"), 7])],
                             "r2", 6_000)
    assert counting.calls == [] and store.schema("n", "new", 0, MAX_TIME) is None
