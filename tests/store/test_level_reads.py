"""A walk reads level by level: every dataset of one hop in one store read.

`LineageStore.checksums_many` and `read_level` must answer exactly what
`checksums`, `resolve_dataset` and `aliases` answer one dataset at a time, on
every backend; and a deep question through a request's `ReadView` must cost
a bounded number of store calls per hop, whatever the number of datasets the
hop touches.
"""
from __future__ import annotations

import pytest

from fll import EndPoint
from fll.rowkeys import MAX_TIME
from fll.server.column_graph import column_lineage
from fll.store import LineageStore
from fll.store.levels import Level
from fll.store.reads import ReadView, SetMerges
from tests.lineage_examples import chain

from .conftest import BACKENDS
from .test_store_apis import _Counting

pytestmark = pytest.mark.parametrize("table_url", BACKENDS, indirect=True)

T0 = 1_700_000_000_000
HOUR = 3_600_000
RANGES = [(0, MAX_TIME), (T0, T0 + 10 * HOUR), (T0 + 3 * HOUR, T0 + 4 * HOUR),
          (T0 + 3 * HOUR + 1, T0 + 7 * HOUR - 1), (T0 - 50 * 365 * 24 * HOUR, T0 + 2 * HOUR)]


def _history(store: LineageStore) -> list[EndPoint]:
    """Datasets written by several sets at several times, two that nothing writes."""
    eps = [EndPoint("n", f"d{i}") for i in range(6)]
    batch = []
    for i in range(1, 5):
        for h in range(i, 9, 2):
            batch.append((chain(eps[i - 1], eps[i], ["a", "b"][: 1 + h % 2], prefix=f"v{h}"),
                          f"r{i}-{h}", T0 + h * HOUR, None))
    store.record_many(batch)
    return eps + [EndPoint("n", "never"), EndPoint("other", "d1")]


@pytest.mark.parametrize("direction", ["incoming", "outgoing"])
def test_checksums_many_answers_what_checksums_answers(open_table_for, direction):
    store = LineageStore(open_table_for())
    eps = _history(store)
    for start, end in RANGES:
        many = store.checksums_many([(e.namespace, e.name) for e in eps], start, end, direction)
        assert many == {(e.namespace, e.name): store.checksums(e, start, end, direction)
                        for e in eps}, (start, end)
        assert any(many.values())


def test_read_level_answers_names_as_one_at_a_time(open_table_for):
    store = LineageStore(open_table_for())
    eps = _history(store)
    store.record_alias("ref", "raw", "n", "d1")
    store.record_alias("ref", "raw2", "n", "d1")
    store.record_alias("ref", "moved", "n", "d2")
    store.record_alias("ref", "moved", "n", "d3")  # turned: d2 no longer has it
    asked = [(e.namespace, e.name) for e in eps] + [("ref", "raw"), ("ref", "moved")]
    level = store.read_level(asked, 0, MAX_TIME)
    for d in asked:
        assert level.resolved[d] == store.resolve_dataset(*d), d
        assert level.aliases[d] == store.aliases(*d), d
        assert level.checksums[d] == store.checksums(EndPoint(*d), 0, MAX_TIME), d
    assert level.aliases[("n", "d1")] == [("ref", "raw"), ("ref", "raw2")]
    assert level.aliases[("n", "d2")] == []
    assert level.resolved[("ref", "moved")] == ("n", "d3")


def test_an_empty_level_reads_nothing(open_table_for):
    counting = _Counting(open_table_for())
    store = LineageStore(counting)
    counting.calls.clear()
    assert store.read_level([], 0, MAX_TIME) == Level({}, {}, {})
    assert store.checksums_many([], 0, MAX_TIME) == {}
    assert counting.calls == []


def _fan_in(store: LineageStore, width: int, depth: int) -> EndPoint:
    """``depth`` levels of ``width`` datasets, each dataset of a level written
    from every dataset of the level below (one set per dataset and run); the
    root is written from the last level."""
    levels = [[EndPoint("w", f"l{k}/d{i}") for i in range(width)] for k in range(depth)]
    root = EndPoint("w", "root")
    batch, run = [], 0
    for k in range(1, depth):
        for dst in levels[k]:
            for j, src in enumerate(levels[k - 1]):
                run += 1
                batch.append((chain(src, dst, ["a"], prefix=f"s{j}"), f"r{run}",
                              T0 + run, None))
    for j, src in enumerate(levels[-1]):
        run += 1
        batch.append((chain(src, root, ["a"], prefix=f"s{j}"), f"r{run}", T0 + run, None))
    store.record_many(batch)
    for k, level in enumerate(levels):  # every dataset's schema, reported twice
        for dataset in level:
            for t in (T0, T0 + 1):
                store.record_schema("w", dataset.name, f"s{k}-{t}", t, [("a", f"t{t}")])
    return root


