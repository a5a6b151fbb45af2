"""Export → record reproduces a run exactly: same run id, program, start and
operation-set checksum, through the CLI (`fll export --format openlineage`,
`fll record`) and through `POST /api/v1/lineage`."""
from __future__ import annotations

import json

from click.testing import CliRunner
from fastapi.testclient import TestClient

from fll import open_store
from fll.cli import main
from fll.server import create_app
from tests.lineage_examples import cdap_example

# a track() job's program has no "/": exported as job fll/customer_revenue
RUN, PROGRAM, START = "local-1700000000000-7", "customer_revenue", 1_700_000_000_000


def _store(url: str) -> str:
    with open_store(url) as s:
        s.record(cdap_example(), RUN, START, PROGRAM)
    return url


def _export(url: str, dataset: str) -> list[dict]:
    r = CliRunner().invoke(main, ["--store", url, "export", dataset, "--format", "openlineage"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_an_exported_run_recorded_into_a_fresh_store_is_the_same_run(tmp_path):
    src = _store(f"sqlite:///{tmp_path}/src.db")
    [event] = _export(src, "myns:another_file")
    assert event["job"] == {"namespace": "fll", "name": PROGRAM}
    file = tmp_path / "events.json"
    file.write_text(json.dumps([event]))
    dst = f"sqlite:///{tmp_path}/dst.db"
    r = CliRunner().invoke(main, ["--store", dst, "record", str(file)])
    assert r.exit_code == 0, r.stderr
    with open_store(src) as a, open_store(dst) as b:
        assert b.run(RUN) == a.run(RUN)
        assert b.run(RUN).program == PROGRAM


def test_re_sending_an_export_to_its_own_store_is_accepted_and_changes_nothing(tmp_path):
    src = _store(f"sqlite:///{tmp_path}/src.db")
    [event] = _export(src, "myns:another_file")
    file = tmp_path / "events.json"
    file.write_text(json.dumps(event))
    r = CliRunner().invoke(main, ["--store", src, "record", str(file)])
    assert r.exit_code == 0, r.stderr
    assert "0 new run(s), 1 already present" in r.stderr
    with open_store(src) as s, TestClient(create_app(s)) as c:
        before = s.run(RUN)
        r = c.post("/api/v1/lineage", json=event)
        assert r.status_code == 200, r.text
        assert s.run(RUN) == before


def test_fll_record_makes_one_run_of_a_run_s_events_with_the_union_of_their_lineage(tmp_path):
    from .test_run_cycle import OUT, event
    rid = "0190f1c2-7a3b-7cde-8f01-23456789abcd"
    file = tmp_path / "events.jsonl"
    file.write_text("\n".join(json.dumps(e) for e in (
        event(rid, "START", ["a"], "2024-05-01T10:00:00Z"),
        event(rid, "COMPLETE", ["b"], "2024-05-01T10:05:00Z"))))
    url = f"sqlite:///{tmp_path}/rec.db"
    r = CliRunner().invoke(main, ["--store", url, "record", str(file)])
    assert r.exit_code == 0, r.stderr
    with open_store(url) as s:
        assert s.fields(OUT, 0, 2**62) == ["a", "b"]
        assert s.run(rid).start_ms == 1714557600000


def test_operations_travel_in_the_export_only_when_the_facets_cannot_give_them_back(tmp_path):
    from fll.openlineage import export_events, run_event_to_lineage

    from .test_run_cycle import OUT, event
    src = _store(f"sqlite:///{tmp_path}/src.db")
    [cdap] = _export(src, "myns:another_file")
    assert "operations" in cdap["run"]["facets"]["fllRun"]
    with open_store(src) as s:
        info, rid, start, program = run_event_to_lineage(
            event("0190f1c2-7a3b-7cde-8f01-23456789abcd", "COMPLETE", ["a", "b"]))
        s.record(info, rid, start, program)
        [ol] = export_events(s, OUT, 0, 2**62)
    assert "operations" not in ol["run"]["facets"]["fllRun"]
    assert run_event_to_lineage(ol)[0] == info
