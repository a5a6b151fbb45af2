"""What ingest remembers between events (`fll.openlineage.ingest`): the set an
event's column lineage builds, and the union of a run's set with an event's,
give exactly what building them afresh gives."""
from __future__ import annotations

import copy

import orjson

from fll import openlineage as ol
from fll.openlineage import facets, ingest
from fll.openlineage.memo import MEMO_MAX_KEY
from fll.opset import DeferredSet


def _event(run_id: str, state: str, columns: int, inputs_per_column: int = 2,
           tags: tuple[tuple[str, str], ...] = (("DIRECT", "IDENTITY"),)) -> dict:
    fields = {
        f"c{j:04d}": {"inputFields": [
            {"namespace": "pg", "name": f"src{k}", "field": f"f{j:04d}",
             "transformations": [{"type": t, "subtype": s} for t, s in tags]}
            for k in range(inputs_per_column)]}
        for j in range(columns)}
    return {"eventType": state, "eventTime": "2024-05-01T10:00:00Z",
            "producer": "urn:test", "run": {"runId": run_id},
            "job": {"namespace": "jobs", "name": "wide"},
            "inputs": [{"namespace": "pg", "name": f"src{k}"} for k in range(inputs_per_column)],
            "outputs": [{"namespace": "pg", "name": "out",
                         "facets": {"columnLineage": {"fields": fields}}}]}


def _forget() -> None:
    for memo in (ingest._BUILT, ingest._ORIGINAL):
        memo.clear()
    ingest._UNIONS.clear()
    facets._NORMAL.clear()
    facets._SOURCES.clear()


def _lineage_bytes(event: dict) -> int:
    return len(orjson.dumps([event["inputs"], event["outputs"]], option=orjson.OPT_SORT_KEYS))


def test_a_wide_event_under_the_limit_is_built_once_and_a_wider_one_each_time():
    _forget()
    wide = _event("r1", "COMPLETE", 400)
    assert 64 * 1024 < _lineage_bytes(wide) <= MEMO_MAX_KEY
    first = ol.run_event_to_lineage(wide)[0]
    again = ol.run_event_to_lineage(copy.deepcopy(wide))[0]
    # remembered, though 64 KB was the old limit: known by its checksum, not built
    assert isinstance(again, DeferredSet) and not again.built
    assert again.checksum == first.checksum and again.destinations == first.destinations
    assert not again.built

    wider = _event("r2", "COMPLETE", 1500)
    assert _lineage_bytes(wider) > MEMO_MAX_KEY
    one = ol.run_event_to_lineage(wider)[0]
    two = ol.run_event_to_lineage(copy.deepcopy(wider))[0]
    assert one.built and two.built and one is not two  # built each time, alike
    assert one.checksum == two.checksum


def test_the_union_remembered_is_the_union_built_afresh():
    _forget()
    start = _event("r1", "START", 30)
    start["outputs"][0]["facets"]["columnLineage"]["fields"] = dict(
        list(start["outputs"][0]["facets"]["columnLineage"]["fields"].items())[:10])
    complete = _event("r1", "COMPLETE", 30, tags=(("DIRECT", "IDENTITY"),
                                                   ("INDIRECT", "FILTER")))
    prior = ol.run_event_to_lineage(start)[0]
    merged = ol.union(prior, complete)
    assert merged is not None
    again = ol.union(prior, copy.deepcopy(complete))  # remembered per pair of sets
    assert again is not None and again.checksum == merged.checksum and not again.built

    # the same events in a process that built nothing yet: the same set
    _forget()
    fresh_prior = ol.run_event_to_lineage(copy.deepcopy(start))[0]
    assert fresh_prior.checksum == prior.checksum
    fresh = ol.union(fresh_prior, copy.deepcopy(complete))
    assert fresh is not merged and fresh.checksum == merged.checksum
    # and from the prior set read back through its facets (nothing remembered of it)
    facets._SOURCES.clear()
    ingest._UNIONS.clear()
    assert ol.union(fresh_prior, complete).checksum == merged.checksum

    # given the set the event built (as the ingest route does): the same union,
    # without building or looking the event's lineage up again
    _forget()
    built = ol.run_event_to_lineage(complete)[0]
    ingest._BUILT.clear()
    given = ol.union(ol.run_event_to_lineage(start)[0], complete, built)
    assert given is not None and given.checksum == merged.checksum
    assert len(ingest._BUILT._data) == 1  # the START's only: the COMPLETE was not built again


def test_a_union_that_adds_nothing_answers_the_prior_set_s_own_checksum():
    _forget()
    complete = _event("r1", "COMPLETE", 20)
    info = ol.run_event_to_lineage(complete)[0]
    assert ol.union(info, complete).checksum == info.checksum
    smaller = _event("r1", "START", 5)
    assert ol.union(info, smaller).checksum == info.checksum
    assert ol.union(info, smaller).checksum == info.checksum  # remembered: the same


def _one_ref_event(ref) -> dict:
    return {"eventType": "COMPLETE", "eventTime": "2024-05-01T10:00:00Z", "producer": "urn:t",
            "run": {"runId": "r"}, "job": {"namespace": "j", "name": "j"},
            "outputs": [{"namespace": "pg", "name": "out", "facets": {"columnLineage": {
                "fields": {"a": {"inputFields": [
                    {"namespace": "pg", "name": "src", "field": "x",
                     "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]},
                    ref]}}}}}]}


_REFS = [
    {"namespace": "pg", "name": "src", "field": "y"},  # no tags
    {"namespace": "pg", "name": "src", "field": "y", "transformations": []},
    {"namespace": "pg", "name": "src", "field": "y",
     "transformations": [{"type": "DIRECT", "subtype": None, "description": None,
                          "masking": None}]},
    {"namespace": "pg", "name": "src", "field": "y",
     "transformations": [{"type": "INDIRECT", "subtype": "FILTER", "masking": True},
                         {"type": "DIRECT", "subtype": "IDENTITY"}]},
    {"namespace": "pg", "name": "src", "field": "y",
     "transformations": [{"type": "DIRECT", "subtype": "IDENTITY", "masking": 1}]},
    {"namespace": "pg", "name": "src", "field": "y",
     "transformations": [{"type": "DIRECT", "subtype": "NOPE"}]},
    {"namespace": "pg", "name": "src", "field": "y", "transformations": {"type": "DIRECT"}},
    {"namespace": "pg", "name": "src", "field": "y", "transformations": ["DIRECT"]},
    {"namespace": "pg", "name": "src", "field": ""},
    {"namespace": 7, "name": "src", "field": "y"},
    {"namespace": "pg", "name": "", "field": "y"},
    {"namespace": "pg", "name": "src", "field": "y",
     "transformations": [{"type": "DIRECT", "subtype": ["IDENTITY"]}]},
    "pg.src.y",
]


def _outcome(event: dict):
    try:
        return "ok", repr(facets._event_lineage(event))
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e).__name__, str(e)


def test_plain_references_read_alike_by_the_fast_reader_and_the_checked_one(monkeypatch):
    fast = [_outcome(_one_ref_event(copy.deepcopy(r))) for r in _REFS]
    monkeypatch.setattr(facets, "_plain_ref", lambda *a: None)  # every reference checked
    slow = [_outcome(_one_ref_event(copy.deepcopy(r))) for r in _REFS]
    assert fast == slow
    kinds = [k for k, _ in fast]
    assert kinds.count("ok") == 4 and "BadRequest" in kinds  # both paths taken
    assert any("inputFields[1].transformations[0].masking" in m for _, m in fast)
