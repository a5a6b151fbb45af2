"""The SQLite layout: one packed SQLite row per wide row. A store of the older
one-row-per-column layout is converted when first opened, all or nothing, also
when several processes open it at once, and an fll reading the old layout is
then refused; re-puts of what a row holds write nothing; long values are
compressed; a value that is not a packed row is a store error naming the row."""
from __future__ import annotations

import multiprocessing
import os
import sqlite3
import subprocess
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from fll import StoreError, open_store
from fll import rowkeys as rk
from fll.store import open_table
from fll.store.base import Compressed, Span
from fll.store import sqlite_layout as layout
from fll.store.sqlite_layout import pack, unpack

from .test_format import _answers, _history

_LEGACY_SCHEMA = ("CREATE TABLE cells (row BLOB NOT NULL, col TEXT NOT NULL, val BLOB NOT NULL, "
                  "PRIMARY KEY (row, col)) WITHOUT ROWID")


def _legacy(path: str, rows: list[tuple[bytes, dict[str, bytes]]]) -> None:
    """A store file as fll wrote it before rows were packed: one row per column."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(_LEGACY_SCHEMA)
    conn.executemany("INSERT INTO cells VALUES (?, ?, ?)",
                     [(k, c, v) for k, cols in rows for c, v in cols.items()])
    conn.commit()
    conn.close()


@pytest.fixture
def legacy(tmp_path):
    """(url of a legacy-layout store holding a history, its rows, its answers)."""
    with open_store(f"sqlite:///{tmp_path}/source.db") as store:
        _history(store)
        rows = list(store.table.scan())
        want = _answers(store)
    path = f"{tmp_path}/legacy.db"
    _legacy(path, rows)
    return f"sqlite:///{path}", rows, want


@contextmanager
def _unwritable(path: Path) -> Iterator[None]:
    """One file made unwritable for real: ``chattr +i`` as root (chmod does not
    stop root), else ``chmod 0444``."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.fail("running as root and `chattr +i` does not work here: no real way "
                        "to make the store read-only", pytrace=False)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        return
    path.chmod(0o444)
    try:
        yield
    finally:
        path.chmod(0o644)


def _tables(path: str) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT name, type FROM sqlite_master WHERE type IN "
                                 "('table', 'view')"))
    finally:
        conn.close()


def test_a_legacy_store_is_converted_on_open_and_answers_as_before(legacy):
    url, rows, want = legacy
    with open_store(url) as store:
        assert list(store.table.scan()) == rows
        assert _answers(store) == want
    assert _tables(url[len("sqlite:///"):]) == {"rows": "table", "wide": "table", "cells": "view"}


def test_an_fll_reading_the_old_layout_finds_a_newer_format_and_cannot_write(legacy):
    url, _, _ = legacy
    open_store(url).close()
    conn = sqlite3.connect(url[len("sqlite:///"):])
    # what the old layout's reader asks first: the format stamp, newer than its 2
    assert conn.execute("SELECT col, val FROM cells WHERE row = ?",
                        (rk.meta("format"),)).fetchall() == [("v", b"3")]
    with pytest.raises(sqlite3.OperationalError, match="view"):
        conn.execute("INSERT INTO cells (row, col, val) VALUES (?, ?, ?)", (b"x", "c", b"v"))
    conn.close()


def test_a_new_store_has_the_refusing_view_from_the_start(tmp_path):
    open_table(f"sqlite:///{tmp_path}/new.db").close()
    assert _tables(f"{tmp_path}/new.db") == {"rows": "table", "wide": "table", "cells": "view"}


def _open_and_answer(url: str, queue) -> None:
    try:
        with open_store(url) as store:
            queue.put(("ok", _answers(store)))
    except BaseException as e:  # reported to the parent, which fails the test
        queue.put(("error", repr(e)))


