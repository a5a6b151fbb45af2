"""Every REST question tags its edges from the summaries stored with each
operation set: a cold store (nothing cached) answers every route without
rebuilding an operation set or composing a tag, and answers as composing
the operations anew would."""
from __future__ import annotations

import pytest

from fll import openlineage
from fll.model import EndPoint, EndPointField
from fll.rowkeys import MAX_TIME
from fll.server import column_graph, field_inputs, views
from fll.store import LineageStore, open_store
from fll.store.reads import ReadView, SetMerges


@pytest.fixture
def cold(seeded):
    """The seeded store opened afresh (no set decoded) and every way an answer
    could be rebuilt from operations made to fail."""
    url = seeded.url
    seeded.close()
    store = open_store(url)
    yield store
    store.close()


def _forbid_rebuilding(monkeypatch) -> None:
    def refuse(*a, **k):
        raise AssertionError("a question rebuilt an operation set or composed tags")
    monkeypatch.setattr(LineageStore, "operation_set", refuse)
    monkeypatch.setattr(openlineage.facets, "_input_transformations", refuse)


def test_cold_questions_read_stored_tags_and_rebuild_no_operation_set(cold, monkeypatch):
    z = EndPointField(EndPoint("chain", "C"), "z")
    # what composing the operations anew gives, with every set read
    want = {}
    for c in cold.checksums(z.endpoint, 0, MAX_TIME):
        for src, tags in openlineage.input_transformations(cold.operation_set(c), z).items():
            want.setdefault(src, []).extend(t for t in tags if t not in want.get(src, []))
    assert want and any(want.values())  # tagged edges to read back
    cold.clear_caches()
    _forbid_rebuilding(monkeypatch)
    view = ReadView(cold, SetMerges())
    got = field_inputs.merged_inputs(view, z, 0, MAX_TIME)
    assert {k: sorted(v, key=lambda t: t.to_dict()["subtype"]) for k, v in got.items()} == \
        {k: sorted(v, key=lambda t: t.to_dict()["subtype"]) for k, v in want.items()}
    summary = views.field_summary(view, z, 0, MAX_TIME, "both", 3, True)
    assert summary["incoming"]
    graph = column_graph.column_lineage(ReadView(cold, SetMerges()), "datasetField:chain:C:z", 3, True,
                                 0, MAX_TIME)
    assert any(n["data"]["inputFields"] for n in graph["graph"])
    # and the same questions without a request's view (the CLI's path)
    assert views.field_summary(cold, z, 0, MAX_TIME, "incoming", 3, True) == \
        views.field_summary(ReadView(cold, SetMerges()), z, 0, MAX_TIME, "incoming", 3, True)