def test_a_deep_question_reads_level_by_level(open_table_for):
    """The store calls of a deep question grow with its hops, not its datasets:
    a graph twice as wide costs the same number of calls."""
    counts = []
    for width in (3, 6):
        counting = _Counting(open_table_for())
        store = LineageStore(counting)
        root = _fan_in(store, width, 4)
        counting.calls.clear()
        view = ReadView(store, SetMerges())
        answer = column_lineage(view, f"datasetField:w:{root.name}:a", 10, False, 0, MAX_TIME)
        assert len(answer["graph"]) == 1 + 4 * width
        assert {n["data"]["fieldType"] for n in answer["graph"]
                if n["data"]["dataset"] != "root"} == {f"t{T0 + 1}"}
        walk = counting.calls
        counts.append(len(walk))
        # 4 hops and one look past the last: a read of the level and one of
        # its sets (their shapes, here the same at every level, are read once,
        # with the next level's index rows); the node id's names with the
        # walk's range. Every node's schema: its latest report (HBase: its
        # ``S|`` row, read with its level; elsewhere one ``first_cells`` for
        # the root's candidates and one for every node), then one read of the
        # schemas themselves. (HBase, counted here as its pipelined scanners
        # and getRows apart: 13 calls in 9 reads.)
        whole = getattr(counting.inner, "first_cells_reads_rows", False)
        assert walk.count("first_cells") == (0 if whole else 2), walk
        assert walk.count("get_many schemas") == 1, walk
        rest = [c for c in walk if c not in ("first_cells", "get_many schemas")]
        assert len(rest) <= 3 * 5, " ".join(walk)
    assert counts[0] == counts[1], counts


def test_exists_many_answers_what_exists_answers(open_table_for):
    store = LineageStore(open_table_for())
    eps = _history(store)  # d0..d5 read or written; "never" and other:d1 not
    assert store.exists_many(eps) == {e: store.exists(e) for e in eps}
    assert store.exists_many(eps)[EndPoint("n", "d0")] is True
    assert store.exists_many(eps)[EndPoint("n", "never")] is False
    assert store.exists_many([]) == {}


def test_read_level_both_answers_both_directions(open_table_for):
    store = LineageStore(open_table_for())
    eps = _history(store)
    asked = [(e.namespace, e.name) for e in eps]
    for start, end in RANGES:
        level, outgoing = store.read_level_both(asked, start, end)
        for d in asked:
            assert level.checksums[d] == store.checksums(EndPoint(*d), start, end), d
            assert outgoing[d] == store.checksums(EndPoint(*d), start, end, "outgoing"), d
        assert any(outgoing.values()) and any(level.checksums.values())


def test_a_node_id_with_many_splits_reads_its_names_at_once(open_table_for):
    """A namespace with colons makes a node id split many ways: the names it
    may mean are read together, not one existence scan and schema read each."""
    counting = _Counting(open_table_for())
    store = LineageStore(counting)
    src, dst = EndPoint("postgres://h:5432", "db:s.t"), EndPoint("postgres://h:5432", "db:s.u")
    store.record_many([(chain(src, dst, ["a"]), "r1", T0, None)])
    counting.calls.clear()
    view = ReadView(store, SetMerges())
    answer = column_lineage(view, f"datasetField:{dst.namespace}:{dst.name}:a", 5, False,
                            0, MAX_TIME)
    assert {n["id"] for n in answer["graph"]} == {f"datasetField:{e.namespace}:{e.name}:a"
                                                  for e in (src, dst)}
    walk = counting.calls
    # every candidate's schema read at once (HBase: with its names), every
    # node's too (HBase: with its level); only a name holding the field can
    # be the one meant, so no candidate is asked whether it exists
    whole = getattr(counting.inner, "first_cells_reads_rows", False)
    assert walk.count("first_cells") == (0 if whole else 2), walk
    assert "scan" not in walk and "first_rows" not in walk, walk


def _split_history(store: LineageStore, case: str) -> None:
    """``datasetField:a:b:c:f`` may mean a:b:c's field f, a:b:c's c:f or
    a:b's c:f... fll tries the splits shortest namespace first, each name
    standing for its alias's target when that is known."""
    src = EndPoint("src", "s")
    if case in ("sets", "exists-without-field", "schema-first", "alias"):
        store.record_many([(chain(src, EndPoint("a:b", "c"), ["f"]), "r1", T0, None)])
    if case == "exists-without-field":  # an earlier split, known, without the field
        store.record_many([(chain(src, EndPoint("a", "b:c"), ["g"]), "r2", T0, None)])
    if case == "schema-first":  # an earlier split known only by its schema, with it
        store.record_schema("a", "b:c", "r3", T0, [("f", "int")])
    if case == "alias":  # an earlier split is an alias of a dataset with the field
        store.record_many([(chain(src, EndPoint("x", "y"), ["f"]), "r4", T0, None)])
        store.record_alias("a", "b:c", "x", "y")


