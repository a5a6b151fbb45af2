"""The propagation walk reads each set's own edges when no field's edges need
merging (one name, sets writing other datasets); everywhere else it merges
per field. Both must answer as a plain walk of each field's merged edges:
the same fields, parents, hops, stopped fields and origins."""
from __future__ import annotations

from fll import EndPoint
from fll.govern import propagate
from fll.rowkeys import MAX_TIME
from fll.store.tags import Tags
from fll.testing.reference_walks import plain_reach

from .jobs import COPY, HASH, SUM, UNTAGGED, UPPER, job

T0 = 1_700_000_000_000


def ep(name: str) -> EndPoint:
    return EndPoint("db", name)


def plain(store, tag: str, start: int = 0, end: int = MAX_TIME) -> tuple:
    """Breadth first over `RangeLineage.edges` (merged per field), then each
    origin's carrying closure on its own."""
    return plain_reach(store, tag, start, end)


def answer(store, tag: str) -> tuple:
    reach = propagate(store, tag, 0, MAX_TIME)
    return reach.parent, reach.hops, reach.stopped, reach.from_origins


def mixed(store) -> None:
    raw = ep("raw")
    # plain sets: each writes its own dataset
    store.record(job(raw, ep("a"), {"ssn": [("ssn", COPY)], "nm": [("name", UPPER)],
                                    "both": [("ssn", COPY), ("name", COPY)]}), "r1", T0, "a")
    store.record(job(ep("a"), ep("b"), {"ssn": [("ssn", COPY)], "h": [("ssn", HASH)]}),
                 "r2", T0 + 1, "b")
    # two sets write one field: untagged in one, hashed in the other; merged, it is masked
    store.record(job(raw, ep("twice"), {"x": [("ssn", UNTAGGED)]}), "r3", T0 + 2, "t1")
    store.record(job(raw, ep("twice"), {"x": [("ssn", HASH)], "y": [("name", COPY)]}),
                 "r4", T0 + 3, "t2")
    # a set reading and writing one dataset
    store.record(job(ep("b"), ep("b"), {"ssn2": [("ssn", COPY)], "ssn": [("ssn", UPPER)]}),
                 "r5", T0 + 4, "self")
    # a cycle, and an aggregate
    store.record(job(ep("b"), ep("c"), {"v": [("ssn2", COPY)]}), "r6", T0 + 5, "bc")
    store.record(job(ep("c"), ep("a"), {"back": [("v", COPY)]}), "r7", T0 + 6, "ca")
    store.record(job(ep("c"), ep("sum"), {"n": [("v", SUM)]}), "r8", T0 + 7, "sum")
    # a dataset known under two names
    loc, logical = EndPoint("file", "/data/d"), EndPoint("pipeline", "d")
    store.record(job(ep("a"), logical, {"ssn": [("ssn", COPY)]}), "r9", T0 + 8, "load")
    store.record(job(loc, ep("mart"), {"ssn": [("ssn", COPY)]}), "r10", T0 + 9, "mart")
    store.record(job(logical, ep("mart2"), {"ssn": [("ssn", COPY)]}), "r11", T0 + 10, "mart2")
    store.record_alias("pipeline", "d", "file", "/data/d")
    tags = Tags(store.table)
    tags.add("db", "raw", "ssn", "PII")
    tags.add("db", "raw", "ssn", "MASKED_OK")
    tags.add("db", "raw", "name", "MASKED_OK")
    tags.define("MASKED_OK", passes=["MASKING", "AGGREGATION"])


def test_the_walk_answers_as_a_plain_walk_where_sets_merge_alias_and_write_themselves(store):
    mixed(store)
    for tag in ("PII", "MASKED_OK"):
        assert answer(store, tag) == plain(store, tag), tag
    parent, hops, stopped, origins = answer(store, "PII")
    # merged over its two sets, twice.x is masked: stopped, though one set copies it
    assert ("db", "twice", "x") in stopped and ("db", "twice", "x") not in parent
    assert ("db", "b", "h") in stopped and ("db", "sum", "n") in stopped
    # through the set writing its own dataset, the cycle and the alias
    assert hops[("db", "b", "ssn2")] == 3 and hops[("db", "a", "back")] == 5
    assert {("db", "mart", "ssn"), ("db", "mart2", "ssn"), ("file", "/data/d", "ssn")} <= \
        parent.keys() and ("pipeline", "d", "ssn") not in parent
    parent, _, stopped, origins = answer(store, "MASKED_OK")
    assert ("db", "twice", "x") in parent and not stopped
    assert origins[("db", "a", "both")] == {("db", "raw", "ssn"), ("db", "raw", "name")}
    assert origins[("db", "a", "nm")] == {("db", "raw", "name")}
