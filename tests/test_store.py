"""The lineage store on the embedded SQLite backend: semantics §3 and the write path."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fll import EndPoint, EndPointField, InvalidLineageError, StoreError, open_store
from fll import rowkeys as rk
from fll.store import open_table
from fll.store.layout import row_sets
from tests.lineage_examples import ANOTHER_FILE, ENDPOINT1, cdap_example, chain

NAME = EndPointField(ANOTHER_FILE, "name")
BODY = EndPointField(ENDPOINT1, "body")


def test_run_at_10000ms_is_outside_end_10000_and_inside_end_10001(store):
    store.record(cdap_example(), "run1", 10000)
    assert store.incoming(NAME, 0, 10000) == set()
    assert store.incoming(NAME, 0, 10001) == {BODY}
    assert store.incoming(NAME, 10000, 10001) == {BODY}
    assert store.incoming(NAME, 10001, 20000) == set()
    assert store.fields(ANOTHER_FILE, 0, 10000) == []
    assert [r.run_id for r in store.runs(ANOTHER_FILE, 0, 10000)] == []


def test_two_runs_in_the_same_millisecond_are_both_kept(store):
    store.record(cdap_example(), "run-a", 5000)
    store.record(cdap_example(), "run-b", 5000)
    assert sorted(r.run_id for r in store.runs(ANOTHER_FILE, 0, 6000)) == ["run-a", "run-b"]
    (group,) = store.operations(NAME, 0, 6000)
    assert sorted(r.run_id for r in group.runs) == ["run-a", "run-b"]


def test_recording_the_same_run_twice_stores_it_once(store):
    assert store.record(cdap_example(), "run1", 1000, "p") is True
    before = list(store.table.scan())
    assert store.record(cdap_example(), "run1", 1000, "p") is False
    assert list(store.table.scan()) == before


def test_a_different_operation_set_for_a_known_run_is_refused(store):
    store.record(cdap_example(), "run1", 1000)
    other = chain(EndPoint("n", "a"), EndPoint("n", "b"), ["x"])
    with pytest.raises(InvalidLineageError, match="already recorded"):
        store.record(other, "run1", 2000)
    assert store.runs(EndPoint("n", "b"), 0, 10**12) == []


def test_one_data_row_per_distinct_operation_set(store):
    for i in range(5):
        store.record(cdap_example(), f"r{i}", 1000 + i)
    data_rows = list(store.table.scan(b"d|", b"d}"))
    assert len(data_rows) == 1
    assert data_rows[0][0] == rk.data(cdap_example().checksum)


def test_summaries_and_operations_of_a_field(store):
    store.record(cdap_example(), "r1", 1000, "pipe")
    store.record(cdap_example(), "r2", 3000, "pipe")
    assert store.outgoing(BODY, 0, 5000) == {NAME}
    assert store.fields(ANOTHER_FILE, 0, 5000) == ["name", "offset"]
    assert store.fields(ANOTHER_FILE, 0, 5000, prefix="NA") == ["name"]
    assert store.fields(ENDPOINT1, 0, 5000) == ["body", "offset"]
    (group,) = store.operations(NAME, 0, 5000)
    assert [o.name for o in group.operations] == ["read", "parse", "concat", "write"]
    assert [(r.run_id, r.program) for r in group.runs] == [("r2", "pipe"), ("r1", "pipe")]
    (out,) = store.operations(BODY, 0, 5000, direction="outgoing")
    assert [o.name for o in out.operations] == ["read", "parse", "concat", "write"]
    assert store.operations(NAME, 0, 5000, direction="outgoing") == []


def test_groups_follow_distinct_operation_sets_newest_first(store):
    a, b = EndPoint("n", "a"), EndPoint("n", "b")
    first = chain(a, b, ["x"])
    second = chain(a, b, ["x"], prefix="v2_")
    store.record(first, "old", 1000)
    store.record(second, "new", 2000)
    groups = store.operations(EndPointField(b, "x"), 0, 3000)
    assert [g.checksum for g in groups] == [second.checksum, first.checksum]
    assert [g.checksum for g in store.operations(EndPointField(b, "x"), 0, 1500)] == \
        [first.checksum]


def test_datasets_and_runs_and_properties(store):
    a, b = EndPoint("n", "a", {"path": "/a"}), EndPoint("n", "b")
    store.record(chain(a, b, ["x"]), "r1", 1000, "job")
    assert store.datasets() == [a, b]
    assert store.exists(a) and not store.exists(EndPoint("n", "zzz"))
    assert store.run("r1").start_ms == 1000 and store.run("nope") is None
    assert store.properties(a, 0, 2000) == [
        {"programRun": "r1", "program": "job", "startMs": 1000, "properties": {"path": "/a"}}]


def test_record_many_is_all_or_nothing(store):
    bad = [(cdap_example(), "ok", 1000, None), (cdap_example(), "", 1000, None)]
    with pytest.raises(InvalidLineageError, match="run id"):
        store.record_many(bad)
    assert [k for k, _ in store.table.scan()] == [rk.meta("format")]


def test_names_with_separators_do_not_mix(store):
    store.record(chain(EndPoint("n", "a|b"), EndPoint("n", "c"), ["x"]), "r1", 1000)
    store.record(chain(EndPoint("n|a", "b"), EndPoint("n", "c|d"), ["x"]), "r2", 1000)
    assert store.incoming(EndPointField(EndPoint("n", "c"), "x"), 0, 2000) == \
        {EndPointField(EndPoint("n", "a|b"), "x")}
    assert store.fields(EndPoint("n", "c|d"), 0, 2000) == ["x"]
    assert [r.run_id for r in store.runs(EndPoint("n", "c"), 0, 2000)] == ["r1"]


# -- the SQLite table itself ------------------------------------------------------------

def test_scan_bounds_limit_and_reverse(tmp_path):
    t = open_table(f"sqlite:///{tmp_path}/t.db")
    t.put({bytes([i]): {"c": bytes([i])} for i in range(256)})
    keys = [k for k, _ in t.scan(b"\x10", b"\x20")]
    assert keys == [bytes([i]) for i in range(0x10, 0x20)]
    assert [k for k, _ in t.scan(b"\x10", b"\x20", reverse=True)] == keys[::-1]
    assert [k for k, _ in t.scan(b"\x10", b"\x20", limit=3)] == keys[:3]
    assert len(list(t.scan())) == 256 and len(list(t.scan(b"\xf0"))) == 16
    t.delete([b"\x11"])
    assert t.get(b"\x11") is None and t.get(b"\x12") == {"c": b"\x12"}
    t.close()


def test_a_scan_spanning_many_pages_returns_every_row_once(tmp_path):
    t = open_table(f"sqlite:///{tmp_path}/t.db")
    t.put({b"k%05d" % i: {"a": b"1", "b": b"2"} for i in range(5000)})
    rows = list(t.scan(b"k", b"l"))
    assert len(rows) == 5000 and all(cols == {"a": b"1", "b": b"2"} for _, cols in rows)
    assert [k for k, _ in t.scan(b"k", b"l", reverse=True)] == [k for k, _ in rows][::-1]


def test_bad_store_urls_name_the_known_schemes():
    with pytest.raises(StoreError, match="sqlite://"):
        open_store("mysql://x/y")
    with pytest.raises(StoreError, match="no scheme"):
        open_store("just-a-path.db")
    with pytest.raises(StoreError, match="unknown sqlite URL parameter"):
        open_store("sqlite:///x.db?cache=yes")



def test_a_store_that_cannot_write_raises_store_error_and_keeps_nothing(tmp_path, monkeypatch):
    s = open_store(f"sqlite:///{tmp_path}/fll.db")
    import sqlite3

    real = s.table._retry

    def full_disk(fn, *, write):
        if write:
            raise s.table._error("write", sqlite3.OperationalError("database or disk is full"))
        return real(fn, write=write)

    monkeypatch.setattr(s.table, "_retry", full_disk)
    with pytest.raises(StoreError, match="disk is full"):
        s.record(cdap_example(), "r1", 1000)
    monkeypatch.undo()
    assert s.runs(ANOTHER_FILE, 0, 2000) == []
    assert s.record(cdap_example(), "r1", 1000) is True
    assert len(s.runs(ANOTHER_FILE, 0, 2000)) == 1


# -- several processes, and crashes ----------------------------------------------------

def _writer(url: str, worker: int, n: int) -> None:
    s = open_store(url)
    for i in range(n):
        s.record(cdap_example(), f"w{worker}-{i}", 1000 + i)
    s.close()


def test_several_processes_write_one_store_at_once(tmp_path):
    url = f"sqlite:///{tmp_path}/fll.db"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(url, w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = open_store(url)
    assert len(s.runs(ANOTHER_FILE, 0, 10**6)) == 600


CRASH_WRITER = textwrap.dedent("""
    import sys
    from fll import open_store
    from tests.lineage_examples import cdap_example, chain
    from fll import EndPoint
    s = open_store(sys.argv[1])
    i = 0
    while True:
        info = cdap_example() if i % 2 else chain(EndPoint("n", "a"), EndPoint("n", f"b{i % 7}"),
                                                   ["x", "y"], prefix=f"p{i}_")
        s.record(info, f"run-{i}", 1000 + i)
        print(f"run-{i}", flush=True)   # printed only after record() returned
        i += 1