@pytest.mark.parametrize("case, meant", [
    ("sets", ("a:b", "c")), ("exists-without-field", ("a:b", "c")),
    ("schema-first", ("a", "b:c")), ("alias", ("x", "y"))])
def test_a_field_node_id_means_the_first_split_holding_the_field(open_table_for, case, meant):
    counting = _Counting(open_table_for())
    store = LineageStore(counting)
    _split_history(store, case)
    for view in (store, ReadView(store, SetMerges())):
        counting.calls.clear()
        answer = column_lineage(view, "datasetField:a:b:c:f", 1, False, 0, MAX_TIME)
        ids = {n["id"] for n in answer["graph"]}
        assert f"datasetField:{meant[0]}:{meant[1]}:f" in ids, (case, ids)
        if view is not store and case != "alias":  # the names it may mean: one read
            assert "scan" not in counting.calls and "first_rows" not in counting.calls


def test_read_level_views_answers_each_view_as_checksums(open_table_for):
    store = LineageStore(open_table_for())
    eps = _history(store)
    asked = [(e.namespace, e.name) for e in eps]
    views = [("incoming", 0, MAX_TIME), ("outgoing", *RANGES[2]), ("incoming", *RANGES[3]),
             ("outgoing", 0, MAX_TIME)]
    level, others = store.read_level_views(asked, views)
    assert level == store.read_level(asked, 0, MAX_TIME)
    assert len(others) == 3
    for (direction, start, end), got in zip(views[1:], others, strict=True):
        assert got == {d: store.checksums(EndPoint(*d), start, end, direction)
                       for d in asked}, (direction, start, end)
        assert any(got.values())


@pytest.mark.parametrize("direction", ["incoming", "outgoing"])
def test_summaries_reading_ahead_reads_the_next_level_with_the_shapes(open_table_for,
                                                                     direction):
    """The sets' summaries as `summaries` answers them, and the level the sets
    lead to as `read_level` answers it, read in the call of the shapes: with
    every shape cached, nothing is read ahead."""
    counting = _Counting(open_table_for())
    store = LineageStore(counting)
    eps = _history(store)
    here = eps[2:4]  # d2, d3: written from d1 and d2, read by d3 and d4
    sets = sorted({c for e in here for c in store.checksums(e, 0, MAX_TIME, direction)})
    want = store.summaries(sets)
    leads_to = {e for c in sets for f in (want[c].source_fields if direction == "incoming"
                                          else want[c].destination_fields)
                for e in [(f.endpoint.namespace, f.endpoint.name)]}
    assert len(leads_to) == 2
    store.clear_caches()
    known = {(e.namespace, e.name) for e in here}
    counting.calls.clear()
    got, ahead, level = store.summaries_reading_ahead(sets, 0, MAX_TIME, direction,
                                                      known.__contains__)
    assert {c: (s.source_fields, s.destination_fields) for c, s in got.items()} == \
        {c: (s.source_fields, s.destination_fields) for c, s in want.items()}
    assert set(ahead) == leads_to - known and ahead
    assert level == store.read_level(ahead, 0, MAX_TIME, direction)
    # the sets, then the shapes and the next level together: no shapes call of their own
    assert counting.calls[0] == "get_many" and "get_many shapes" not in counting.calls
    store.clear_caches(shapes=False)
    counting.calls.clear()
    again, ahead, level = store.summaries_reading_ahead(sets, 0, MAX_TIME, direction,
                                                        known.__contains__)
    assert set(again) == set(sets) and ahead == [] and level == Level({}, {}, {})
    assert counting.calls == ["get_many"]
    # sets only lead where asked (``leads``)
    store.clear_caches()
    _, ahead, _ = store.summaries_reading_ahead(sets, 0, MAX_TIME, direction,
                                                known.__contains__, leads=())
    assert ahead == []


def test_a_walk_reads_ahead_only_what_it_reaches(open_table_for):
    """Read ahead or not, a deep question answers the same, and a dataset
    read ahead is read once."""
    counting = _Counting(open_table_for())
    store = LineageStore(counting)
    root = _fan_in(store, 3, 4)
    node = f"datasetField:w:{root.name}:a"
    plain = column_lineage(store, node, 10, False, 0, MAX_TIME)
    plan = store._index_plan
    read: list[tuple] = []

    def counted(ns, name, start, end, direction, **kw):
        read.append((ns, name, start, end, direction))
        return plan(ns, name, start, end, direction, **kw)
    store._index_plan = counted  # type: ignore[method-assign]
    for end in (MAX_TIME, T0 + 10 ** 9):
        store.clear_caches()
        counting.calls.clear()
        read.clear()
        view = ReadView(store, SetMerges())
        assert column_lineage(view, node, 10, False, 0, end) == plain
        assert counting.calls.count("get_many shapes") <= 1, counting.calls  # the last level's
        walked = [r for r in read if r[2:] == (0, end, "incoming")]
        assert len(walked) == len(set(walked)) == 1 + 4 * 3, walked
