"""Store formats: a format-1 store (before time buckets) reads, upgrades in place,
resumes an interrupted upgrade, migrates run by run to any backend, and a store
of a newer format is refused with one line naming both versions."""
from __future__ import annotations

import json

import pytest

from fll import EndPoint, EndPointField, StoreError, open_store
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.store.lineage import FORMAT
from tests.lineage_examples import chain

from .conftest import open_url

SRC, DST = EndPoint("n", "src"), EndPoint("n", "dst")
DAY = 86_400_000


def _history(store: LineageStore) -> None:
    runs = []
    for i in range(40):
        src = EndPoint("n", f"raw/day={i % 13}")
        runs.append((chain(src, DST, ["a", f"f{i % 3}"]), f"r{i}", 1_650_000_000_000 + i * DAY // 3,
                     f"p{i % 2}"))
    store.record_many(runs)
    store.claim_run_start("claimed-only", 1_650_000_000_000)
    store.record_schema("n", "dst", "r1", 1_650_000_000_000, [("a", "string")])
    store.record_alias("ref", "dst", "n", "dst")


def _answers(store: LineageStore) -> dict:
    out = {}
    t0 = 1_650_000_000_000
    for lo, hi in [(0, rk.MAX_TIME), (t0, t0 + 5 * DAY), (t0 + DAY // 2, t0 + 3 * DAY + 7),
                   (t0 + 4 * DAY, t0 + 4 * DAY + 1)]:
        out[(lo, hi, "sets")] = store.checksums(DST, lo, hi)
        out[(lo, hi, "in")] = sorted(map(str, store.incoming(EndPointField(DST, "a"), lo, hi)))
        out[(lo, hi, "fields")] = store.fields(DST, lo, hi)
        out[(lo, hi, "runs")] = [tuple(r) for r in store.runs(DST, lo, hi)]
    out["schema"] = store.schema("n", "dst", 0, rk.MAX_TIME)
    out["alias"] = store.resolve_dataset("ref", "dst")
    return out


def _to_format_1(table) -> None:
    """What a store written before time buckets holds: no bucket rows, no stamp."""
    old = [k for k, _ in table.scan() if k[:1] in (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET,
                                                    rk.META)]
    table.delete(old)


@pytest.fixture
def format1(tmp_path):
    url = f"sqlite:///{tmp_path}/old.db"
    with open_store(url) as store:
        _history(store)
        want = _answers(store)
        _to_format_1(store.table)
    return url, want


def test_a_format_1_store_answers_as_before_and_upgrades_in_place(format1):
    url, want = format1
    with open_store(url) as store:
        assert store.format == 1
        assert _answers(store) == want
        assert admin.fsck(store.table).clean
        dry = admin.upgrade(store.table, dry_run=True)
        assert dry.from_format == 1 and dry.index_rows > 0
        assert admin.store_format(store.table) == 1  # the dry run changed nothing
        report = admin.upgrade(store.table, batch_size=7)
        assert report.bucket_rows > 0 and admin.store_format(store.table) == FORMAT
    with open_store(url) as store:
        assert store.format == FORMAT
        assert _answers(store) == want
        fsck = admin.fsck(store.table)
        assert fsck.clean, fsck.to_dict()
        assert admin.upgrade(store.table).from_format == FORMAT  # nothing left to do


class _PutsThenFails:
    def __init__(self, inner, ok: int):
        self.inner, self.ok, self.url = inner, ok, inner.url

    def put(self, rows):
        if self.ok == 0:
            raise StoreError("connection lost")
        self.ok -= 1
        self.inner.put(rows)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_an_interrupted_upgrade_resumes_where_it_stopped(format1):
    url, want = format1
    with open_store(url) as store:
        with pytest.raises(StoreError, match="connection lost"):
            admin.upgrade(_PutsThenFails(store.table, 5), batch_size=4)
        assert admin.store_format(store.table) == 1
        report = admin.upgrade(store.table, batch_size=4)
        assert report.resumed_from is not None
        assert admin.store_format(store.table) == FORMAT
    with open_store(url) as store:
        assert _answers(store) == want
        assert admin.fsck(store.table).clean


def test_a_store_of_a_newer_format_is_refused_naming_both_versions(tmp_path):
    url = f"sqlite:///{tmp_path}/new.db"
    open_store(url).close()
    table = open_url(url)
    table.put({rk.meta("format"): {"v": str(FORMAT + 1).encode()}})
    table.close()
    with pytest.raises(StoreError, match=f"format {FORMAT + 1}, newer than format {FORMAT}"):
        open_store(url)
    from click.testing import CliRunner

    from fll.cli import main
    result = CliRunner().invoke(main, ["--store", url, "admin", "fsck"])
    assert result.exit_code == 3
    assert f"format {FORMAT + 1}" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("table_url", ["sqlite", "bigtable", "hbase-thrift"], indirect=True)
def test_migrate_copies_runs_from_a_format_1_store_to_any_backend(format1, open_table_for):
    url, want = format1
    with open_store(url) as source:
        destination = LineageStore(open_table_for())
        report = admin.migrate_runs(source, destination, batch_size=6)
        assert report.runs == 41 and report.new_runs == 40
        assert destination.format == FORMAT
        assert _answers(destination) == want
        assert destination.claim_run_start("claimed-only", 1) == 1_650_000_000_000
        again = admin.migrate_runs(source, destination)  # rerun: idempotent
        assert again.new_runs == 0
        assert admin.fsck(destination.table).clean


def test_the_upgrade_command_shows_progress_and_reports_json(format1):
    from click.testing import CliRunner

    from fll.cli import main
    url, _ = format1
    runner = CliRunner()
    dry = runner.invoke(main, ["--store", url, "admin", "upgrade", "--dry-run",
                               "--format", "json"])
    assert dry.exit_code == 0, dry.output
    result = runner.invoke(main, ["--store", url, "admin", "upgrade", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["from_format"] == 1 and doc["to_format"] == FORMAT and doc["bucket_rows_written"]
    text = runner.invoke(main, ["--store", url, "admin", "upgrade"])
    assert text.exit_code == 0 and "already format" in text.stdout
