"""Validation rules and summaries of semantics §1–2."""
from __future__ import annotations

import time

import pytest

from fll import (DROPPED, EndPoint, EndPointField, FieldLineageInfo, InputField,
                 InvalidLineageError, ReadOperation, Transformation, TransformOperation,
                 WriteOperation)
from fll.codec import canonical_bytes
from tests.lineage_examples import ANOTHER_FILE, ENDPOINT1, cdap_example, cdap_example_operations

SRC = EndPoint("ns", "src")
DST = EndPoint("ns", "dst")


def names(ops):
    return [o.name for o in ops]


# -- value objects ---------------------------------------------------------------

def test_endpoint_identity_ignores_properties_but_keeps_them():
    a = EndPoint("ns", "x", {"path": "/a"})
    b = EndPoint("ns", "x", {"path": "/b"})
    assert a == b and hash(a) == hash(b)
    assert a.properties["path"] == "/a"
    with pytest.raises(TypeError):
        a.properties["path"] = "/c"  # type: ignore[index]
    with pytest.raises(AttributeError):
        a.name = "y"  # type: ignore[misc]


def test_operations_are_immutable_and_hashable():
    op = ReadOperation("r", "d", SRC, ["a", "b"])
    assert op.outputs == ("a", "b")
    assert hash(op) == hash(ReadOperation("r", "d", SRC, ("a", "b")))
    t = TransformOperation("t", "d", [InputField("r", "a")], ["x"],
                           {InputField("r", "a"): (Transformation("DIRECT", "IDENTITY"),)})
    assert len({t, t}) == 1
    from dataclasses import FrozenInstanceError
    with pytest.raises(FrozenInstanceError):
        op.name = "other"  # type: ignore[misc]


def test_transformation_rejects_unknown_type():
    with pytest.raises(InvalidLineageError, match="DIRECT, INDIRECT"):
        Transformation("SIDEWAYS")


# -- validation -------------------------------------------------------------------

def test_repeated_operation_name_is_rejected_naming_it():
    ops = cdap_example_operations() + [TransformOperation("parse", "again", [], ["z"])]
    with pytest.raises(InvalidLineageError, match="'parse'.*more than once"):
        FieldLineageInfo(ops)


def test_a_set_without_read_or_without_write_is_rejected():
    w = WriteOperation("w", "", DST, [])
    with pytest.raises(InvalidLineageError, match="no READ"):
        FieldLineageInfo([w])
    with pytest.raises(InvalidLineageError, match="no WRITE"):
        FieldLineageInfo([ReadOperation("r", "", SRC, ["a"])])


def test_read_without_source_and_write_without_destination_are_rejected():
    with pytest.raises(InvalidLineageError, match="READ operation 'r' has no source"):
        FieldLineageInfo([ReadOperation("r", "", None, ["a"]),  # type: ignore[arg-type]
                          WriteOperation("w", "", DST, [InputField("r", "a")])])
    with pytest.raises(InvalidLineageError, match="WRITE operation 'w' has no destination"):
        FieldLineageInfo([ReadOperation("r", "", SRC, ["a"]),
                          WriteOperation("w", "", None, [InputField("r", "a")])])  # type: ignore


def test_unknown_origin_is_rejected_with_the_known_origin_names():
    ops = [ReadOperation("read", "", SRC, ["a"]),
           WriteOperation("write", "", DST, [InputField("raed", "a")])]
    with pytest.raises(InvalidLineageError) as e:
        FieldLineageInfo(ops)
    msg = str(e.value)
    assert "'write'" in msg and "'raed'" in msg and "read, write" in msg
    assert e.value.operation == "write" and e.value.field == "a"


def test_input_naming_a_field_its_origin_does_not_output_is_rejected():
    ops = [ReadOperation("read", "", SRC, ["a"]),
           WriteOperation("write", "", DST, [InputField("read", "b")])]
    with pytest.raises(InvalidLineageError, match="'b' is not an output of operation 'read'"):
        FieldLineageInfo(ops)


def test_self_reference_is_rejected():
    ops = [ReadOperation("read", "", SRC, ["a"]),
           TransformOperation("t", "", [InputField("read", "a"), InputField("t", "x")], ["x"]),
           WriteOperation("write", "", DST, [InputField("t", "x")])]
    with pytest.raises(InvalidLineageError, match="'t' takes its own output 'x'"):
        FieldLineageInfo(ops)


def test_cycle_is_rejected_naming_an_operation_and_field():
    ops = [ReadOperation("read", "", SRC, ["a"]),
           TransformOperation("t1", "", [InputField("read", "a"), InputField("t2", "y")], ["x"]),
           TransformOperation("t2", "", [InputField("t1", "x")], ["y"]),
           WriteOperation("write", "", DST, [InputField("t2", "y")])]
    with pytest.raises(InvalidLineageError, match="cycle") as e:
        FieldLineageInfo(ops)
    assert e.value.operation in ("t1", "t2") and e.value.field in ("x", "y")


# -- checksum ---------------------------------------------------------------------

