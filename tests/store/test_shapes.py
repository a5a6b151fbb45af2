"""Sets that differ only in their endpoints share one shape row (format 5)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField, ReadOperation,
                 TransformOperation, WriteOperation, open_store)
from fll import rowkeys as rk
from fll.codec import Summaries, canonical_bytes, summaries_of
from fll.store import LineageStore, admin
from fll.store.datarows import SHAPED, join_shape, shape_ref, split_shape
from tests.lineage_examples import chain

from .conftest import BACKENDS

NAMES = ["raw/day=1", "raw/day=2", "a|b%c", "ünï cödé", "dst", "#"]
PROPS = [{}, {"path": "/data/raw/day=1"}, {"path": "/data/raw/day=2", "format": "csv"}]


@st.composite
def endpoint_sets(draw):
    """Random valid sets over a few endpoints: reads and writes of the same
    dataset, several sources, odd names, properties, the placeholder namespace."""
    pool = [EndPoint(draw(st.sampled_from(["n", "s3", "#"])), draw(st.sampled_from(NAMES)),
                     draw(st.sampled_from(PROPS))) for _ in range(4)]
    ops = []
    produced: list[InputField] = []
    for s in range(draw(st.integers(1, 3))):
        fields = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
        ops.append(ReadOperation(f"read{s}", "r", draw(st.sampled_from(pool)), fields))
        produced += [InputField(f"read{s}", f) for f in fields]
    for t in range(draw(st.integers(0, 4))):
        inputs = draw(st.lists(st.sampled_from(produced), min_size=1, max_size=3, unique=True))
        ops.append(TransformOperation(f"t{t}", "upper", inputs, [f"x{t}"]))
        produced.append(InputField(f"t{t}", f"x{t}"))
    for w in range(draw(st.integers(1, 2))):
        inputs = draw(st.lists(st.sampled_from(produced), min_size=1, max_size=4,
                               unique_by=lambda i: i.name))
        ops.append(WriteOperation(f"write{w}", "w", draw(st.sampled_from(pool)), inputs))
    return FieldLineageInfo(ops)


def _same(a: Summaries, b: Summaries) -> bool:
    return (a.incoming, a.outgoing, a.source_fields, a.destination_fields) == \
        (b.incoming, b.outgoing, b.source_fields, b.destination_fields)


@given(endpoint_sets())
@settings(max_examples=300, deadline=None)
def test_a_shape_and_its_endpoints_give_back_the_set_and_its_summaries(info):
    ops = canonical_bytes(info.operations)
    split = split_shape(info)
    endpoints = {(e.namespace, e.name): e for e in info.sources | info.destinations}
    odd = any(e.namespace == "#" for e in endpoints.values()) or \
        len({(e.namespace, e.name, tuple(e.properties.items()))
             for op in info.operations for e in [getattr(op, "source", None),
                                                  getattr(op, "destination", None)] if e}) \
        != len(endpoints)
    if odd:
        assert split is None  # a placeholder namespace, or one dataset with two property sets
        return
    assert split is not None
    shape, eps = split
    assert join_shape(shape, eps) == ops
    from fll.codec import decode_canonical, summaries_to_bytes
    shaped = decode_canonical(shape)
    assert {e.namespace for e in shaped.sources | shaped.destinations} == {"#"}
    got = Summaries(summaries_to_bytes(shaped), [EndPoint(e["namespace"], e["name"])
                                                  for e in eps])
    assert _same(got, summaries_of(info))


@given(st.lists(endpoint_sets(), min_size=1, max_size=4))
@settings(max_examples=40, deadline=None)
def test_a_store_answers_every_set_as_it_was_recorded_whatever_its_form(tmp_path_factory, sets):
    path = tmp_path_factory.mktemp("shapes") / "s.db"
    with open_store(f"sqlite:///{path}") as store:
        store.record_many([(info, f"r{i}", 1_000 + i, None) for i, info in enumerate(sets)])
        store.clear_caches()
        for info in sets:
            assert store.operation_set(info.checksum).checksum == info.checksum
            assert _same(store.summaries([info.checksum])[info.checksum], summaries_of(info))
        for info in sets:
            for dst, srcs in info.incoming_summary().items():
                assert srcs <= store.incoming(dst, 0, 10_000)
        assert admin.fsck(store.table).clean


def _shape_rows(table) -> list[bytes]:
    return [k for k, _ in table.scan(b"p|", rk.prefix_end(b"p|"))]


def _daily(day: int) -> FieldLineageInfo:
    return chain(EndPoint("n", "raw", {"path": f"/data/raw/day={day}"}), EndPoint("n", "dst"),
                 ["a", "b"])


@pytest.mark.parametrize("table_url", BACKENDS, indirect=True)
def test_a_daily_job_stores_one_shape_and_a_small_row_per_day(open_table_for):
    store = LineageStore(open_table_for())
    store.record_many([(_daily(d), f"run-{d}", 86_400_000 * d, "daily") for d in range(30)])
    assert len(_shape_rows(store.table)) == 1
    rows = store.table.get_many([rk.data(_daily(d).checksum) for d in range(30)])
    assert all(list(r) == [SHAPED] and len(r[SHAPED]) < 80 for r in rows.values())
    assert shape_ref(rows[rk.data(_daily(3).checksum)])[1][0]["properties"] == \
        {"path": "/data/raw/day=3"}
    store.clear_caches()
    assert store.operation_set(_daily(7).checksum) == _daily(7)
    assert store.incoming(EndPointField(EndPoint("n", "dst"), "a"), 0, 86_400_000 * 30) == \
        {EndPointField(EndPoint("n", "raw"), "a")}
    assert [r.run_id for r in store.runs(EndPoint("n", "dst"), 0, 86_400_000 * 2)] == \
        ["run-1", "run-0"]


@pytest.mark.parametrize("extra", [{}, {"k": "v"}])
def test_one_dataset_read_with_two_sets_of_properties_keeps_a_whole_row(tmp_path, extra):
    a = EndPoint("n", "raw", {"path": "/x"})
    b = EndPoint("n", "raw", {"path": "/y", **extra})
    info = FieldLineageInfo([ReadOperation("r1", "", a, ["x"]), ReadOperation("r2", "", b, ["y"]),
                             WriteOperation("w", "", EndPoint("n", "dst"),
                                            [InputField("r1", "x"), InputField("r2", "y")])])
    with open_store(f"sqlite:///{tmp_path}/w.db") as store:
        store.record(info, "r", 1)
        assert list(store.table.get(rk.data(info.checksum))) == ["z"]
        assert _shape_rows(store.table) == []
        store.clear_caches()
        assert store.operation_set(info.checksum) == info


def test_purge_removes_a_shape_with_its_last_set_and_fsck_repairs_an_unused_one(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/p.db") as store:
        store.record_many([(_daily(d), f"run-{d}", 1_000 * d, None) for d in range(4)])
        store.record(chain(EndPoint("n", "other"), EndPoint("n", "out"), ["c"]), "solo", 50_000)
        solo = _shape_rows(store.table)
        assert len(solo) == 2
        admin.purge(store, 2_000)  # two days of four: the shape stays
        assert _shape_rows(store.table) == solo
        store.clear_caches()
        assert store.operation_set(_daily(3).checksum) == _daily(3)
        admin.purge(store, 10_000)  # the last of the daily sets: its shape goes
        solo = _shape_rows(store.table)
        assert len(solo) == 1
        assert admin.fsck(store.table).clean
        # a shape no set names (a set removed by hand): fsck reports and removes it
        store.record(_daily(9), "run-9", 20_000)
        (shape,) = set(_shape_rows(store.table)) - set(solo)
        store.table.delete([rk.data(_daily(9).checksum), rk.run("run-9")])
        store.table.delete_columns({rk.run_row(b, "n", n, 20_000): ["run-9"]
                                    for b, n in ((rk.BACKWARD, "dst"), (rk.FORWARD, "raw"),
                                                 (rk.FIRST_BACKWARD, "dst"),
                                                 (rk.FIRST_FORWARD, "raw"))})
        report = admin.fsck(store.table)
        assert report.orphans == [shape]
        admin.fsck(store.table, repair=True)
        assert _shape_rows(store.table) == solo and admin.fsck(store.table).clean
        admin.purge(store, rk.MAX_TIME)
        assert [k for k, _ in store.table.scan() if k[:1] != rk.META] == []
