"""The two tag row kinds: keys round-trip through `fll.rowkeys.decode`, a
dataset's tags are one key prefix, malformed keys are refused, and a store of
this format opens with them (they are additive)."""
from __future__ import annotations

import pytest

from fll import open_store
from fll import rowkeys as rk
from fll.store import admin
from fll.store.tags import Tags


@pytest.mark.parametrize("ns, name, field, tag", [
    ("db", "raw", "ssn", "PII"),
    ("db", "raw", "", "GOLD"),
    ("postgres://h:5432", "a|b", "x%y|z", "P|I I"),
])
def test_tagged_keys_round_trip(ns, name, field, tag):
    k = rk.decode(rk.tagged(ns, name, field, tag))
    assert (k.kind, k.namespace, k.name, k.field, k.tag) == ("tagged", ns, name, field, tag)
    assert rk.tagged(ns, name, field, tag).startswith(rk.dataset_prefix(rk.TAGGED, ns, name))


def test_tag_keys_round_trip():
    assert rk.decode(rk.tag("P|I")) == rk.Key("tag", tag="P|I")


@pytest.mark.parametrize("key", [b"T|", b"T|a|b", b"t|db|raw|ssn", b"t|db|raw|ssn|", b"t||raw|f|X",
                                 b"t|db|raw|f|X|Y"])
def test_malformed_tag_keys_are_refused(key):
    with pytest.raises(ValueError):
        rk.decode(key)


def test_a_store_with_tags_reopens_and_describes_them(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    with open_store(url) as s:
        Tags(s.table).add("db", "raw", "ssn", "pii", "alice")
    with open_store(url) as s:
        [a] = Tags(s.table).assignments()
        assert (a.tag, a.by) == ("PII", "alice")
        row = admin.describe_row(rk.tagged("db", "raw", "ssn", "PII"),
                                 s.table.get(rk.tagged("db", "raw", "ssn", "PII")))
        assert (row["kind"], row["tag"], row["field"], row["columns"]["by"]) == \
            ("tagged", "PII", "ssn", "alice")
        assert admin.fsck(s.table).clean
