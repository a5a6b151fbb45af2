"""Ingest's memos bounded in bytes (`fll.openlineage.memo.Memo`), and the sets
they give back known by their checksum (`fll.opset.DeferredSet`): built only
when their operations are asked for, and then the very set building gives."""
from __future__ import annotations

import copy

import pytest

from fll import open_store
from fll import openlineage as ol
from fll.errors import BadRequest
from fll.openlineage import facets, ingest
from fll.openlineage.memo import DEFAULT_MEMO_BYTES, MISS, Memo
from fll.opset import DeferredSet

from .test_ingest_memo import _event, _forget


@pytest.fixture(autouse=True)
def _fresh_memos():
    _forget()
    yield
    ol.memo_budget(DEFAULT_MEMO_BYTES)
    _forget()


def test_a_memo_holds_its_byte_budget_and_evicts_the_least_recently_used():
    memo = Memo(10_000, lambda v: len(v))
    for i in range(50):
        memo.keep(i, "x" * 700)
        assert memo.bytes <= 10_000
    held = len(memo)
    assert 0 < held < 50 and memo.bytes == held * (700 + 300)  # each entry's own 300 bytes
    newest = 49
    oldest = 50 - held
    assert memo.find(oldest - 1) is MISS and memo.find(oldest) == "x" * 700
    memo.keep("new", "y")  # evicts the least recently used: oldest + 1, not oldest (just read)
    assert memo.find(oldest) is not MISS and memo.find(oldest + 1) is MISS
    assert memo.find(newest) is not MISS
    memo.keep(newest, "z" * 10)  # kept again: counted once, with its new size
    assert memo.bytes == sum(300 + len(v) for v, _ in memo._data.values())
    memo.clear()
    assert len(memo) == 0 and memo.bytes == 0


def test_the_ingest_budget_splits_between_the_memos_and_bounds_what_they_hold():
    ol.memo_budget(40_000)
    assert ingest._BUILT.budget + ingest._UNIONS.budget + ingest._ORIGINAL.budget \
        + facets._SOURCES.budget <= 40_000
    for i in range(40):
        ev = _event(f"r{i}", "COMPLETE", 20)
        ev["outputs"][0]["name"] = f"out{i}"
        ol.run_event_to_lineage(ev)
    assert 0 < len(ingest._BUILT) < 40 and ingest._BUILT.bytes <= ingest._BUILT.budget
    assert len(facets._SOURCES) < 40 and facets._SOURCES.bytes <= facets._SOURCES.budget


def test_a_store_s_cache_budget_sizes_the_memos_of_its_server(tmp_path):
    from fll.server import create_app
    store = open_store(f"sqlite:///{tmp_path / 'fll.db'}", cache_mb=16)
    try:
        create_app(store)
        assert ingest._BUILT.budget == store.cache_budget.ingest * 45 // 100
        assert store.cache_budget.ingest == 16 * 2**20 * 4 // 100
        assert sum(store.cache_budget) <= 16 * 2**20
    finally:
        store.close()


def test_a_set_found_again_is_the_set_building_gives_built_only_when_asked(monkeypatch):
    ev = _event("r1", "COMPLETE", 25)
    first = ol.run_event_to_lineage(ev)[0]
    assert first.built and not isinstance(first, DeferredSet)
    builds = []
    real = ingest._lineage_info
    monkeypatch.setattr(ingest, "_lineage_info", lambda e: builds.append(1) or real(e))
    again = ol.run_event_to_lineage(copy.deepcopy(ev))[0]
    assert isinstance(again, DeferredSet) and again == first and hash(again) == hash(first)
    assert again.destinations == first.destinations and not builds  # nothing built yet
    assert again.operations == first.operations and builds == [1]  # built on first use
    assert again.canonical_bytes() == first.canonical_bytes()
    assert again.incoming_summary() == first.incoming_summary()
    assert again.sources == first.sources and builds == [1]  # once


def test_a_deferred_set_refuses_a_build_that_gives_another_set():
    one = ol.run_event_to_lineage(_event("r1", "COMPLETE", 5))[0]
    other = ol.run_event_to_lineage(_event("r2", "COMPLETE", 6))[0]
    wrong = DeferredSet(one.checksum, lambda: other)
    with pytest.raises(RuntimeError, match=one.checksum):
        wrong.operations  # noqa: B018 - the access builds


def test_an_event_that_failed_is_never_remembered():
    bad = _event("r1", "COMPLETE", 3)
    bad["outputs"][0]["facets"]["columnLineage"]["fields"]["c0000"]["inputFields"][0][
        "field"] = 7
    for _ in range(2):
        with pytest.raises(BadRequest, match=r"inputFields\[0\]\.field"):
            ol.run_event_to_lineage(copy.deepcopy(bad))
    assert len(ingest._BUILT) == 0


