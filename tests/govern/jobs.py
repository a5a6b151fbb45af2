"""Small tagged operation sets for the governance tests: one job per call,
each output field built from the inputs it names with the tags it names."""
from __future__ import annotations

from fll import (EndPoint, FieldLineageInfo, InputField, ReadOperation, TransformOperation,
                 WriteOperation)
from fll.model import Transformation

COPY = (Transformation("DIRECT", "IDENTITY"),)
UPPER = (Transformation("DIRECT", "TRANSFORMATION"),)
HASH = (Transformation("DIRECT", "TRANSFORMATION", "sha2", masking=True),)
SUM = (Transformation("DIRECT", "AGGREGATION"),)
COUNT = (Transformation("DIRECT", "AGGREGATION", "count", masking=True),)
FILTER = (Transformation("INDIRECT", "FILTER"),)
UNTAGGED: tuple = ()


def job(src: EndPoint, dst: EndPoint, outputs: dict[str, list[tuple[str, tuple]]]
        ) -> FieldLineageInfo:
    """``outputs``: destination field -> [(source field of ``src``, its tags)]."""
    needed = sorted({f for ins in outputs.values() for f, _ in ins})
    ops: list = [ReadOperation("read", "read", src, needed)]
    for out, ins in sorted(outputs.items()):
        inputs = [InputField("read", f) for f, _ in ins]
        tags = {InputField("read", f): t for f, t in ins if t}
        ops.append(TransformOperation(f"t_{out}", f"build {out}", inputs, [out], tags))
    ops.append(WriteOperation("write", "write", dst,
                              [InputField(f"t_{out}", out) for out in sorted(outputs)]))
    return FieldLineageInfo(ops)
