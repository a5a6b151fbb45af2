"""The four CDAP v3 lineage/fields paths, answered over HTTP on the seed's HR example
and the A → B → C chain."""
from __future__ import annotations

import pytest

from .conftest import v3
from .fixtures import AB_START_S, BC_START_S, HR_START_S

ALL = "start=0&end=now"
EMP = ("MyNamespace", "Employee Data")


def test_fields_lists_every_written_field_sorted(client):
    r = client.get(v3(*EMP, f"/lineage/fields?{ALL}"))
    assert r.status_code == 200
    assert r.json() == ["Dept_Name", "Employee_Name", "ID", "Salary", "Start_Date"]


def test_fields_prefix_is_case_insensitive(client):
    r = client.get(v3(*EMP, f"/lineage/fields?prefix=dEpT&{ALL}"))
    assert r.json() == ["Dept_Name"]


def test_fields_include_current_flags_fields_without_lineage_in_the_range(client):
    # the chain's C was written at 3000 s; in [0, 2500 s) C has no lineage but its fields exist
    r = client.get(v3("chain", "C", "/lineage/fields?includeCurrent=true&start=0&end=2500"))
    assert r.json() == [{"name": "w", "lineage": False}, {"name": "z", "lineage": False}]
    r = client.get(v3("chain", "C", f"/lineage/fields?includeCurrent=true&{ALL}"))
    assert r.json() == [{"name": "w", "lineage": True}, {"name": "z", "lineage": True}]


def test_field_incoming_of_id_names_both_source_files(client):
    r = client.get(v3(*EMP, f"/lineage/fields/ID?direction=incoming&{ALL}"))
    assert r.status_code == 200
    assert r.json() == {
        "incoming": [{"dataset": {"namespace": "MyNamespace", "dataset": "HR File"},
                      "fields": ["body"]},
                     {"dataset": {"namespace": "MyNamespace", "dataset": "Person File"},
                      "fields": ["body"]}],
        "outgoing": None}


def test_field_outgoing_of_hr_body_reaches_every_employee_field(client):
    r = client.get(v3("MyNamespace", "HR File", f"/lineage/fields/body?direction=outgoing&{ALL}"))
    assert r.json() == {"incoming": None, "outgoing": [
        {"dataset": {"namespace": "MyNamespace", "dataset": "Employee Data"},
         "fields": ["Dept_Name", "Employee_Name", "ID", "Salary", "Start_Date"]}]}


def test_field_both_directions_with_one_level_stops_at_the_neighbour_dataset(client):
    r = client.get(v3("chain", "B", f"/lineage/fields/x2?direction=both&{ALL}"))
    body = r.json()
    # tagged edges add one key per group: the kind of each field's edge
    y_tags = body["incoming"][0].pop("transformations")["y"]
    assert [(t["type"], t["subtype"]) for t in y_tags] == [("INDIRECT", "FILTER")]
    body["outgoing"][0].pop("transformations")
    assert body == {
        "incoming": [{"dataset": {"namespace": "chain", "dataset": "A"}, "fields": ["x", "y"]}],
        "outgoing": [{"dataset": {"namespace": "chain", "dataset": "C"}, "fields": ["z"]}]}


def test_field_summary_with_indirect_hidden_drops_the_filter_column(client):
    r = client.get(v3("chain", "B", f"/lineage/fields/x2?direction=incoming&indirect=hide&{ALL}"))
    assert r.status_code == 200
    assert [g["fields"] for g in r.json()["incoming"]] == [["x"]]
    bad = client.get(v3("chain", "B", f"/lineage/fields/x2?direction=incoming&indirect=no&{ALL}"))
    assert bad.status_code == 400 and "indirect must be show or hide" in bad.text


@pytest.mark.parametrize("level, expected", [
    (1, [("B", ["x2"])]),
    (2, [("A", ["x", "y"]), ("B", ["x2"])]),
    (50, [("A", ["x", "y"]), ("B", ["x2"])]),
])
def test_field_level_walks_further_hops_across_datasets(client, level, expected):
    r = client.get(v3("chain", "C", f"/lineage/fields/z?direction=incoming&level={level}&{ALL}"))
    assert r.status_code == 200
    got = [(g["dataset"]["dataset"], g["fields"]) for g in r.json()["incoming"]]
    assert got == expected


def test_field_level_only_follows_runs_inside_the_range(client):
    # the A → B run (2000 s) is outside [2500 s, now): level 2 cannot reach A
    r = client.get(v3("chain", "C", "/lineage/fields/z?direction=incoming&level=2"
                                    "&start=2500&end=now"))
    assert [g["dataset"]["dataset"] for g in r.json()["incoming"]] == ["B"]


def test_field_direction_is_required(client):
    r = client.get(v3(*EMP, f"/lineage/fields/ID?{ALL}"))
    assert r.status_code == 400
    assert "direction" in r.json()["error"]


def test_level_above_the_hard_cap_is_a_bad_request(client):
    r = client.get(v3(*EMP, f"/lineage/fields/ID?direction=both&level=101&{ALL}"))
    assert r.status_code == 400 and "level" in r.json()["error"]
    r = client.get(v3(*EMP, f"/lineage/fields/ID?direction=both&level=0&{ALL}"))
    assert r.status_code == 400


