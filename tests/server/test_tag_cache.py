"""`GET …/lineage/fields/{f}` tags its edges through the server's
TransformationCache: a second request composes nothing again, and a field a
dataset-wide request (Marquez) already composed is not composed again."""
from __future__ import annotations

from fll.model import EndPoint, EndPointField
from fll.rowkeys import MAX_TIME
from fll.server import views


def _counting(monkeypatch) -> dict:
    calls = {"field": 0, "dataset": 0}
    field_pass, dataset_pass = views.input_transformations, views.dataset_input_transformations

    def one_field(*a, **k):
        calls["field"] += 1
        return field_pass(*a, **k)

    def whole(*a, **k):
        calls["dataset"] += 1
        return dataset_pass(*a, **k)
    monkeypatch.setattr(views, "input_transformations", one_field)
    monkeypatch.setattr(views, "dataset_input_transformations", whole)
    return calls


def test_a_repeated_field_request_composes_nothing_again(seeded, monkeypatch):
    calls = _counting(monkeypatch)
    cache = views.TransformationCache()
    z = EndPointField(EndPoint("chain", "C"), "z")
    first = views.field_summary(seeded, z, 0, MAX_TIME, "incoming", 3, True, cache)
    assert calls["field"] > 0 and calls["dataset"] == 0  # only the fields walked, not all
    done = calls["field"]
    again = views.field_summary(seeded, z, 0, MAX_TIME, "incoming", 3, True, cache)
    assert again == first and calls["field"] == done
    # the answer is the one an uncached walk gives
    assert views.field_summary(seeded, z, 0, MAX_TIME, "incoming", 3, True) == first


def test_a_field_of_a_dataset_already_composed_is_read_from_that_entry(seeded, monkeypatch):
    calls = _counting(monkeypatch)
    cache = views.TransformationCache()
    views.column_lineage(seeded, cache, "datasetField:chain:C:z", 3, False, 0, MAX_TIME)
    assert calls["dataset"] > 0
    views.field_summary(seeded, EndPointField(EndPoint("chain", "C"), "z"), 0, MAX_TIME,
                        "incoming", 3, True, cache)
    assert calls["field"] == 0