@pytest.mark.slow
def test_processes_opening_a_legacy_store_at_once_convert_it_once(legacy, tmp_path):
    _, rows, want = legacy
    ctx = multiprocessing.get_context("fork")
    for attempt in range(6):  # the race is between opens: run it several times
        path = f"{tmp_path}/race-{attempt}.db"
        _legacy(path, rows)
        queue = ctx.Queue()
        procs = [ctx.Process(target=_open_and_answer, args=(f"sqlite:///{path}", queue))
                 for _ in range(4)]
        for p in procs:
            p.start()
        results = [queue.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert results == [("ok", want)] * 4
        assert _tables(path) == {"rows": "table", "wide": "table", "cells": "view"}
        with open_store(f"sqlite:///{path}") as store:
            assert list(store.table.scan()) == rows


def test_a_legacy_store_that_cannot_be_written_is_refused_in_one_line(legacy):
    url, _, _ = legacy
    path = url[len("sqlite:///"):]
    with _unwritable(Path(path)):
        with pytest.raises(StoreError) as e:
            open_table(url)
    message = str(e.value)
    assert "\n" not in message
    assert "one-row-per-column layout" in message and path in message
    assert _tables(path) == {"cells": "table"}  # nothing half-converted


def _changes(table) -> int:
    return table._conn().total_changes


@pytest.mark.parametrize("put, changes, then", [
    ({"a": b"1"}, 0, {"a": b"1", "b": b"2"}),
    ({"b": b"2", "a": b"1"}, 0, {"a": b"1", "b": b"2"}),
    ({"a": b"9"}, 1, {"a": b"9", "b": b"2"}),
    ({"c": b""}, 1, {"a": b"1", "b": b"2", "c": b""}),
])
def test_a_put_merges_columns_and_a_put_of_what_a_row_holds_writes_nothing(
        tmp_path, put, changes, then):
    table = open_table(f"sqlite:///{tmp_path}/t.db")
    table.put({b"k": {"a": b"1", "b": b"2"}})
    before = _changes(table)
    table.put({b"k": put})
    assert _changes(table) - before == changes
    assert table.get(b"k") == then
    table.close()


def test_a_long_row_put_again_as_it_is_is_not_unpacked(tmp_path, monkeypatch):
    """A content-addressed row (an operation set, a schema body) is put again
    by every event naming it: the stored value and the new one are the same
    bytes, so the check that the row holds them unpacks (and decompresses)
    neither. A row put with another value is still compared and merged."""
    from fll.store import sqlite_layout
    table = open_table(f"sqlite:///{tmp_path}/t.db")
    body = {"f": bytes(range(256)) * 20}
    table.put({b"q|x": body})
    unpacked = []
    real = sqlite_layout.unpack
    monkeypatch.setattr(sqlite_layout, "unpack", lambda v: unpacked.append(v) or real(v))
    before = _changes(table)
    table.put({b"q|x": body})
    assert unpacked == [] and _changes(table) == before
    table.put({b"q|x": {"f": b"other"}})
    assert unpacked and table.get(b"q|x") == {"f": b"other"}
    table.close()


def test_a_row_without_columns_is_not_stored(tmp_path):
    table = open_table(f"sqlite:///{tmp_path}/t.db")
    table.put({b"k": {}, b"j": {"a": b"1"}})
    assert table.get(b"k") is None and [k for k, _ in table.scan()] == [b"j"]
    table.close()


@pytest.mark.parametrize("cols", [
    {"c": b"0123456789abcdef" * 2, "t": b"12345678"},  # a checksum: stored as raw bytes
    {"c": b"0123456789ABCDEF" * 2},  # upper case: not how fll writes one, kept as it is
    {"c": b"0123456789abcdef" * 2 + b"0", "d": b"0123456789abcdeg" * 2},
    {"d": b"0123456789abcdef" * 2},  # hex in another column: kept as it is
    {"o": bytes(range(256)) * 40, "s": b"x" * 5000},
    {"o": os.urandom(3000)},  # incompressible: stored as it is
    {"a": b"short"},
])
def test_values_of_any_length_round_trip_and_long_ones_are_stored_compressed(tmp_path, cols):
    table = open_table(f"sqlite:///{tmp_path}/t.db")
    table.put({b"d|x": cols})
    assert table.get(b"d|x") == cols
    assert unpack(pack(cols)) == cols
    raw = sum(len(v) for v in cols.values())
    if raw > 4000 and cols.get("o", b"")[:1] == b"\x00":
        assert len(pack(cols)) < raw // 4
    if cols.get("c", b"").islower() and len(cols["c"]) == 32:
        assert len(pack(cols)) < len(pack({**cols, "c": b""})) + 20
    table.close()


def test_a_row_of_values_already_compressed_is_stored_as_packed_and_reads_back(
        tmp_path, monkeypatch):
    # a run model's event body: zlib output, which a second pass never shrinks
    body = zlib.compress(os.urandom(1000).hex().encode() * 2, 3)
    assert len(body) > 400
    passes: list[int] = []
    real = layout.zlib.compress
    monkeypatch.setattr(layout.zlib, "compress",
                        lambda raw, level=-1: passes.append(len(raw)) or real(raw, level))
    table = open_table(f"sqlite:///{tmp_path}/t.db")
    table.put({b"e|x": {"z": Compressed(body)}, b"e|y": {"z": body}})
    assert table.get(b"e|x") == table.get(b"e|y") == {"z": body}
    assert pack({"z": Compressed(body)})[:1] != b"\x00"  # not compressed again
    assert unpack(pack({"z": Compressed(body)})) == {"z": body}
    assert len(passes) == 1  # the unmarked copy's, never the marked one's
    # a row with any value not marked is still compressed when that pays
    cols = {"z": Compressed(body), "s": b"x" * 5000}
    assert pack(cols)[:1] == b"\x00" and unpack(pack(cols)) == cols
    table.close()


def test_a_value_that_is_not_a_packed_row_is_a_store_error_naming_the_row(tmp_path):
    table = open_table(f"sqlite:///{tmp_path}/t.db")
    table.put({b"r|a": {"c": b"1"}, b"r|b": {"c": b"2"}})
    conn = table._conn()
    conn.execute("UPDATE rows SET val = ? WHERE row = ?", (b"\x00garbage", b"r|b"))
    for read in (lambda: table.get(b"r|b"), lambda: list(table.scan()),
                 lambda: table.get_many([b"r|a", b"r|b"]),
                 lambda: table.scan_ranges([(b"r|", b"r}")])):
        with pytest.raises(StoreError, match=r"row b'r\|b' is corrupt"):
            read()
    assert table.get(b"r|a") == {"c": b"1"}
    table.close()


def test_a_store_from_before_the_wide_table_is_read_as_rows_where_it_cannot_be_written(
        tmp_path):
    # an auditor's read-only copy of a store an older fll wrote: the file has
    # no `wide` table and nothing may add one; the lineage store refuses it
    # naming the upgrade, and its rows read as they are (for a copy to upgrade)
    from fll.store import open_rows
    from fll.store.lineage import OlderFormat

    from .test_format import to_older_format

    with open_store(f"sqlite:///{tmp_path}/source.db") as store:
        _history(store)
        to_older_format(store.table, 3)
        rows = list(store.table.scan())
    path = f"{tmp_path}/old.db"  # the file as format 3 wrote it: packed rows only
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE rows (row BLOB NOT NULL PRIMARY KEY, val BLOB NOT NULL) "
                 "WITHOUT ROWID")
    conn.executemany("INSERT INTO rows VALUES (?, ?)", [(k, pack(c)) for k, c in rows])
    conn.commit()
    conn.close()
    url = f"sqlite:///{path}"
    with _unwritable(Path(path)):
        with pytest.raises(OlderFormat, match="format 3; .*admin upgrade"):
            open_store(url)
        table = open_rows(url)
        try:
            assert sorted(table.scan()) == sorted(rows)
            with pytest.raises(StoreError):  # and a write is refused, not lost
                table.put({b"x": {"c": b"1"}})
        finally:
            table.close()
    assert "wide" not in _tables(path)  # nothing was added to the file


