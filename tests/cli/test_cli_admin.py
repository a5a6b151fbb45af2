"""`fll admin`: fsck (find, repair, clean), purge (dry run, retention), migrate, init."""
from __future__ import annotations

import json
import os

import pytest

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField, ReadOperation,
                 StoreError, WriteOperation, open_store)
from fll import rowkeys as rk
from fll.store import admin, open_table
from fll.store.datarows import data_row
from tests.cli.conftest import RUNS, T0, B, C, build_store
from tests.lineage_examples import cdap_example


def full_scan(url: str) -> list[tuple[bytes, dict]]:
    table = open_table(url)
    try:
        return list(table.scan())
    finally:
        table.close()


# -- fsck ------------------------------------------------------------------------

@pytest.fixture
def broken_store(lineage_store):
    """The lineage store plus an orphaned data row, a dangling index row and a lost run row."""
    table = open_table(lineage_store)
    lonely = FieldLineageInfo([ReadOperation("r", "orphan", EndPoint("ns", "o"), ["x"]),
                               WriteOperation("w", "", EndPoint("ns", "p"),
                                              [InputField("r", "x")])])
    table.put({rk.data(lonely.checksum): data_row(lonely)})
    dangling = rk.run_row(rk.BACKWARD, "ns", "ghost", T0)
    table.put({dangling: {"ghost-run": b"\x00" * 16}})
    table.delete([rk.run("r-ab")])  # as if a crash hit between index rows and run row
    table.close()
    return lineage_store, rk.data(lonely.checksum), dangling


def test_fsck_finds_then_repairs_then_reports_clean(run_cli, broken_store):
    url, orphan_key, dangling_key = broken_store
    found = run_cli("admin", "fsck", "--format", "json", store=url)
    assert found.exit_code == 1  # problems found and not repaired
    report = json.loads(found.stdout)
    assert report["clean"] is False and report["repaired"] is False
    assert report["orphaned_data_rows"] == [admin.printable_key(orphan_key)]
    assert report["dangling_index_rows"] == [admin.printable_key(dangling_key) +
                                             " column ghost-run"]
    assert report["missing_run_rows"] == ["r|r-ab"]
    text = run_cli("admin", "fsck", store=url).stdout
    # the orphaned data row is reclaimable, not one of the problems
    assert "found 2 problem(s)" in text and "1 row(s) nothing references" in text
    assert "--repair" in text
    assert f"reclaimable: data or shape row nothing references: " \
           f"{admin.printable_key(orphan_key)}" in text
    before = full_scan(url)
    assert full_scan(url) == before  # fsck without --repair changed nothing

    repaired = json.loads(run_cli("admin", "fsck", "--repair", "--format", "json",
                                  store=url).stdout)
    assert repaired["repaired"] is True
    assert repaired["fixed"] == 3  # what was changed: a row deleted, a cell, a run row rebuilt
    keys = {k for k, _ in full_scan(url)}
    assert orphan_key not in keys and dangling_key not in keys
    with open_store(url) as store:
        # rebuilt from its index rows: start and set; the program lived in the lost row only
        assert store.run("r-ab") == ("r-ab", T0 + 100_000, None, store.run("r-ab").checksum)
    clean = run_cli("admin", "fsck", store=url)
    assert clean.exit_code == 0 and clean.stdout.startswith("clean:")


def test_fsck_reports_rows_of_no_fll_shape_without_deleting_them(run_cli, lineage_store):
    table = open_table(lineage_store)
    table.put({b"zz-foreign": {"x": b"1"}})
    table.close()
    report = json.loads(run_cli("admin", "fsck", "--repair", "--format", "json",
                                store=lineage_store).stdout)
    assert report["unknown_rows"] == ["zz-foreign"]
    assert b"zz-foreign" in {k for k, _ in full_scan(lineage_store)}


# -- purge -----------------------------------------------------------------------

