"""Lineage diff between two time ranges: added, removed and changed edges, for
a field or a whole dataset, any depth, aliased datasets."""
from __future__ import annotations

import pytest

from fll import EndPoint, EndPointField
from fll.errors import BadRequest
from fll.govern import dataset_roots, diff, diff_text, parse_span

from .jobs import COPY, FILTER, HASH, SUM, UPPER, job

DAY = 86_400_000
T0 = 1_700_000_000_000
RAW, OUT, MART = EndPoint("db", "raw"), EndPoint("db", "out"), EndPoint("db", "mart")
BEFORE, AFTER = (T0, T0 + DAY), (T0 + DAY, T0 + 2 * DAY)


def f(ep: EndPoint, name: str) -> EndPointField:
    return EndPointField(ep, name)


@pytest.fixture
def changed_sql(store):
    """Day 1: out.a = sha2(raw.ssn), out.b = raw.b, filtered on raw.flag; mart.t = sum(out.b).
    Day 2 the job's SQL changed: out.a = upper(raw.ssn) (unmasked), out.b from
    raw.c instead, no filter; a new column out.n = raw.ssn. mart unchanged."""
    store.record(job(RAW, OUT, {"a": [("ssn", HASH)], "b": [("b", COPY), ("flag", FILTER)]}),
                 "d1", T0 + 1000, "etl")
    store.record(job(OUT, MART, {"t": [("b", SUM)]}), "m1", T0 + 2000, "mart")
    store.record(job(RAW, OUT, {"a": [("ssn", UPPER)], "b": [("c", COPY)],
                                "n": [("ssn", COPY)]}), "d2", T0 + DAY + 1000, "etl")
    store.record(job(OUT, MART, {"t": [("b", SUM)]}), "m2", T0 + DAY + 2000, "mart")
    return store


def edge(src: str, dst: str, *tags: tuple[str, str, bool]) -> dict:
    return {"source": src, "destination": dst,
            "transformations": [{"type": a, "subtype": b, "masking": m} for a, b, m in tags]}


def test_a_job_whose_sql_changed_names_exactly_the_edges_that_changed(changed_sql):
    roots = dataset_roots(changed_sql, OUT, [BEFORE, AFTER])
    got = diff(changed_sql, roots, BEFORE, AFTER, depth=1)
    assert got["added"] == [edge("db:raw:c", "db:out:b", ("DIRECT", "IDENTITY", False)),
                            edge("db:raw:ssn", "db:out:n", ("DIRECT", "IDENTITY", False))]
    assert got["removed"] == [edge("db:raw:b", "db:out:b", ("DIRECT", "IDENTITY", False)),
                              edge("db:raw:flag", "db:out:b", ("INDIRECT", "FILTER", False))]
    assert got["changed"] == [{
        "edge": {"source": "db:raw:ssn", "destination": "db:out:a"},
        "before": [{"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}],
        "after": [{"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": False}]}]
    # out.b -> mart.t is in both ranges, alike: not reported
    assert "db:mart:t" not in str(got)


def test_the_same_range_twice_has_no_difference(changed_sql):
    assert diff(changed_sql, [f(OUT, "b")], BEFORE, BEFORE, 3) == \
        {"added": [], "removed": [], "changed": []}


def test_a_field_and_depth(changed_sql):
    one = diff(changed_sql, [f(MART, "t")], BEFORE, AFTER, depth=1)
    assert one == {"added": [], "removed": [], "changed": []}
    two = diff(changed_sql, [f(MART, "t")], BEFORE, AFTER, depth=2)
    assert [(e["source"], e["destination"]) for e in two["added"]] == [("db:raw:c", "db:out:b")]
    assert [(e["source"], e["destination"]) for e in two["removed"]] == [
        ("db:raw:b", "db:out:b"), ("db:raw:flag", "db:out:b")]


def test_an_edge_in_both_ranges_that_one_walk_does_not_reach_is_not_added(store):
    # before: x -> y -> z; after: y -> z only (x -> y gone), and w -> y new.
    # From z at depth 2 the after-walk meets w -> y; the before walk meets x -> y.
    x, y, z, w = (EndPoint("db", n) for n in "xyzw")
    store.record(job(x, y, {"v": [("v", COPY)]}), "1", T0, "xy")
    store.record(job(y, z, {"v": [("v", COPY)]}), "2", T0 + 1, "yz")
    store.record(job(w, y, {"v": [("v", COPY)]}), "3", T0 + DAY, "wy")
    store.record(job(y, z, {"v": [("v", COPY)]}), "4", T0 + DAY + 1, "yz")
    # an edge reached only by the after walk but also in the before range: w -> y
    # recorded before too, reachable before only through... itself: same edge
    got = diff(store, [f(z, "v")], BEFORE, AFTER, 2)
    assert [e["source"] for e in got["added"]] == ["db:w:v"]
    assert [e["source"] for e in got["removed"]] == ["db:x:v"]
    # a deeper edge present in both ranges (a -> x before and after) but reached
    # only by the before walk is looked up in the after range: not "removed"
    a = EndPoint("db", "a")
    store.record(job(a, x, {"v": [("v", COPY)]}), "5", T0 + 2, "ax")
    store.record(job(a, x, {"v": [("v", COPY)]}), "6", T0 + DAY + 2, "ax")
    got = diff(store, [f(z, "v")], BEFORE, AFTER, 3)
    assert [e["source"] for e in got["removed"]] == ["db:x:v"]


def test_aliased_datasets_diff_as_one(store):
    loc, logical = EndPoint("file", "/d/out"), EndPoint("pipeline", "out")
    store.record(job(RAW, logical, {"a": [("ssn", COPY)]}), "1", T0, "etl")
    store.record(job(RAW, loc, {"a": [("ssn", HASH)]}), "2", T0 + DAY, "etl")
    store.record_alias("pipeline", "out", "file", "/d/out")
    got = diff(store, [f(loc, "a")], BEFORE, AFTER, 1)
    assert got["changed"] and got["changed"][0]["edge"] == {
        "source": "db:raw:ssn", "destination": "file:/d/out:a"}
    assert got["added"] == got["removed"] == []
    assert dataset_roots(store, logical, [BEFORE, AFTER]) == [f(loc, "a")]


def test_text_form(changed_sql):
    text = diff_text(diff(changed_sql, dataset_roots(changed_sql, OUT, [BEFORE, AFTER]),
                          BEFORE, AFTER))
    assert "+ db:raw:c -> db:out:b [DIRECT/IDENTITY]" in text
    assert "- db:raw:flag -> db:out:b [INDIRECT/FILTER]" in text
    assert "~ db:raw:ssn -> db:out:a [DIRECT/TRANSFORMATION+masked] => " \
           "[DIRECT/TRANSFORMATION]" in text
    assert text.endswith("2 added, 2 removed, 1 changed\n")


def test_spans():
    assert parse_span("1700000000..1700086400", "--before") == (1_700_000_000_000,
                                                                1_700_086_400_000)
    assert parse_span("1700000000,1700086400", "before", separator=",")[1] == 1_700_086_400_000
    s, e = parse_span("now-2d..now-1d", "--before")
    assert e - s == DAY
    assert parse_span("..10", "--before") == (0, 10_000)
    for bad in ("1700000000", "", "b..10", "20..10"):
        with pytest.raises(BadRequest, match="--before"):
            parse_span(bad, "--before")


def test_depth_is_bounded(changed_sql):
    with pytest.raises(BadRequest, match="depth"):
        diff(changed_sql, [f(OUT, "a")], BEFORE, AFTER, 0)