def _wide_table(path: str):
    table = open_table(f"sqlite:///{path}")
    table.declare_wide([b"g|"])
    return table


def test_rows_holding_finds_the_rows_of_each_span_holding_a_column(tmp_path):
    set_a, set_b = "0123456789abcdef" * 2, "fedcba9876543210" * 2
    table = _wide_table(f"{tmp_path}/t.db")
    table.put({b"g|x|1": {set_a: b"", set_b: b""}, b"g|x|2": {set_b: b""},
               b"g|x|3": {set_a: b""}, b"g|y|1": {set_a: b"", "plain": b""}})
    spans = [(Span(b"g|x|", b"g|x}"), set_a), (Span(b"g|x|2", b"g|x|4"), set_a),
             (Span(b"g|x|", b"g|x}"), set_b), (Span(b"g|y|", b"g|y}"), "plain"),
             (Span(b"g|z|", b"g|z}"), set_a)]
    assert table.rows_holding(spans) == [[b"g|x|1", b"g|x|3"], [b"g|x|3"],
                                         [b"g|x|1", b"g|x|2"], [b"g|y|1"], []]
    # the same answers past one statement's worth of spans
    many = table.rows_holding([(Span(b"g|x|", b"g|x}"), set_a)] * 250)
    assert many == [[b"g|x|1", b"g|x|3"]] * 250
    # a span outside the wide prefixes, or a file where such a row may be
    # packed, is not answered: the caller reads the rows
    assert table.rows_holding([(Span(b"d|", b"d}"), set_a)]) is None
    table.close()
    raw = open_table(f"sqlite:///{tmp_path}/p.db")
    raw.put({b"g|x|1": {set_a: b""}})  # packed: written before the prefix was declared
    raw.close()
    packed = _wide_table(f"{tmp_path}/p.db")
    assert packed.rows_holding([(Span(b"g|x|", b"g|x}"), set_a)]) is None
    packed.close()


