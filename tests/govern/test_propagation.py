"""Where a classification tag reaches: the policy (every subtype, masking,
INDIRECT, untagged edges, per-tag passes), cycles, two paths of which one is
broken, time ranges, aliased datasets, origins and paths."""
from __future__ import annotations

import pytest

from fll import EndPoint, EndPointField, FieldLineageInfo, InputField, ReadOperation, \
    TransformOperation, WriteOperation
from fll.errors import BadRequest, NotFound
from fll.govern import carries, dataset_tags, key_of, propagate
from fll.model import Transformation
from fll.rowkeys import MAX_TIME
from fll.store.tags import Tags

from .jobs import COPY, COUNT, FILTER, HASH, SUM, UNTAGGED, UPPER, job

T0 = 1_700_000_000_000
RAW = EndPoint("db", "raw")


def ep(name: str) -> EndPoint:
    return EndPoint("db", name)


def fid(name: str, f: str) -> str:
    return f"db:{name}:{f}"


def reached(store, tag="PII", start=0, end=MAX_TIME, **kw) -> tuple[set[str], dict[str, dict]]:
    rows = propagate(store, tag, start, end, **kw).fields_json()
    carried = {r["field"] for r in rows if not r["stopped"]}
    stopped = {r["field"]: r for r in rows if r["stopped"]}
    return carried, stopped


@pytest.mark.parametrize("subtype, masking, passes, carried", [
    ("IDENTITY", False, (), True),
    ("TRANSFORMATION", False, (), True),
    ("", False, (), True),
    ("AGGREGATION", False, (), False),
    ("IDENTITY", True, (), False),
    ("TRANSFORMATION", True, (), False),
    ("AGGREGATION", True, (), False),
    ("AGGREGATION", False, ("AGGREGATION",), True),
    ("AGGREGATION", True, ("AGGREGATION",), False),
    ("AGGREGATION", True, ("AGGREGATION", "MASKING"), True),
    ("TRANSFORMATION", True, ("MASKING",), True),
    ("AGGREGATION", False, ("MASKING",), False),
])
def test_direct_edges_by_subtype_masking_and_policy(subtype, masking, passes, carried):
    tag = Transformation("DIRECT", subtype, masking=masking)
    ok, broke = carries([tag], frozenset(passes))
    assert ok is carried
    assert broke == ([] if carried else [tag])


@pytest.mark.parametrize("subtype", ["JOIN", "GROUP_BY", "FILTER", "SORT", "WINDOW",
                                     "CONDITIONAL", ""])
def test_indirect_edges_never_carry_and_stop_nothing(subtype):
    every = frozenset(("AGGREGATION", "MASKING"))
    assert carries([Transformation("INDIRECT", subtype)], every) == (False, [])


def test_untagged_edges_carry_and_one_carrying_tag_on_an_edge_is_enough():
    assert carries([]) == (True, [])
    assert carries(list(HASH) + list(COPY))[0] is True
    assert carries(list(FILTER) + list(COPY))[0] is True
    assert carries(list(FILTER) + list(SUM)) == (False, list(SUM))


@pytest.fixture
def warehouse(store):
    """raw.ssn hashed in one job, summed in another, copied in a third, then the
    copy copied on; raw.id is only a filter of the copy job."""
    store.record(job(RAW, ep("hashed"), {"h": [("ssn", HASH)], "id": [("id", COPY)]}),
                 "r-hash", T0, "hash")
    store.record(job(RAW, ep("summed"), {"total": [("ssn", SUM)], "n": [("ssn", COUNT)]}),
                 "r-sum", T0 + 1_000, "sum")
    store.record(job(RAW, ep("copied"), {"ssn": [("ssn", COPY), ("id", FILTER)]}),
                 "r-copy", T0 + 2_000, "copy")
    store.record(job(ep("copied"), ep("report"), {"who": [("ssn", UPPER)]}),
                 "r-report", T0 + 3_000, "report")
    Tags(store.table).add("db", "raw", "ssn", "pii", "alice")
    return store