def test_runs_recorded_from_deferred_sets_store_what_built_sets_store(tmp_path, monkeypatch):
    """A run of a set the store holds is recorded by its checksum alone; a
    deferred set the store does not hold yet builds itself for its data row."""
    start = _event("r1", "START", 12)
    complete = _event("r1", "COMPLETE", 12, tags=(("DIRECT", "IDENTITY"),
                                                   ("INDIRECT", "FILTER")))
    start["outputs"][0]["facets"]["columnLineage"]["fields"] = dict(
        list(start["outputs"][0]["facets"]["columnLineage"]["fields"].items())[:4])

    def ingest_run(store, run_id: str) -> None:
        s, c = copy.deepcopy(start), copy.deepcopy(complete)
        s["run"]["runId"] = c["run"]["runId"] = run_id
        info, rid, at, program = ol.run_event_to_lineage(s)
        store.record(info, rid, at, program)
        built = ol.run_event_to_lineage(c)[0]
        prior = store.run(rid)
        merged = ol.union(DeferredSet(prior.checksum, lambda: store.operation_set(
            prior.checksum)), c, built)
        store.record(merged, rid, at, program, supersede=True)

    first = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        ingest_run(first, "00000000-0000-4000-8000-000000000001")
        builds = []
        real = ingest._lineage_info
        monkeypatch.setattr(ingest, "_lineage_info", lambda e: builds.append(1) or real(e))
        ingest_run(first, "00000000-0000-4000-8000-000000000002")
        assert builds == []  # the second run: nothing built, nothing read back
        want = first.operation_set(first.run("00000000-0000-4000-8000-000000000002").checksum)
    finally:
        first.close()
    # a fresh store, the memos warm: the deferred sets build for their data rows
    second = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        ingest_run(second, "00000000-0000-4000-8000-000000000003")
        assert builds  # built from the event, as the store needed its operations
        second.clear_caches()
        got = second.operation_set(second.run("00000000-0000-4000-8000-000000000003").checksum)
        assert got.checksum == want.checksum and got.operations == want.operations
    finally:
        second.close()


def test_what_the_memos_count_is_above_what_they_hold():
    """The entries' estimates against tracemalloc, with the sets they were
    built with gone (as after a run of a set the store holds)."""
    import gc
    import tracemalloc

    ol.memo_budget(1 << 30)
    events = []
    for i in range(200):
        ev = _event(f"r{i}", "COMPLETE", 10)
        ev["outputs"][0]["name"] = f"output_dataset_{i:05d}"
        events.append(ev)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for ev in events:
            ol.run_event_to_lineage(ev)
        gc.collect()
        both = tracemalloc.get_traced_memory()[0]
        sources = facets._SOURCES.bytes
        facets._SOURCES.clear()
        facets._NORMAL.clear()
        gc.collect()
        built_only = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(ingest._BUILT) == 200
    assert ingest._BUILT.bytes >= built_only - base > 0
    assert sources >= both - built_only > 0


def _reaches(root: object, target: object, depth: int = 8) -> bool:
    """Whether ``target`` is reachable from ``root`` through functions, their
    closures and the sets they hold (what a pending write keeps alive)."""
    import gc
    import types

    seen, level = {id(root)}, [root]
    for _ in range(depth):
        nxt = []
        for obj in level:
            for ref in gc.get_referents(obj):
                if ref is target:
                    return True
                if id(ref) in seen or not isinstance(
                        ref, (types.FunctionType, types.CellType, tuple, DeferredSet, dict)):
                    continue
                if isinstance(ref, dict) and not any(isinstance(o, DeferredSet) for o in level):
                    continue  # only a set's own attributes, not every dict met
                seen.add(id(ref))
                nxt.append(ref)
        level = nxt
    return False


def test_a_pending_write_holds_no_parsed_event_and_a_remembered_union_reads_none(tmp_path):
    from fll.server import create_app

    store = open_store(f"sqlite:///{tmp_path / 'fll.db'}")
    try:
        app = create_app(store)
        route = app.state.ingest
        start = _event("00000000-0000-4000-8000-000000000009", "START", 6)
        for ev in (start, copy.deepcopy(start)):  # built, then remembered
            assert _reaches((lambda held: (lambda: held))(ev), ev)  # the walk finds a capture
            write = route.prepare(ev)
            assert not _reaches(write, ev)
            assert not _reaches(write, ev["outputs"])
        write()  # recorded
        # a union remembered: the event's lineage is not read back again
        complete = _event("00000000-0000-4000-8000-000000000009", "COMPLETE", 6,
                          tags=(("DIRECT", "IDENTITY"), ("INDIRECT", "SORT")))
        info = ol.run_event_to_lineage(complete)[0]
        prior = ol.run_event_to_lineage(start)[0]
        assert ol.union(prior, complete, info) is not None  # remembered from now on
        read = []
        again = ol.union_of(prior, lambda: read.append(1) or complete, info)
        assert again is not None and again.checksum == ol.union(prior, complete).checksum
        assert read == []
    finally:
        store.close()
