"""Maintenance of a lineage table: row display, stats, fsck, purge and migrate.

Everything here works on the raw `Table` rows described in `fll.rowkeys`, so
it sees (and can repair) what the query paths of `LineageStore` would trip
over. Work is streamed in key order and done in batches: memory grows with
the number of distinct operation sets (and the problems found), never with
the number of rows. This module must never print or depend on click: the CLI
passes a ``progress`` callback and renders the reports.

Repair and purge delete rows, each re-checked inside the transaction that
deletes it on SQLite, so they are safe beside writers there; on backends
without transactions they take the ``v|lease`` row and refuse to start while
a writer announced itself (`maintenance`). Upgrade and run-by-run migration
of store formats live here too.
"""
from __future__ import annotations

import functools
import json
import re
import struct
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import msgpack
import xxhash

from .. import rowkeys as rk
from ..opset import decode_canonical
from ..summaries import Summaries
from ..errors import BadRequest, FllError, StoreError
from ..model import EndPoint
from . import runs as run_model
from .base import Table
from .lineage import (FIRST_OF_RUN, RUN_OF_BUCKET, RUN_OF_FIRST, SHAPED, WIDE_PREFIXES,
                      LineageStore, data_parts, data_row, decode_data, has_lineage_rows,
                      unstamped_format, run_failed,
                      join_shape, row_sets, run_cells, SCHEMA_REF, set_used_since, shape_ref,
                      unused_buckets)
from .tags import decode_assignment, decode_def

Progress = Callable[[int], None]
_T = struct.Struct(">q")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INDEX_KINDS = (rk.BACKWARD, rk.FORWARD, rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET,
                rk.FIRST_BACKWARD, rk.FIRST_FORWARD)
#: rows a column per run, 64 ms each: the run index and the first-run rows
_RUN_ROWS = (rk.BACKWARD, rk.FORWARD, rk.FIRST_BACKWARD, rk.FIRST_FORWARD)
_BATCH = 500


# -- showing keys and rows -----------------------------------------------------

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


# -- scan ----------------------------------------------------------------------

