"""Time expressions: epoch seconds, now-7d, ISO 8601, and the start/end rules."""
from __future__ import annotations

import pytest

from fll import BadRequest
from fll.timerange import parse_range, parse_time

NOW = 1_700_000_000_000


@pytest.mark.parametrize("text, expected", [
    ("0", 0),
    ("1442863938", 1442863938000),
    ("now", NOW),
    ("now-7d", NOW - 7 * 86400 * 1000),
    ("now-1d+4h", NOW - 20 * 3600 * 1000),
    ("now - 30m", NOW - 1800 * 1000),
    ("now-10s", NOW - 10_000),
    ("2023-11-14T22:13:20Z", NOW),
    ("2023-11-14T22:13:20+00:00", NOW),
    (12, 12000),
])
def test_time_expressions(text, expected):
    assert parse_time(text, "start", now=NOW) == expected


@pytest.mark.parametrize("text, message", [
    ("yesterday", "not a time"),
    ("-5", "must not be negative"),
    ("now-7x", "not a time"),
    ("", "is required"),
    (None, "is required"),
])
def test_bad_times_name_the_parameter(text, message):
    with pytest.raises(BadRequest, match=message) as e:
        parse_time(text, "end", now=NOW)
    assert e.value.parameter == "end"


def test_iso_can_be_refused_where_only_rest_forms_are_allowed():
    with pytest.raises(BadRequest, match="epoch seconds, now"):
        parse_time("2023-11-14", "start", allow_iso=False)


def test_start_after_end_is_refused():
    with pytest.raises(BadRequest, match="start must not be after end"):
        parse_range("20", "10")
    assert parse_range("10", "10") == (10000, 10000)
