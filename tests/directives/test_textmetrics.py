"""fll.directives.textmetrics against SimMetrics 4.1.1 itself (no Spark).

simmetrics_golden.jsonl holds what SimMetrics returns, bit for bit, for every method of
text-metric and text-distance on 60 pairs of texts (scripts/simmetrics_oracle writes it
from the Java library).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from fll.directives.textmetrics import METHODS, distance, f32, similarity

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "directives" / \
    "simmetrics_golden.jsonl"
ROWS = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def _bits(value: float) -> int:
    return int(struct.unpack("i", struct.pack("f", value))[0])


@pytest.mark.parametrize("method", sorted(set(METHODS["text-metric"]) | set(METHODS["text-distance"])))
def test_every_method_gives_simmetrics_float_bit_for_bit(method):
    rows = [r for r in ROWS if r[1] == method]
    assert rows, f"no golden results for {method}"
    wrong = []
    for kind, _, a, b, bits in rows:
        got = similarity(method, a, b) if kind == "metric" else distance(method, a, b)
        if _bits(got) != bits:
            wrong.append((kind, a, b, got, struct.unpack("f", struct.pack("i", bits))[0]))
    assert not wrong, f"{len(wrong)} of {len(rows)} differ, first: {wrong[0]}"


def test_golden_file_covers_both_directives_and_every_method_name():
    seen = {(r[0], r[1]) for r in ROWS}
    want = {("metric", m) for m in METHODS["text-metric"]} | \
        {("distance", m) for m in METHODS["text-distance"]}
    assert seen == want


def test_java_float_rounding_is_kept_where_double_arithmetic_would_differ():
    # 1 - 2/6 in Java floats is 0.6666666f; in doubles rounded once it is 0.6666667f
    assert similarity("levenshtein", "martha", "marhta") == f32(0.6666666)
    assert f32(1 - 2 / 6) != similarity("levenshtein", "martha", "marhta")