def test_insertion_order_does_not_change_the_checksum():
    ops = cdap_example_operations()
    assert FieldLineageInfo(ops).checksum == FieldLineageInfo(ops[::-1]).checksum
    assert FieldLineageInfo(ops).checksum == FieldLineageInfo(ops[2:] + ops[:2]).checksum


@pytest.mark.parametrize("change", [
    lambda ops: [ReadOperation("read", "read the file", EndPoint("other", "endpoint1"),
                               ["offset", "body"])] + ops[1:],
    lambda ops: [ReadOperation("read", "read the file", EndPoint("ns", "endpoint1", {"p": "1"}),
                               ["offset", "body"])] + ops[1:],
    lambda ops: [ReadOperation("read", "read a file", ENDPOINT1, ["offset", "body"])] + ops[1:],
    lambda ops: [ReadOperation("read", "read the file", ENDPOINT1, ["body", "offset"])] + ops[1:],
    lambda ops: ops[:3] + [WriteOperation("write", "write the file", ANOTHER_FILE,
                                          [InputField("read", "offset")])],
], ids=["namespace", "property", "description", "field order", "field"])
def test_any_change_changes_the_checksum(change):
    ops = cdap_example_operations()
    assert FieldLineageInfo(change(ops)).checksum != FieldLineageInfo(ops).checksum


def test_transformation_tags_take_part_in_the_checksum():
    def build(masking):
        i = InputField("read", "body")
        return FieldLineageInfo([
            ReadOperation("read", "", SRC, ["body"]),
            TransformOperation("h", "", [i], ["x"],
                               {i: (Transformation("DIRECT", "TRANSFORMATION", "", masking),)}),
            WriteOperation("write", "", DST, [InputField("h", "x")])])
    assert build(True).checksum != build(False).checksum


# -- the worked example -------------------------------------------------------------

def test_cdap_example_incoming_summary():
    info = cdap_example()
    assert info.incoming_summary() == {
        EndPointField(ANOTHER_FILE, "offset"): {EndPointField(ENDPOINT1, "offset")},
        EndPointField(ANOTHER_FILE, "name"): {EndPointField(ENDPOINT1, "body")},
    }


def test_cdap_example_operations_per_field():
    info = cdap_example()
    assert names(info.incoming_operations(EndPointField(ANOTHER_FILE, "name"))) == \
        ["read", "parse", "concat", "write"]
    assert names(info.incoming_operations(EndPointField(ANOTHER_FILE, "offset"))) == \
        ["read", "write"]
    assert names(info.outgoing_operations(EndPointField(ENDPOINT1, "offset"))) == \
        ["read", "write"]
    assert names(info.outgoing_operations(EndPointField(ENDPOINT1, "body"))) == \
        ["read", "parse", "concat", "write"]


def test_operations_come_in_topological_order_whatever_the_input_order():
    assert names(FieldLineageInfo(cdap_example_operations()[::-1]).operations) == \
        ["read", "parse", "concat", "write"]


def test_sources_destinations_and_destination_fields():
    info = cdap_example()
    assert info.sources == {ENDPOINT1} and info.destinations == {ANOTHER_FILE}
    assert info.destination_fields() == {ANOTHER_FILE: {"offset", "name"}}


def test_read_wired_straight_to_write_maps_one_to_one():
    info = FieldLineageInfo([ReadOperation("r", "", SRC, ["a", "b", "c"]),
                             WriteOperation("w", "", DST, [InputField("r", "a"),
                                                           InputField("r", "b")])])
    assert info.incoming_summary() == {
        EndPointField(DST, "a"): {EndPointField(SRC, "a")},
        EndPointField(DST, "b"): {EndPointField(SRC, "b")}}
    # c is read and never used: in neither summary
    assert EndPointField(SRC, "c") not in info.outgoing_summary()


def test_several_writes_to_the_same_field_merge():
    other = EndPoint("ns", "other")
    info = FieldLineageInfo([
        ReadOperation("r1", "", SRC, ["a"]), ReadOperation("r2", "", other, ["a"]),
        WriteOperation("w1", "", DST, [InputField("r1", "a")]),
        WriteOperation("w2", "", DST, [InputField("r2", "a")])])
    assert info.incoming_summary() == {
        EndPointField(DST, "a"): {EndPointField(SRC, "a"), EndPointField(other, "a")}}
    assert names(info.incoming_operations(EndPointField(DST, "a"))) == ["r1", "r2", "w1", "w2"]


def test_a_field_whose_only_path_ends_in_a_drop_maps_to_dropped():
    info = FieldLineageInfo([
        ReadOperation("r", "", SRC, ["a", "b", "c"]),
        TransformOperation("drop_b", "", [InputField("r", "b")], []),
        TransformOperation("drop_c", "", [InputField("r", "c")], []),
        TransformOperation("copy_c", "", [InputField("r", "c")], ["d"]),
        WriteOperation("w", "", DST, [InputField("r", "a"), InputField("copy_c", "d")])])
    out = info.outgoing_summary()
    assert out[EndPointField(SRC, "b")] == {DROPPED}
    # c is dropped on one path but written on another: no marker
    assert out[EndPointField(SRC, "c")] == {EndPointField(DST, "d")}
    assert names(info.outgoing_operations(EndPointField(SRC, "b"))) == ["r", "drop_b"]


