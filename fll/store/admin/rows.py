"""Showing and parsing row keys and rows, and the row facts every admin operation shares.

A key prints in a printable form (`printable_key`) or a human one with ISO
times (`human_key`), each read back exactly (`parse_row_key`); `describe_row`
decodes a row for `fll get` and `fll scan`; `row_time` and `timed_columns`
give the time a row carries. The row-kind groups and the batch size used by
the operations are here too.
"""
from __future__ import annotations

import json
import re
import struct
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import msgpack

from ... import rowkeys as rk
from ...errors import BadRequest
from ..datarows import SHAPED, data_parts, shape_ref
from ..layout import SCHEMA_REF


Progress = Callable[[int], None]
_T = struct.Struct(">q")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INDEX_KINDS = (rk.BACKWARD, rk.FORWARD, rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET,
                rk.FIRST_BACKWARD, rk.FIRST_FORWARD)
#: rows a column per run, 64 ms each: the run index and the first-run rows
_RUN_ROWS = (rk.BACKWARD, rk.FORWARD, rk.FIRST_BACKWARD, rk.FIRST_FORWARD)
_BATCH = 500


_BUCKETS = (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET)
_BY_SET = (rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET)
_BUCKET_OF = {rk.BACKWARD: rk.BACKWARD_BUCKET, rk.FORWARD: rk.FORWARD_BUCKET}


Cell = tuple[bytes, str]


def iso_ms(ms: int) -> str:
    """``2024-05-01T10:00:00.123Z`` for epoch ms; exact (no float), plain digits past 9999."""
    try:
        return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
    except OverflowError:
        return str(ms)


def parse_iso_ms(text: str) -> int:
    """Inverse of `iso_ms` (also plain digits = ms); ValueError otherwise."""
    if re.fullmatch(r"\d+", text):
        return int(text)
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return (dt - _EPOCH) // timedelta(milliseconds=1)


_PRINTABLE = {b: (chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}") for b in range(256)}
_PRINTABLE[0x5C] = "\\\\"


def printable_key(key: bytes) -> str:
    r"""The key with printable ASCII kept, ``\`` doubled and every other byte as ``\xNN``.

    `parse_printable_key` reads it back exactly, so it can be pasted into `fll get`.
    """
    # latin-1 maps each byte to the code point of the same number: one translate call
    return key.decode("latin-1").translate(_PRINTABLE)


def parse_printable_key(text: str) -> bytes:
    r"""Bytes of a key written with ``\xNN`` and ``\\`` escapes (other text as UTF-8)."""
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            nxt = text[i + 1:i + 2]
            if nxt == "\\":
                out.append(0x5C)
                i += 2
                continue
            if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2:i + 4]):
                out.append(int(text[i + 2:i + 4], 16))
                i += 4
                continue
            raise BadRequest(f"row key {text!r}: bad escape at character {i + 1} "
                             f"(use \\xNN or \\\\)", "ROWKEY")
        out.extend(c.encode("utf-8"))
        i += 1
    return bytes(out)


def human_key(key: bytes) -> str:
    """The key with escaped parts kept and the inverted time shown as ISO 8601.

    Parts stay percent-escaped, so splitting on ``|`` is exact and
    `parse_human_key` reads it back. Keys of no known shape fall back to
    `printable_key`.
    """
    try:
        k = rk.decode(key)
    except ValueError:
        return printable_key(key)
    if k.start_ms is None or k.kind in ("backward-buckets", "forward-buckets"):
        return printable_key(key)
    if k.level == 0:  # a format-4 run row: no run in the key
        head = len(key) - 8
        return f"{key[:head].decode('utf-8')}{iso_ms(k.start_ms)}"
    if k.kind == "event":  # e|<time>|<run>|<digest>: the time first
        return f"e|{iso_ms(k.start_ms)}|{key[11:].decode('utf-8')}"
    parts = key.split(rk.SEP)
    # kind | ns | name | [checksum |] <8 bytes, may hold '|'> | run
    head = len(parts[0]) + len(parts[1]) + len(parts[2]) + 3
    if k.checksum is not None:
        head += len(rk.escape(k.checksum)) + 1
    prefix, run = key[:head], key[head + 9:]
    return f"{prefix.decode('utf-8')}{iso_ms(k.start_ms)}|{run.decode('utf-8')}"


def parse_human_key(text: str) -> bytes | None:
    """Key bytes of a `human_key` string, or None when ``text`` is not one."""
    parts = text.split("|")
    if parts[0] in ("b", "f") and len(parts) == 4:  # a format-4 run row
        try:
            inv = rk.invert(parse_iso_ms(parts[-1]))
        except (ValueError, OverflowError):
            return None
        return "|".join(parts[:-1]).encode("utf-8") + rk.SEP + inv
    if parts[0] == "e" and len(parts) == 4:  # an event row: e|<time>|<run>|<digest>
        try:
            inv = rk.invert(parse_iso_ms(parts[1]))
        except (ValueError, OverflowError):
            return None
        return rk.EVENT + rk.SEP + inv + rk.SEP + "|".join(parts[2:]).encode("utf-8")
    want = {"b": 5, "f": 5, "B": 6, "F": 6, "x": 5, "y": 5, "J": 5}.get(parts[0])
    if want is None or len(parts) != want:
        return None
    try:
        ms = parse_iso_ms(parts[-2])
        inv = rk.invert(ms)
    except (ValueError, OverflowError):
        return None
    head = "|".join(parts[:-2]).encode("utf-8") + rk.SEP
    return head + inv + rk.SEP + parts[-1].encode("utf-8")