def test_the_tag_reaches_only_the_copies_and_names_where_it_stopped(warehouse):
    carried, stopped = reached(warehouse)
    assert carried == {fid("raw", "ssn"), fid("copied", "ssn"), fid("report", "who")}
    assert set(stopped) == {fid("hashed", "h"), fid("summed", "total"), fid("summed", "n")}
    assert stopped[fid("hashed", "h")]["transformations"] == [
        {"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}]
    assert stopped[fid("summed", "total")]["transformations"] == [
        {"type": "DIRECT", "subtype": "AGGREGATION", "masking": False}]
    assert stopped[fid("summed", "n")]["stoppedAt"] == fid("raw", "ssn")
    # raw.id feeds copied.ssn only as a filter: neither carried nor stopped
    assert fid("raw", "id") not in carried and fid("hashed", "id") not in carried


def test_each_field_says_whether_it_was_tagged_its_origins_and_a_path(warehouse):
    rows = {r["field"]: r for r in propagate(warehouse, "pii", 0, MAX_TIME).fields_json()}
    assert rows[fid("raw", "ssn")] == {"field": fid("raw", "ssn"), "direct": True,
                                       "origins": [fid("raw", "ssn")],
                                       "path": [fid("raw", "ssn")], "stopped": False,
                                       "hops": 0}
    who = rows[fid("report", "who")]
    assert who["direct"] is False and who["origins"] == [fid("raw", "ssn")]
    assert who["path"] == [fid("raw", "ssn"), fid("copied", "ssn"), fid("report", "who")]
    assert who["hops"] == 2


def test_a_policy_lets_the_tag_pass_aggregation_or_masking(warehouse):
    tags = Tags(warehouse.table)
    tags.define("PII", passes=["aggregation"])
    carried, stopped = reached(warehouse)
    assert fid("summed", "total") in carried
    assert set(stopped) == {fid("hashed", "h"), fid("summed", "n")}  # masked stay stopped
    tags.define("PII", passes=["masking"])
    carried, stopped = reached(warehouse)
    assert fid("hashed", "h") in carried and fid("summed", "total") in stopped
    tags.define("PII", passes=["aggregation", "masking"])
    carried, stopped = reached(warehouse)
    assert {fid("hashed", "h"), fid("summed", "total"), fid("summed", "n")} <= carried
    assert not stopped
    tags.define("PII", passes=[])
    assert reached(warehouse)[0] == {fid("raw", "ssn"), fid("copied", "ssn"),
                                     fid("report", "who")}


def test_a_field_reached_by_two_paths_of_which_one_is_broken_carries_the_tag(store):
    # in one set: out = concat(sha2(ssn), ssn): one path masked, one a copy
    ops = [ReadOperation("read", "read", RAW, ["ssn"]),
           TransformOperation("hash", "sha2", [InputField("read", "ssn")], ["h"],
                              {InputField("read", "ssn"): HASH}),
           TransformOperation("both", "concat", [InputField("hash", "h"),
                                                 InputField("read", "ssn")], ["out"],
                              {InputField("hash", "h"): COPY,
                               InputField("read", "ssn"): COPY}),
           WriteOperation("write", "write", ep("mixed"), [InputField("both", "out"),
                                                           InputField("hash", "h")])]
    store.record(FieldLineageInfo(ops), "r-mixed", T0, "mixed")
    # across sets: one run hashes into twice.x, another copies into it
    store.record(job(RAW, ep("twice"), {"x": [("ssn", HASH)]}), "r-1", T0, "a")
    store.record(job(RAW, ep("twice"), {"x": [("ssn", COPY)]}), "r-2", T0 + 1, "b")
    # a field stopped on one edge and carried on another hop later is carried
    store.record(job(ep("mixed"), ep("late"), {"y": [("h", COPY)]}), "r-3", T0 + 2, "c")
    store.record(job(ep("twice"), ep("late"), {"y": [("x", COPY)]}), "r-4", T0 + 3, "d")
    Tags(store.table).add("db", "raw", "ssn", "PII")
    carried, stopped = reached(store)
    assert {fid("mixed", "out"), fid("twice", "x"), fid("late", "y")} <= carried
    assert set(stopped) == {fid("mixed", "h")}


def test_cycles_end_and_list_each_field_once(store):
    a, b = ep("a"), ep("b")
    store.record(job(a, b, {"v": [("v", COPY)]}), "r-ab", T0, "ab")
    store.record(job(b, a, {"v": [("v", UPPER)]}), "r-ba", T0 + 1, "ba")
    store.record(job(b, ep("c"), {"s": [("v", SUM)]}), "r-bc", T0 + 2, "bc")
    Tags(store.table).add("db", "a", "v", "PII")
    rows = propagate(store, "PII", 0, MAX_TIME).fields_json()
    assert [r["field"] for r in rows] == [fid("a", "v"), fid("b", "v"), fid("c", "s")]
    assert [r["stopped"] for r in rows] == [False, False, True]


def test_origins_of_a_field_fed_by_two_tagged_fields_through_a_cycle(store):
    a, b, c = ep("a"), ep("b"), ep("c")
    store.record(job(a, c, {"v": [("x", COPY), ("y", COPY)]}), "r-1", T0, "one")
    store.record(job(c, b, {"w": [("v", COPY)]}), "r-2", T0 + 1, "two")
    store.record(job(b, c, {"v": [("w", COPY)]}), "r-3", T0 + 2, "three")
    tags = Tags(store.table)
    tags.add("db", "a", "x", "PII")
    tags.add("db", "a", "y", "PII")
    rows = {r["field"]: r for r in propagate(store, "PII", 0, MAX_TIME).fields_json()}
    assert rows[fid("b", "w")]["origins"] == [fid("a", "x"), fid("a", "y")]
    assert rows[fid("c", "v")]["origins"] == [fid("a", "x"), fid("a", "y")]


def test_untagged_producers_carry_the_tag(store):
    store.record(job(RAW, ep("plain"), {"ssn": [("ssn", UNTAGGED)]}), "r", T0, "cdap")
    Tags(store.table).add("db", "raw", "ssn", "PII")
    assert fid("plain", "ssn") in reached(store)[0]


def test_only_the_runs_of_the_range_count(warehouse):
    # before the copy job ran, the tag stays at its origin
    carried, stopped = reached(warehouse, end=T0 + 2_000)
    assert carried == {fid("raw", "ssn")}
    assert set(stopped) == {fid("hashed", "h"), fid("summed", "total"), fid("summed", "n")}
    # a later run of the hash job without masking: the tag now passes, in its range only
    warehouse.record(job(RAW, ep("hashed"), {"h": [("ssn", UPPER)]}), "r-hash-2",
                     T0 + 86_400_000, "hash")
    assert fid("hashed", "h") in reached(warehouse, start=T0 + 86_400_000)[0]
    assert fid("hashed", "h") in reached(warehouse, start=T0 + 86_400_000)[0]
    assert fid("hashed", "h") in reached(warehouse, end=T0 + 86_400_000)[1]


def test_aliased_and_renamed_datasets_are_walked_as_one(store):
    # runs recorded under a logical name and under the location it stands for
    loc, logical = EndPoint("file", "/data/customers"), EndPoint("pipeline", "customers")
    store.record(job(RAW, logical, {"ssn": [("ssn", COPY)]}), "r-1", T0, "load")
    store.record(job(loc, ep("mart"), {"ssn": [("ssn", COPY)]}), "r-2", T0 + 1, "mart")
    store.record_alias("pipeline", "customers", "file", "/data/customers")
    tags = Tags(store.table)
    tags.add("db", "raw", "ssn", "PII")
    carried, _ = reached(store)
    assert carried == {fid("raw", "ssn"), "file:/data/customers:ssn", fid("mart", "ssn")}
    # a tag put on a field under its alias name is the same origin
    tags.add("pipeline", "customers", "ssn", "GOLD")
    rows = propagate(store, "GOLD", 0, MAX_TIME).fields_json()
    assert [(r["field"], r["direct"]) for r in rows] == [
        (fid("mart", "ssn"), False), ("file:/data/customers:ssn", True)]
    # and the dataset's tags are told apart, asked under either name
    for ns, name in (("file", "/data/customers"), ("pipeline", "customers")):
        got = dataset_tags(store, ns, name, 0, MAX_TIME)
        assert got["fields"]["ssn"]["tags"] == ["GOLD"]
        assert got["fields"]["ssn"]["propagatedTags"] == [
            {"name": "PII", "origins": [fid("raw", "ssn")]}]


def test_hops_beyond_the_limit_cut_the_answer_and_say_so(store):
    names = [f"d{i}" for i in range(6)]
    for i in range(5):
        store.record(job(ep(names[i]), ep(names[i + 1]), {"v": [("v", COPY)]}),
                     f"r{i}", T0 + i, "chain")
    Tags(store.table).add("db", "d0", "v", "PII")
    reach = propagate(store, "PII", 0, MAX_TIME, max_hops=3)
    assert reach.truncated and len(reach.parent) == 4
    full = propagate(store, "PII", 0, MAX_TIME)
    assert not full.truncated and len(full.parent) == 6


def test_an_unknown_tag_is_not_found(warehouse):
    with pytest.raises(NotFound, match="NOPE"):
        propagate(warehouse, "nope", 0, MAX_TIME)


def test_dataset_tags_tell_put_and_propagated_tags_apart(warehouse):
    Tags(warehouse.table).add("db", "copied", "", "gold")
    Tags(warehouse.table).add("db", "copied", "ssn", "audited")
    got = dataset_tags(warehouse, "db", "copied", 0, MAX_TIME)
    assert got["tags"] == ["GOLD"]
    assert got["fields"] == {"ssn": {"tags": ["AUDITED"], "propagatedTags": [
        {"name": "PII", "origins": [fid("raw", "ssn")]}]}}
    assert dataset_tags(warehouse, "db", "hashed", 0, MAX_TIME)["fields"] == {}


# -- the tag rows ------------------------------------------------------------------

def test_tags_keep_who_and_when_and_are_case_insensitive(store):
    tags = Tags(store.table)
    assert tags.add("db", "raw", "ssn", "pii", "alice") is True
    assert tags.add("db", "raw", "ssn", "PII", "bob") is False  # the first kept
    [a] = tags.assignments("Pii")
    assert (a.tag, a.namespace, a.name, a.field, a.by) == ("PII", "db", "raw", "ssn", "alice")
    assert a.at_ms > 0
    assert tags.get("pii").by == "alice"  # defined by its first use
    assert tags.remove("db", "raw", "ssn", "pii") is True
    assert tags.remove("db", "raw", "ssn", "pii") is False
    assert tags.assignments() == []
    assert [t.name for t in tags.all()] == ["PII"]  # the definition stays


def test_a_definition_changes_only_what_is_given(store):
    tags = Tags(store.table)
    tags.define("pii", "personal data", ["aggregation"], "alice")
    tags.define("pii", passes=["masked"])
    t = tags.get("PII")
    assert (t.description, t.passes, t.by) == ("personal data", frozenset({"MASKING"}), "alice")
    tags.define("pii", description="")
    assert tags.get("PII").passes == frozenset({"MASKING"})


@pytest.mark.parametrize("bad", ["", "  ", "a\nb", "x" * 200])
def test_bad_tag_names_are_refused(store, bad):
    with pytest.raises(BadRequest):
        Tags(store.table).add("db", "raw", "ssn", bad)


def test_a_bad_policy_is_refused(store):
    with pytest.raises(BadRequest, match="AGGREGATION or MASKING"):
        Tags(store.table).define("pii", passes=["identity"])


def test_names_with_separators_round_trip(store):
    tags = Tags(store.table)
    tags.add("postgres://h:5432", "s|t", "a|b%c", "p|i")
    [a] = tags.assignments()
    assert (a.namespace, a.name, a.field, a.tag) == ("postgres://h:5432", "s|t", "a|b%c", "P|I")
    assert tags.of_dataset("postgres://h:5432", "s|t") == [a]
    assert tags.of_dataset("postgres://h:5432", "s") == []


def test_field_edges_memo_is_shared_not_changed(warehouse):
    # two questions over one range answer alike (memoised answers are never mutated)
    from fll.govern import RangeLineage

    lin = RangeLineage(warehouse, 0, MAX_TIME)
    ssn = key_of(EndPointField(RAW, "ssn"))
    first = {k: list(v) for k, v in lin.edges(ssn, True).items()}
    assert first[("db", "copied", "ssn")] == list(COPY)
    propagate(warehouse, "PII", 0, MAX_TIME, lineage=lin)
    assert {k: list(v) for k, v in lin.edges(ssn, True).items()} == first


def test_a_wide_all_to_all_set_carries_to_every_output_it_feeds(store):
    cols = [f"c{i}" for i in range(300)]
    ins = [InputField("read", c) for c in cols]
    # every output from every input: c0 through a sum, the rest copied
    tags = {i: (SUM if i.name == "c0" else COPY) for i in ins}
    ops = [ReadOperation("read", "read", RAW, cols),
           TransformOperation("all", "all to all", ins, [f"o{i}" for i in range(300)], tags),
           WriteOperation("write", "write", ep("wide"),
                          [InputField("all", f"o{i}") for i in range(300)])]
    store.record(FieldLineageInfo(ops), "r-wide", T0, "wide")
    tags_ = Tags(store.table)
    tags_.add("db", "raw", "c0", "SUMMED")
    tags_.add("db", "raw", "c1", "COPIED")
    carried, stopped = reached(store, "SUMMED")
    assert carried == {fid("raw", "c0")} and len(stopped) == 300
    carried, stopped = reached(store, "COPIED")
    assert len(carried) == 301 and not stopped
