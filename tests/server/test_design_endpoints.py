"""The seed design's paths: multi-level field maps, one field's detailed lineage,
dataset properties; plus time handling shared by every route."""
from __future__ import annotations

import time

import pytest

from .conftest import v3
from .fixtures import AB_START_S, BC_START_S, HR_START_S

ALL = "start=0&end=now"
EMP = ("MyNamespace", "Employee Data")


def _maps(body):
    return {(m["source"]["name"], m["destination"]["name"]):
            [(f["from"], f["to"]) for f in m["fieldmap"]] for m in body}


def test_dataset_field_lineage_of_the_middle_dataset_goes_both_ways(client):
    r = client.get(v3("chain", "B", f"/fields/lineage?{ALL}"))
    assert r.status_code == 200
    assert _maps(r.json()) == {
        ("A", "B"): [("x", "x2"), ("y", "x2"), ("y", "y")],
        ("B", "C"): [("x2", "z"), ("y", "w")]}
    assert r.json()[0]["source"] == {"namespace": "chain", "name": "A"}


def test_dataset_field_lineage_tags_each_pair_and_can_hide_indirect_ones(client):
    body = client.get(v3("chain", "B", f"/fields/lineage?{ALL}")).json()
    kinds = {(m["source"]["name"], f["from"], f["to"]): f.get("kind")
             for m in body for f in m["fieldmap"]}
    assert kinds[("A", "y", "x2")] == "INDIRECT"
    assert kinds[("A", "x", "x2")] == "DIRECT"
    hidden = client.get(v3("chain", "B", f"/fields/lineage?indirect=hide&{ALL}")).json()
    assert ("y", "x2") not in _maps(hidden)[("A", "B")]
    assert ("x", "x2") in _maps(hidden)[("A", "B")]


@pytest.mark.parametrize("level, pairs", [(1, {("B", "C")}), (2, {("A", "B"), ("B", "C")})])
def test_dataset_field_lineage_is_multi_level_up_to_level(client, level, pairs):
    r = client.get(v3("chain", "C", f"/fields/lineage?level={level}&{ALL}"))
    assert set(_maps(r.json())) == pairs


def test_dataset_field_lineage_cuts_cycles(client, seeded):
    from fll import EndPoint, FieldLineageInfo, InputField, ReadOperation, WriteOperation
    a, c = EndPoint("chain", "A"), EndPoint("chain", "C")
    back = FieldLineageInfo([ReadOperation("r", "", c, ("z",)),
                             WriteOperation("w", "", a, (InputField("r", "z"),))])
    seeded.record(back, "run-ca", 4_000_000, "chain/ca")  # C → A closes the loop
    r = client.get(v3("chain", "A", f"/fields/lineage?level=100&{ALL}"))
    assert r.status_code == 200
    assert set(_maps(r.json())) == {("A", "B"), ("B", "C"), ("C", "A")}
    r = client.get(v3("chain", "A", f"/lineage/fields/x?direction=outgoing&level=100&{ALL}"))
    got = {(g["dataset"]["dataset"], tuple(g["fields"])) for g in r.json()["outgoing"]}
    # C.z flows back into A as A.z (a new field); A.x itself is never repeated
    assert got == {("B", ("x2",)), ("C", ("z",)), ("A", ("z",))}
    r = client.get("/api/v1/column-lineage?nodeId=datasetField:chain:A:z&depth=100")
    assert r.status_code == 200
    ids = [n["id"] for n in r.json()["graph"]]
    assert len(ids) == len(set(ids))


