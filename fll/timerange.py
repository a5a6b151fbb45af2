"""Time expressions and the `[start, end)` rule.

Every range in fll is start inclusive, end exclusive, in epoch milliseconds
inside the store. Users (REST, CLI) write epoch seconds, relative expressions
(`now`, `now-7d`, `now-1d+4h`, units s m h d) or, at the CLI, ISO 8601.
Parsing never guesses: anything else is a `BadRequest` naming the parameter.
"""
from __future__ import annotations

import re
import time
from datetime import datetime, timezone

from .errors import BadRequest

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_REL = re.compile(r"^now((?:\s*[+-]\s*\d+\s*[smhdw])*)$")
_TERM = re.compile(r"([+-])\s*(\d+)\s*([smhdw])")
UNITS_TEXT = "s (seconds), m (minutes), h (hours), d (days), w (weeks)"
MAX_SECONDS = 2**63 // 1000 - 1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_time(value: str | int | None, parameter: str = "time", *, now: int | None = None,
               default: int | None = None, allow_iso: bool = True) -> int:
    """Parse one time expression into epoch milliseconds.

    ``now`` (ms) fixes the clock so `start` and `end` of one request agree.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise BadRequest(f"{parameter} is required", parameter)
        return default
    if isinstance(value, bool):
        raise BadRequest(f"{parameter} must be a time, got {value!r}", parameter)
    if isinstance(value, int):
        seconds = value
    else:
        text = value.strip()
        clock = now_ms() if now is None else now
        m = _REL.match(text)
        if m:
            offset = sum((1 if s == "+" else -1) * int(n) * _UNITS[u]
                         for s, n, u in _TERM.findall(m.group(1)))
            result = clock + offset * 1000
            if result < 0:
                raise BadRequest(f"{parameter}={value!r} is before 1970", parameter)
            return result
        if re.fullmatch(r"-?\d+", text):
            seconds = int(text)
        elif allow_iso:
            try:
                dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise BadRequest(
                    f"{parameter}={value!r} is not a time: use epoch seconds, now, now-7d, "
                    f"now-1d+4h or ISO 8601{_units_hint(text)}", parameter) from None
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            return int(dt.timestamp() * 1000)
        else:
            raise BadRequest(
                f"{parameter}={value!r} is not a time: use epoch seconds, now, now-7d or "
                f"now-1d+4h{_units_hint(text)}", parameter)
    if seconds < 0:
        raise BadRequest(f"{parameter} must not be negative, got {seconds}", parameter)
    if seconds > MAX_SECONDS:
        raise BadRequest(f"{parameter}={seconds} is too large", parameter)
    return seconds * 1000


def _units_hint(text: str) -> str:
    # a relative time with a unit fll does not know (now-3mo, now-1y): list the units
    return f" (units: {UNITS_TEXT})" if text.lower().startswith("now") else ""


def parse_range(start: str | int | None, end: str | int | None, *, default_start: int = 0,
                default_end: int | None = None, allow_iso: bool = True) -> tuple[int, int]:
    """Both ends of `[start, end)` in ms; `start > end` is a `BadRequest`."""
    clock = now_ms()
    s = parse_time(start, "start", now=clock, default=default_start, allow_iso=allow_iso)
    e = parse_time(end, "end", now=clock, default=clock + 1 if default_end is None else default_end,
                   allow_iso=allow_iso)
    if s > e:
        raise BadRequest(f"start must not be after end (start={start}, end={end})", "start")
    return s, e
