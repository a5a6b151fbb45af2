"""`fll record` and `fll export`: the run file shape, OpenLineage events, round trips."""
from __future__ import annotations

import json

from fll.openlineage import export_run_id

import pytest

from fll import EndPoint, EndPointField, open_store
from tests.cli.conftest import T0, A, B, C
from tests.lineage_examples import cdap_example, chain


def _record_doc(run_id: str, info, **time) -> dict:
    return {"run_id": run_id, "program": "p", "operations": info.to_dict()["operations"],
            **time}


def test_record_stores_a_run_file_and_is_idempotent(run_cli, tmp_path):
    url = f"sqlite:///{tmp_path}/new.db"
    file = tmp_path / "run.json"
    file.write_text(json.dumps(_record_doc("r1", cdap_example(), start_time_ms=T0)))
    first = run_cli("record", str(file), "--format", "json", store=url)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["recorded"] == 1
    again = json.loads(run_cli("record", str(file), "--format", "json", store=url).stdout)
    assert again["recorded"] == 0 and again["unchanged"] == 1
    with open_store(url) as store:
        run = store.run("r1")
        assert run.start_ms == T0 and run.program == "p"
        assert run.checksum == cdap_example().checksum
        name = EndPointField(EndPoint("myns", "another_file"), "name")
        assert store.incoming(name, 0, T0 + 1) == {EndPointField(EndPoint("ns", "endpoint1"),
                                                                 "body")}


def test_record_reads_a_list_from_stdin_with_relative_and_iso_start_times(run_cli, tmp_path):
    url = f"sqlite:///{tmp_path}/new.db"
    docs = [_record_doc("a", chain(A, B, ["id"]), start="2023-11-14T22:13:20Z"),
            _record_doc("b", chain(B, C, ["id"]), start="now-1h")]
    result = run_cli("record", "-", store=url, input=json.dumps(docs))
    assert result.exit_code == 0, result.output
    with open_store(url) as store:
        assert store.run("a").start_ms == T0
        assert store.run("b").start_ms > T0


def test_record_takes_run_id_and_start_from_options_for_a_bare_operation_set(run_cli, tmp_path):
    url = f"sqlite:///{tmp_path}/new.db"
    file = tmp_path / "ops.json"
    file.write_text(json.dumps(cdap_example().to_dict()))  # {"checksum", "operations"}
    missing = run_cli("record", str(file), store=url)
    assert missing.exit_code == 2 and "run id" in missing.stderr
    ok = run_cli("record", str(file), "--run-id", "given", "--start", "1700000000",
                 "--program", "cli", store=url)
    assert ok.exit_code == 0, ok.output
    with open_store(url) as store:
        assert store.run("given") == ("given", T0, "cli", cdap_example().checksum)


_GOOD = json.dumps(_record_doc("good", cdap_example(), start_time_ms=T0))
BAD_FILES = [  # (file content, text the error line must hold)
    ("{not json", "not JSON"),
    (_GOOD + "\n{broken", "line 2 column 2"),
    (f'[{_GOOD}, {{"run_id": "r", "start_time_ms": 1, "operations": [{{"type": "READ"}}]}}]',
     "bad.json[1]: operations[0]: missing 'name'"),
    (f'[{_GOOD}, {{"run_id": "r", "operations": []}}]', "no start time"),
    (f'[{_GOOD}, {{"run_id": "r", "start_time_ms": "soon", "operations": []}}]',
     "start_time_ms must be integer"),
    (f'[{_GOOD}, {{"run_id": "r", "start": [1], "operations": []}}]', "start must be a time"),
    (f'[{_GOOD}, {{"start": "now", "operations": []}}]', "no run id"),
    (f'[{_GOOD}, 42]', "expected an object"),
    ("[]", "nothing to record"),
]


@pytest.mark.parametrize("content, message", BAD_FILES)
def test_record_of_a_bad_file_exits_2_naming_the_file_and_stores_nothing(run_cli, tmp_path,
                                                                         content, message):
    url = f"sqlite:///{tmp_path}/new.db"
    file = tmp_path / "bad.json"
    file.write_text(content)
    result = run_cli("record", str(file), store=url)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fll record: error: ") and str(file) in result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "new.db").exists()  # all or nothing: not even created


