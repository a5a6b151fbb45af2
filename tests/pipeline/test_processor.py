"""The operations processor, driven by tests/fixtures/pipeline/processor_cases.yaml."""
from __future__ import annotations

import os

import pytest
import yaml

from fll.errors import InvalidLineageError
from fll.model import DROPPED, EndPoint, EndPointField
from fll.pipeline.api import (FieldReadOperation, FieldTransformOperation, FieldWriteOperation,
                              StageField)
from fll.pipeline.processor import StageLineage, process

CASES_FILE = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "pipeline",
                          "processor_cases.yaml")
with open(CASES_FILE, encoding="utf-8") as fh:
    CASES = yaml.safe_load(fh)


def _ref(value):
    if isinstance(value, list):
        return StageField(*value)
    return value


def _op(spec):
    kind, name = spec[0], spec[1]
    if kind == "read":
        return FieldReadOperation(name, f"read {spec[2]}", EndPoint("ns", spec[2]), spec[3])
    if kind == "transform":
        return FieldTransformOperation(name, name, [_ref(i) for i in spec[2]], spec[3])
    return FieldWriteOperation(name, f"write {spec[2]}", EndPoint("ns", spec[2]),
                               [_ref(i) for i in spec[3]])


def _stages(case):
    return [StageLineage(s["name"], s["kind"], tuple(s.get("inputs", [])),
                         tuple(_op(o) for o in s.get("ops", [])),
                         tuple(s["outputs"]) if "outputs" in s else None)
            for s in case["stages"]]


def _field(text):
    if text == "_dropped.":
        return DROPPED
    dataset, _, name = text.partition(".")
    return EndPointField(EndPoint("ns", dataset), name)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_processor_case(case):
    if "error" in case:
        with pytest.raises(InvalidLineageError) as info:
            process(_stages(case))
        assert case["error"] in str(info.value)
        return
    info = process(_stages(case))
    incoming = info.incoming_summary()
    for dst, srcs in case.get("incoming", {}).items():
        assert incoming[_field(dst)] == {_field(s) for s in srcs}, dst
    if "incoming" in case:
        assert set(incoming) == {_field(d) for d in case["incoming"]}
    for dst, names in case.get("operations", {}).items():
        assert [op.name for op in info.incoming_operations(_field(dst))] == names, dst
    outgoing = info.outgoing_summary()
    for src, dsts in case.get("outgoing", {}).items():
        assert outgoing[_field(src)] == {_field(d) for d in dsts}, src


def test_operation_names_are_prefixed_with_their_stage():
    info = process(_stages(CASES[0]))
    assert {op.name for op in info.operations} == {
        "src.read", "parse.parse", "concat.concat", "out.write"}


def test_a_stage_recording_the_same_operation_twice_is_refused():
    stages = [
        StageLineage("src", "source", (), (
            FieldReadOperation("read", "r", EndPoint("ns", "in"), ["a"]),
            FieldReadOperation("read", "r", EndPoint("ns", "in"), ["a"])), ("a",)),
        StageLineage("out", "sink", ("src",), (
            FieldWriteOperation("write", "w", EndPoint("ns", "dst"), ["a"]),)),
    ]
    with pytest.raises(InvalidLineageError, match="stage 'src' recorded operation 'read' twice"):
        process(stages)


def test_transformation_tags_follow_their_input_field():
    from fll.model import Transformation

    tag = (Transformation("DIRECT", "AGGREGATION"),)
    stages = [
        StageLineage("src", "source", (), (
            FieldReadOperation("read", "r", EndPoint("ns", "in"), ["a", "b"]),), ("a", "b")),
        StageLineage("agg", "transform", ("src",), (
            FieldTransformOperation("sum", "s", ["a", "b"], ["total"], {"b": tag}),),
            ("total",)),
        StageLineage("out", "sink", ("agg",), (
            FieldWriteOperation("write", "w", EndPoint("ns", "dst"), ["total"]),)),
    ]
    op = next(o for o in process(stages).operations if o.name == "agg.sum")
    assert dict(op.transformations) == {op.inputs[1]: tag}
