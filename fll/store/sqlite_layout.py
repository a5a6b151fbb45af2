"""How the SQLite backend lays rows out: the two tables (and the view that
stands where the legacy layout was), the statements that write them, a row's
columns packed as one stored value (`pack`/`unpack`, a checksum column as 16
raw bytes, compressed when long), and the SQL functions every connection
registers (`_prepare`). See `fll.store.sqlite`."""
from __future__ import annotations

import binascii
import re
import sqlite3
import threading
import zlib
from typing import Mapping

import msgpack

from .base import Compressed


_SCHEMA = """
CREATE TABLE IF NOT EXISTS rows (
    row BLOB NOT NULL PRIMARY KEY,
    val BLOB NOT NULL
) WITHOUT ROWID
"""
_WIDE_SCHEMA = """
CREATE TABLE IF NOT EXISTS wide (
    row BLOB NOT NULL,
    col NOT NULL,
    val BLOB NOT NULL,
    PRIMARY KEY (row, col)
) WITHOUT ROWID
"""
# an idempotent re-put of a cell writes nothing
_UPSERT_CELL = ("INSERT INTO wide (row, col, val) VALUES (?, ?, ?) ON CONFLICT (row, col) "
                "DO UPDATE SET val = excluded.val WHERE val IS NOT excluded.val")
# the layout before rows were packed; converted on open (see `_convert_cells`)
_LEGACY = "cells"
# what an fll reading the legacy layout finds in its place: a format-version row
# newer than the format 2 it reads, so it refuses this store with a clear error
_LEGACY_VIEW = ("CREATE VIEW cells AS SELECT CAST('v|format' AS BLOB) AS row, 'v' AS col, "
                "CAST('3' AS BLOB) AS val")
# merge a put's columns into the stored row, and leave the row alone when it
# already holds every one of them: idempotent re-puts then dirty no page
_UPSERT = ("INSERT INTO rows (row, val) VALUES (?, ?) ON CONFLICT (row) "
           "DO UPDATE SET val = fll_merge(val, excluded.val) "
           "WHERE NOT fll_covers(val, excluded.val)")


# A stored value longer than this is zlib-compressed: SQLite keeps at most about
# 1 KB of a WITHOUT ROWID row in its B-tree page (4 KB pages) and moves the rest
# to an overflow page of its own, so an operation-set row of 1.6 KB would
# otherwise take two pages. Compressed values start with a byte no msgpack map
# starts with.
_COMPRESS_OVER = 400
_ZLIB = b"\x00"


# The ``c`` column as fll writes it (a checksum: 32 lowercase hex digits, in the
# run row and the per-run index rows) is stored as its 16 raw bytes in a msgpack
# extension and given back as the same hex. Any other value is kept as it is.
_HEX_EXT = 1
_HEX = re.compile(rb"[0-9a-f]{32}").fullmatch
_packers = threading.local()  # a Packer per thread: packb would build one per call


def _ext(code: int, data: bytes) -> object:
    if code == _HEX_EXT and len(data) == 16:
        return binascii.hexlify(data)
    return msgpack.ExtType(code, data)  # not a column value: unpack refuses it


def pack(cols: Mapping[str, bytes]) -> bytes:
    """A row's columns as the stored value: one msgpack map of str to bytes,
    a checksum as raw bytes, compressed when long."""
    d = cols if type(cols) is dict else dict(cols)
    c = d.get("c")
    if c is not None and len(c) == 32 and _HEX(c):
        d = dict(d)
        d["c"] = msgpack.ExtType(_HEX_EXT, binascii.unhexlify(c))
    packer = getattr(_packers, "p", None)
    if packer is None:
        packer = _packers.p = msgpack.Packer(use_bin_type=True)
    raw = packer.pack(d)
    if len(raw) > _COMPRESS_OVER and not all(type(v) is Compressed for v in d.values()):
        small = _ZLIB + zlib.compress(raw, 6)
        if len(small) < len(raw):
            return small
    return raw


def unpack(val: bytes) -> dict[str, bytes]:
    """The columns of a stored value; ValueError when it is not one."""
    try:
        if val[:1] == _ZLIB:
            val = zlib.decompress(val[1:])
        cols = msgpack.unpackb(val, raw=False, ext_hook=_ext)
    except Exception as e:  # msgpack and zlib raise several kinds
        raise ValueError(f"not a packed row ({type(e).__name__})") from None
    if type(cols) is not dict or not all(type(v) is bytes for v in cols.values()):
        raise ValueError("not a packed row (not a map of columns)")
    return cols


_HEX_STR = re.compile(r"[0-9a-f]{32}").fullmatch


def _col_in(col: str) -> str | bytes:
    """A column name as the wide table stores it: a checksum as 16 raw bytes."""
    if len(col) == 32 and _HEX_STR(col):
        return binascii.unhexlify(col)
    return col


def _col_out(col: str | bytes) -> str:
    return binascii.hexlify(col).decode("ascii") if type(col) is bytes else str(col)


def _after(prefix: bytes) -> bytes:
    """The smallest key above every key starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return b"\xff" * 9
    p[-1] += 1
    return bytes(p)


def _merge(old: bytes, new: bytes) -> bytes:
    cols = unpack(old)
    cols.update(unpack(new))
    return pack(cols)


def _covers(old: bytes, new: bytes) -> bool:
    if old == new:  # the same columns packed alike (a content-addressed row put again)
        return True
    have = unpack(old)
    return all(have.get(c, None) == v for c, v in unpack(new).items())


class _Pack:
    """The aggregate that packs a legacy row's cells (the conversion)."""

    def __init__(self) -> None:
        self.cols: dict[str, bytes] = {}

    def step(self, col: str, val: bytes) -> None:
        self.cols[col] = bytes(val)

    def finalize(self) -> bytes:
        return pack(self.cols)


def _add_temp_wide(conn: sqlite3.Connection) -> None:
    """An empty ``wide`` table in the connection's TEMP schema, for a file that
    has none and cannot be given one (read-only)."""
    conn.execute(_WIDE_SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))


def _prepare(conn: sqlite3.Connection) -> None:
    conn.create_function("fll_merge", 2, _merge, deterministic=True)
    conn.create_function("fll_covers", 2, _covers, deterministic=True)
    conn.create_aggregate("fll_pack", 2, _Pack)  # type: ignore[arg-type]
