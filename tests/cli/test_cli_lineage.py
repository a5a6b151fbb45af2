"""`fll runs`, `fll fields`, `fll lineage` and the renderings of `fll.render`."""
from __future__ import annotations

import json
import re

import pytest

from fll import BadRequest, EndPoint, EndPointField, open_store
from fll.render import (parse_dataset_ref, parse_field_ref, render_dot, render_mermaid,
                        render_tree, walk_lineage)
from tests.cli.conftest import T0, A, B, C, build_store
from tests.lineage_examples import chain


def test_runs_json_lists_the_runs_of_a_dataset_newest_first(run_cli, lineage_store):
    result = run_cli("runs", "ns:B:x", "--format", "json", store=lineage_store)
    assert result.exit_code == 0
    runs = json.loads(result.stdout)
    assert [r["run_id"] for r in runs] == ["r-bc-2", "r-bc", "r-ab"]
    assert runs[-1]["start_ms"] == T0 + 100_000 and runs[-1]["program"] == "ab"


def test_runs_honour_the_time_range_start_inclusive_end_exclusive(run_cli, lineage_store):
    start, end = str((T0 + 200_000) // 1000), str((T0 + 300_000) // 1000)
    runs = json.loads(run_cli("runs", "ns:B:x", "--start", start, "--end", end, "--format",
                              "json", store=lineage_store).stdout)
    assert [r["run_id"] for r in runs] == ["r-bc"]
    written = json.loads(run_cli("runs", "ns:B:x", "--direction", "incoming", "--format",
                                 "json", store=lineage_store).stdout)
    assert [r["run_id"] for r in written] == ["r-ab"]


def test_fields_json_lists_fields_and_filters_by_prefix(run_cli, lineage_store):
    assert json.loads(run_cli("fields", "myns:another_file", "--format", "json",
                              store=lineage_store).stdout) == ["name", "offset"]
    assert run_cli("fields", "myns:another_file", "--prefix", "N",
                   store=lineage_store).stdout == "name\n"


def test_lineage_json_follows_fields_across_datasets(run_cli, lineage_store):
    result = run_cli("lineage", "ns:C:id", "--format", "json", store=lineage_store)
    assert result.exit_code == 0
    g = json.loads(result.stdout)
    assert g["field"]["dataset"] == "C" and g["direction"] == "incoming"
    assert {(e["source"], e["destination"]) for e in g["edges"]} == {
        ("ns:B:x:id", "ns:C:id"), ("ns:A:id", "ns:B:x:id")}
    hops = {n["id"]: n["hops"] for n in g["nodes"]}
    assert hops == {"ns:C:id": 0, "ns:B:x:id": 1, "ns:A:id": 2}


def test_lineage_depth_cuts_the_walk_and_marks_the_cut(run_cli, lineage_store):
    g = json.loads(run_cli("lineage", "ns:C:id", "--depth", "1", "--format", "json",
                           store=lineage_store).stdout)
    assert [(e["source"], e["destination"]) for e in g["edges"]] == [("ns:B:x:id", "ns:C:id")]
    assert [n["id"] for n in g["nodes"] if n.get("truncated")] == ["ns:B:x:id"]


def test_lineage_time_range_uses_only_runs_inside_it(run_cli, lineage_store):
    # before r-ab ran, ns:B:x had no writer: the walk stops at B
    g = json.loads(run_cli("lineage", "ns:C:id", "--start", str((T0 + 200_000) // 1000),
                           "--format", "json", store=lineage_store).stdout)
    assert {e["source"] for e in g["edges"]} == {"ns:B:x:id"}


def test_lineage_outgoing_tree_of_a_cdap_source_field(run_cli, lineage_store):
    result = run_cli("lineage", "ns:endpoint1:body", "--direction", "outgoing",
                     store=lineage_store)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ns:endpoint1:body  (outgoing")
    # a small tree lists the run of each hop under the field it wrote
    assert lines[1:] == ["└── → myns:another_file:name",
                         "        runs: run-cdap (2023-11-14T22:13:20Z, cdap)"]


def test_lineage_both_directions_tree_shows_both_sides(run_cli, lineage_store):
    out = run_cli("lineage", "ns:B:x:v", "--direction", "both", store=lineage_store).stdout
    assert "└── ← ns:A:v" in out and "└── → ns:C:v" in out


def test_lineage_dot_has_the_expected_nodes_and_edges(run_cli, lineage_store):
    out = run_cli("lineage", "ns:C:v", "--format", "dot", store=lineage_store).stdout
    assert out.startswith("digraph") and out.rstrip().endswith("}")
    edges = set(re.findall(r'^\s*"([^"]+)" -> "([^"]+)";', out, re.M))
    assert edges == {("ns:B:x:v", "ns:C:v"), ("ns:A:v", "ns:B:x:v")}
    nodes = set(re.findall(r'^\s*"([^"]+)" \[label=', out, re.M))
    assert nodes == {"ns:A:v", "ns:B:x:v", "ns:C:v"}
    assert re.search(r'label="ns:B:x";', out)  # the dataset cluster


def test_lineage_mermaid_has_a_node_per_field_and_an_edge_per_hop(run_cli, lineage_store):
    out = run_cli("lineage", "ns:C:v", "--format", "mermaid", store=lineage_store).stdout
    assert out.splitlines()[0] == "flowchart LR"
    dataset_of: dict[str, str] = {}
    group = None
    for line in out.splitlines():
        if m := re.match(r'^\s+subgraph d\d+\["([^"]*)"\]$', line):
            group = m.group(1)
        elif m := re.match(r'^\s+(n\d+)\["([^"]*)"\]$', line):
            dataset_of[m.group(1)] = f"{group}:{m.group(2)}"
    assert sorted(dataset_of.values()) == ["ns:A:v", "ns:B:x:v", "ns:C:v"]
    edges = {(dataset_of[a], dataset_of[b])
             for a, b in re.findall(r"^\s+(n\d+) --> (n\d+)$", out, re.M)}
    assert edges == {("ns:A:v", "ns:B:x:v"), ("ns:B:x:v", "ns:C:v")}
    root = re.search(r"^\s+class (n\d+) root$", out, re.M).group(1)
    assert dataset_of[root] == "ns:C:v"


def test_lineage_of_an_unknown_field_exits_1(run_cli, lineage_store):
    result = run_cli("lineage", "ns:C:nope", store=lineage_store)
    assert result.exit_code == 1 and "field 'nope' not found" in result.stderr


@pytest.mark.parametrize("text, expected", [
    ("ns:ds:f", ("ns", "ds", "f")),
    ("ns:a:b:c:f", ("ns", "a:b:c", "f")),
    ("hdfs:/data/x.csv:col", ("hdfs", "/data/x.csv", "col")),
])
def test_field_references_split_at_the_first_and_last_colon(text, expected):
    f = parse_field_ref(text)
    assert (f.endpoint.namespace, f.endpoint.name, f.field) == expected


@pytest.mark.parametrize("text", ["ns", "ns:f", ":ds:f", "ns::f", "ns:ds:"])
def test_malformed_field_references_are_bad_requests(text):
    with pytest.raises(BadRequest, match="NAMESPACE:DATASET"):
        parse_field_ref(text)


def test_dataset_references_keep_colons_in_the_name():
    assert parse_dataset_ref("ns:B:x") == EndPoint("ns", "B:x")
    with pytest.raises(BadRequest):
        parse_dataset_ref("justaname")


@pytest.fixture
def cyclic_store(tmp_path):
    """ns:A → ns:B:x → ns:C → ns:A (three runs): lineage with a cycle across runs."""
    url = build_store(f"sqlite:///{tmp_path}/cycle.db", [
        ("ab", T0, None, lambda: chain(A, B, ["id"])),
        ("bc", T0 + 1, None, lambda: chain(B, C, ["id"])),
        ("ca", T0 + 2, None, lambda: chain(C, A, ["id"])),
    ])
    with open_store(url) as store:
        yield store


def test_walk_across_a_cycle_terminates_and_marks_it(cyclic_store):
    root = EndPointField(C, "id")
    graph = walk_lineage(cyclic_store, root, "incoming", 50, 0, T0 + 10)
    assert len(graph.edges) == 3 and len(graph.nodes) == 3
    tree = render_tree(graph)
    assert tree.splitlines()[-1].endswith("← ns:C:id  (cycle)")
    assert render_dot(graph).count("->") == 3
    assert render_mermaid(graph).count("-->") == 3


def test_tree_marks_a_field_reached_twice_as_seen_above(tmp_path):
    # ns:C.id is built from A.id twice: directly and through ns:B:x
    from fll import FieldLineageInfo, InputField, ReadOperation, WriteOperation
    two_sources = FieldLineageInfo([
        ReadOperation("ra", "", A, ["id"]), ReadOperation("rb", "", B, ["id"]),
        WriteOperation("w", "", C, [InputField("ra", "id"), InputField("rb", "id")])])
    url = build_store(f"sqlite:///{tmp_path}/dag.db", [
        ("ab", T0, None, lambda: chain(A, B, ["id"])), ("abc", T0 + 1, None, lambda: two_sources)])
    with open_store(url) as store:
        graph = walk_lineage(store, EndPointField(C, "id"), "incoming", 5, 0, T0 + 10)
    lines = render_tree(graph).splitlines()
    assert lines[1:] == ["├── ← ns:A:id", "└── ← ns:B:x:id", "    └── ← ns:A:id  (see above)"]


def test_dot_and_mermaid_quote_awkward_names():
    from fll.render import LineageGraph
    odd = EndPointField(EndPoint("n s", 'we"ird'), 'a"b<c>')
    other = EndPointField(EndPoint("ns", "x"), "y")
    graph = LineageGraph(other, "incoming", 1, 0, 1, edges={(odd, other)})
    dot = render_dot(graph)
    assert '"n s:we\\"ird:a\\"b<c>" -> "ns:x:y";' in dot
    mermaid = render_mermaid(graph)
    assert "#quot;" in mermaid and '"b' not in mermaid.replace('["', "").replace('"]', "")