def scan_rows(table: Table, *, kinds: list[bytes] | None = None, dataset: tuple[str, str] |
              None = None, start_ms: int | None = None, end_ms: int | None = None,
              limit: int | None = None, reverse: bool = False
              ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
    """Rows in key order, streamed, restricted to row kinds, one dataset and a time range.

    With a time range, rows without a time (``d|`` rows, unknown keys) are
    left out; ``b|``/``f|`` of one dataset are read as one contiguous key
    range, every other kind is filtered row by row.
    """
    if dataset is not None:
        kinds = [k for k in (kinds or list(_INDEX_KINDS)) if k in _INDEX_KINDS]
        if not kinds:
            raise BadRequest("--dataset selects index rows: use --prefix b, f, i, o, B or F",
                             "dataset")
    timed = start_ms is not None or end_ms is not None
    lo_t = 0 if start_ms is None else start_ms
    hi_t = rk.MAX_TIME if end_ms is None else end_ms
    ranges: list[tuple[bytes, bytes, bool]] = []  # (start, stop, filter by time)
    for kind in sorted(kinds) if kinds else [b""]:
        if dataset is not None:
            prefix = rk.dataset_prefix(kind, *dataset)
            if kind in _RUN_ROWS and timed:
                # from the 64 ms run row holding ``start``: its runs before
                # ``start`` (and older narrow rows there) are filtered out below
                lo, _ = rk.time_range(prefix, lo_t, hi_t)
                _, hi = rk.time_range(prefix, lo_t - lo_t % rk.LEVELS4[0], hi_t)
                ranges.append((lo, hi if hi_t > lo_t else lo, True))
            else:
                ranges.append((prefix, rk.prefix_end(prefix), timed))
        elif kind:
            prefix = kind + rk.SEP
            ranges.append((prefix, rk.prefix_end(prefix), timed))
        else:
            ranges.append((b"", b"", timed))
    if reverse:
        ranges.reverse()
    emitted = 0
    for lo, hi, filtered in ranges:
        if lo == hi and lo:
            continue
        # the backend honours the limit only when no row is filtered out here
        for key, cols in table.scan(lo, hi, reverse=reverse,
                                    limit=None if filtered or limit is None else limit - emitted):
            if filtered:
                kept = timed_columns(key, cols, lo_t, hi_t)
                if kept is None:
                    continue
                cols = kept
            yield key, cols
            emitted += 1
            if limit is not None and emitted >= limit:
                return


# -- stats ---------------------------------------------------------------------

def stats(table: Table, progress: Progress | None = None) -> dict:
    """Rows and bytes per kind, distinct operation sets, datasets and runs (one full scan)."""
    kinds = {name: {"rows": 0, "bytes": 0} for name in list(rk.KINDS.values()) + ["unknown"]}
    datasets: set[tuple[bytes, bytes]] = set()
    total_rows = total_bytes = 0
    started_only = 0  # run rows whose start was claimed (OpenLineage START) and no set came
    for key, cols in table.scan():
        name = rk.KINDS.get(key[:1], "unknown") if key[1:2] == rk.SEP else "unknown"
        size = row_bytes(key, cols)
        kinds[name]["rows"] += 1
        kinds[name]["bytes"] += size
        total_rows += 1
        total_bytes += size
        if key[:1] in (rk.BACKWARD, rk.FORWARD):
            parts = key.split(rk.SEP, 3)
            if len(parts) == 4:
                datasets.add((parts[1], parts[2]))
        elif name == "run" and "c" not in cols:
            started_only += 1
        if progress:
            progress(1)
    out = {"store": table.url, "rows": total_rows, "bytes": total_bytes, "kinds": kinds,
           "operation_sets": kinds["data"]["rows"],
           "runs": kinds["run"]["rows"] - started_only, "started_only_runs": started_only,
           "datasets": len(datasets)}
    size_bytes = getattr(table, "size_bytes", None)
    if callable(size_bytes):
        out["file_bytes"] = size_bytes()
    return out


# -- fsck ----------------------------------------------------------------------

Cell = tuple[bytes, str]


@dataclass
class FsckReport:
    """What fsck found (keys are raw bytes) and what it repaired."""

    rows: int = 0
    format: int = 0
    dangling: list[bytes] = field(default_factory=list)   # index/run rows, data row missing
    #: cells of wide rows naming a set whose data row is missing (row, column)
    dangling_cells: list[tuple[bytes, str]] = field(default_factory=list)
    orphans: list[bytes] = field(default_factory=list)    # d| rows nothing references
    missing_runs: dict[bytes, dict[str, bytes]] = field(default_factory=dict)  # r| to rebuild
    missing_twins: dict[bytes, dict[str, bytes]] = field(default_factory=dict)  # index rows
    stale_buckets: list[tuple[bytes, str]] = field(default_factory=list)  # g|/h| cells no run keeps
    #: ``i|``/``o|`` cells whose run cell is not the same (row, run)
    stray_firsts: list[tuple[bytes, str]] = field(default_factory=list)
    unfinished: list[bytes] = field(default_factory=list)  # r| rows still pending (w=0)
    #: ``s|`` rows naming a schema whose ``q|`` row is missing
    dangling_schemas: list[bytes] = field(default_factory=list)
    #: ``q|`` rows (schema bodies) no ``s|`` row names
    unused_schemas: list[bytes] = field(default_factory=list)
    #: run-model rows (``e|`` events, ``J|`` job runs) their run's ``n|`` row does not name
    stray_run_rows: list[bytes] = field(default_factory=list)
    #: ``n|`` cells naming an event whose ``e|`` row is missing
    broken_event_refs: list[tuple[bytes, str]] = field(default_factory=list)
    #: failed-run rows (``x|``/``y|``) whose run row is gone or names another set
    stray_failed: list[bytes] = field(default_factory=list)
    corrupt: list[bytes] = field(default_factory=list)    # rows that do not decode
    unknown: list[bytes] = field(default_factory=list)    # keys of no fll shape
    #: rows of an older format left in an upgraded store (narrow run and bucket rows, B|/F|)
    legacy: list[bytes] = field(default_factory=list)
    repaired: bool = False
    #: problems a repair left (corrupt and unknown rows are reported, never changed)
    unrepaired: int = 0
    #: what the repair changed (rows or cells, as each list counts them): a problem
    #: a writer finished or removed before the repair reached it is not counted
    fixed: int = 0
    #: problems the scans suggested that a fresh re-read showed were not there
    #: (a writer was between two of its writes, or wrote after a scan passed)
    unconfirmed: int = 0
    #: what each suspected problem depends on, for that re-read: the run cell
    #: (row, run) behind a missing run row, the run cells (run row, run, value,
    #: first-run row) wanting a missing twin cell
    run_cell_of: dict[bytes, Cell] = field(default_factory=dict, repr=False)
    twin_wanters: dict[Cell, list[tuple[bytes, str, bytes, bytes]]] = field(
        default_factory=dict, repr=False)

    @property
    def problems(self) -> int:
        return (len(self.dangling) + len(self.dangling_cells) + len(self.orphans)
                + len(self.missing_runs)
                + len(self.missing_twins) + len(self.stale_buckets) + len(self.unfinished)
                + len(self.stray_firsts)
                + len(self.dangling_schemas) + len(self.unused_schemas)
                + len(self.stray_run_rows) + len(self.broken_event_refs)
                + len(self.stray_failed)
                + len(self.legacy) + len(self.corrupt)
                + len(self.unknown))

    @property
    def clean(self) -> bool:
        return self.problems == 0

    @property
    def exit_code(self) -> int:
        """0 when clean or fully repaired, 1 when problems remain (for scripts)."""
        if self.clean:
            return 0
        return 1 if (not self.repaired or self.unrepaired) else 0

    def to_dict(self) -> dict:
        def keys(items) -> list[str]:
            return [printable_key(k) for k in items]

        def cells(items) -> list[str]:
            return [f"{printable_key(k)} column {c}" for k, c in items]
        return {"rows": self.rows, "format": self.format, "clean": self.clean,
                "repaired": self.repaired, "unrepaired": self.unrepaired,
                "fixed": self.fixed, "unconfirmed": self.unconfirmed,
                "exit_code": self.exit_code,
                "dangling_index_rows": keys(self.dangling) + cells(self.dangling_cells),
                "orphaned_data_rows": keys(self.orphans),
                "missing_run_rows": keys(self.missing_runs),
                "missing_index_twins": keys(self.missing_twins),
                "stale_bucket_rows": cells(self.stale_buckets),
                "first_run_cells_without_their_run": cells(self.stray_firsts),
                "unfinished_runs": keys(self.unfinished),
                "schema_rows_without_their_schema": keys(self.dangling_schemas),
                "unused_schemas": keys(self.unused_schemas),
                "run_rows_not_named_by_their_run": keys(self.stray_run_rows),
                "run_events_missing": cells(self.broken_event_refs),
                "failed_run_rows_without_their_run": keys(self.stray_failed),
                "older_format_rows": keys(self.legacy),
                "corrupt_rows": keys(self.corrupt),
                "unknown_rows": keys(self.unknown)}


_BUCKETS = (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET)
_BY_SET = (rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET)
_BUCKET_OF = {rk.BACKWARD: rk.BACKWARD_BUCKET, rk.FORWARD: rk.FORWARD_BUCKET}


def _row_checksum(key: bytes, cols: dict[str, bytes]) -> str | None:
    """The set a narrow row (of any format) or a run row names."""
    if key[:1] in _BY_SET or key[:1] in _BUCKETS:
        return rk.decode(key).checksum
    c = cols.get("c")
    return c.decode("utf-8") if c is not None else None


def _bucket_children(key: bytes, k: rk.Key) -> list[bytes]:
    level, first = k.level or 0, k.start_ms or 0
    size = rk.LEVELS4[level - 1]
    return [rk.bucket4(key[:1], k.namespace or "", k.name or "", level - 1, first + i * size)
            for i in range(rk.LEVELS4[level] // size) if first + i * size <= rk.MAX_TIME]


def _bucket_kept(table: Table, cell: Cell, gone: "set[Cell] | frozenset[Cell]" = frozenset()
                 ) -> bool:
    """Whether a bucket cell is kept: at level 1 by a run of its set in its
    span (the run rows, filtered by checksum); above, by its column in one of
    its children one level down that is present and not in ``gone``."""
    key, checksum = cell
    k = rk.decode(key)
    if (k.level or 0) <= 1:
        return _bucket_kept_since(table, cell, 0)
    present = table.get_many(_bucket_children(key, k))
    return any(checksum in cols and (child, checksum) not in gone
               for child, cols in present.items())


def _bucket_kept_since(table: Table, cell: Cell, since_ms: int) -> bool:
    """Whether a run of the bucket cell's set started in the bucket's span, at
    or after ``since_ms``: the run rows of the span, read until one is found."""
    key, checksum = cell
    k = rk.decode(key)
    first = k.start_ms or 0
    end = min(first + rk.LEVELS4[k.level or 0], rk.MAX_TIME + 1)
    since = max(first, since_ms)
    lo, hi = rk.time_range(rk.dataset_prefix(RUN_OF_BUCKET[key[:1]], k.namespace or "",
                                             k.name or ""), since - since % rk.LEVELS4[0], end)
    for row, cols in table.scan(lo, hi):
        try:
            if any(c == checksum and t >= since for _, c, t in row_sets(row, cols)):
                return True
        except (ValueError, UnicodeDecodeError):
            continue
    return False


def _by_row(cells: "list[Cell] | set[Cell]") -> dict[bytes, list[str]]:
    out: dict[bytes, list[str]] = {}
    for key, col in sorted(cells):
        out.setdefault(key, []).append(col)
    return out


def _set_endpoints(info) -> list[tuple[bytes, str, str]]:
    return [(rk.BACKWARD, e.namespace, e.name) for e in sorted(info.destinations)] + \
        [(rk.FORWARD, e.namespace, e.name) for e in sorted(info.sources)]


@contextmanager
def maintenance(table: Table, what: str, *, lease_ms: int = 3_600_000) -> Iterator[None]:
    """Hold the maintenance lease for a purge or repair on a backend without
    transactions: take ``v|lease`` (check-and-put; an expired one is taken
    over), then refuse if any writer announced itself within its time to live.
    Writers check the lease after announcing, so one of the two always sees
    the other. On SQLite every step is its own transaction: nothing to hold."""
    if callable(getattr(table, "atomic", None)):
        yield
        return
    from .lineage import LEASE, WRITER_PREFIX, _now_ms

    key = rk.meta(LEASE)
    now = _now_ms()
    mine = {"t": _T.pack(now + lease_ms), "w": f"{what} since {iso_ms(now)}".encode()}
    current = table.get(key)
    if current is not None and _T.unpack(current["t"])[0] > now:
        raise StoreError(f"store {table.url}: another maintenance command holds the lease "
                         f"({current.get('w', b'?').decode(errors='replace')})")
    expected = None if current is None else current["t"]
    if not table.check_and_put(key, "t", expected, mine):
        raise StoreError(f"store {table.url}: another maintenance command took the lease first")
    try:
        prefix = rk.meta(WRITER_PREFIX)
        active: list[bytes] = []
        expired: list[bytes] = []
        for k, c in table.scan(prefix, rk.prefix_end(prefix)):
            alive = "t" in c and len(c["t"]) == 8 and _T.unpack(c["t"])[0] > now
            (active if alive else expired).append(k)
        if expired:  # writers long gone: their rows would only pile up
            table.delete(expired)
        if active:
            raise StoreError(f"store {table.url}: {len(active)} writer(s) active in the last "
                             f"30 s; {what} needs them stopped on this backend (no "
                             f"transactions): stop them and retry")
        yield
    finally:
        table.delete([key])


def atomically(table: Table, fn: Callable[[Table], Any]) -> Any:
    """``fn(table)`` in one transaction where the backend has them; else as is
    (the caller then holds the maintenance lease, see `lease`)."""
    atomic = getattr(table, "atomic", None)
    if callable(atomic):
        return atomic(lambda _t: fn(table))
    return fn(table)


def fsck(table: Table, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    """Check that every run cell and run row points at a data row, every data
    row is referenced, every run cell has its twins (its set's bucket cells at
    each level and its directory cell), every bucket cell is kept by a run, and
    no row of an older format is left; with ``repair``, fix what can be fixed.
    A store of an older format is refused: `fll admin upgrade` converts it
    first (a rerun finishes an interrupted one).

    Several scans (the shapes, the schema bodies, the ``d|`` rows, then every
    row), each judging from what the earlier ones saw. Writers may run
    meanwhile: on SQLite the scans read one snapshot (`SQLiteTable.snapshot`,
    which blocks no writer); on backends without transactions they read as
    they go. Either way a problem is reported only once a fresh read of what
    it depends on still shows it (`_confirm`; after `SETTLE_S` where writers
    may be between two puts), so a sound store beside writers reports
    nothing. The repair re-checks each problem again inside the transaction
    that changes it (one per batch; elsewhere under the lease, which no
    writer holds meanwhile) and leaves alone what a writer completed since;
    ``report.fixed`` counts what it changed.
    """
    from .lineage import FORMAT, OlderFormat

    report = FsckReport()
    found = store_format(table)
    if 0 < found < FORMAT:
        raise OlderFormat(table.url, found)  # its rows are read by `upgrade` alone
    if found > FORMAT:
        raise StoreError(f"store {table.url} has format {found}, newer than format {FORMAT} "
                         f"this fll reads; upgrade fll")
    report.format = found or FORMAT
    with _read_view(table):
        _find_problems(table, report, progress)
    if not report.clean:
        _confirm(table, report, settle=not _transactional(table))
    if repair and not report.clean:
        with maintenance(table, "fsck --repair"):
            if not _transactional(table):
                # no writer runs now (the lease): this re-read is the state repaired
                _confirm(table, report, settle=False)
            report.fixed = _repair(table, report)
        report.repaired = True
        report.unrepaired = len(report.corrupt) + len(report.unknown)
    return report


def _transactional(table: Table) -> bool:
    return callable(getattr(table, "atomic", None))


@contextmanager
def _read_view(table: Table) -> Iterator[None]:
    """One state of the store for every read inside, where the backend can
    (SQLite: `SQLiteTable.snapshot`); elsewhere reads as they come, and what
    they suggest is confirmed by `_confirm`."""
    snapshot = getattr(table, "snapshot", None)
    if callable(snapshot):
        with snapshot():
            yield
    else:
        yield


def _shape_parts(cols: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(shape, summaries) of a ``p|`` row; an error when it does not decode."""
    parts = data_parts(cols)
    decode_canonical(parts[0])
    Summaries(parts[1])
    return parts


_BODY_ERRORS = (ValueError, KeyError, UnicodeDecodeError, msgpack.UnpackException)
_DATA_ERRORS = (ValueError, FllError, IndexError, TypeError, KeyError, UnicodeDecodeError)


def _body_digest(key: bytes, cols: dict[str, bytes]) -> bytes:
    """The digest a ``q|`` row is keyed by, once its body is checked against it."""
    digest = rk.checksum_bytes(rk.decode(key).checksum or "")
    msgpack.unpackb(cols["f"], raw=False)
    if xxhash.xxh3_128_digest(cols["f"]) != digest:
        raise ValueError("not the schema its key names")
    return digest


def _check_data(key: bytes, cols: dict[str, bytes],
                shapes: dict[str, tuple[bytes, bytes]]) -> None:
    """An error when a ``d|`` row does not decode to the set its key names
    (a row in shape form with the shapes given, by checksum)."""
    stored = rk.decode(key).checksum or ""
    if SHAPED in cols:
        shape_checksum, eps = shape_ref(cols)
        if shape_checksum not in shapes:
            raise ValueError("its shape row is missing or corrupt")
        ops = join_shape(shapes[shape_checksum][0], eps)
        if decode_canonical(ops).checksum != stored:
            raise ValueError("its shape and endpoints make another set")
        Summaries(shapes[shape_checksum][1], [EndPoint(e["namespace"], e["name"])
                                              for e in eps])
    else:
        ops, summaries = data_parts(cols)
        decode_canonical(ops)
        Summaries(summaries)


def _find_problems(table: Table, report: FsckReport, progress: Progress | None) -> None:
    """The scans of `fsck`: what they find goes into ``report``, to be confirmed."""
    data: set[str] = set()
    # the shapes first (format 5): few, and every shaped d| row is checked against its own
    shapes: dict[str, tuple[bytes, bytes]] = {}
    shape_keys: dict[str, bytes] = {}
    for key, cols in table.scan(rk.SHAPE + rk.SEP, rk.prefix_end(rk.SHAPE + rk.SEP)):
        try:
            c = rk.decode(key).checksum or ""
            shape_keys[c] = key
            shapes[c] = _shape_parts(cols)
        except (ValueError, FllError, UnicodeDecodeError):
            shapes.pop(c, None)
            report.corrupt.append(key)
    used_shapes: set[str] = set()
    # schema bodies (format 6): few, each checked against the digest it is keyed by
    bodies: dict[bytes, bytes] = {}
    for key, cols in table.scan(rk.SCHEMA_BODY + rk.SEP,
                                rk.prefix_end(rk.SCHEMA_BODY + rk.SEP)):
        try:
            bodies[_body_digest(key, cols)] = key
        except _BODY_ERRORS:
            report.corrupt.append(key)
    named_schemas: set[bytes] = set()
    for key, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        data.add(rk.decode(key).checksum or "")
        try:
            if SHAPED in cols:
                used_shapes.add(shape_ref(cols)[0])
            _check_data(key, cols, shapes)
        except _DATA_ERRORS:
            report.corrupt.append(key)
    referenced: set[str] = set()
    # runs seen in b|/f| rows, and twins expected, checked a batch at a time so
    # memory stays flat whatever the number of runs
    pending: dict[str, tuple[str, int, bytes, bytes | None]] = {}  # ..., the run cell's row
    twins: dict[bytes, dict[str, bytes]] = {}
    # format 5: a run cell is indexed either by its first-run cell (row, run,
    # value) or by its bucket cells, as in format 4; and the run cell's row
    either: list[tuple[bytes, str, bytes, dict[bytes, dict[str, bytes]], bytes]] = []
    firsts: list[tuple[bytes, str, bytes]] = []  # first-run cells, to match with run cells
    stale: set[Cell] = set()
    current = report.format >= 4
    fmt5 = report.format >= 5
    model = run_model.ModelCheck()
    failed_rows: list[bytes] = []  # x|/y| rows, checked against their run rows in batches

    def check_runs() -> None:
        found = table.get_many([rk.run(r) for r in pending])
        for run_id, (checksum, start, program, row) in pending.items():
            if rk.run(run_id) not in found:
                report.missing_runs[rk.run(run_id)] = {
                    "c": checksum.encode(), "t": _T.pack(start), "p": program}
                if row is not None:
                    report.run_cell_of[rk.run(run_id)] = (row, run_id)
        pending.clear()

    def check_twins() -> None:
        keys = set(twins)
        for first, _, _, buckets, _ in either:
            keys.add(first)
            keys.update(buckets)
        found = table.get_many(sorted(keys))
        expected: list[tuple[bytes, dict[str, bytes], tuple[bytes, str, bytes, bytes] | None]] = \
            [(key, cols, None) for key, cols in twins.items()]
        for first, run_id, value, buckets, row in either:
            if found.get(first, {}).get(run_id) != value:
                expected.extend((key, cols, (row, run_id, value, first))
                                for key, cols in buckets.items())
        for key, cols, wanter in expected:
            have = found.get(key, {})
            missing = {c: v for c, v in cols.items() if c not in have}
            if missing:
                report.missing_twins.setdefault(key, {}).update(missing)
                if wanter is not None:
                    for c in missing:
                        report.twin_wanters.setdefault((key, c), []).append(wanter)
        twins.clear()
        either.clear()

    def check_firsts() -> None:
        found = table.get_many(sorted({RUN_OF_FIRST[k[:1]] + k[1:] for k, _, _ in firsts}))
        for key, run_id, value in firsts:
            if found.get(RUN_OF_FIRST[key[:1]] + key[1:], {}).get(run_id) != value:
                report.stray_firsts.append((key, run_id))
        firsts.clear()

    for key, cols in table.scan():
        report.rows += 1
        if progress:
            progress(1)
        kind = key[:1]
        if kind in (rk.DATA, rk.META, rk.SHAPE, rk.SCHEMA_BODY) and key[1:2] == rk.SEP:
            continue
        try:
            k = rk.decode(key)
            if kind in run_model.ModelCheck.KINDS:
                model.see(key, cols)  # the run model: checked once the scan is done
                continue
            if kind in (rk.FAILED_BACKWARD, rk.FAILED_FORWARD):
                if "c" not in cols or k.run_id is None:
                    raise ValueError("a failed-run row without its set")
                failed_set = cols["c"].decode()
                if failed_set not in data:
                    report.dangling.append(key)  # its set's data row is missing
                else:
                    referenced.add(failed_set)
                    failed_rows.append(key)
                if len(failed_rows) >= _BATCH:
                    report.stray_failed += _still_stray_failed(table, failed_rows)
                    failed_rows.clear()
                continue
            if kind == rk.SCHEMA:
                digest = cols[SCHEMA_REF]
                if len(digest) != 16:
                    raise ValueError("a schema reference of another size")
                named_schemas.add(digest)
                if digest not in bodies and table.get(rk.schema_body(
                        rk.checksum_of(digest))) is None:  # (not written since the scan)
                    report.dangling_schemas.append(key)
                continue
            if kind in (rk.ALIAS, rk.ALIASED_BY):
                continue  # no operation set behind these
            if kind == rk.TAG:
                decode_def(key, cols)  # a tag's definition: it must decode, nothing more
                continue
            if kind == rk.TAGGED:
                decode_assignment(key, cols)  # names no set: a tag may be put before any run
                continue
            if kind == rk.RUN:
                if "t" in cols:
                    _T.unpack(cols["t"])
                if "c" not in cols and "t" in cols:
                    continue  # a start claimed before the run's lineage arrived
                if cols.get("w") == b"0":
                    report.unfinished.append(key)  # a writer stopped between its puts
            if kind in _BUCKETS and k.checksum is None:
                if k.level == rk.DIRECTORY_LEVEL:  # the directory row: columns are bucket starts
                    if not all(c.isdigit() for c in cols):
                        raise ValueError("a directory column that is no bucket start")
                    continue
                _bucket_cells(table, key, cols, data, referenced, report, stale, current)
                continue
            if kind in (rk.BACKWARD, rk.FORWARD) and k.level == 0:
                for run_id, checksum, t in list(row_sets(key, cols)):
                    if checksum not in data:
                        report.dangling_cells.append((key, run_id))
                        continue
                    referenced.add(checksum)
                    if current:
                        wanted = run_cells(kind, k.namespace or "", k.name or "", t, run_id,
                                           checksum)
                        wanted.pop(key, None)
                        if fmt5:
                            either.append((FIRST_OF_RUN[kind] + key[1:], run_id, cols[run_id],
                                           wanted, key))
                        else:
                            for twin, want in wanted.items():
                                twins.setdefault(twin, {}).update(want)
                    pending.setdefault(run_id, (checksum, t, b"", key))
                if len(twins) + len(either) >= _BATCH:
                    check_twins()
                if len(pending) >= _BATCH:
                    check_runs()
                continue
            if kind in RUN_OF_FIRST and k.level == 0:
                for run_id, checksum, _ in list(row_sets(key, cols)):
                    if checksum not in data:
                        report.dangling_cells.append((key, run_id))
                    else:
                        firsts.append((key, run_id, cols[run_id]))
                if len(firsts) >= _BATCH:
                    check_firsts()
                continue
            if current and kind in _INDEX_KINDS + _BUCKETS:
                report.legacy.append(key)  # narrow rows an interrupted upgrade left
                continue
            if kind in _BUCKETS:
                continue  # an older store's narrow buckets: checked after its upgrade
            named = _row_checksum(key, cols)
        except (ValueError, UnicodeDecodeError, struct.error):
            (report.corrupt if kind in rk.KINDS and key[1:2] == rk.SEP
             else report.unknown).append(key)
            continue
        if named is None or named not in data:
            report.dangling.append(key)
            continue
        referenced.add(named)
        if kind in (rk.BACKWARD, rk.FORWARD):
            pending.setdefault(k.run_id or "", (named, k.start_ms or 0, cols.get("p", b""),
                                                None))
            if len(pending) >= _BATCH:
                check_runs()
    check_runs()
    check_twins()
    check_firsts()
    report.stray_failed += _still_stray_failed(table, failed_rows)
    report.corrupt += model.corrupt
    report.stray_run_rows, report.broken_event_refs = model.problems()
    report.orphans = [rk.data(c) for c in sorted(data - referenced)] + \
        [shape_keys[c] for c in sorted(set(shape_keys) - used_shapes)]
    report.unused_schemas = sorted(key for digest, key in bodies.items()
                                   if digest not in named_schemas)


def _bucket_cells(table: Table, key: bytes, cols: dict[str, bytes], data: set[str],
                  referenced: set[str], report: FsckReport, stale: set[Cell],
                  current: bool) -> None:
    """Check the cells of one format-4 bucket row. Scanned in key order, a
    bucket's children (one level down) came first, so ``stale`` holds those
    already found unused."""
    for checksum in sorted(cols):
        if checksum not in data:
            report.dangling_cells.append((key, checksum))
            continue
        referenced.add(checksum)
        if current and not _bucket_kept(table, (key, checksum), stale):
            report.stale_buckets.append((key, checksum))
            stale.add((key, checksum))


# -- confirming what the scans found ---------------------------------------------
#
# Each `_still_*` takes problems of one kind as the scans listed them and returns
# those a fresh read of exactly what the problem depends on still shows: the
# scans read the store at different moments (on SQLite one snapshot, elsewhere
# as they go, beside writers between two of their writes). `_confirm` runs them
# before anything is reported; the repair runs them again inside the transaction
# (SQLite) or under the lease (elsewhere) that applies each fix.

#: seconds a check on a backend without transactions waits before re-reading
#: what it suspects: a writer's puts for one batch follow each other within
#: milliseconds, so what a writer was in the middle of is finished by then
SETTLE_S = 2.0


def _still_stray_failed(t: Table, keys: list[bytes]) -> list[bytes]:
    """Failed-run rows still there whose run row is gone or names another set
    (a purge or supersede cut short)."""
    if not keys:
        return []
    rows = t.get_many(keys)
    runs = t.get_many(sorted({rk.run(rk.decode(k).run_id or "") for k in rows}))
    out = []
    for key in keys:
        cols = rows.get(key)
        if cols is None:
            continue
        run = runs.get(rk.run(rk.decode(key).run_id or "")) or {}
        if run.get("c") != cols.get("c"):
            out.append(key)
    return out


def _still_present(t: Table, keys: list[bytes]) -> list[bytes]:
    rows = t.get_many(keys)
    return [k for k in keys if k in rows]


def _still_dangling(t: Table, keys: list[bytes]) -> list[bytes]:
    """Rows still naming a set whose data row is absent (or naming none)."""
    rows = t.get_many(keys)
    checks: dict[bytes, str | None] = {}
    for key, cols in rows.items():
        if key[:1] == rk.RUN and "c" not in cols and "t" in cols:
            continue  # a start claimed, as a writer's first step is
        try:
            checks[key] = _row_checksum(key, cols)
        except (ValueError, UnicodeDecodeError):
            continue
    present = t.get_many([rk.data(c) for c in set(checks.values()) if c])
    return [k for k in keys if k in checks
            and (checks[k] is None or rk.data(checks[k] or "") not in present)]


def _still_dangling_cells(t: Table, cells: list[Cell]) -> list[Cell]:
    """Cells still there naming a set whose data row is absent."""
    rows = t.get_many(sorted({k for k, _ in cells}))
    named: dict[Cell, str] = {}
    for key, col in cells:
        cols = rows.get(key, {})
        if col not in cols:
            continue
        try:
            named[(key, col)] = rk.run_of(0, cols[col])[1] if key[:1] in _RUN_ROWS else col
        except (ValueError, UnicodeDecodeError):
            continue
    present = t.get_many([rk.data(c) for c in set(named.values())])
    return [cell for cell in cells if cell in named and rk.data(named[cell]) not in present]


def _still_missing_runs(t: Table, items: list[tuple[bytes, dict[str, bytes]]],
                        cell_of: dict[bytes, Cell]) -> list[tuple[bytes, dict[str, bytes]]]:
    """Run rows still absent while the run cell that names them is there (and
    its set's data row, which a rebuilt run row needs)."""
    keys = [k for k, _ in items]
    cells = [cell_of[k] for k in keys if k in cell_of]
    found = t.get_many(keys + [rk.data(v["c"].decode()) for _, v in items]
                       + sorted({row for row, _ in cells}))
    out = []
    for key, cols in items:
        cell = cell_of.get(key)
        if key in found or rk.data(cols["c"].decode()) not in found:
            continue
        if cell is not None and cell[1] not in found.get(cell[0], {}):
            continue  # the run went since (a purge, a supersede)
        out.append((key, cols))
    return out


def _still_missing_twins(t: Table, items: list[tuple[bytes, dict[str, bytes]]],
                         wanters: dict[Cell, list[tuple[bytes, str, bytes, bytes]]]
                         ) -> list[tuple[bytes, dict[str, bytes]]]:
    """Twin cells still absent while a run cell that needs them is there
    without its first-run cell."""
    keys = {k for k, _ in items}
    for key, cols in items:
        for col in cols:
            for row, _, _, first in wanters.get((key, col), ()):
                keys.update((row, first))
    found = t.get_many(sorted(keys))
    out = []
    for key, cols in items:
        have = found.get(key, {})
        still = {}
        for col, value in cols.items():
            if col in have:
                continue
            wanted_by = wanters.get((key, col))
            if wanted_by is not None and not any(
                    found.get(row, {}).get(run) == v and found.get(first, {}).get(run) != v
                    for row, run, v, first in wanted_by):
                continue  # no run cell needs it now
            still[col] = value
        if still:
            out.append((key, still))
    return out


def _still_stale(t: Table, cells: list[Cell], gone: set[Cell]) -> list[Cell]:
    """Bucket cells still there that no run keeps; in key order, so a bucket's
    children come first and those found unused (``gone``, updated) keep nothing."""
    present = t.get_many(sorted({k for k, _ in cells}))
    out = []
    for cell in cells:
        if cell[1] in present.get(cell[0], {}) and not _bucket_kept(t, cell, gone):
            gone.add(cell)
            out.append(cell)
    return out


def _still_stray_firsts(t: Table, cells: list[Cell]) -> list[Cell]:
    """First-run cells still there without the same cell in their run row."""
    rows = t.get_many(sorted({k for k, _ in cells}))
    runs = t.get_many(sorted({RUN_OF_FIRST[k[:1]] + k[1:] for k, _ in cells}))
    return [(k, c) for k, c in cells if c in rows.get(k, {})
            and runs.get(RUN_OF_FIRST[k[:1]] + k[1:], {}).get(c) != rows[k][c]]


def _still_unfinished(t: Table, keys: list[bytes]) -> list[bytes]:
    rows = t.get_many(keys)
    return [k for k in keys if rows.get(k, {}).get("w") == b"0"]


def _still_dangling_schemas(t: Table, keys: list[bytes]) -> list[bytes]:
    """Schema rows still naming a body that is not there."""
    rows = t.get_many(keys)
    refs = {k: cols.get(SCHEMA_REF, b"") for k, cols in rows.items()}
    present = t.get_many([rk.schema_body(rk.checksum_of(d)) for d in set(refs.values())
                          if len(d) == 16])
    return [k for k in keys if len(refs.get(k, b"")) == 16
            and rk.schema_body(rk.checksum_of(refs[k])) not in present]


def _still_unused_schemas(t: Table, keys: list[bytes]) -> list[bytes]:
    """Schema bodies still there that no schema row names (one scan of them)."""
    if not keys:
        return []
    used = {cols.get(SCHEMA_REF) for _, cols in
            t.scan(rk.SCHEMA + rk.SEP, rk.prefix_end(rk.SCHEMA + rk.SEP))}
    present = t.get_many(keys)
    return [k for k in keys if k in present
            and rk.checksum_bytes(rk.decode(k).checksum or "") not in used]


def _still_corrupt(t: Table, keys: list[bytes]) -> list[bytes]:
    """Rows still there that still do not decode: a data row in shape form
    with its shape as it is now; every other row depends on itself alone."""
    rows = t.get_many(keys)
    shape_keys = set()
    for key, cols in rows.items():
        if key[:1] == rk.DATA and SHAPED in cols:
            try:
                shape_keys.add(rk.shape(shape_ref(cols)[0]))
            except _DATA_ERRORS:
                continue
    shape_rows = t.get_many(sorted(shape_keys))
    shapes: dict[str, tuple[bytes, bytes]] = {}
    for key, cols in shape_rows.items():
        try:
            shapes[rk.decode(key).checksum or ""] = _shape_parts(cols)
        except (ValueError, FllError, UnicodeDecodeError):
            continue
    out = []
    for key in keys:
        if key not in rows:
            continue
        cols = rows[key]
        try:
            if key[:1] == rk.DATA and key[1:2] == rk.SEP:
                _check_data(key, cols, shapes)
            elif key[:1] == rk.SHAPE and key[1:2] == rk.SEP:
                _shape_parts(cols)
            elif key[:1] == rk.SCHEMA_BODY and key[1:2] == rk.SEP:
                _body_digest(key, cols)
            else:
                out.append(key)
            continue
        except _DATA_ERRORS + _BODY_ERRORS:
            out.append(key)
    return out


def _unused_data_rows(t: Table, keys: list[bytes]) -> list[bytes]:
    """``d|`` rows still there that no run of their set uses (a row that does
    not decode is left out: it is reported corrupt, never deleted)."""
    out = []
    for key, cols in t.get_many([k for k in keys if k[:1] == rk.DATA]).items():
        try:
            info = decode_data(cols, t)
        except (ValueError, FllError):
            continue
        if not set_used_since(t, rk.decode(key).checksum or "", _set_endpoints(info), 0):
            out.append(key)
    return out


def _still_orphans(t: Table, keys: list[bytes], corrupt: set[bytes]) -> list[bytes]:
    """Data rows no run uses and shapes no data row names, still; a corrupt
    data row nothing references stays listed while it is still there."""
    unused = set(_unused_data_rows(t, keys))
    unused.update(_still_present(t, [k for k in keys if k in corrupt]))
    shapes = [k for k in keys if k[:1] == rk.SHAPE]
    if shapes:
        used = _shapes_used(t)
        present = t.get_many(shapes)
        unused.update(k for k in shapes if k in present and rk.decode(k).checksum not in used)
    return [k for k in keys if k in unused]


def _confirm(table: Table, report: FsckReport, *, settle: bool) -> None:
    """Keep in ``report`` only the problems a fresh read still shows (after
    `SETTLE_S` when ``settle``: a backend without transactions, whose writers
    may be between two puts)."""
    before = report.problems
    if settle:
        time.sleep(SETTLE_S)

    def each(fn: Callable[[Table, list], list], items: list) -> list:
        return [x for i in range(0, len(items), _BATCH) for x in fn(table, items[i:i + _BATCH])]

    report.corrupt = each(_still_corrupt, report.corrupt)
    report.unknown = each(_still_present, report.unknown)
    report.legacy = each(_still_present, report.legacy)
    report.dangling = each(_still_dangling, report.dangling)
    report.dangling_cells = each(_still_dangling_cells, report.dangling_cells)
    report.missing_runs = dict(each(functools.partial(
        _still_missing_runs, cell_of=report.run_cell_of), list(report.missing_runs.items())))
    report.missing_twins = dict(each(functools.partial(
        _still_missing_twins, wanters=report.twin_wanters), list(report.missing_twins.items())))
    report.stale_buckets = _still_stale(table, report.stale_buckets, set())
    report.stray_firsts = each(_still_stray_firsts, report.stray_firsts)
    report.unfinished = each(_still_unfinished, report.unfinished)
    report.dangling_schemas = each(_still_dangling_schemas, report.dangling_schemas)
    report.stray_run_rows = each(run_model.still_stray, report.stray_run_rows)
    report.stray_failed = each(_still_stray_failed, report.stray_failed)
    report.broken_event_refs = each(run_model.still_broken, report.broken_event_refs)
    report.unused_schemas = _still_unused_schemas(table, report.unused_schemas)
    report.orphans = _still_orphans(table, report.orphans, set(report.corrupt))
    report.unconfirmed += before - report.problems


def _repair(table: Table, report: FsckReport) -> int:
    """Each fix re-checked (`_still_*`) inside the transaction that applies it;
    returns how many rows or cells were fixed, each list counted as it is."""
    def chunks(items: list) -> Iterator[list]:
        for i in range(0, len(items), _BATCH):
            yield items[i:i + _BATCH]

    def drop_dangling(t: Table, keys: list[bytes]) -> int:
        gone = _still_dangling(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_dangling_cells(t: Table, cells: list[Cell]) -> int:
        gone = _still_dangling_cells(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_orphans(t: Table, keys: list[bytes]) -> int:
        gone = _unused_data_rows(t, keys)  # shapes after the data rows: `drop_unused_shapes`
        t.delete(gone)
        return len(gone)

    def add_runs(t: Table, items: list[tuple[bytes, dict[str, bytes]]]) -> int:
        keep = dict(_still_missing_runs(t, items, report.run_cell_of))
        if keep:
            t.put(keep)
        return len(keep)

    def add_twins(t: Table, items: list[tuple[bytes, dict[str, bytes]]]) -> int:
        keep: dict[bytes, dict[str, bytes]] = {}
        for key, cols in _still_missing_twins(t, items, report.twin_wanters):
            k = rk.decode(key)
            for col, value in cols.items():
                # a bucket cell: only while a run of its set in the bucket is there
                if k.level == rk.DIRECTORY_LEVEL or _bucket_kept_since(t, (key, col), 0):
                    keep.setdefault(key, {})[col] = value
        if keep:
            t.put(keep)
        return len(keep)

    def drop_stray_firsts(t: Table, cells: list[Cell]) -> int:
        # still without the same cell in the run row (a writer may have finished since)
        gone = _still_stray_firsts(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_dangling_schemas(t: Table, keys: list[bytes]) -> int:
        # still naming a body that is not there (a writer writes both at once)
        gone = _still_dangling_schemas(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_stray_run_rows(t: Table, keys: list[bytes]) -> int:
        gone = run_model.still_stray(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_stray_failed(t: Table, keys: list[bytes]) -> int:
        gone = _still_stray_failed(t, keys)
        t.delete(gone)
        return len(gone)

    def drop_broken_refs(t: Table, cells: list[Cell]) -> int:
        gone = run_model.still_broken(t, cells)
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_stale(t: Table, cells: list[Cell]) -> int:
        # in key order: children before their parents (earlier batches are deleted)
        gone = _still_stale(t, cells, set())
        t.delete_columns(_by_row(gone))
        return len(gone)

    def drop_legacy(t: Table, keys: list[bytes]) -> int:
        gone = _still_present(t, keys)
        t.delete(gone)
        return len(gone)

    def finish_runs(t: Table, keys: list[bytes]) -> int:
        # what the writer would have done next: the index rows, then w=1
        writer = LineageStore(t)
        done = 0
        for key, cols in t.get_many(keys).items():
            if cols.get("w") != b"0" or "c" not in cols or "t" not in cols:
                continue
            data = t.get(rk.data(cols["c"].decode()))
            try:
                info = decode_data(data, t) if data else None
            except (ValueError, FllError):
                info = None
            if info is None:
                continue  # its data row is gone: reported as dangling
            run_id = rk.decode(key).run_id or ""
            t.put(writer._index_rows(info, run_id, _T.unpack(cols["t"])[0], cols.get("p", b"")))
            t.put({key: {"w": b"1"}})
            if run_failed(t.get(rk.run_model(run_id))):  # a failed run's cells go apart
                writer.move_to_failed([run_id], table=t)
            done += 1
        return done

    steps: list[tuple[list, Callable[[Table, list], int]]] = [
        (report.dangling, drop_dangling),
        (report.dangling_cells, drop_dangling_cells),
        (list(report.missing_runs.items()), add_runs),
        (list(report.missing_twins.items()), add_twins),
        (report.stale_buckets, drop_stale),
        (report.stray_firsts, drop_stray_firsts),
        (report.unfinished, finish_runs),
        (report.legacy, drop_legacy),
        (report.dangling_schemas, drop_dangling_schemas),
        (report.stray_run_rows, drop_stray_run_rows),
        (report.broken_event_refs, drop_broken_refs),
        (report.stray_failed, drop_stray_failed),
        (report.orphans, drop_orphans)]
    fixed = 0
    for items, fix in steps:
        for batch in chunks(items):
            fixed += atomically(table, functools.partial(_apply, fix, batch))
    if report.orphans:
        fixed += drop_unused_shapes(table)
    if report.unused_schemas:
        fixed += drop_unused_schemas(table)
    return fixed


def _apply(fix: Callable[[Table, list], int], batch: list, table: Table) -> int:
    return fix(table, batch)


def _delete(table: Table, keys: list[bytes]) -> None:
    for i in range(0, len(keys), _BATCH):
        table.delete(keys[i:i + _BATCH])


# -- purge ---------------------------------------------------------------------

@dataclass
class PurgeReport:
    before_ms: int
    dry_run: bool
    runs: int = 0
    index_rows: int = 0
    bucket_rows: int = 0
    data_rows: int = 0
    shape_rows: int = 0
    #: bucket and data rows a dry run already counted (a set spans batches)
    counted: set = field(default_factory=set, repr=False)

    def to_dict(self) -> dict:
        return {"before_ms": self.before_ms, "before": iso_ms(self.before_ms),
                "dry_run": self.dry_run, "runs": self.runs, "index_rows": self.index_rows,
                "bucket_rows": self.bucket_rows, "data_rows": self.data_rows,
                "shape_rows": self.shape_rows}


def count_runs_before(table: Table, before_ms: int) -> int:
    """How many runs started before ``before_ms`` (a scan of the ``r|`` rows)."""
    n = 0
    for key, cols in table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        t = row_time(key, cols)
        if t is not None and t < before_ms:
            n += 1
    return n


def purge(store: LineageStore, before_ms: int, *, dry_run: bool = False,
          progress: Progress | None = None) -> PurgeReport:
    """Remove every run that started before ``before_ms``: its index rows and run
    row, then the bucket and data rows no remaining run uses.

    Batch by batch, each in one transaction on SQLite that re-reads its run rows
    and re-checks every bucket and data row's use after its deletes, so a writer
    reusing a set meanwhile either committed first (the set stays) or commits
    after (and writes the data row again). Idempotent and restartable.
    ``dry_run`` counts with the same rules and changes nothing.
    """
    table = store.table
    if not dry_run:
        with maintenance(table, "purge"):
            return _purge(store, before_ms, progress=progress)
    return _purge(store, before_ms, dry_run=True, progress=progress)


def _purge(store: LineageStore, before_ms: int, *, dry_run: bool = False,
           progress: Progress | None = None) -> PurgeReport:
    table = store.table
    report = PurgeReport(before_ms, dry_run)
    batch: list[bytes] = []

    def flush() -> None:
        if batch:
            if dry_run:
                _purge_batch(store, table, list(batch), before_ms, report, dry_run=True)
            else:
                counts = PurgeReport(before_ms, False)
                atomically(table, functools.partial(_purge_in_txn, store, list(batch),
                                                    before_ms, counts))
                report.runs += counts.runs
                report.index_rows += counts.index_rows
                report.bucket_rows += counts.bucket_rows
                report.data_rows += counts.data_rows
            if progress:
                progress(len(batch))
        batch.clear()

    for key, cols in table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        start = row_time(key, cols)
        if start is None or start >= before_ms:
            continue
        batch.append(key)
        if len(batch) >= _BATCH:
            flush()
    flush()
    if report.data_rows:
        report.shape_rows = _unused_shapes(table, report.counted) if dry_run \
            else drop_unused_shapes(table)
    if not dry_run:  # schemas reported by purged runs
        old: list[bytes] = []
        for key, _ in table.scan(rk.SCHEMA + rk.SEP, rk.prefix_end(rk.SCHEMA + rk.SEP)):
            k = rk.decode(key)
            if k.start_ms is not None and k.start_ms < before_ms:
                old.append(key)
        _delete(table, old)
        if old:
            drop_unused_schemas(table)
        if report.runs:
            _delete(table, run_model.empty_jobs(table))  # jobs whose every run went
    return report


def _shapes_used(table: Table) -> set[str]:
    """The shapes the ``d|`` rows name (one scan of them)."""
    used = set()
    for _, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        value = cols.get(SHAPED)
        if value is not None and len(value) >= 16:
            used.add(rk.checksum_of(value[:16]))
    return used


def _unused_shapes(table: Table, going: set) -> int:
    """How many shapes no ``d|`` row would name once the rows in ``going`` are gone."""
    used = set()
    for key, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        value = cols.get(SHAPED)
        if key not in going and value is not None and len(value) >= 16:
            used.add(rk.checksum_of(value[:16]))
    return sum(1 for key, _ in table.scan(rk.SHAPE + rk.SEP, rk.prefix_end(rk.SHAPE + rk.SEP))
               if rk.decode(key).checksum not in used)


def drop_unused_shapes(table: Table) -> int:
    """Remove the ``p|`` rows no ``d|`` row names any more, in one transaction
    with the scan that decides it (elsewhere under the maintenance lease, as
    purge and repair run): a writer storing a set of a shape writes the shape
    again in its own transaction. Returns how many went."""
    def drop(t: Table) -> int:
        used = _shapes_used(t)
        gone = []
        for key, _ in t.scan(rk.SHAPE + rk.SEP, rk.prefix_end(rk.SHAPE + rk.SEP)):
            try:
                if rk.decode(key).checksum not in used:
                    gone.append(key)
            except (ValueError, UnicodeDecodeError):
                continue  # of no known shape: fsck reports it
        t.delete(gone)
        return len(gone)
    return atomically(table, drop)


def drop_unused_schemas(table: Table) -> int:
    """Remove the ``q|`` rows (schema bodies) no ``s|`` row names any more, in one
    transaction with the scan that decides it (elsewhere under the maintenance
    lease): a writer writes a schema's body in the same batch as the row
    naming it. Returns how many went."""
    def drop(t: Table) -> int:
        used = {cols.get(SCHEMA_REF) for _, cols in
                t.scan(rk.SCHEMA + rk.SEP, rk.prefix_end(rk.SCHEMA + rk.SEP))}
        gone = []
        for key, _ in t.scan(rk.SCHEMA_BODY + rk.SEP, rk.prefix_end(rk.SCHEMA_BODY + rk.SEP)):
            checksum = rk.decode(key).checksum or ""
            if rk.checksum_bytes(checksum) not in used:
                gone.append(key)
        t.delete(gone)
        return len(gone)
    return atomically(table, drop)


def _purge_in_txn(store: LineageStore, keys: list[bytes], before_ms: int,
                  report: PurgeReport, table: Table) -> None:
    report.runs = report.index_rows = report.bucket_rows = report.data_rows = 0
    _purge_batch(store, table, keys, before_ms, report, dry_run=False)


def _purge_batch(store: LineageStore, table: Table, keys: list[bytes], before_ms: int,
                 report: PurgeReport, *, dry_run: bool) -> None:
    runs = table.get_many(keys)
    cells: dict[bytes, set[str]] = {}
    wanted: list[tuple[bytes, str, str, str, int]] = []
    sets: dict[str, list[tuple[bytes, str, str]]] = {}
    firsts: dict[bytes, set[str]] = {}
    gone_runs = []
    gone_models: list[tuple[str, int]] = []  # the runs' run-model rows go with them
    failed_rows: list[bytes] = []  # and their failed-run rows, if they failed
    for key, cols in runs.items():
        start = row_time(key, cols)
        if start is None or start >= before_ms:
            continue  # changed since the scan
        gone_runs.append(key)
        run_id = rk.decode(key).run_id or ""
        gone_models.append((run_id, start))
        checksum = cols.get("c", b"").decode("utf-8", "replace")
        if not checksum:
            continue  # only a claimed start
        if checksum not in sets:
            try:
                sets[checksum] = _set_endpoints(store.operation_set(checksum))
            except FllError:
                sets[checksum] = []  # data row gone: fsck owns that case
        for kind, ns, name in sets[checksum]:
            failed_rows.append(rk.failed(rk.FAILED_BACKWARD if kind == rk.BACKWARD
                                         else rk.FAILED_FORWARD, ns, name, start, run_id))
            cells.setdefault(rk.run_row(kind, ns, name, start), set()).add(run_id)
            # its first-run cell, if it was its set's first run
            firsts.setdefault(rk.run_row(FIRST_OF_RUN[kind], ns, name, start),
                              set()).add(run_id)
            wanted.append((_BUCKET_OF[kind], ns, name, checksum, start))
    there = table.get_many(sorted(firsts)) if firsts else {}
    first_cells = sum(1 for k, runs in firsts.items() for r in runs if r in there.get(k, {}))
    if not dry_run:
        # the runs' cells first: the bucket and data rows are then unused
        # exactly when no other run keeps them
        table.delete(gone_runs)
        table.delete_columns({k: sorted(v) for k, v in (cells | firsts).items()})
        table.delete(failed_rows + run_model.purge_keys(table, gone_models))
        stale = unused_buckets(table, wanted)
        unused = [rk.data(c) for c, eps in sets.items()
                  if eps and not set_used_since(table, c, eps, 0)]
        present = table.get_many(sorted({k for k, _ in stale}) + unused)
        stale = [(k, c) for k, c in stale if c in present.get(k, {})]
        table.delete_columns(_by_row(stale))
        table.delete([k for k in unused if k in present])
        # a top bucket row left without columns leaves its dataset's directory
        tops = sorted({k for k, _ in stale if rk.decode(k).level == rk.TOP})
        if tops:
            still = table.get_many(tops)
            listed: dict[bytes, list[str]] = {}
            for k in tops:
                if k not in still:
                    d = rk.decode(k)
                    listed.setdefault(rk.directory(k[:1], d.namespace or "", d.name or ""),
                                      []).append(str(d.start_ms))
            table.delete_columns(listed)
        report.bucket_rows += len(stale)
        report.data_rows += sum(1 for k in unused if k in present)
    else:
        # nothing is deleted: a bucket cell or set counts when no run from the
        # cut on keeps it
        buckets = {(rk.bucket4(kind, ns, name, level, start - start % rk.LEVELS4[level]), c)
                   for kind, ns, name, c, start in wanted for level in range(1, rk.TOP + 1)}
        present = table.get_many(sorted({k for k, _ in buckets}))
        stale = [b for b in sorted(buckets) if b not in report.counted
                 and b[1] in present.get(b[0], {}) and not _bucket_kept_since(table, b, before_ms)]
        unused = [rk.data(c) for c, eps in sets.items() if rk.data(c) not in report.counted
                  and eps and not set_used_since(table, c, eps, before_ms)]
        there = table.get_many(unused)
        report.counted.update(stale)
        report.counted.update(there)
        report.bucket_rows += len(stale)
        report.data_rows += len(there)
    report.runs += len(gone_runs)
    report.index_rows += sum(len(v) for v in cells.values()) + first_cells


# -- migrate -------------------------------------------------------------------

@dataclass
class MigrateReport:
    source: str
    destination: str
    total: int = 0
    copied: int = 0
    resumed_from: bytes | None = None

    def to_dict(self) -> dict:
        return {"from": self.source, "to": self.destination, "total_rows": self.total,
                "copied_rows": self.copied,
                "resumed_from": None if self.resumed_from is None
                else printable_key(self.resumed_from)}


def resume_point(source: Table, destination: Table, batch_size: int) -> bytes | None:
    """Where an interrupted copy restarts: ``batch_size - 1`` source rows before the
    destination's last key, so a batch that landed only in part (on a backend
    without atomic batches) is copied again whole. None when the destination is empty.
    """
    last = next(iter(destination.scan(reverse=True, limit=1)), None)
    if last is None:
        return None
    key = last[0]
    if source.get(key) is None:
        raise BadRequest(f"destination {destination.url} is not empty and its last row "
                         f"{printable_key(key)!r} is not in the source {source.url}: it is not "
                         f"a partial copy of it; use an empty destination", "to")
    if batch_size == 1:
        return key
    back = list(source.scan(b"", key, reverse=True, limit=batch_size - 1))
    return back[-1][0] if back else key


def migrate(source: Table, destination: Table, *, batch_size: int = 1000,
            progress: Progress | None = None, total: int | None = None) -> MigrateReport:
    """Copy every row of ``source`` into ``destination`` in key order, ``batch_size``
    rows per put. Resumable: rerun after an interruption and it continues near the
    destination's last key (puts are idempotent, so rows copied twice are harmless).

    Into a backend whose questions do not read first-run rows (HBase: see
    `LineageStore.first_runs`), each first-run cell also brings its run's
    bucket cells, so the copy answers every question as the source does."""
    if batch_size < 1:
        raise BadRequest(f"batch size must be at least 1, got {batch_size}", "batch-size")
    report = MigrateReport(source.url, destination.url)
    declare = getattr(destination, "declare_wide", None)
    if callable(declare):  # the rows the lineage store keeps a cell at a time
        declare(WIDE_PREFIXES)
    start = resume_point(source, destination, batch_size)
    report.resumed_from = start
    report.total = sum(1 for _ in source.scan()) if total is None else total
    if progress and start:
        progress(sum(1 for _ in source.scan(b"", start)))  # rows already there
    batch: dict[bytes, dict[str, bytes]] = {}
    rows = 0  # source rows in the batch (it may hold bucket cells besides)
    buckets_too = not getattr(destination, "one_call_ranges", False)

    def flush() -> None:
        destination.put(batch)
        report.copied += rows
        if progress:
            progress(rows)

    for key, cols in source.scan(start or b""):
        batch[key] = dict(cols)
        rows += 1
        if buckets_too and key[:1] in RUN_OF_FIRST:
            _first_run_buckets(key, cols, batch)
        if rows >= batch_size:
            flush()
            batch, rows = {}, 0
    if batch:
        flush()
    return report


def _first_run_buckets(key: bytes, cols: dict[str, bytes],
                       into: dict[bytes, dict[str, bytes]]) -> None:
    """The bucket and directory cells of the runs of a first-run row, as a
    format-4 writer would have written them (a cell that does not decode is
    copied as it is: fsck reports it)."""
    try:
        k = rk.decode(key)
        runs = list(row_sets(key, cols))
    except (ValueError, UnicodeDecodeError):
        return
    for run_id, checksum, t in runs:
        for row, new in run_cells(RUN_OF_FIRST[key[:1]], k.namespace or "", k.name or "", t,
                                  run_id, checksum).items():
            into.setdefault(row, {}).update(new)


def init(table: Table) -> str:
    """Create the table where the backend needs it; returns what was done."""
    for name in ("create_table", "create", "ensure_table"):
        fn = getattr(table, name, None)
        if callable(fn):
            fn()
            return f"created {table.url}"
    # SQLite (and backends that create on open) made it when the table was opened
    next(iter(table.scan(limit=1)), None)
    return f"ready {table.url}"


def dump_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


# -- format upgrade ------------------------------------------------------------

@dataclass
class UpgradeReport:
    url: str
    from_format: int
    to_format: int
    dry_run: bool
    index_rows: int = 0
    bucket_rows: int = 0
    #: index rows rewritten without their program (format 2 kept it there too)
    rewritten_rows: int = 0
    #: format 2 rows removed: the by-set index and bucket rows keyed by hex checksum
    removed_rows: int = 0
    #: ``d|`` and ``p|`` rows rewritten with this format's summaries
    data_rows: int = 0
    #: ``s|`` rows that held their schema, now naming it (stored once, ``q|``)
    schema_rows: int = 0
    resumed_from: bytes | None = None

    def to_dict(self) -> dict:
        return {"store": self.url, "from_format": self.from_format, "to_format": self.to_format,
                "dry_run": self.dry_run, "index_rows": self.index_rows,
                "bucket_rows_written": self.bucket_rows,
                "index_rows_rewritten": self.rewritten_rows,
                "older_rows_removed": self.removed_rows,
                "data_rows_rewritten": self.data_rows,
                "schema_rows_rewritten": self.schema_rows,
                "resumed_from": None if self.resumed_from is None
                else printable_key(self.resumed_from)}


def store_format(table: Table) -> int:
    """The format a table's rows are in (1: before versioning; 0: empty)."""
    row = table.get(rk.meta("format"))
    if row is not None and row.get("v", b"").isdigit():
        return int(row["v"])
    if not has_lineage_rows(table):
        return 0
    return unstamped_format(table)


def count_upgrade_rows(table: Table) -> int:
    """How many rows an upgrade reads (its progress bar's length): the ``b|``/``f|``
    rows, and the ``d|`` and ``p|`` rows it may rewrite."""
    return sum(1 for kind in (rk.BACKWARD, rk.FORWARD, rk.DATA, rk.SHAPE)
               for _ in table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)))


def _older_rows(table: Table) -> Iterator[bytes]:
    """Rows format 4 has no use for: the narrow run rows of formats 1-3,
    format 2's by-set index (``B|``/``F|``) and every narrow bucket row."""
    for kind in (rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET):
        for key, _ in table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)):
            yield key
    for kind in (rk.BACKWARD, rk.FORWARD) + _BUCKETS:
        for key, _ in table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)):
            try:
                k = rk.decode(key)
            except (ValueError, UnicodeDecodeError):
                continue  # of no known shape: fsck reports it
            if not rk.is_wide(key) and k.level != rk.DIRECTORY_LEVEL:
                yield key


def upgrade(table: Table, *, dry_run: bool = False, batch_size: int = 1000,
            progress: Progress | None = None) -> UpgradeReport:
    """Convert a store of format 1, 2, 3 or 4 to format 5 in place (from 4:
    only the stamp, format 5 adds rows without changing any).

    First pass, over the narrow ``b|``/``f|`` rows (one per run and endpoint)
    in key order: write each run's format-4 cells (its run cell, its set's
    bucket cells at every level, the directory cell). Second pass: remove the
    rows format 4 has no use for (narrow run rows, ``B|``/``F|``, narrow
    bucket rows). Then stamp the format. ``d|`` and ``r|`` rows are not
    rewritten: every format reads them.

    Resumable: after each batch of the first pass the last key done is kept in
    ``v|upgrade``; a rerun continues from there (every put is idempotent); the
    second pass only deletes what is of no use, so it simply runs again.
    Writers of this fll may run meanwhile (they write format 4 rows until the
    stamp) and
    readers keep answering: until the stamp, a store of an older format is
    answered from its run index, which holds both shapes. Writers of an older
    fll must be stopped first. A newer format than this fll knows is refused."""
    from .lineage import FORMAT

    found = store_format(table)
    report = UpgradeReport(table.url, found, FORMAT, dry_run)
    if found > FORMAT:
        raise StoreError(f"store {table.url} has format {found}, newer than format {FORMAT} "
                         f"this fll knows; upgrade fll")
    if found in (0, FORMAT):
        return report
    declare = getattr(table, "declare_wide", None)
    if callable(declare):
        declare(WIDE_PREFIXES)
    cursor_row = table.get(rk.meta("upgrade")) or {}
    cursor = cursor_row.get("k")
    report.resumed_from = cursor
    if not dry_run and "f" not in cursor_row:
        # before any row changes: a format-1 store has no stamp, and once its run
        # index is half wide it must still be known as one being converted
        table.put({rk.meta("upgrade"): {"f": str(found).encode()}})
    batch: dict[bytes, dict[str, bytes]] = {}
    done = 0

    def write(t: Table) -> None:
        if batch:
            t.put(batch)

    def flush(last: bytes) -> None:
        nonlocal done
        if not dry_run:
            atomically(table, write)
            table.put({rk.meta("upgrade"): {"k": last}})  # after the rows it vouches for
        report.bucket_rows += sum(len(cols) for key, cols in batch.items()
                                  if key[:1] in _BUCKETS)
        batch.clear()
        if progress:
            progress(done)
        done = 0

    last = b""
    for kind in (rk.BACKWARD, rk.FORWARD):
        prefix = kind + rk.SEP
        start = prefix
        if cursor is not None:
            if cursor >= rk.prefix_end(prefix):
                continue
            if cursor >= prefix:
                start = cursor + b"\x00"
        for key, cols in table.scan(start, rk.prefix_end(prefix)):
            done += 1
            try:
                k = rk.decode(key)
            except (ValueError, UnicodeDecodeError):
                continue  # of no known shape: fsck reports it
            if k.level == 0 or "c" not in cols:
                continue  # already a format-4 row (a writer of this fll wrote it)
            checksum = cols["c"].decode("utf-8", "replace")
            for row, new in run_cells(kind, k.namespace or "", k.name or "", k.start_ms or 0,
                                      k.run_id or "", checksum).items():
                batch.setdefault(row, {}).update(new)
            report.index_rows += 1
            last = key
            if done >= batch_size:
                flush(last)
    flush(last)
    older: list[bytes] = []
    for key in _older_rows(table):
        report.removed_rows += 1
        if not dry_run:
            older.append(key)
            if len(older) >= batch_size:
                _delete(table, older)
                older.clear()
    if not dry_run:
        _delete(table, older)
    report.data_rows = _upgrade_data_rows(table, dry_run, batch_size, progress)
    report.schema_rows = _upgrade_schema_rows(table, dry_run, batch_size)
    if not dry_run:
        table.put({rk.meta("format"): {"v": str(FORMAT).encode()}})
        table.delete([rk.meta("upgrade")])
    return report


def _upgrade_schema_rows(table: Table, dry_run: bool, batch_size: int) -> int:
    """Turn every ``s|`` row that holds its schema (``f``, formats 1-5) into one
    naming it (`SCHEMA_REF`), the schema stored once in its ``q|`` row; the
    body before the row naming it, so a rerun after an interruption finds
    either form. Returns the rows converted."""
    done = 0
    batch: dict[bytes, dict[str, bytes]] = {}
    for key, cols in table.scan(rk.SCHEMA + rk.SEP, rk.prefix_end(rk.SCHEMA + rk.SEP)):
        body = cols.get("f")
        if body is None:
            continue
        done += 1
        if dry_run:
            continue
        digest = xxhash.xxh3_128_digest(body)
        batch[rk.schema_body(rk.checksum_of(digest))] = {"f": body}
        batch[key] = {SCHEMA_REF: digest}
        if len(batch) >= batch_size:
            _put_replacing(table, batch)
    if batch:
        _put_replacing(table, batch)
    return done


def _put_replacing(table: Table, batch: dict[bytes, dict[str, bytes]]) -> None:
    """Put rows whose old columns must go (a put adds columns): each row's
    columns not in the new value are deleted after the put, in one
    transaction where the backend has them."""
    def write(t: Table) -> None:
        t.put(batch)
        old = t.get_many(list(batch))
        extra = {k: sorted(set(cols) - set(batch[k])) for k, cols in old.items()}
        t.delete_columns({k: c for k, c in extra.items() if c})
    atomically(table, write)
    batch.clear()


def _older_data_parts(row: dict[str, bytes]) -> tuple[bytes, bytes]:
    """(operations, summaries) of a whole ``d|`` or ``p|`` row of any format:
    format 2 kept them plain in ``o`` and ``s``."""
    if "z" not in row and "o" in row and "s" in row:
        return row["o"], row["s"]
    return data_parts(row)


def _upgrade_data_rows(table: Table, dry_run: bool, batch_size: int,
                       progress: Progress | None) -> int:
    """Rewrite every whole ``d|`` row and every ``p|`` shape whose summaries are
    not this format's (format 6: `fll.codec.summaries_to_bytes`) from its
    operations; a ``d|`` row in shape form names its shape and needs nothing.
    Idempotent (a row is content-addressed: the same operations give the same
    row), so an interrupted upgrade simply runs it again. A row that does not
    decode is left as it is: fsck reports it. Returns the rows rewritten."""
    from ..summaries import SUMMARY_VERSION

    done = 0
    batch: dict[bytes, dict[str, bytes]] = {}

    def current(summaries: bytes) -> bool:
        try:
            return msgpack.unpackb(summaries, raw=False).get("v") == SUMMARY_VERSION
        except Exception:
            return False

    for prefix in (rk.DATA + rk.SEP, rk.SHAPE + rk.SEP):
        for key, cols in table.scan(prefix, rk.prefix_end(prefix)):
            if SHAPED in cols:
                continue
            try:
                ops, summaries = _older_data_parts(cols)
                if current(summaries) and "z" in cols:
                    continue
                new = data_row(decode_canonical(ops))
            except (FllError, ValueError):
                continue
            done += 1
            if not dry_run:
                batch[key] = new  # format 2's plain "o" and "s" go with the put
                if len(batch) >= batch_size:
                    _put_replacing(table, batch)
            if progress:
                progress(1)
    if batch:
        _put_replacing(table, batch)
    return done


# -- logical migration -----------------------------------------------------------

@dataclass
class RunMigrateReport:
    source: str
    destination: str
    runs: int = 0
    new_runs: int = 0
    other_rows: int = 0

    def to_dict(self) -> dict:
        return {"from": self.source, "to": self.destination, "runs": self.runs,
                "new_runs": self.new_runs, "schema_and_alias_rows": self.other_rows}


def migrate_runs(source: LineageStore, destination: LineageStore, *, batch_size: int = 500,
                 progress: Progress | None = None) -> RunMigrateReport:
    """Copy every run (its operation set, start, program), claimed start, schema
    and alias from one store to another, whatever their formats and backends:
    the destination writes its own layout. Idempotent, so an interrupted copy is
    resumed by running it again (runs already there cost one read per batch)."""
    report = RunMigrateReport(source.url, destination.url)
    pending: list[tuple[Any, str, int, str | None]] = []

    def flush() -> None:
        if pending:
            report.new_runs += destination.record_many(pending)
            if progress:
                progress(len(pending))
            pending.clear()

    for key, cols in source.table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        run_id = rk.decode(key).run_id or ""
        start = row_time(key, cols)
        if start is None:
            continue
        report.runs += 1
        if "c" not in cols:
            destination.claim_run_start(run_id, start)
            if progress:
                progress(1)
            continue
        info = source.operation_set(cols["c"].decode())
        pending.append((info, run_id, start, cols.get("p", b"").decode() or None))
        if len(pending) >= batch_size:
            flush()
    flush()
    other: dict[bytes, dict[str, bytes]] = {}
    # a schema's body before the rows naming it
    # classification tags too: not lineage, but the store's (fll.store.tags)
    for kind in (rk.SCHEMA_BODY, rk.SCHEMA, rk.ALIAS, rk.ALIASED_BY, rk.TAG, rk.TAGGED):
        for key, cols in source.table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)):
            other[key] = cols
            if len(other) >= batch_size:
                destination.table.put(other)
                report.other_rows += len(other)
                other = {}
    if other:
        destination.table.put(other)
        report.other_rows += len(other)
    return report
