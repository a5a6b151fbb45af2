"""Maintenance of a lineage table: row display, stats, fsck, purge and migrate.

Everything here works on the raw `Table` rows described in `fll.rowkeys`, so
it sees (and can repair) what the query paths of `LineageStore` would trip
over. Work is streamed in key order and done in batches: memory grows with
the number of distinct operation sets (and the problems found), never with
the number of rows. This module must never print or depend on click: the CLI
passes a ``progress`` callback and renders the reports.

Repair and purge delete rows; run them while no writer is active on
backends without atomic batches (a writer there puts the ``d|`` row a moment
before its index rows, and fsck could take it for an orphan in between).
"""
from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterator

import msgpack

from .. import rowkeys as rk
from ..codec import decode_canonical
from ..errors import BadRequest, FllError
from .base import Table
from .lineage import LineageStore

Progress = Callable[[int], None]
_T = struct.Struct(">q")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_INDEX_KINDS = (rk.BACKWARD, rk.FORWARD, rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET)
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
    if k.start_ms is None:
        return printable_key(key)
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
    want = {"b": 5, "f": 5, "B": 6, "F": 6}.get(parts[0])
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
        if kind == "run" and column == "t":
            return _T.unpack(value)[0]
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
    if k.run_id is not None:
        out["run_id"] = k.run_id
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
            raise BadRequest("--dataset selects index rows: use --prefix b, f, B or F", "dataset")
    timed = start_ms is not None or end_ms is not None
    lo_t = 0 if start_ms is None else start_ms
    hi_t = rk.MAX_TIME if end_ms is None else end_ms
    ranges: list[tuple[bytes, bytes, bool]] = []  # (start, stop, filter by time)
    for kind in sorted(kinds) if kinds else [b""]:
        if dataset is not None:
            prefix = rk.dataset_prefix(kind, *dataset)
            if kind in (rk.BACKWARD, rk.FORWARD) and timed:
                lo, hi = rk.time_range(prefix, lo_t, hi_t)
                ranges.append((lo, hi, False))
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
                t = row_time(key, cols)
                if t is None or not lo_t <= t < hi_t:
                    continue
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
        if progress:
            progress(1)
    out = {"store": table.url, "rows": total_rows, "bytes": total_bytes, "kinds": kinds,
           "operation_sets": kinds["data"]["rows"], "runs": kinds["run"]["rows"],
           "datasets": len(datasets)}
    size_bytes = getattr(table, "size_bytes", None)
    if callable(size_bytes):
        out["file_bytes"] = size_bytes()
    return out


# -- fsck ----------------------------------------------------------------------

@dataclass
class FsckReport:
    """What fsck found (keys are raw bytes) and what it repaired."""

    rows: int = 0
    dangling: list[bytes] = field(default_factory=list)   # index/run rows, data row missing
    orphans: list[bytes] = field(default_factory=list)    # d| rows nothing references
    missing_runs: dict[bytes, dict[str, bytes]] = field(default_factory=dict)  # r| to rebuild
    corrupt: list[bytes] = field(default_factory=list)    # d| rows that do not decode
    unknown: list[bytes] = field(default_factory=list)    # keys of no fll shape
    repaired: bool = False

    @property
    def clean(self) -> bool:
        return not (self.dangling or self.orphans or self.missing_runs or self.corrupt
                    or self.unknown)

    def to_dict(self) -> dict:
        def keys(items) -> list[str]:
            return [printable_key(k) for k in items]
        return {"rows": self.rows, "clean": self.clean, "repaired": self.repaired,
                "dangling_index_rows": keys(self.dangling),
                "orphaned_data_rows": keys(self.orphans),
                "missing_run_rows": keys(self.missing_runs),
                "corrupt_data_rows": keys(self.corrupt),
                "unknown_rows": keys(self.unknown)}


def _row_checksum(key: bytes, cols: dict[str, bytes]) -> str | None:
    if key[:1] in (rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET):
        return rk.decode(key).checksum
    c = cols.get("c")
    return c.decode("utf-8", "replace") if c is not None else None


