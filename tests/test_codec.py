"""Canonical encoding, JSON round trip and hostile input to the decoders."""
from __future__ import annotations

import json

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField, InvalidLineageError,
                 ReadOperation, Transformation, TransformOperation, WriteOperation)
from fll.codec import CANONICAL_VERSION, canonical_bytes
from fll.opset import decode_canonical
from fll.summaries import summaries_of
from fll.model import DROPPED
from tests.lineage_examples import cdap_example


def test_json_round_trip_keeps_everything():
    i = InputField("read", "body")
    info = FieldLineageInfo([
        ReadOperation("read", "r", EndPoint("ns", "src", {"path": "/x"}), ["body"]),
        TransformOperation("h", "hash it", [i], ["x"],
                           {i: (Transformation("DIRECT", "TRANSFORMATION", "sha2", True),)}),
        WriteOperation("write", "w", EndPoint("ns", "dst"), [InputField("h", "x")])])
    again = FieldLineageInfo.from_dict(json.loads(json.dumps(info.to_dict())))
    assert again.checksum == info.checksum
    assert again.operations == info.operations
    t = next(o for o in again.operations if o.name == "h")
    assert t.transformations[i][0].masking is True
    assert again.sources == {EndPoint("ns", "src")}
    assert next(iter(again.sources)).properties == {"path": "/x"}


def test_canonical_bytes_are_versioned_and_decode_back():
    info = cdap_example()
    raw = canonical_bytes(info.operations)
    assert msgpack.unpackb(raw)["v"] == CANONICAL_VERSION
    assert decode_canonical(raw).checksum == info.checksum


def test_a_row_of_another_version_is_refused():
    raw = msgpack.packb({"v": 99, "operations": []})
    with pytest.raises(InvalidLineageError, match="version 99"):
        decode_canonical(raw)


@pytest.mark.parametrize("doc, where", [
    ({"operations": "nope"}, "operations: expected a list"),
    ({"operations": [{"type": "READ", "name": "r"}]}, "missing 'source'"),
    ({"operations": [{"type": "JUMP", "name": "r"}]}, "expected READ, TRANSFORM or WRITE"),
    ({"operations": [{"type": "READ", "name": "r", "source": {"namespace": "n", "name": 3},
                      "outputs": []}]}, "source.name: expected str"),
    ({"operations": [{"type": "WRITE", "name": "w", "destination": {"namespace": "n",
                      "name": "d"}, "inputs": [{"origin": "r"}]}]}, r"inputs\[0\]: missing 'name'"),
    ({}, "missing 'operations'"),
])
def test_malformed_dicts_name_where_they_are_wrong(doc, where):
    with pytest.raises(InvalidLineageError, match=where):
        FieldLineageInfo.from_dict(doc)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_rows_raise_only_invalid_lineage_error(raw):
    with pytest.raises(InvalidLineageError):
        decode_canonical(raw)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(
                        st.sampled_from(["type", "name", "operations", "source", "inputs",
                                         "outputs", "origin", "namespace", "destination",
                                         "transformations", "masking"]), c, max_size=5),
                    max_leaves=20))
@settings(max_examples=300, deadline=None)
def test_random_json_raises_only_invalid_lineage_error(doc):
    try:
        FieldLineageInfo.from_dict(doc)
    except InvalidLineageError:
        pass


# -- property tests on random valid operation graphs ----------------------------------

@st.composite
def operation_sets(draw):
    """Random valid DAGs: reads, transforms over earlier outputs, writes, drops."""
    n_src = draw(st.integers(1, 3))
    ops = []
    produced: list[InputField] = []
    for s in range(n_src):
        fields = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True))
        ops.append(ReadOperation(f"read{s}", "", EndPoint(draw(st.sampled_from(["n1", "n2"])),
                                                          f"src{s}"), fields))
        produced += [InputField(f"read{s}", f) for f in fields]
    for t in range(draw(st.integers(0, 8))):
        inputs = draw(st.lists(st.sampled_from(produced), min_size=0, max_size=3, unique=True))
        outs = draw(st.lists(st.sampled_from("uvwxyz"), min_size=0, max_size=2, unique=True))
        ops.append(TransformOperation(f"t{t}", "", inputs, outs))
        produced += [InputField(f"t{t}", o) for o in outs]
    for w in range(draw(st.integers(1, 2))):
        inputs = draw(st.lists(st.sampled_from(produced), min_size=1, max_size=5,
                               unique_by=lambda i: i.name))
        ops.append(WriteOperation(f"write{w}", "", EndPoint("n1", f"dst{w % 2}"), inputs))
    order = draw(st.permutations(ops))
    return ops, order


@given(operation_sets())
@settings(max_examples=200, deadline=None)
def test_checksum_is_stable_under_permutation_and_msgpack_round_trip(sets):
    ops, shuffled = sets
    info = FieldLineageInfo(ops)
    assert FieldLineageInfo(shuffled).checksum == info.checksum
    assert decode_canonical(canonical_bytes(info.operations)).checksum == info.checksum
    assert FieldLineageInfo.from_dict(info.to_dict()).checksum == info.checksum


@given(operation_sets())
@settings(max_examples=200, deadline=None)
def test_incoming_summary_is_the_inverse_of_the_outgoing_one(sets):
    info = FieldLineageInfo(sets[0])
    inverted: dict[EndPointField, set[EndPointField]] = {}
    for dst, srcs in info.incoming_summary().items():
        for s in srcs:
            inverted.setdefault(s, set()).add(dst)
    outgoing = {k: set(v) - {DROPPED} for k, v in info.outgoing_summary().items()}
    outgoing = {k: v for k, v in outgoing.items() if v}
    assert inverted == outgoing


@given(operation_sets())
@settings(max_examples=100, deadline=None)
def test_stored_summaries_equal_the_computed_ones(sets):
    info = FieldLineageInfo(sets[0])
    s = summaries_of(info)
    assert s.incoming == info.incoming_summary()
    assert s.outgoing == info.outgoing_summary()


@given(operation_sets())
@settings(max_examples=100, deadline=None)
def test_the_fast_canonical_form_equals_the_sorted_dict_form(sets):
    from fll.codec import canonical_operation, operation_to_dict, sorted_form
    for op in sets[0]:
        fast = canonical_operation(op)
        assert msgpack.packb(fast) == msgpack.packb(sorted_form(operation_to_dict(op)))


def test_the_canonical_encoding_of_a_known_set_never_changes():
    # pinned: changing this checksum means every stored operation set splits in two
    assert cdap_example().checksum == "ec362839005c30063683e107d41af2bc"