def parse_row_key(text: str, *, hex_form: bool = False) -> bytes:
    r"""A row key typed by a user: hex (``hex_form``), the human form with an ISO
    time, or the printable form with ``\xNN`` escapes."""
    if hex_form:
        try:
            return bytes.fromhex(text.replace(" ", ""))
        except ValueError:
            raise BadRequest(f"row key {text!r} is not hexadecimal", "ROWKEY") from None
    human = parse_human_key(text)
    return human if human is not None else parse_printable_key(text)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": value.hex()}
    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def decode_column(kind: str, column: str, value: bytes) -> Any:
    """One cell as JSON-ready data: msgpack of ``d|`` rows decoded, times as ints,
    texts as strings; anything undecodable as ``{"hex": ...}``."""
    try:
        if kind == "data" and column in ("o", "s"):
            return _jsonable(msgpack.unpackb(value, raw=False, strict_map_key=False))
        if kind == "data" and column == SHAPED:  # a shape and its endpoints (format 5)
            checksum, eps = shape_ref({column: value})
            return {"shape": checksum, "endpoints": _jsonable(eps)}
        if kind in ("data", "shape") and column == "z":  # operations and summaries, deflated
            ops, summaries = data_parts({"z": value})
            return {"o": _jsonable(msgpack.unpackb(ops, raw=False, strict_map_key=False)),
                    "s": _jsonable(msgpack.unpackb(summaries, raw=False, strict_map_key=False))}
        if kind == "schema" and column == SCHEMA_REF:  # the schema it names (format 6)
            return {"schema": rk.checksum_of(value)}
        if kind == "schemas":  # a run's report (format 7): its start and the schema named
            at, run_id = rk.schema_column_of(column)
            return {"start_ms": at, "run": run_id, "schema": rk.checksum_of(value)}
        if kind == "schema-body" or (kind == "schema" and column == "f"):
            return _jsonable(msgpack.unpackb(value, raw=False))
        if kind == "run" and column == "t":
            return _T.unpack(value)[0]
        if kind in ("backward", "forward", "backward-first", "forward-first") \
                and len(value) == 17:  # a run cell
            return {"ms_in_row": value[0], "checksum": rk.checksum_of(value[1:])}
        return value.decode("utf-8")
    except Exception:  # a corrupt cell is shown, not fatal: this is a repair tool
        return {"hex": value.hex()}


def describe_row(key: bytes, columns: dict[str, bytes]) -> dict:
    """A row as one JSON object: printable and hex key, decoded key parts, decoded columns."""
    out: dict[str, Any] = {"key": printable_key(key), "key_hex": key.hex()}
    try:
        k = rk.decode(key)
    except ValueError:
        out["kind"] = "unknown"
        out["columns"] = {c: {"hex": v.hex()} for c, v in sorted(columns.items())}
        return out
    out["kind"] = k.kind
    if k.namespace is not None:
        out["namespace"], out["name"] = k.namespace, k.name
    if k.checksum is not None:
        out["checksum"] = k.checksum
    if k.start_ms is not None:
        out["start_ms"], out["start"] = k.start_ms, iso_ms(k.start_ms)
    if k.tag is not None:
        out["tag"] = k.tag
    if k.field is not None:
        out["field"] = k.field
    if k.run_id is not None:
        out["run_id"] = k.run_id
    elif k.level == 0:  # a format-4 run row: its runs are its columns
        out["runs"] = sorted(columns)
    out["columns"] = {c: decode_column(k.kind, c, v) for c, v in sorted(columns.items())}
    if k.kind == "run" and isinstance(out["columns"].get("t"), int):
        out["start_ms"] = out["columns"]["t"]
        out["start"] = iso_ms(out["start_ms"])
    return out


def row_time(key: bytes, columns: dict[str, bytes]) -> int | None:
    """The run start time a row carries (index key or run row), else None."""
    if key[:1] == rk.RUN:
        t = columns.get("t")
        return _T.unpack(t)[0] if t is not None and len(t) == 8 else None
    if key[:1] in _INDEX_KINDS:
        try:
            return rk.decode(key).start_ms
        except ValueError:
            return None
    return None


def timed_columns(key: bytes, columns: dict[str, bytes], start_ms: int, end_ms: int
                  ) -> dict[str, bytes] | None:
    """What of a row lies in ``[start, end)``, or None for nothing: a format-4
    run row spans 64 ms, so only its runs that started in the range are kept
    (a cell that does not decode goes with its row's start); any other row
    is whole or nothing, by the time it carries."""
    if key[:1] in _RUN_ROWS:
        try:
            k = rk.decode(key)
        except (ValueError, UnicodeDecodeError):
            return None
        if k.level == 0:
            row_ms = k.start_ms or 0
            kept = {}
            for run_id, value in columns.items():
                try:
                    t = rk.run_of(row_ms, value)[0]
                except ValueError:
                    t = row_ms
                if start_ms <= t < end_ms:
                    kept[run_id] = value
            return kept or None
    at = row_time(key, columns)
    return columns if at is not None and start_ms <= at < end_ms else None


def row_bytes(key: bytes, columns: dict[str, bytes]) -> int:
    return len(key) + sum(len(c) + len(v) for c, v in columns.items())


def dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)