def test_transform_outputs_depend_on_every_input():
    info = FieldLineageInfo([
        ReadOperation("r", "", SRC, ["a", "b"]),
        TransformOperation("t", "", [InputField("r", "a"), InputField("r", "b")], ["x", "y"]),
        WriteOperation("w", "", DST, [InputField("t", "x")])])
    assert info.incoming_summary()[EndPointField(DST, "x")] == \
        {EndPointField(SRC, "a"), EndPointField(SRC, "b")}


def test_same_field_name_from_two_origins_is_kept_apart():
    other = EndPoint("ns", "other")
    info = FieldLineageInfo([
        ReadOperation("r1", "", SRC, ["id"]), ReadOperation("r2", "", other, ["id"]),
        TransformOperation("t", "", [InputField("r2", "id")], ["key"]),
        WriteOperation("w", "", DST, [InputField("r1", "id"), InputField("t", "key")])])
    inc = info.incoming_summary()
    assert inc[EndPointField(DST, "id")] == {EndPointField(SRC, "id")}
    assert inc[EndPointField(DST, "key")] == {EndPointField(other, "id")}


def test_all_to_all_layers_are_linear():
    fields = [f"f{i}" for i in range(100)]
    ops = [ReadOperation("read", "", SRC, fields)]
    prev = "read"
    for layer in range(5):
        for f in fields:
            ops.append(TransformOperation(f"l{layer}_{f}", "",
                                          [InputField(prev if layer == 0 else f"l{layer-1}_{g}",
                                                      g) for g in fields], [f]))
        prev = f"l{layer}"
    ops.append(WriteOperation("write", "", DST, [InputField(f"l4_{f}", f) for f in fields]))
    # CPU time of this process: other work on the machine does not count
    t0 = time.process_time()
    info = FieldLineageInfo(ops)
    inc = info.incoming_summary()
    out = info.outgoing_summary()
    one = info.incoming_operations(EndPointField(DST, "f0"))
    elapsed = time.process_time() - t0
    assert len(ops) == 502
    assert inc[EndPointField(DST, "f7")] == {EndPointField(SRC, f) for f in fields}
    assert out[EndPointField(SRC, "f3")] == {EndPointField(DST, f) for f in fields}
    # read, every operation of layers 0-3, only l4_f0 of the last layer, write
    assert len(one) == 1 + 400 + 1 + 1
    assert elapsed < 1.0, f"100 fields x 5 all-to-all layers took {elapsed:.2f}s"


def test_a_deep_chain_does_not_hit_the_recursion_limit():
    ops = [ReadOperation("read", "", SRC, ["a"])]
    prev = "read"
    for i in range(5000):
        ops.append(TransformOperation(f"t{i}", "", [InputField(prev, "a")], ["a"]))
        prev = f"t{i}"
    ops.append(WriteOperation("write", "", DST, [InputField(prev, "a")]))
    info = FieldLineageInfo(ops)
    assert info.incoming_summary() == {EndPointField(DST, "a"): {EndPointField(SRC, "a")}}
    assert info.outgoing_summary() == {EndPointField(SRC, "a"): {EndPointField(DST, "a")}}


def test_the_model_imports_nothing_of_fll_but_errors():
    # the model is the bottom layer: graph, codec and the operation set build on it
    import ast
    from pathlib import Path

    import fll.model

    tree = ast.parse(Path(fll.model.__file__).read_text(encoding="utf-8"))
    relative = sorted({"." * n.level + (n.module or "") for n in ast.walk(tree)
                       if isinstance(n, ast.ImportFrom) and n.level})
    absolute = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                if a.name.startswith("fll")]
    assert relative == [".errors"] and absolute == []


def test_the_json_form_round_trips_through_the_public_methods():
    info = FieldLineageInfo(cdap_example_operations())
    doc = info.to_dict()
    assert doc["checksum"] == info.checksum and len(doc["operations"]) == len(info.operations)
    assert FieldLineageInfo.from_dict(doc) == info
    with pytest.raises(InvalidLineageError, match="missing 'operations'"):
        FieldLineageInfo.from_dict({"checksum": info.checksum})


def test_a_transform_made_from_checked_parts_is_the_one_the_constructor_makes():
    a, b = InputField("read:s", "a"), InputField("read:s", "b")
    tags = {b: (Transformation("DIRECT", "AGGREGATION"),)}
    made = TransformOperation.checked("t", "d", (a, b), ("x",), dict(tags))
    built = TransformOperation("t", "d", [a, b], ["x"], tags)
    assert made == built and hash(made) == hash(built)
    assert dict(made.transformations) == dict(built.transformations)
    assert canonical_bytes([made]) == canonical_bytes([built])