def fsck(table: Table, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
    """Check that every index and run row points at a data row, and every data
    row is referenced; with ``repair``, delete dangling and orphaned rows and
    rebuild run rows lost between an index write and its run row.

    Two scans: the ``d|`` rows first (a set of checksums), then every row.
    """
    report = FsckReport()
    data: set[str] = set()
    for key, cols in table.scan(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)):
        stored = rk.decode(key).checksum or ""
        data.add(stored)
        try:
            decode_canonical(cols["o"])
            if "s" not in cols:
                raise KeyError("s")
        except (KeyError, FllError):
            report.corrupt.append(key)
    referenced: set[str] = set()
    # runs seen in b|/f| rows, checked against their r| rows a batch at a time so
    # memory stays flat whatever the number of runs
    pending: dict[str, tuple[str, int, bytes]] = {}

    def check_runs() -> None:
        found = table.get_many([rk.run(r) for r in pending])
        for run_id, (checksum, start, program) in pending.items():
            if rk.run(run_id) not in found:
                report.missing_runs[rk.run(run_id)] = {
                    "c": checksum.encode(), "t": _T.pack(start), "p": program}
        pending.clear()

    for key, cols in table.scan():
        report.rows += 1
        if progress:
            progress(1)
        kind = key[:1]
        if kind == rk.DATA and key[1:2] == rk.SEP:
            continue
        try:
            k = rk.decode(key)
            checksum = _row_checksum(key, cols)
        except (ValueError, UnicodeDecodeError):
            report.unknown.append(key)
            continue
        if kind in (rk.SCHEMA, rk.ALIAS, rk.ALIASED_BY):
            continue  # no operation set behind these
        if kind == rk.RUN and "c" not in cols and "t" in cols:
            continue  # a start claimed before the run's lineage arrived
        if checksum is None or checksum not in data:
            report.dangling.append(key)
            continue
        referenced.add(checksum)
        if kind in (rk.BACKWARD, rk.FORWARD):
            pending.setdefault(k.run_id or "", (checksum, k.start_ms or 0, cols.get("p", b"")))
            if len(pending) >= _BATCH:
                check_runs()
    check_runs()
    report.orphans = [rk.data(c) for c in sorted(data - referenced)]
    if repair and not report.clean:
        _delete(table, report.dangling)
        _delete(table, report.orphans)
        for i in range(0, len(report.missing_runs), _BATCH):
            chunk = list(report.missing_runs.items())[i:i + _BATCH]
            table.put(dict(chunk))
        report.repaired = True
    return report


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
    data_rows: int = 0

    def to_dict(self) -> dict:
        return {"before_ms": self.before_ms, "before": iso_ms(self.before_ms),
                "dry_run": self.dry_run, "runs": self.runs, "index_rows": self.index_rows,
                "data_rows": self.data_rows}


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
    """Remove every run that started before ``before_ms``: its index rows, then
    its run row, then the data rows no run at or after ``before_ms`` uses.

    Idempotent and restartable: a run row goes only after its index rows, so an
    interrupted purge finds the rest next time. A data row is kept while any
    ``B|``/``F|`` row of its set has a start at or after the cut-off, which is
    the same answer before and after the deletes (so ``dry_run`` counts exactly).
    """
    table = store.table
    report = PurgeReport(before_ms, dry_run)
    endpoints: dict[str, tuple[list, list]] = {}  # checksum -> (destinations, sources)
    index_batch: list[bytes] = []
    run_batch: list[bytes] = []

    def flush() -> None:
        if not dry_run:
            _delete(table, index_batch)
            _delete(table, run_batch)  # after its index rows: see the docstring
        if progress:
            progress(len(run_batch))
        index_batch.clear()
        run_batch.clear()

    for key, cols in table.scan(rk.RUN + rk.SEP, rk.prefix_end(rk.RUN + rk.SEP)):
        start = row_time(key, cols)
        if start is None or start >= before_ms:
            continue
        run_id = rk.decode(key).run_id or ""
        checksum = cols.get("c", b"").decode("utf-8", "replace")
        if checksum not in endpoints:
            try:
                info = store.operation_set(checksum)
                endpoints[checksum] = (sorted(info.destinations), sorted(info.sources))
            except FllError:
                endpoints[checksum] = ([], [])  # data row gone: fsck owns that case
        dsts, srcs = endpoints[checksum]
        for ep in dsts:
            index_batch.append(rk.backward(ep.namespace, ep.name, start, run_id))
            index_batch.append(rk.by_set(rk.BACKWARD_BY_SET, ep.namespace, ep.name, checksum,
                                         start, run_id))
        for ep in srcs:
            index_batch.append(rk.forward(ep.namespace, ep.name, start, run_id))
            index_batch.append(rk.by_set(rk.FORWARD_BY_SET, ep.namespace, ep.name, checksum,
                                         start, run_id))
        report.index_rows += 2 * (len(dsts) + len(srcs))
        report.runs += 1
        run_batch.append(key)
        if len(run_batch) >= _BATCH:
            flush()
    flush()
    gone: list[bytes] = []
    for checksum, (dsts, srcs) in endpoints.items():
        if not (dsts or srcs):
            continue
        if not _set_used_since(table, checksum, dsts, srcs, before_ms):
            gone.append(rk.data(checksum))
    report.data_rows = len(gone)
    if not dry_run:
        _delete(table, gone)
    return report


def _set_used_since(table: Table, checksum: str, dsts: list, srcs: list, since_ms: int) -> bool:
    for kind, eps in ((rk.BACKWARD_BY_SET, dsts), (rk.FORWARD_BY_SET, srcs)):
        for ep in eps:
            lo, hi = rk.time_range(rk.by_set_prefix(kind, ep.namespace, ep.name, checksum),
                                   since_ms, rk.MAX_TIME)
            if next(iter(table.scan(lo, hi, limit=1)), None) is not None:
                return True
    return False


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
    destination's last key (puts are idempotent, so rows copied twice are harmless)."""
    if batch_size < 1:
        raise BadRequest(f"batch size must be at least 1, got {batch_size}", "batch-size")
    report = MigrateReport(source.url, destination.url)
    start = resume_point(source, destination, batch_size)
    report.resumed_from = start
    report.total = sum(1 for _ in source.scan()) if total is None else total
    if progress and start:
        progress(sum(1 for _ in source.scan(b"", start)))  # rows already there
    batch: dict[bytes, dict[str, bytes]] = {}
    for key, cols in source.scan(start or b""):
        batch[key] = cols
        if len(batch) >= batch_size:
            destination.put(batch)
            report.copied += len(batch)
            if progress:
                progress(len(batch))
            batch = {}
    if batch:
        destination.put(batch)
        report.copied += len(batch)
        if progress:
            progress(len(batch))
    return report


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
