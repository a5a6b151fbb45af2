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


def job(src: EndPoint, dst: EndPoint, outputs: dict[str, list[tuple[str, tuple]]],
        sources: list[tuple[EndPoint, str, tuple]] | None = None) -> FieldLineageInfo:
    """``outputs``: destination field -> [(source field of ``src``, its tags)].
    ``sources``: more inputs from other datasets as (endpoint, field, tags),
    fed to every output."""
    needed = sorted({f for ins in outputs.values() for f, _ in ins})
    ops = [ReadOperation("read", "read", src, needed)]
    others = {}
    for i, (ep, f, _) in enumerate(sources or []):
        name = f"read{i}"
        ops.append(ReadOperation(name, "read", ep, [f]))
        others[i] = name
    for out, ins in sorted(outputs.items()):
        inputs = [InputField("read", f) for f, _ in ins]
        tags = {InputField("read", f): t for f, t in ins if t}
        for i, (ep, f, t) in enumerate(sources or []):
            inputs.append(InputField(others[i], f))
            if t:
                tags[InputField(others[i], f)] = t
        ops.append(TransformOperation(f"t_{out}", f"build {out}", inputs, [out], tags))
    ops.append(WriteOperation("write", "write", dst,
                              [InputField(f"t_{out}", out) for out in sorted(outputs)]))
    return FieldLineageInfo(ops)
