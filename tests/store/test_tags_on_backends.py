"""Classification tag rows and a tag's propagation, identical on every backend
(SQLite, the Bigtable emulator, HBase over Thrift): tags use the `Table`
protocol only."""
from __future__ import annotations

import pytest

from fll import EndPoint
from fll.govern import propagate
from fll.rowkeys import MAX_TIME
from fll.store import LineageStore, admin
from fll.store.tags import Tags
from tests.govern.jobs import COPY, HASH, job

from .conftest import BACKENDS

pytestmark = pytest.mark.parametrize("table_url", BACKENDS, indirect=True)


def test_tags_round_trip_propagate_and_fsck_alike(open_table_for):
    store = LineageStore(open_table_for())
    raw = EndPoint("db", "raw")
    store.record(job(raw, EndPoint("db", "copy"), {"ssn": [("ssn", COPY)]}), "r1", 1_000, "c")
    store.record(job(raw, EndPoint("db", "hash"), {"h": [("ssn", HASH)]}), "r2", 2_000, "h")
    tags = Tags(store.table)
    assert tags.add("db", "raw", "ssn", "pii", "alice") is True
    assert tags.add("db", "raw", "", "gold") is True
    tags.define("pii", "personal data")
    assert [(a.field, a.tag, a.by) for a in tags.assignments()] == [("ssn", "PII", "alice"),
                                                                    ("", "GOLD", "")]
    assert tags.get("PII").description == "personal data"
    rows = propagate(store, "PII", 0, MAX_TIME).fields_json()
    assert [(r["field"], r["stopped"]) for r in rows] == [
        ("db:copy:ssn", False), ("db:raw:ssn", False), ("db:hash:h", True)]
    assert tags.remove("db", "raw", "", "GOLD") is True
    assert [a.tag for a in tags.of_dataset("db", "raw")] == ["PII"]
    assert admin.fsck(store.table).clean