def test_deleting_columns_reaches_packed_and_cell_rows_alike(tmp_path):
    set_a = "0123456789abcdef" * 2
    raw = open_table(f"sqlite:///{tmp_path}/t.db")
    raw.put({b"g|old": {set_a: b"", "k": b"1"}, b"d|x": {"a": b"1", "b": b"2"},
             b"d|y": {"a": b"1"}})
    raw.close()
    table = _wide_table(f"{tmp_path}/t.db")  # g|old stays packed: read from both
    table.put({b"g|new": {set_a: b"", "k": b"1"}})
    table.delete_columns({b"g|old": [set_a], b"g|new": [set_a], b"d|x": ["a"], b"d|y": ["a"],
                          b"d|none": ["a"]})
    assert dict(table.scan()) == {b"d|x": {"b": b"2"}, b"g|new": {"k": b"1"},
                                  b"g|old": {"k": b"1"}}
    table.close()


def test_rows_outside_the_wide_prefixes_are_read_whole_wherever_their_cells_are(tmp_path):
    # keys under no declared prefix: read from the packed table alone while the
    # file has no cell outside the prefixes, and from both once it has one
    # (cells a table declaring other prefixes wrote)
    set_a = "0123456789abcdef" * 2
    other = open_table(f"sqlite:///{tmp_path}/t.db")
    other.declare_wide([b"d|", b"g|"])
    other.put({b"d|cells": {"a": b"1", set_a: b""}, b"g|x|1": {set_a: b""}})
    other.close()
    table = _wide_table(f"{tmp_path}/t.db")  # declares g| only: d|cells is stray
    table.put({b"d|packed": {"a": b"2"}, b"r|run": {"c": b"3"}})
    assert table._stray_cells
    want = {b"d|cells": {"a": b"1", set_a: b""}, b"d|packed": {"a": b"2"},
            b"r|run": {"c": b"3"}}
    assert table.get_many([b"d|cells", b"d|packed", b"r|run", b"d|none"]) == want
    assert table.get(b"d|cells") == want[b"d|cells"]
    table.close()
    clean = _wide_table(f"{tmp_path}/c.db")
    clean.put({b"d|packed": {"a": b"2"}, b"g|x|1": {set_a: b""}, b"z|last": {"z": b"9"}})
    assert not clean._stray_cells
    assert clean.get_many([b"d|packed", b"z|last", b"d|none"]) == \
        {b"d|packed": {"a": b"2"}, b"z|last": {"z": b"9"}}
    assert clean.get_many([b"d|packed", b"g|x|1"]) == \
        {b"d|packed": {"a": b"2"}, b"g|x|1": {set_a: b""}}
    clean.close()
    # a cell after the last prefix, and one before the first, are both found
    for key in (b"a|before", b"z|after"):
        raw = open_table(f"sqlite:///{tmp_path}/{key[:1].decode()}.db")
        raw.declare_wide([key[:2]])
        raw.put({key: {"a": b"1"}})
        raw.close()
        table = _wide_table(f"{tmp_path}/{key[:1].decode()}.db")
        assert table._stray_cells and table.get_many([key]) == {key: {"a": b"1"}}
        table.close()
