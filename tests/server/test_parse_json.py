"""`fll.server.ingest.parse_json`: orjson's speed, the standard library's answers.

Every body reads as the same value `json.loads` gives, and every body it
refuses is refused with the message the server has always given."""
from __future__ import annotations

import json
import math

import pytest

from fll.server.errors import ApiError
from fll.server.ingest import parse_json

SAME_VALUE = [
    b'{"eventType": "START", "n": 12, "x": 1.5, "ok": true, "none": null}',
    b'[123456789012345678901234567890]',          # beyond 64 bits: json keeps an int
    b'[1234567890123456789, -9223372036854775809]',
    b'[9223372036854775807, 0.1, 1e-300, -0]',
    b'{"a": 1, "a": 2}',                            # the last of a duplicate key wins
    b'["\\ud800"]',                                 # a lone surrogate json accepts
    b'[NaN, Infinity, -Infinity]',                  # json's extensions
    b'[1e400]',
    b'\xef\xbb\xbf{"bom": 1}',                      # UTF-8 with a byte-order mark
    '{"utf16": "é"}'.encode("utf-16"),
    b' \n {"spaced": "\\u00e9\\n"} \t',
    b'"\xc3\xa9"',
]


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("body", SAME_VALUE)
def test_a_body_reads_as_the_value_json_gives(body):
    assert _same(parse_json(body), json.loads(body))


@pytest.mark.parametrize("body", [b"", b"{", b"{not json", b'{"a": 1,}', b"[1, 2", b"\xff\xfe\xfd",
                                  b'{"a": "\x01"}', b"nul", b"[1] [2]"])
def test_a_body_that_is_not_json_is_refused_with_the_standard_message(body):
    try:
        json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        expected = f"the body is not JSON: {e}"
    with pytest.raises(ApiError) as got:
        parse_json(body)
    assert got.value.status == 400 and got.value.message == expected


def test_a_body_nested_too_deeply_is_refused_in_one_line():
    with pytest.raises(ApiError) as got:
        parse_json(b"[" * 100_000 + b"]" * 100_000)
    assert got.value.status == 400
    assert got.value.message == "the body nests JSON arrays/objects too deeply"
