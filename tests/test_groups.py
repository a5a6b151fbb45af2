"""Stored summaries as shared groups (`fll.graph.LineageGroups`, `fll.summaries.Summaries`)
answer exactly what walking the operations answers, on random operation sets,
and stay linear in the operations on all-to-all sets."""
from __future__ import annotations

import random

import pytest

from fll import (EndPoint, EndPointField, FieldLineageInfo, InputField, ReadOperation,
                 Transformation, TransformOperation, WriteOperation)
from fll.summaries import summaries_of, summaries_to_bytes
from fll import graph
from fll.graph import tag_order
from fll.model import DROPPED
from fll.openlineage import input_transformations

_TAGS = [Transformation("DIRECT", "IDENTITY"), Transformation("DIRECT", "TRANSFORMATION"),
         Transformation("DIRECT", "AGGREGATION", masking=True),
         Transformation("DIRECT", "TRANSFORMATION", "upper"),
         Transformation("INDIRECT", "FILTER"), Transformation("INDIRECT", "GROUP_BY"),
         Transformation("INDIRECT", "CONDITIONAL", "case")]


def random_set(rnd: random.Random) -> FieldLineageInfo:
    """READs, layers of transforms (some wide, some dropping, some tagged), WRITEs."""
    ops: list = []
    produced: list[InputField] = []
    for r in range(rnd.randint(1, 3)):
        ep = EndPoint("src", f"s{rnd.randint(0, 2)}")
        fields = [f"f{i}" for i in rnd.sample(range(8), rnd.randint(1, 6))]
        ops.append(ReadOperation(f"read{r}", "read", ep, fields))
        produced += [InputField(f"read{r}", f) for f in fields]
    for t in range(rnd.randint(0, 12)):
        k = rnd.choice([1, 1, 2, 3, len(produced)])
        inputs = list(dict.fromkeys(rnd.sample(produced, min(k, len(produced)))))
        outputs = [] if rnd.random() < 0.1 else [f"t{t}_{i}" for i in range(rnd.randint(1, 4))]
        tags = {}
        for inp in inputs:
            if rnd.random() < 0.6:
                tags[inp] = tuple(rnd.sample(_TAGS, rnd.choice([1, 1, 2])))
        ops.append(TransformOperation(f"t{t}", "t", inputs, outputs, tags))
        produced += [InputField(f"t{t}", o) for o in outputs]
    for w in range(rnd.randint(1, 2)):
        ep = EndPoint("dst", f"d{rnd.randint(0, 1)}")
        pick = rnd.sample(produced, min(len(produced), rnd.randint(1, 8)))
        by_name: dict[str, InputField] = {}
        for p in pick:
            by_name.setdefault(p.name, p)
        ops.append(WriteOperation(f"write{w}", "write", ep, list(by_name.values())))
    return FieldLineageInfo(ops)


def _tagged(found: dict) -> dict:
    return {k: sorted(v, key=tag_order) for k, v in found.items()}


@pytest.mark.parametrize("flat", [0, 2, graph.FLAT_GROUP])
@pytest.mark.parametrize("seed", range(200))
def test_stored_groups_answer_as_the_operations_do(seed, flat, monkeypatch):
    # flat 0: every group stays shared, so refs and steps are walked, not expanded
    monkeypatch.setattr(graph, "FLAT_GROUP", flat)
    info = random_set(random.Random(seed))
    s = summaries_of(info)
    incoming, outgoing = info.incoming_summary(), info.outgoing_summary()
    assert dict(s.incoming) == incoming
    assert dict(s.outgoing) == outgoing
    assert s.destination_fields == {EndPointField(ep, f) for ep, fs in
                                    info.destination_fields().items() for f in fs}
    assert s.source_fields == {EndPointField(ep, f) for ep, fs in
                               info.source_fields().items() for f in fs}
    for dest in incoming:
        assert _tagged(s.incoming_tags(dest)) == _tagged(input_transformations(info, dest))
    # outgoing tags are the incoming ones turned round
    for src, dests in outgoing.items():
        got = s.outgoing_tags(src)
        if dests == {DROPPED}:
            assert got == {}
            continue
        assert set(got) == set(dests)
        for d, tags in got.items():
            assert sorted(tags, key=tag_order) == \
                sorted(input_transformations(info, d)[src], key=tag_order)


def _all_to_all(n: int) -> FieldLineageInfo:
    cols = [f"c{i}" for i in range(n)]
    ins = [InputField("read", c) for c in cols]
    return FieldLineageInfo([
        ReadOperation("read", "read", EndPoint("s", "src"), cols),
        TransformOperation("mix", "mix", ins, cols, {i: (_TAGS[1],) for i in ins}),
        WriteOperation("write", "write", EndPoint("s", "dst"),
                       [InputField("mix", c) for c in cols])])


def test_an_all_to_all_set_is_stored_in_space_linear_in_its_width():
    small, large = len(summaries_to_bytes(_all_to_all(200))), \
        len(summaries_to_bytes(_all_to_all(2000)))
    # n x n edges would be 100x; the shared group keeps it about 10x (wider ints)
    assert large < 20 * small
    s = summaries_of(_all_to_all(2000))
    one = s.incoming[EndPointField(EndPoint("s", "dst"), "c5")]
    assert len(one) == 2000
    # every destination shares one answer object: no per-field copy
    assert s.incoming[EndPointField(EndPoint("s", "dst"), "c6")] is one
    assert len(s.outgoing[EndPointField(EndPoint("s", "src"), "c9")]) == 2000
