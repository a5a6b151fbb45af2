"""``fll tag`` and ``fll diff`` end to end through the CLI, and the tag rows
through fsck, migrate and purge."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fll import EndPoint, open_store
from fll import rowkeys as rk
from fll.cli import main
from fll.store import LineageStore, admin, open_table
from fll.store.tags import Tags

from .jobs import COPY, FILTER, HASH, SUM, UPPER, job

DAY_S = 86_400
T0 = 1_700_000_000_000
RAW = EndPoint("db", "raw")


@pytest.fixture
def url(tmp_path) -> str:
    """The README's example: raw.ssn hashed in one job, summed in another,
    copied in a third; a day later the hash job's SQL changed (no hash)."""
    u = f"sqlite:///{tmp_path}/g.db"
    with open_store(u) as s:
        s.record(job(RAW, EndPoint("db", "hashed"), {"h": [("ssn", HASH)], "id": [("id", COPY)]}),
                 "r1", T0, "hash")
        s.record(job(RAW, EndPoint("db", "summed"), {"total": [("ssn", SUM)]}), "r2", T0 + 1000,
                 "sum")
        s.record(job(RAW, EndPoint("db", "copied"), {"ssn": [("ssn", COPY), ("id", FILTER)]}),
                 "r3", T0 + 2000, "copy")
        s.record(job(RAW, EndPoint("db", "hashed"), {"h": [("ssn", UPPER)], "id": [("id", COPY)]}),
                 "r4", T0 + DAY_S * 1000, "hash")
    return u


