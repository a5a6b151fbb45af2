"""Operation sets shared by the core tests (built on the fly, no files)."""
from __future__ import annotations

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField, ReadOperation,
                 TransformOperation, WriteOperation)

ENDPOINT1 = EndPoint("ns", "endpoint1")
ANOTHER_FILE = EndPoint("myns", "another_file")


def cdap_example_operations():
    """CDAP's own worked example (semantics §2)."""
    return [
        ReadOperation("read", "read the file", ENDPOINT1, ["offset", "body"]),
        TransformOperation("parse", "parse the body", [InputField("read", "body")],
                           ["first_name", "last_name"]),
        TransformOperation("concat", "concatenate names",
                           [InputField("parse", "first_name"), InputField("parse", "last_name")],
                           ["name"]),
        WriteOperation("write", "write the file", ANOTHER_FILE,
                       [InputField("read", "offset"), InputField("concat", "name")]),
    ]


def cdap_example() -> FieldLineageInfo:
    return FieldLineageInfo(cdap_example_operations())


def chain(src: EndPoint, dst: EndPoint, fields: list[str], prefix: str = "") -> FieldLineageInfo:
    """``src.f → upper(f) → dst.f`` for every field."""
    ops = [ReadOperation(prefix + "read", "read", src, fields)]
    for f in fields:
        ops.append(TransformOperation(f"{prefix}t_{f}", f"transform {f}",
                                      [InputField(prefix + "read", f)], [f]))
    ops.append(WriteOperation(prefix + "write", "write", dst,
                              [InputField(f"{prefix}t_{f}", f) for f in fields]))
    return FieldLineageInfo(ops)


def field(ep: EndPoint, name: str) -> EndPointField:
    return EndPointField(ep, name)