def test_field_detail_backward_for_id_keeps_only_its_own_paths(client):
    r = client.get(v3(*EMP, f"/fields/ID/lineage?direction=backward&{ALL}"))
    assert r.status_code == 200
    body = r.json()
    assert body["startTimeInSeconds"] == 0
    assert abs(body["endTimeInSeconds"] - time.time()) < 60
    [path] = body["paths"]
    ids = {n["id"] for n in path["nodes"]}
    assert ids == {"HR File Reader.body", "Person File Reader.body",
                   "HR File Parser.Employee_Name", "HR File Parser.Dept_Name",
                   "Person File Parser.SSN", "GenerateID.ID", "Employee Data Writer.ID"}
    nodes = {n["id"]: n for n in path["nodes"]}
    assert nodes["HR File Reader.body"]["sourceEndPoint"] == {"namespace": "MyNamespace",
                                                              "name": "HR File"}
    assert nodes["Employee Data Writer.ID"]["destinationEndPoint"]["name"] == "Employee Data"
    assert nodes["GenerateID.ID"]["label"] == "ID"
    assert {"from": "Person File Parser.SSN", "to": "GenerateID.ID",
            "operation": "GenerateID"} in path["connections"]
    assert all("Salary" not in c["to"] for c in path["connections"])
    assert path["runs"] == ["run-hr-1"]
    assert [op["name"] for op in path["operations"]][-1] == "Employee Data Writer"


def test_field_detail_forward_follows_the_read_field(client):
    r = client.get(v3("MyNamespace", "Person File", f"/fields/body/lineage?direction=forward&{ALL}"))
    [path] = r.json()["paths"]
    assert {c["to"] for c in path["connections"]} == {
        "Person File Parser.SSN", "GenerateID.ID", "Employee Data Writer.ID"}


def test_field_detail_rejects_an_unknown_direction(client):
    r = client.get(v3(*EMP, f"/fields/ID/lineage?direction=sideways&{ALL}"))
    assert r.status_code == 400 and "direction" in r.json()["error"]


def test_properties_list_one_entry_per_run(client, seeded):
    from .fixtures import hr_employee_info
    seeded.record(hr_employee_info(), "run-hr-2", (HR_START_S + 10) * 1000, "hr-pipeline")
    r = client.get(v3("MyNamespace", "HR File", f"/properties?{ALL}"))
    assert r.status_code == 200
    assert r.json() == [
        {"programRun": "run-hr-2", "properties": {"inputPath": "/data/2017/hr", "regex": "*.csv"},
         "state": "COMPLETE"},
        {"programRun": "run-hr-1", "properties": {"inputPath": "/data/2017/hr", "regex": "*.csv"},
         "state": "COMPLETE"}]


# -- time ---------------------------------------------------------------------------

def test_end_is_exclusive_and_start_inclusive(client):
    url = v3("chain", "B", "/lineage/fields/x2?direction=incoming&start={}&end={}")
    assert client.get(url.format(0, AB_START_S)).json()["incoming"] == []
    assert client.get(url.format(0, AB_START_S + 1)).json()["incoming"] != []
    assert client.get(url.format(AB_START_S, AB_START_S + 1)).json()["incoming"] != []
    assert client.get(url.format(AB_START_S + 1, BC_START_S)).json()["incoming"] == []


def test_relative_times_work(client, seeded):
    from .fixtures import bc_info
    seeded.record(bc_info(), "run-bc-now", int(time.time() * 1000) - 3_600_000, "chain/bc")
    url = v3("chain", "C", "/lineage/fields/z/operations?direction=incoming&start={}&end={}")
    recent = client.get(url.format("now-1d", "now")).json()["incoming"]
    assert [p["run"] for p in recent[0]["programs"]] == ["run-bc-now"]
    assert client.get(url.format("now-10m", "now")).json()["incoming"] == []
    both = client.get(url.format("0", "now%2B1h")).json()["incoming"]
    assert [p["run"] for p in both[0]["programs"]] == ["run-bc-now", "run-bc"]


@pytest.mark.parametrize("query, word", [
    ("end=now", "start"), ("start=0", "end"), ("start=5&end=1", "start"),
    ("start=-5&end=now", "start"), ("start=yesterday&end=now", "start"),
    ("start=0&end=now-3x", "end"),
])
def test_bad_or_missing_times_are_bad_requests_naming_the_parameter(client, query, word):
    r = client.get(v3("chain", "B", f"/properties?{query}"))
    assert r.status_code == 400
    assert word in r.json()["error"]