def test_export_json_round_trips_through_record(run_cli, lineage_store, tmp_path):
    exported = run_cli("export", "ns:B:x", "--format", "json", store=lineage_store)
    assert exported.exit_code == 0
    docs = json.loads(exported.stdout)
    assert [d["run_id"] for d in docs] == ["r-bc-2", "r-bc", "r-ab"]
    file = tmp_path / "export.json"
    file.write_text(exported.stdout)
    copy = f"sqlite:///{tmp_path}/copy.db"
    assert run_cli("record", str(file), store=copy).exit_code == 0
    again = json.loads(run_cli("export", "ns:B:x", "--format", "json", store=copy).stdout)
    assert again == docs


def test_export_openlineage_events_carry_column_lineage_and_record_back(run_cli, lineage_store,
                                                                        tmp_path):
    result = run_cli("export", "myns:another_file", "--format", "openlineage",
                     store=lineage_store)
    assert result.exit_code == 0, result.output
    events = json.loads(result.stdout)
    assert len(events) == 1
    event = events[0]
    # the run id goes out as a UUID (the spec's format), the original in fllRun
    assert event["run"]["runId"] == export_run_id("run-cdap") and event["eventType"] == "COMPLETE"
    assert event["run"]["facets"]["fllRun"]["runId"] == "run-cdap"
    facet = event["outputs"][0]["facets"]["columnLineage"]
    assert {(f["namespace"], f["name"], f["field"])
            for f in facet["fields"]["name"]["inputFields"]} == {("ns", "endpoint1", "body")}
    # a START event without facets for the same run is skipped, its time kept
    start_event = {**{k: event[k] for k in ("run", "job", "producer", "schemaURL")},
                   "eventType": "START", "eventTime": "2023-11-14T22:13:19Z",
                   "inputs": [], "outputs": []}
    file = tmp_path / "events.jsonl"
    file.write_text(json.dumps(start_event) + "\n" + json.dumps(event) + "\n")
    copy = f"sqlite:///{tmp_path}/copy.db"
    recorded = run_cli("record", str(file), store=copy)
    assert recorded.exit_code == 0, recorded.output
    assert "skipped" in recorded.stderr
    with open_store(copy) as store:
        run = store.run("run-cdap")
        assert run.start_ms == T0 - 1000
        name = EndPointField(EndPoint("myns", "another_file"), "name")
        assert store.incoming(name, 0, T0) == {EndPointField(EndPoint("ns", "endpoint1"),
                                                             "body")}


def test_export_lines_writes_one_json_document_per_line(run_cli, lineage_store):
    out = run_cli("export", "ns:C", "--lines", store=lineage_store).stdout
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["run_id"] for d in docs] == ["r-bc-2", "r-bc"]


def test_export_of_an_unknown_dataset_exits_1(run_cli, lineage_store):
    result = run_cli("export", "ns:nope", store=lineage_store)
    assert result.exit_code == 1 and "dataset ns:nope not found" in result.stderr


def test_record_into_a_directory_that_does_not_exist_is_refused_unless_create(run_cli,
                                                                               tmp_path):
    """A typo in a directory of the store path is one line and exit 3, and builds
    nothing; ``fll --create`` makes the directory and the store, said once; a new
    file in an existing directory is a first start, said once too."""
    file = tmp_path / "run.json"
    file.write_text(json.dumps(_record_doc("r1", cdap_example(), start_time_ms=T0)))
    typo = f"sqlite:///{tmp_path}/typo/nope.db"
    refused = run_cli("record", str(file), store=typo)
    assert refused.exit_code == 3
    assert refused.stderr.splitlines() == [
        f"fll record: error: store {typo}: directory {tmp_path}/typo does not exist (a typo "
        f"in the store path?); give --create to create it and a new store"]
    assert not (tmp_path / "typo").exists()
    created = run_cli("--create", "record", str(file), store=typo)
    assert created.exit_code == 0, created.output
    assert created.stderr.count("created a new, empty store") == 1
    again = run_cli("record", str(file), store=typo)
    assert again.exit_code == 0 and "created" not in again.stderr
    fresh = run_cli("record", str(file), store=f"sqlite:///{tmp_path}/fresh.db")
    assert fresh.exit_code == 0 and fresh.stderr.count("created a new, empty store") == 1
    init = run_cli("admin", "init", store=f"sqlite:///{tmp_path}/other/typo.db")
    assert init.exit_code == 3 and "does not exist" in init.stderr