def fll(url: str, *args: str):
    result = CliRunner().invoke(main, ["--store", url, *args], catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


def test_tag_add_show_remove(url):
    r = fll(url, "tag", "add", "db:raw:ssn", "pii", "--by", "alice")
    assert r.exit_code == 0 and r.output == "tagged db:raw:ssn PII\n"
    assert fll(url, "tag", "add", "db:raw:ssn", "PII").output == "already tagged db:raw:ssn PII\n"
    r = fll(url, "tag", "show", "pii", "--end", str(T0 // 1000 + 3), "--format", "json")
    assert r.exit_code == 0
    rows = json.loads(r.output)
    assert [(x["field"], x["direct"], x["stopped"]) for x in rows] == [
        ("db:copied:ssn", False, False), ("db:raw:ssn", True, False),
        ("db:hashed:h", False, True), ("db:summed:total", False, True)]
    assert rows[0]["origins"] == ["db:raw:ssn"] and rows[0]["path"] == ["db:raw:ssn",
                                                                         "db:copied:ssn"]
    assert rows[2]["transformations"] == [{"type": "DIRECT", "subtype": "TRANSFORMATION",
                                           "masking": True}]
    text = fll(url, "tag", "show", "PII", "--end", str(T0 // 1000 + 3)).output
    assert "PII: 2 field(s) carry it, stopped at 2" in text
    assert "stopped: db:hashed:h  (DIRECT/TRANSFORMATION+masked of db:raw:ssn)" in text
    listed = json.loads(fll(url, "tag", "list", "--format", "json").output)
    assert listed["tags"][0]["name"] == "PII"
    assert listed["tags"][0]["taggedAt"][0]["taggedBy"] == "alice"
    assert fll(url, "tag", "remove", "db:raw:ssn", "pii").exit_code == 0
    r = fll(url, "tag", "remove", "db:raw:ssn", "pii")
    assert r.exit_code == 1 and "has no tag PII" in r.output


def test_tag_define_policy_and_dataset_tags(url):
    fll(url, "tag", "add", "db:raw:ssn", "pii")
    r = fll(url, "tag", "define", "pii", "--pass", "masking", "--description", "personal")
    assert r.output == "PII: passes identity, transformation and masking - personal\n"
    rows = json.loads(fll(url, "tag", "show", "PII", "--end", str(T0 // 1000 + 3),
                          "--format", "json").output)
    assert [x["field"] for x in rows if not x["stopped"]] == ["db:copied:ssn", "db:hashed:h",
                                                             "db:raw:ssn"]
    assert fll(url, "tag", "define", "pii", "--stop-all", "--pass", "masking").exit_code == 2
    assert fll(url, "tag", "add", "db:raw", "gold", "--on-dataset").output == \
        "tagged db:raw GOLD\n"


def test_bad_references_are_one_line_errors(url):
    r = fll(url, "tag", "add", "db:raw:nope", "pii")
    assert r.exit_code == 1 and "field 'nope' not found" in r.output
    r = fll(url, "tag", "show", "nope")
    assert r.exit_code == 1 and "tag 'NOPE' is unknown" in r.output
    r = fll(url, "tag", "add", "db:raw:ssn", " ")
    assert r.exit_code == 2 and "tag must be a non-empty name" in r.output


def test_diff_of_a_job_whose_sql_changed(url):
    day = T0 // 1000 + DAY_S
    r = fll(url, "diff", "db:hashed", "--before", f"..{day}", "--after", f"{day}..")
    assert r.exit_code == 0
    assert r.output == ("~ db:raw:ssn -> db:hashed:h [DIRECT/TRANSFORMATION+masked] => "
                        "[DIRECT/TRANSFORMATION]\n0 added, 0 removed, 1 changed\n")
    got = json.loads(fll(url, "diff", "db:hashed:h", "--before", f"..{day}", "--after",
                         f"{day}..", "--format", "json").output)
    assert got["changed"][0]["edge"] == {"source": "db:raw:ssn", "destination": "db:hashed:h"}
    # the copy job did not run in the later range: its edges are not in its lineage
    assert fll(url, "diff", "db:copied", "--before", f"..{day}", "--after",
               f"{day}..").output.endswith("0 added, 2 removed, 0 changed\n")
    r = fll(url, "diff", "db:hashed", "--before", "yesterday", "--after", "now-1d..now")
    assert r.exit_code == 2 and "--before must look like START..END" in r.output
    assert fll(url, "diff", "db:nope", "--before", "..1", "--after", "1..").exit_code == 1


def test_fsck_checks_tag_rows_and_migrate_copies_them(url, tmp_path):
    fll(url, "tag", "add", "db:raw:ssn", "pii")
    fll(url, "tag", "add", "db:raw", "gold", "--on-dataset")
    r = fll(url, "admin", "fsck")
    assert r.exit_code == 0 and r.output.startswith("clean")
    dst = f"sqlite:///{tmp_path}/copy.db"
    assert fll(url, "admin", "migrate", "--from", url, "--to", dst).exit_code == 0
    with open_store(dst) as copy:
        assert sorted((a.name, a.field, a.tag) for a in Tags(copy.table).assignments()) == \
            [("raw", "", "GOLD"), ("raw", "ssn", "PII")]
    # purge keeps tags (they are not lineage of a time range)
    assert fll(url, "admin", "purge", "--before", "now").exit_code == 0
    with open_store(url) as s:
        assert len(Tags(s.table).assignments()) == 2
    # a corrupt tag row is reported, not changed
    table = open_table(url)
    try:
        table.put({rk.tagged("db", "raw", "x", "BAD"): {"at": b"yesterday"}})
        report = admin.fsck(table)
        assert [bytes(k) for k in report.corrupt] == [rk.tagged("db", "raw", "x", "BAD")]
    finally:
        table.close()


def test_scan_shows_tag_rows(url):
    fll(url, "tag", "add", "db:raw:ssn", "pii", "--by", "alice")
    out = fll(url, "scan", "--prefix", "t|", "--format", "json").output
    rows = [json.loads(line.lstrip(",")) for line in out.splitlines() if "{" in line]
    assert [(r["kind"], r["namespace"], r["name"], r["field"], r["tag"], r["columns"]["by"])
            for r in rows] == [("tagged", "db", "raw", "ssn", "PII", "alice")]


def test_a_store_tagged_opens_as_lineage(url):
    fll(url, "tag", "add", "db:raw:ssn", "pii")
    with open_store(url) as s:
        assert isinstance(s, LineageStore) and s.datasets()