def test_operations_of_id_are_in_topological_order_with_the_run(client):
    r = client.get(v3(*EMP, f"/lineage/fields/ID/operations?direction=incoming&{ALL}"))
    assert r.status_code == 200
    body = r.json()
    assert body["outgoing"] is None
    [group] = body["incoming"]
    # a run recorded through the store API (no OpenLineage events): COMPLETE
    assert group["programs"] == [{"program": "hr-pipeline", "run": "run-hr-1",
                                  "lastExecutedTimeInSeconds": HR_START_S,
                                  "state": "COMPLETE"}]
    names = [op["name"] for op in group["operations"]]
    assert set(names) == {"HR File Reader", "HR File Parser", "Person File Reader",
                          "Person File Parser", "GenerateID", "Employee Data Writer"}
    pos = {n: i for i, n in enumerate(names)}
    assert pos["HR File Reader"] < pos["HR File Parser"] < pos["GenerateID"]
    assert pos["Person File Parser"] < pos["GenerateID"] < pos["Employee Data Writer"]
    read = group["operations"][pos["HR File Reader"]]
    assert read["inputs"] == {"endPoint": {"namespace": "MyNamespace", "name": "HR File",
                                           "properties": {"inputPath": "/data/2017/hr",
                                                          "regex": "*.csv"}}}
    gen = group["operations"][pos["GenerateID"]]
    assert gen["inputs"]["fields"][2] == {"origin": "Person File Parser", "name": "SSN"}
    assert gen["outputs"] == {"fields": ["ID"]}


def test_operations_of_salary_leave_out_the_person_file(client):
    r = client.get(v3(*EMP, f"/lineage/fields/Salary/operations?direction=incoming&{ALL}"))
    names = [op["name"] for op in r.json()["incoming"][0]["operations"]]
    assert names == ["HR File Reader", "HR File Parser", "Employee Data Writer"]


def test_operations_list_programs_newest_first_per_operation_set(client, seeded):
    from .fixtures import ab_info
    seeded.record(ab_info(), "run-ab-later", (AB_START_S + 500) * 1000, "chain/ab")
    r = client.get(v3("chain", "B", f"/lineage/fields/x2/operations?{ALL}"))
    body = r.json()
    [group] = body["incoming"]
    assert [p["run"] for p in group["programs"]] == ["run-ab-later", "run-ab"]
    assert [p["lastExecutedTimeInSeconds"] for p in group["programs"]] == [AB_START_S + 500,
                                                                          AB_START_S]
    # default direction is both: B.x2 is also read by the B → C run
    assert body["outgoing"][0]["programs"][0]["run"] == "run-bc"
    assert body["outgoing"][0]["programs"][0]["lastExecutedTimeInSeconds"] == BC_START_S


def test_operations_keep_transformation_tags_on_inputs(client):
    r = client.get(v3("chain", "B", f"/lineage/fields/x2/operations?direction=incoming&{ALL}"))
    ops = {op["name"]: op for op in r.json()["incoming"][0]["operations"]}
    assert ops["x2"]["inputs"]["fields"][0]["transformations"] == [
        {"type": "DIRECT", "subtype": "TRANSFORMATION", "description": "upper(x)",
         "masking": False}]


def test_all_field_lineage_groups_relations_by_dataset(client):
    r = client.get(v3(*EMP, "/lineage/allfieldlineage?start=0&end=1600000000"))
    assert r.status_code == 200
    body = r.json()
    assert body["direction"] == "BOTH"
    assert body["start-ts"] == 0 and body["end-ts"] == 1600000000
    assert body["entityId"] == {"namespace": "MyNamespace", "dataset": "Employee Data",
                                "entity": "DATASET"}
    assert body["fields"] == ["Dept_Name", "Employee_Name", "ID", "Salary", "Start_Date"]
    assert body["outgoing"] == []
    person = [g for g in body["incoming"] if g["entityId"]["dataset"] == "Person File"]
    assert person == [{"entityId": {"namespace": "MyNamespace", "dataset": "Person File",
                                    "entity": "DATASET"},
                       "relations": [{"source": "body", "destination": "ID"}]}]
    hr = [g for g in body["incoming"] if g["entityId"]["dataset"] == "HR File"][0]
    assert {x["destination"] for x in hr["relations"]} == {
        "Dept_Name", "Employee_Name", "ID", "Salary", "Start_Date"}


def test_all_field_lineage_outgoing_only_leaves_incoming_null(client):
    r = client.get(v3("chain", "B", f"/lineage/allfieldlineage?direction=outgoing&{ALL}"))
    body = r.json()
    assert body["direction"] == "OUTGOING" and body["incoming"] is None
    assert body["outgoing"] == [{"entityId": {"namespace": "chain", "dataset": "C",
                                              "entity": "DATASET"},
                                 "relations": [{"source": "x2", "destination": "z"},
                                               {"source": "y", "destination": "w"}]}]


@pytest.mark.parametrize("dataset, field, query, status, answer", [
    # lineage in the range: answered from the range alone
    ("C", "z", f"direction=both&{ALL}", 200, None),
    # known (C was written at 3000 s) but no lineage in [0, 2500 s): an empty answer
    ("C", "z", "direction=both&start=0&end=2500", 200,
     {"incoming": [], "outgoing": []}),
    # never read or written: 404 whatever the range
    ("C", "nope", f"direction=both&{ALL}", 404, None),
    ("C", "nope", "direction=incoming&start=0&end=2500", 404, None),
    ("Nowhere", "z", f"direction=both&{ALL}", 404, None),
])
def test_a_field_summary_is_404_only_for_a_field_no_run_ever_touched(
        client, dataset, field, query, status, answer):
    r = client.get(v3("chain", dataset, f"/lineage/fields/{field}?{query}"))
    assert r.status_code == status, r.text
    if answer is not None:
        assert r.json() == answer
    if status == 404:
        assert set(r.json()) == {"error", "status"} and "unknown" in r.json()["error"]
