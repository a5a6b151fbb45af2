"""`upgrade`: convert a store of an older format in place, the only code that
reads older formats; `store_format` tells which format a table is in."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import msgpack
import xxhash

from ... import rowkeys as rk
from ...errors import FllError, StoreError
from ...opset import decode_canonical
from ..base import Table
from ..datarows import SHAPED, data_parts, data_row
from ..layout import SCHEMA_REF, WIDE_PREFIXES, run_cells
from ..lineage import has_lineage_rows, unstamped_format
from .lease import _delete, atomically
from .rows import _BUCKETS, Progress, printable_key


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
    #: ``s|`` rows (one per run and dataset) moved into their dataset's ``S|`` row (format 7)
    schema_refs: int = 0
    #: ``A|`` rows (one per alias) moved into their target's ``A|`` row (format 8)
    alias_rows: int = 0
    resumed_from: bytes | None = None

    def to_dict(self) -> dict:
        return {"store": self.url, "from_format": self.from_format, "to_format": self.to_format,
                "dry_run": self.dry_run, "index_rows": self.index_rows,
                "bucket_rows_written": self.bucket_rows,
                "index_rows_rewritten": self.rewritten_rows,
                "older_rows_removed": self.removed_rows,
                "data_rows_rewritten": self.data_rows,
                "schema_rows_rewritten": self.schema_rows,
                "schema_rows_moved": self.schema_refs,
                "alias_rows_moved": self.alias_rows,
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
    """Convert a store of format 1 to 7 to format 8 in place (from 4: format 5
    adds rows without changing any; 5 to 6: data rows and schemas rewritten;
    6 to 7: the schema rows moved, `_move_schema_rows`; 7 to 8: the alias
    rows moved, `_move_alias_rows`).

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
    from ..lineage import FORMAT

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
    report.schema_refs = _move_schema_rows(table, dry_run, batch_size)
    report.alias_rows = _move_alias_rows(table, dry_run, batch_size)
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


#: where a row of an older format moves: (its new row, the column, the value),
#: or None to leave it (already moved, or not decoding: fsck reports it)
_Move = Callable[[bytes, dict[str, bytes]], "tuple[bytes, str, bytes] | None"]


def _move_rows(table: Table, kind: bytes, move: _Move, dry_run: bool, batch_size: int
               ) -> int:
    """Move every row of ``kind`` that ``move`` places into a column of
    another row, a batch at a time: the columns put, then the rows they
    replace deleted. Blind puts, so an interrupted upgrade simply runs it
    again over the rows left. Returns the rows moved (to move, dry)."""
    done = 0
    cells: dict[bytes, dict[str, bytes]] = {}
    moved: list[bytes] = []

    def flush() -> None:
        if cells:
            table.put(cells)  # the columns before the rows they replace go
        _delete(table, moved)
        cells.clear()
        moved.clear()

    for key, cols in table.scan(kind + rk.SEP, rk.prefix_end(kind + rk.SEP)):
        try:
            where = move(key, cols)
        except (ValueError, UnicodeDecodeError):
            continue
        if where is None:
            continue
        done += 1
        if dry_run:
            continue
        row, column, value = where
        cells.setdefault(row, {})[column] = value
        moved.append(key)
        if len(moved) >= batch_size:
            flush()
    if not dry_run:
        flush()
    return done


def _move_schema_rows(table: Table, dry_run: bool, batch_size: int) -> int:
    """Format 7: move each ``s|<ns>|<name>|<inv start>|<run>`` row (format 6,
    naming its schema by digest; formats 1-5 held it, in a dry run not yet
    converted) into a column of its dataset's ``S|`` row
    (`fll.rowkeys.schema_column`), the same digest as its value."""
    def move(key: bytes, cols: dict[str, bytes]) -> tuple[bytes, str, bytes] | None:
        k = rk.decode(key)
        column = rk.schema_column(k.start_ms or 0, k.run_id or "")
        digest = cols.get(SCHEMA_REF)
        if k.namespace is None or k.name is None or k.start_ms is None or not k.run_id or (
                len(digest or b"") != 16 and not (dry_run and "f" in cols)):
            return None
        return rk.schemas(k.namespace, k.name), column, digest or b""
    return _move_rows(table, rk.SCHEMA, move, dry_run, batch_size)


def _move_alias_rows(table: Table, dry_run: bool, batch_size: int) -> int:
    """Format 8: move each ``A|<ns>|<name>|<alias ns>|<alias>`` row (format 7,
    a row per alias) into a column of its dataset's ``A|<ns>|<name>`` row
    (`fll.rowkeys.alias_column`)."""
    def move(key: bytes, _: dict[str, bytes]) -> tuple[bytes, str, bytes] | None:
        k = rk.decode(key)
        if k.alias is None or k.namespace is None or k.name is None:
            return None  # already a row per dataset
        return rk.aliased_by(k.namespace, k.name), rk.alias_column(*k.alias), b""
    return _move_rows(table, rk.ALIASED_BY, move, dry_run, batch_size)


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
    not this format's (format 6: `fll.summaries.summaries_to_bytes`) from its
    operations; a ``d|`` row in shape form names its shape and needs nothing.
    Idempotent (a row is content-addressed: the same operations give the same
    row), so an interrupted upgrade simply runs it again. A row that does not
    decode is left as it is: fsck reports it. Returns the rows rewritten."""
    from ...summaries import SUMMARY_VERSION

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