def test_purge_dry_run_changes_nothing_and_counts_what_would_go(run_cli, lineage_store):
    before = full_scan(lineage_store)
    cut = str((T0 + 250_000) // 1000)  # run-cdap, r-ab, r-bc are older
    result = run_cli("admin", "purge", "--before", cut, "--dry-run", "--format", "json",
                     store=lineage_store)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert full_scan(lineage_store) == before
    assert report["dry_run"] is True and report["runs"] == 3
    # run-cdap: 1 source + 1 destination, r-ab and r-bc likewise: a run cell each per
    # endpoint, and as each is its set's first run, a first-run cell too
    assert report["index_rows"] == 3 * 2 * 2
    # the sets of run-cdap and r-ab go; r-bc's set is still used by r-bc-2
    assert report["data_rows"] == 2


def test_purge_removes_exactly_the_old_runs_and_their_unused_sets(run_cli, lineage_store):
    before = full_scan(lineage_store)
    cut = str((T0 + 250_000) // 1000)
    dry = json.loads(run_cli("admin", "purge", "--before", cut, "--dry-run", "--format",
                             "json", store=lineage_store).stdout)
    result = run_cli("admin", "purge", "--before", cut, "--format", "json", store=lineage_store)
    assert result.exit_code == 0, result.output
    assert "purging runs" in result.stderr  # the progress bar, on stderr
    report = json.loads(result.stdout)
    assert {k: v for k, v in report.items() if k != "dry_run"} == \
        {k: v for k, v in dry.items() if k != "dry_run"}
    after = full_scan(lineage_store)
    # (a dataset's directory row of top buckets, emptied too, is not counted)
    removed = {k for k, _ in before} - {k for k, _ in after} - \
        {k for k, _ in before if k.endswith(b"|*")}
    assert len(removed) == report["runs"] + report["index_rows"] + report["bucket_rows"] + \
        report["data_rows"] + report["shape_rows"]
    survivors = {admin.describe_row(k, c).get("run_id") for k, c in after} - {None}
    assert survivors == {"r-bc-2"}
    with open_store(lineage_store) as store:
        assert store.incoming(EndPointField(C, "id"), 0, T0 + 10**6) == {EndPointField(B, "id")}
    assert json.loads(run_cli("admin", "fsck", "--format", "json",
                              store=lineage_store).stdout)["clean"] is True
    again = json.loads(run_cli("admin", "purge", "--before", cut, "--format", "json",
                               store=lineage_store).stdout)
    assert again["runs"] == 0 and full_scan(lineage_store) == after


def test_purge_requires_before_and_a_valid_time(run_cli, lineage_store):
    assert run_cli("admin", "purge", store=lineage_store).exit_code == 2
    bad = run_cli("admin", "purge", "--before", "last tuesday", store=lineage_store)
    assert bad.exit_code == 2 and "--before" in bad.stderr


def test_purge_accepts_relative_times(run_cli, lineage_store):
    result = run_cli("admin", "purge", "--before", "now-3650d", "--dry-run", store=lineage_store)
    assert result.exit_code == 0 and "would remove 0 run(s)" in result.stdout


# -- migrate ---------------------------------------------------------------------

def test_migrate_between_two_sqlite_files_gives_identical_scans(run_cli, lineage_store,
                                                                tmp_path):
    dst = f"sqlite:///{tmp_path}/dst.db"
    result = run_cli("admin", "migrate", "--raw", "--from", lineage_store, "--to", dst,
                     "--batch-size", "5", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert "copying rows" in result.stderr  # the progress bar, on stderr
    assert report["copied_rows"] == report["total_rows"] == len(full_scan(lineage_store))
    assert full_scan(dst) == full_scan(lineage_store)
    assert run_cli("scan", "--format", "json", store=dst).stdout == \
        run_cli("scan", "--format", "json", store=lineage_store).stdout


class _Crashing:
    """A destination table that fails after ``ok`` puts, like a dropped connection."""

    def __init__(self, inner, ok: int):
        self.inner, self.ok, self.url = inner, ok, inner.url

    def put(self, rows):
        if self.ok == 0:
            raise StoreError("connection lost")
        self.ok -= 1
        self.inner.put(rows)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_migrate_resumes_after_an_interruption(run_cli, lineage_store, tmp_path):
    dst = f"sqlite:///{tmp_path}/dst.db"
    src_table, dst_table = open_table(lineage_store), open_table(dst)
    with pytest.raises(StoreError):
        admin.migrate(src_table, _Crashing(dst_table, ok=2), batch_size=4)
    partial = full_scan(dst)
    assert len(partial) == 8  # two batches landed
    point = admin.resume_point(src_table, dst_table, 4)
    keys = [k for k, _ in full_scan(lineage_store)]
    assert point == keys[4]  # one batch back from the last copied key
    src_table.close()
    dst_table.close()
    result = run_cli("admin", "migrate", "--raw", "--from", lineage_store, "--to", dst,
                     "--batch-size", "4", "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["resumed_from"] == admin.printable_key(keys[4])
    assert report["copied_rows"] == len(keys) - 4
    assert full_scan(dst) == full_scan(lineage_store)


def test_migrate_refuses_a_destination_that_is_not_a_partial_copy(run_cli, lineage_store,
                                                                  tmp_path):
    other = build_store(f"sqlite:///{tmp_path}/other.db", [
        ("zzz", T0, None, cdap_example)])
    table = open_table(other)
    table.put({b"zz-unrelated": {"x": b"1"}})
    table.close()
    result = run_cli("admin", "migrate", "--raw", "--from", lineage_store, "--to", other)
    assert result.exit_code == 2 and "not a partial copy" in result.stderr


def test_migrate_from_a_missing_store_is_a_store_error(run_cli, tmp_path):
    result = run_cli("admin", "migrate", "--from", f"sqlite:///{tmp_path}/none.db", "--to",
                     f"sqlite:///{tmp_path}/dst.db")
    assert result.exit_code == 3 and "does not exist" in result.stderr
    assert not os.path.exists(tmp_path / "none.db")


# -- init ------------------------------------------------------------------------

def test_init_creates_an_empty_store_that_reads_can_then_open(run_cli, tmp_path):
    url = f"sqlite:///{tmp_path}/sub/fresh.db"
    assert run_cli("scan", store=url).exit_code == 3
    # its directory does not exist either: a typo unless --create says otherwise
    assert run_cli("admin", "init", store=url).exit_code == 3
    assert not os.path.exists(tmp_path / "sub")
    result = run_cli("--create", "admin", "init", store=url)
    assert result.exit_code == 0 and url in result.stdout
    assert os.path.exists(tmp_path / "sub" / "fresh.db")
    scanned = run_cli("scan", "--format", "json", store=url)
    assert scanned.exit_code == 0
    assert [r["key"] for r in json.loads(scanned.stdout)] == ["v|format"]  # only its format
    stats = json.loads(run_cli("stats", "--format", "json", store=url).stdout)
    assert stats["rows"] == 1 and stats["runs"] == 0


def test_runs_fixture_is_what_the_admin_tests_assume():
    # purge counts above rely on these start times and shared sets
    assert [r[1] - T0 for r in RUNS] == [0, 100_000, 200_000, 300_000]