""")


def test_a_writer_killed_mid_stream_leaves_no_dangling_index_row(tmp_path):
    url = f"sqlite:///{tmp_path}/fll.db"
    returned: list[str] = []
    for attempt in range(5):
        p = subprocess.Popen([sys.executable, "-c", CRASH_WRITER, url], stdout=subprocess.PIPE,
                             text=True, cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": "."})
        time.sleep(0.8 + 0.3 * attempt)
        os.kill(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        returned += out.split()
    assert len(returned) > 20
    s = open_store(url)
    data = {k for k, _ in s.table.scan(b"d|", b"d}")}
    for prefix in (b"b|", b"f|", b"r|"):
        for key, cols in s.table.scan(prefix, rk.prefix_end(prefix)):
            sets = [cols["c"].decode()] if prefix == b"r|" else \
                [c for _, c, _ in row_sets(key, cols)]
            assert sets and all(rk.data(c) in data for c in sets), \
                f"{key!r} points at a missing data row"
    for run_id in returned:
        r = s.run(run_id)
        assert r is not None, f"{run_id} returned from record() but is not readable"


def test_a_data_row_removed_by_another_process_is_written_again(tmp_path):
    url = f"sqlite:///{tmp_path}/fll.db"
    writer, admin = open_store(url), open_store(url)
    writer.record(cdap_example(), "r1", 1000)
    admin.table.delete([rk.data(cdap_example().checksum)])  # e.g. a purge elsewhere
    writer.record(cdap_example(), "r2", 2000)
    assert admin.table.get(rk.data(cdap_example().checksum)) is not None
    assert admin.incoming(NAME, 1500, 2500) == {BODY}


def test_a_long_scan_seeks_from_its_cursor(tmp_path):
    t = open_table(f"sqlite:///{tmp_path}/t.db")
    t.put({b"k%06d" % i: {"a": b"1"} for i in range(30000)})
    statements: list[str] = []
    conn = t._conn()
    conn.set_trace_callback(statements.append)
    assert len(list(t.scan(b"k", b"l"))) == 30000
    assert len(list(t.scan(b"k", b"l", reverse=True))) == 30000
    pages = [s for s in statements if s.startswith("SELECT")]
    forward, backward = pages[:len(pages) // 2], pages[len(pages) // 2:]
    assert len(forward) > 10 and len(backward) > 10
    # after the first page, each page seeks from its cursor row, not the range start
    assert all("row >= x'6b' " not in s and "row > x'6b3" in s for s in forward[1:])
    assert all("row < x'6c'" not in s and "row < x'6b3" in s for s in backward[1:])
    plan = conn.execute("EXPLAIN QUERY PLAN SELECT row, val FROM rows WHERE row > ? "
                        "AND row < ? ORDER BY row LIMIT 10", (b"k015000", b"l")).fetchall()
    assert "SEARCH" in str(plan)
