"""The data model of the HBase Thrift test double (`fll.testing.hbase_thrift`):
HBase's Thrift 1 IDL loaded (`hb`), tables of rows in byte order holding
versioned cells and delete markers, scanner state, and the filter strings the
double understands."""
from __future__ import annotations

import bisect
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

import thriftpy2

IDL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "store",
                   "hbase.thrift")
hb = thriftpy2.load(IDL, module_name="fll_hbase_thrift")

MAX_ROW_LENGTH = 32767  # HBase's HConstants.MAX_ROW_LENGTH (Short.MAX_VALUE)
DEFAULT_MAX_FRAME = 2 * 1024 * 1024  # hbase.regionserver.thrift.framed.max_frame_size_in_mb=2
LATEST = 2 ** 63 - 1  # HConstants.LATEST_TIMESTAMP: "now, on the server"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _io(exc: str, text: str) -> Exception:
    return hb.IOError(message=f"{exc}: {text}")


def _split(column: bytes) -> tuple[bytes, bytes | None]:
    """``family:qualifier`` → (family, qualifier); a bare family → (family, None)."""
    fam, sep, qual = column.partition(b":")
    return fam, (qual if sep else None)


@dataclass
class _Row:
    # column → versions, newest first: [(ts, value), …]
    cells: dict[bytes, list[tuple[int, bytes]]] = field(default_factory=dict)
    col_tomb: dict[bytes, int] = field(default_factory=dict)  # column → delete-marker ts
    fam_tomb: dict[bytes, int] = field(default_factory=dict)  # family → delete-marker ts


@dataclass
class _Table:
    families: dict[bytes, Any]  # family name (no colon) → ColumnDescriptor
    enabled: bool = True
    rows: dict[bytes, _Row] = field(default_factory=dict)
    keys: list[bytes] = field(default_factory=list)  # sorted

    def row_for_write(self, key: bytes) -> _Row:
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = _Row()
            bisect.insort(self.keys, key)
        return row

    def visible(self, key: bytes, row: _Row, columns: list[bytes] | None, before: int,
                versions: int = 1) -> dict[bytes, list[tuple[int, bytes]]]:
        """The versions a read sees: not hidden by a delete marker, ``ts < before``,
        at most the family's max_versions (and ``versions``)."""
        out: dict[bytes, list[tuple[int, bytes]]] = {}
        for col in sorted(row.cells):
            fam, qual = _split(col)
            if columns is not None and not any(c == col or c == fam or c == fam + b":"
                                               for c in columns):
                continue
            desc = self.families.get(fam)
            limit = min(versions, desc.maxVersions if desc is not None else 1)
            floor = max(row.col_tomb.get(col, -1), row.fam_tomb.get(fam, -1))
            seen = [(ts, v) for ts, v in row.cells[col] if ts > floor and ts < before]
            if seen:
                out[col] = seen[:limit]
        return out


@dataclass
class _Scanner:
    table: bytes
    start: bytes
    stop: bytes
    reverse: bool
    columns: list[bytes] | None
    before: int
    batch: int | None
    sort: bool
    filters: list[tuple[str, bytes]]
    cursor: bytes | None = None  # last row fully returned
    pending: list[Any] = field(default_factory=list)  # partial-row results not yet sent


_FILTER = re.compile(r"\s*(\w+)\s*\(\s*(?:'((?:[^']|'')*)')?\s*\)\s*")


def _parse_filters(text: bytes | None) -> list[tuple[str, bytes]]:
    """The filter-string subset this double understands: ``A AND B`` of
    PrefixFilter('p'), ColumnPrefixFilter('q'), KeyOnlyFilter(), FirstKeyOnlyFilter()."""
    if not text:
        return []
    out = []
    for part in re.split(r"\s+AND\s+", text.decode("utf-8")):
        m = _FILTER.fullmatch(part)
        known = ("PrefixFilter", "ColumnPrefixFilter", "KeyOnlyFilter", "FirstKeyOnlyFilter")
        if not m or m.group(1) not in known:
            raise hb.IllegalArgument(message=f"java.lang.IllegalArgumentException: "
                                             f"Filter string not supported: {part.strip()}")
        out.append((m.group(1), (m.group(2) or "").replace("''", "'").encode("utf-8")))
    return out
