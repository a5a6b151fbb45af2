"""`GET /api/v1/column-lineage`: Marquez's column-lineage graph, with transformations kept."""
from __future__ import annotations

from urllib.parse import quote

import pytest


def _graph(client, node, **params):
    q = "&".join(f"{k}={v}" for k, v in params.items())
    r = client.get(f"/api/v1/column-lineage?nodeId={quote(node, safe='')}&{q}")
    assert r.status_code == 200, r.text
    return {n["id"]: n for n in r.json()["graph"]}


def test_upstream_graph_of_c_z_walks_back_to_a_with_transformations(client):
    g = _graph(client, "datasetField:chain:C:z")
    assert set(g) == {"datasetField:chain:C:z", "datasetField:chain:B:x2",
                      "datasetField:chain:A:x", "datasetField:chain:A:y"}
    z = g["datasetField:chain:C:z"]
    assert z["type"] == "DATASET_FIELD"
    assert z["data"] == {"namespace": "chain", "dataset": "C", "field": "z", "fieldType": "",
                         "inputFields": [{"namespace": "chain", "dataset": "B", "field": "x2",
                                          "transformations": [{"type": "DIRECT",
                                                               "subtype": "IDENTITY",
                                                               "description": "",
                                                               "masking": False}]}]}
    # Marquez's shape: the node is the origin of each of its edges
    assert z["inEdges"] == [{"origin": "datasetField:chain:C:z",
                             "destination": "datasetField:chain:B:x2"}]
    assert z["outEdges"] == []
    x2 = g["datasetField:chain:B:x2"]["data"]["inputFields"]
    assert [(i["field"], [t["subtype"] for t in i["transformations"]]) for i in x2] == [
        ("x", ["TRANSFORMATION"]), ("y", ["FILTER"])]


def test_depth_counts_field_hops(client):
    assert set(_graph(client, "datasetField:chain:C:z", depth=0)) == {"datasetField:chain:C:z"}
    assert set(_graph(client, "datasetField:chain:C:z", depth=1)) == {
        "datasetField:chain:C:z", "datasetField:chain:B:x2"}


def test_downstream_only_when_asked(client):
    assert set(_graph(client, "datasetField:chain:A:x")) == {"datasetField:chain:A:x"}
    g = _graph(client, "datasetField:chain:A:x", withDownstream="true")
    assert set(g) == {"datasetField:chain:A:x", "datasetField:chain:B:x2",
                      "datasetField:chain:C:z"}
    assert g["datasetField:chain:A:x"]["outEdges"] == [
        {"origin": "datasetField:chain:A:x", "destination": "datasetField:chain:B:x2"}]


def test_dataset_node_id_covers_all_its_fields(client):
    g = _graph(client, "dataset:MyNamespace:Employee Data", depth=1)
    fields = {n["data"]["field"] for n in g.values() if n["data"]["dataset"] == "Employee Data"}
    assert fields == {"ID", "Employee_Name", "Dept_Name", "Salary", "Start_Date"}
    assert "datasetField:MyNamespace:Person File:body" in g


def test_node_ids_with_colons_in_the_namespace_resolve(client, seeded):
    from fll import EndPoint, FieldLineageInfo, InputField, ReadOperation, WriteOperation
    src, dst = EndPoint("postgres://db:5432", "public.t"), EndPoint("s3://bucket", "out:1")
    seeded.record(FieldLineageInfo([ReadOperation("r", "", src, ("a:b",)),
                                    WriteOperation("w", "", dst, (InputField("r", "a:b"),))]),
                  "run-colon", 5_000, None)
    g = _graph(client, "datasetField:s3://bucket:out:1:a:b")
    assert set(g) == {"datasetField:s3://bucket:out:1:a:b",
                      "datasetField:postgres://db:5432:public.t:a:b"}


@pytest.mark.parametrize("node, status", [
    ("", 400), ("table:x:y", 400), ("datasetField:nocolons", 400),
    ("datasetField:chain:Z:x", 404), ("datasetField:chain:A:nope", 404), ("dataset:no:pe", 404),
])
def test_bad_node_ids(client, node, status):
    r = client.get(f"/api/v1/column-lineage?nodeId={quote(node, safe='')}")
    assert r.status_code == status
    assert r.json()["status"] == status


def test_depth_above_the_cap_is_a_bad_request(client):
    r = client.get("/api/v1/column-lineage?nodeId=datasetField:chain:C:z&depth=1000")
    assert r.status_code == 400 and "depth" in r.json()["error"]


def test_a_job_node_id_answers_the_column_lineage_of_what_its_latest_run_wrote(client, seeded):
    g = _graph(client, "job:chain:ab", depth=1)
    assert {n["id"] for n in g.values() if n["data"]["dataset"] == "B"} == {
        "datasetField:chain:B:x2", "datasetField:chain:B:y"}
    assert "datasetField:chain:A:x" in g and "datasetField:chain:C:z" not in g
    # a program without "/" is the job fll:<program>, as export names it
    g = _graph(client, "job:fll:hr-pipeline", depth=0)
    assert len(g) == 5


def test_a_job_with_no_run_is_not_found(client):
    r = client.get("/api/v1/column-lineage?nodeId=job:chain:nope")
    assert r.status_code == 404 and "no run of this job" in r.json()["error"]


def test_indirect_hide_leaves_out_inputs_that_only_filter_and_does_not_walk_past_them(client):
    g = _graph(client, "datasetField:chain:C:z", indirect="hide")
    # A.y only filters the rows of B.x2: neither an edge nor an input field
    assert set(g) == {"datasetField:chain:C:z", "datasetField:chain:B:x2",
                      "datasetField:chain:A:x"}
    x2 = g["datasetField:chain:B:x2"]
    assert [i["field"] for i in x2["data"]["inputFields"]] == ["x"]
    assert x2["inEdges"] == [{"origin": "datasetField:chain:B:x2",
                              "destination": "datasetField:chain:A:x"}]
    shown = _graph(client, "datasetField:chain:C:z", indirect="show")
    assert "datasetField:chain:A:y" in shown
    # downstream too: A.y is copied into B.y (kept) and filters B.x2 (left out)
    down = _graph(client, "datasetField:chain:A:y", depth=2, withDownstream="true",
                  indirect="hide")
    assert "datasetField:chain:B:y" in down and "datasetField:chain:B:x2" not in down
    assert "datasetField:chain:B:x2" in _graph(client, "datasetField:chain:A:y", depth=2,
                                               withDownstream="true")


def test_indirect_takes_show_or_hide_only(client):
    r = client.get("/api/v1/column-lineage?nodeId=datasetField:chain:C:z&indirect=maybe")
    assert r.status_code == 400 and "indirect" in r.text
