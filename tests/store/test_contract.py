"""The `Table` contract and the lineage store API, run identically on every backend.

SQLite always; the Bigtable emulator always; the HBase backend through happybase
and real sockets against fll's HBase Thrift 1 test server always; a real HBase
when ``FLL_TEST_HBASE`` is set.
Lineage answers are computed on SQLite and must be identical everywhere.
"""
from __future__ import annotations

import os
import random
import threading

import pytest

from fll import EndPoint, EndPointField, InvalidLineageError, StoreError
from fll import rowkeys as rk
from fll.model import InputField, ReadOperation, TransformOperation, WriteOperation
from fll.store import LineageStore
from fll.store.base import Table
from tests.lineage_examples import ANOTHER_FILE, ENDPOINT1, cdap_example, chain

from .conftest import BACKENDS, open_url

pytestmark = pytest.mark.parametrize("table_url", BACKENDS, indirect=True)


def keys(rows) -> list[bytes]:
    return [k for k, _ in rows]


def _atomic(table) -> bool:
    return bool(getattr(table, "atomic_batches", False)) or type(table).__name__ == "SQLiteTable"


# -- the Table protocol ----------------------------------------------------------------

def test_a_table_implements_the_protocol_and_round_trips_rows(open_table_for):
    t = open_table_for()
    assert isinstance(t, Table)
    t.put({b"a": {"x": b"1", "y": b""}, b"b": {"x": b"2"}})
    assert t.get(b"a") == {"x": b"1", "y": b""}
    assert t.get(b"b") == {"x": b"2"}
    assert t.get(b"missing") is None


def test_a_put_merges_columns_into_an_existing_row_and_overwrites_values(open_table_for):
    t = open_table_for()
    t.put({b"r": {"a": b"1", "b": b"2"}})
    t.put({b"r": {"b": b"3", "c": b"4"}})
    assert t.get(b"r") == {"a": b"1", "b": b"3", "c": b"4"}


@pytest.mark.parametrize("declared", [True, False])
def test_first_cells_answer_each_rows_first_column_in_a_range(open_table_for, declared):
    """`first_cells`: of every row asked, its first column in ``[lo, hi)`` in
    byte order and that cell's value, absent rows and rows without one left
    out; a deleted column is gone. On rows a SQLite table keeps a cell at a
    time (declared wide) and on rows it packs alike."""
    t = open_table_for()
    prefix = b"S|" if declared else b"P|"
    if declared and callable(getattr(t, "declare_wide", None)):
        t.declare_wide([prefix])
    rng = random.Random(7)
    names = [f"{rng.randrange(16**3):03x}|r{rng.randrange(9)}" for _ in range(40)] + \
        ["0ff|\u00e9t\u00e9", "0ff|z", "100", "0fe|%7C", "a", "~"]
    rows = {prefix + b"n|d" + bytes([65 + i]): {c: f"{i}:{c}".encode() for c in
                                                  rng.sample(names, rng.randrange(1, 12))}
            for i in range(14)}
    t.put(rows)
    some = sorted(rows)[3]
    gone = sorted(rows[some])[:2]
    t.delete_columns({some: gone})
    stored = {k: {c: v for c, v in cols.items() if k != some or c not in gone}
              for k, cols in rows.items()}
    asked = sorted(rows) + [prefix + b"n|absent", b"zz"]
    for lo, hi in [("", "~~"), ("0ff", "100"), ("0ff|z", "0ff|\u00e9"), ("5", "a"),
                   ("a", "a"), ("b", "a"), ("100", "101"), ("000", "0ff")]:
        want = {}
        for k, cols in stored.items():
            inside = sorted((c.encode(), c) for c in cols if lo.encode() <= c.encode() < hi.encode())
            if inside:
                want[k] = (inside[0][1], cols[inside[0][1]])
        assert t.first_cells(asked, lo, hi) == want, (lo, hi)
    assert t.first_cells([], "", "~") == {}


def test_get_many_returns_present_rows_and_leaves_out_absent_ones(open_table_for):
    t = open_table_for()
    t.put({bytes([i]) + b"k": {"v": bytes([i])} for i in range(20)})
    asked = [bytes([i]) + b"k" for i in range(0, 40, 3)] + [b"\x03k"]
    got = t.get_many(asked)
    assert got == {bytes([i]) + b"k": {"v": bytes([i])} for i in range(0, 20, 3)}
    assert t.get_many([]) == {}


SCAN_KEYS = [b"a", b"a\x00", b"ab", b"b", b"ba", b"c", b"d"]
# (start, stop, expected keys in ascending order): start inclusive, stop exclusive,
# stop=b"" means to the end of the table
SCAN_CASES = [
    (b"", b"", SCAN_KEYS),
    (b"b", b"d", [b"b", b"ba", b"c"]),
    (b"b", b"", [b"b", b"ba", b"c", b"d"]),
    (b"", b"b", [b"a", b"a\x00", b"ab"]),
    (b"a", b"a\x00", [b"a"]),
    (b"a\x00", b"ab", [b"a\x00"]),
    (b"a\x01", b"b", [b"ab"]),
    (b"bb", b"c", []),
    (b"d", b"d", []),
    (b"d", b"c", []),
    (b"e", b"", []),
    (b"c", b"c\x00", [b"c"]),
    (b"", b"a", []),
]


@pytest.mark.parametrize("start,stop,expected", SCAN_CASES)
def test_a_scan_includes_start_excludes_stop_in_both_directions(open_table_for, start, stop,
                                                                expected):
    t = open_table_for()
    t.put({k: {"v": k} for k in SCAN_KEYS})
    assert keys(t.scan(start, stop)) == expected
    assert keys(t.scan(start, stop, reverse=True)) == expected[::-1]
    for limit in (1, 2, 5):
        assert keys(t.scan(start, stop, limit=limit)) == expected[:limit]
        assert keys(t.scan(start, stop, limit=limit, reverse=True)) == expected[::-1][:limit]
    assert all(cols == {"v": k} for k, cols in t.scan(start, stop))


def test_a_scan_with_limit_zero_or_an_empty_table_yields_nothing(open_table_for):
    t = open_table_for()
    assert list(t.scan()) == []
    assert list(t.scan(reverse=True)) == []
    t.put({b"x": {"v": b"1"}})
    assert list(t.scan(limit=0)) == []
    assert list(t.scan(limit=0, reverse=True)) == []


def test_scans_cross_page_boundaries_without_losing_or_repeating_rows(open_table_for):
    t = open_table_for()
    all_keys = [b"k%03d" % i for i in range(53)]
    t.put({k: {"v": k} for k in all_keys})
    assert keys(t.scan()) == all_keys
    assert keys(t.scan(reverse=True)) == all_keys[::-1]
    assert keys(t.scan(b"k010", b"k040", limit=17)) == all_keys[10:27]
    assert keys(t.scan(b"k010", b"k040", limit=17, reverse=True)) == all_keys[39:22:-1]


def test_binary_keys_with_every_byte_value_sort_and_round_trip(open_table_for):
    t = open_table_for()
    all_keys = [bytes([i]) for i in range(256)] + [b"\xff" + bytes([i]) for i in range(256)] + \
        [b"\x00\x00", b"\x00\xff", b"k|\x00|\xff"]
    random.Random(8).shuffle(all_keys)
    t.put({k: {"v": k, "bin": bytes(range(256))} for k in all_keys})
    ordered = sorted(all_keys)
    assert keys(t.scan()) == ordered
    assert keys(t.scan(reverse=True)) == ordered[::-1]
    assert keys(t.scan(b"\x00", b"\x01")) == [b"\x00", b"\x00\x00", b"\x00\xff"]
    assert keys(t.scan(b"\xff", b"", reverse=True)) == ordered[::-1][:257]
    assert keys(t.scan(b"\x7f", b"\x81")) == [b"\x7f", b"\x80"]
    got = t.get_many(all_keys)
    assert set(got) == set(all_keys)
    assert all(got[k] == {"v": k, "bin": bytes(range(256))} for k in all_keys)
    assert t.get(b"\x00") == {"v": b"\x00", "bin": bytes(range(256))}


def test_large_values_of_one_mebibyte_round_trip(open_table_for):
    t = open_table_for()
    rng = random.Random(1)
    big = {b"big%d" % i: {"v": rng.randbytes(1 << 20), "w": b"x"} for i in range(3)}
    t.put(big)
    for k, cols in big.items():
        assert t.get(k) == cols
    assert dict(t.scan(b"big", b"bih")) == big
    assert dict(t.scan(b"big", b"bih", reverse=True)) == big


def test_delete_removes_whole_rows_and_tolerates_missing_ones(open_table_for):
    t = open_table_for()
    t.put({b"a": {"x": b"1", "y": b"2"}, b"b": {"x": b"2"}, b"c": {"x": b"3"}})
    t.delete([b"b", b"nope"])
    assert t.get(b"b") is None
    assert keys(t.scan()) == [b"a", b"c"]
    t.delete([])
    t.put({b"b": {"z": b"9"}})
    assert t.get(b"b") == {"z": b"9"}


def test_concurrent_writers_lose_no_row_and_no_column(open_table_for):
    t = open_table_for()
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(10):
                t.put({b"w%d-%02d" % (w, i): {"v": b"%d" % i},
                       b"shared": {f"w{w}-{i}": b"x"}})
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(keys(t.scan(b"w", b"x"))) == 40
    assert t.get(b"shared") == {f"w{w}-{i}": b"x" for w in range(4) for i in range(10)}


def test_a_backend_that_promises_atomic_batches_never_shows_half_a_batch(open_table_for):
    t = open_table_for()
    batch_keys = [b"atom%02d" % i for i in range(40)]
    if not _atomic(t):
        # per-row atomicity only: the lineage store orders its writes instead
        # (see test_a_crash_between_writes_never_leaves_an_index_row_without_its_data)
        assert getattr(t, "atomic_batches", None) is False
        return
    t.put({k: {"gen": b"0"} for k in batch_keys})
    stop = threading.Event()
    seen: list[set] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append({cols["gen"] for cols in t.get_many(batch_keys).values()})

    th = threading.Thread(target=reader)
    th.start()
    for gen in range(1, 30):
        t.put({k: {"gen": b"%d" % gen} for k in batch_keys})
    stop.set()
    th.join()
    assert seen and all(len(s) == 1 for s in seen)


# -- the lineage store on top ------------------------------------------------------------

CUSTOMERS = EndPoint("ns", "customers", {"format": "parquet"})
CLEAN = EndPoint("ns", "clean")
ODD = EndPoint("ns|x", "a%b|c")


def dropping_set():
    return [
        ReadOperation("read", "read with junk", ENDPOINT1, ["offset", "body", "junk"]),
        TransformOperation("drop_junk", "drop", [InputField("read", "junk")], []),
        TransformOperation("up", "upper", [InputField("read", "body")], ["body"]),
        WriteOperation("write", "write", ANOTHER_FILE,
                       [InputField("read", "offset"), InputField("up", "body")]),
    ]


def scenario():
    from fll import FieldLineageInfo

    cdap = cdap_example()
    drop = FieldLineageInfo(dropping_set())
    clean = chain(CUSTOMERS, CLEAN, ["id", "name", "email"])
    odd = chain(CLEAN, ODD, ["id", "na|me"], prefix="o_")
    return [
        (cdap, "run-1", 1_000, "etl.daily"),
        (cdap, "run-2", 2_000, "etl.daily"),
        (clean, "run-3", 3_000, None),
        (drop, "run-4", 4_000, "etl.fix"),
        (clean, "run-5", 5_000, "etl.clean"),
        (odd, "run-6", 5_000, "odd|prog"),
        (cdap, "run-7", 9_000, "etl.daily"),
    ]


RANGES = [(0, 10**13), (1_500, 4_500), (2_000, 2_001), (5_000, 5_001), (6_000, 7_000)]


def record(store: LineageStore) -> None:
    runs = scenario()
    assert store.record(*runs[0]) is True
    assert store.record(*runs[0]) is False  # the same run again is a no-op
    assert store.record_many(runs[1:4]) == 3
    assert store.record_many(runs) == 3  # only the new ones count
    with pytest.raises(InvalidLineageError, match="run-3"):
        store.record(runs[0][0], "run-3", 3_000)


def answers(store: LineageStore) -> dict:
    """Every query of the lineage store, as plain comparable data."""
    out: dict = {"datasets": [str(d) for d in store.datasets()]}
    eps = store.datasets() + [EndPoint("ns", "never")]
    for ep in eps:
        out[f"exists {ep}"] = store.exists(ep)
        for start, end in RANGES:
            tag = f"{ep} [{start},{end})"
            fields = store.fields(ep, start, end)
            out[f"fields {tag}"] = fields
            out[f"fields-prefix {tag}"] = store.fields(ep, start, end, prefix="N")
            out[f"properties {tag}"] = store.properties(ep, start, end)
            for direction in ("incoming", "outgoing"):
                out[f"checksums {direction} {tag}"] = sorted(
                    store.checksums(ep, start, end, direction))
            for direction in ("incoming", "outgoing", "both"):
                out[f"runs {direction} {tag}"] = [tuple(r) for r in
                                                  store.runs(ep, start, end, direction)]
                out[f"runs {direction} limit 1 {tag}"] = [
                    tuple(r) for r in store.runs(ep, start, end, direction, limit=1)]
            for name in fields + ["nope"]:
                f = EndPointField(ep, name)
                out[f"incoming {f} {tag}"] = sorted(map(str, store.incoming(f, start, end)))
                out[f"outgoing {f} {tag}"] = sorted(map(str, store.outgoing(f, start, end)))
                out[f"outgoing+dropped {f} {tag}"] = sorted(
                    map(str, store.outgoing(f, start, end, include_dropped=True)))
                for direction in ("incoming", "outgoing"):
                    out[f"operations {direction} {f} {tag}"] = [
                        (g.checksum, [repr(o) for o in g.operations], [tuple(r) for r in g.runs])
                        for g in store.operations(f, start, end, direction)]
    for _info, run_id, _start, _prog in scenario():
        r = store.run(run_id)
        out[f"run {run_id}"] = tuple(r) if r else None
        out[f"set of {run_id}"] = store.operation_set(r.checksum).to_dict() if r else None
    out["run unknown"] = store.run("unknown")
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The answers on SQLite, the reference backend."""
    path = tmp_path_factory.mktemp("reference") / "ref.db"
    with LineageStore(open_url(f"sqlite:///{path}")) as store:
        record(store)
        return answers(store)


def test_the_lineage_store_answers_every_query_as_on_sqlite(open_table_for, reference):
    with LineageStore(open_table_for()) as store:
        record(store)
        got = answers(store)
    assert got.keys() == reference.keys()
    different = [k for k in got if got[k] != reference[k]]
    assert different == [], f"answers differ from SQLite for: {different[:5]}"


def test_all_runs_and_schema_spans_are_the_per_dataset_answers_in_one_pass(open_table_for):
    with LineageStore(open_table_for()) as store:
        record(store)
        # 70 runs in one millisecond share a run row; one run superseded
        same_ms = [(chain(EndPoint("b", "src"), EndPoint("b", "dst"), ["x"]), f"ms-{i:02d}",
                    9_000, "etl/same") for i in range(70)]
        store.record_many(same_ms)
        store.record(chain(EndPoint("b", "src"), EndPoint("b", "dst"), ["x", "y"]), "ms-00",
                     9_000, "etl/same", supersede=True)
        store.record_schema("b", "dst", "ms-01", 9_000, [("x", "INT")])
        store.record_schema("b", "dst", "ms-02", 12_000, [("x", "INT")])
        store.record_schema("c", "only-schema", "datasetEvent", 5_000, [("a", None)])
        everything = (0, rk.MAX_TIME)
        expected = {ep: (store.runs(ep, *everything, "incoming"),
                         store.runs(ep, *everything, "outgoing"))
                    for ep in store.datasets()}
        got = store.all_runs()
        assert got == expected
        assert len(got[EndPoint("b", "dst")][0]) == 70
        assert store.schema_spans() == {EndPoint("b", "dst"): (9_000, 12_000),
                                        EndPoint("c", "only-schema"): (5_000, 5_000)}


def test_the_cdap_example_reads_back_as_semantics_section_2_says(open_table_for):
    with LineageStore(open_table_for()) as store:
        record(store)
        name = EndPointField(ANOTHER_FILE, "name")
        assert store.incoming(name, 0, 2_500) == {EndPointField(ENDPOINT1, "body")}
        assert store.incoming(EndPointField(ANOTHER_FILE, "offset"), 0, 2_500) == \
            {EndPointField(ENDPOINT1, "offset")}
        [group] = store.operations(name, 0, 2_500)
        assert [o.name for o in group.operations] == ["read", "parse", "concat", "write"]
        assert [r.run_id for r in group.runs] == ["run-2", "run-1"]
        assert store.fields(ODD, 0, 10**13) == ["id", "na|me"]
        junk = EndPointField(ENDPOINT1, "junk")
        assert store.outgoing(junk, 0, 10**13) == set()
        assert len(store.outgoing(junk, 0, 10**13, include_dropped=True)) == 1


def test_concurrent_recorders_store_every_run(open_table_for):
    table = open_table_for()
    store = LineageStore(table)
    src, dst = EndPoint("c", "src"), EndPoint("c", "dst")
    sets = [chain(src, dst, [f"f{i}", "k"]) for i in range(3)]
    errors: list[BaseException] = []

    def recorder(w: int) -> None:
        try:
            for i in range(8):
                store.record(sets[(w + i) % 3], f"w{w}-{i}", 1_000 + w * 100 + i, f"p{w}")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=recorder, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(store.runs(dst, 0, 10**6)) == 32
    assert sorted(store.fields(dst, 0, 10**6)) == ["f0", "f1", "f2", "k"]
    assert len(store.checksums(dst, 0, 10**6)) == 3


class _FailingPuts:
    """A table whose put number ``fail_at`` (1-based) raises, as a crash would."""

    def __init__(self, inner, fail_at: int):
        self.inner = inner
        self.url = inner.url
        self.atomic_batches = _atomic(inner)
        self.fail_at = fail_at
        self.puts = 0

    def put(self, rows):
        self.puts += 1
        if self.puts == self.fail_at:
            raise StoreError("injected crash")
        self.inner.put(rows)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("fail_at", [1, 2, 3])
def test_a_crash_between_writes_never_leaves_an_index_row_without_its_data(open_table_for,
                                                                           fail_at):
    inner = open_table_for()
    LineageStore(inner)  # stamps the empty store with its format: not a write of the run
    proxy = _FailingPuts(inner, fail_at)
    store = LineageStore(proxy)
    if _atomic(inner) and fail_at > 1:
        # one batch, all or nothing: there is no second write to crash before
        assert store.record(cdap_example(), "run-x", 1_000, "p") is True
        assert proxy.puts == 1
        return
    with pytest.raises(StoreError, match="injected"):
        store.record(cdap_example(), "run-x", 1_000, "p")
    data = {k for k, _ in inner.scan(b"d|", b"d}")}
    for kind in (b"b|", b"f|"):
        for _key, cols in inner.scan(kind, kind[:1] + b"}"):
            assert rk.data(cols["c"].decode()) in data
    if _atomic(inner):
        assert LineageStore(inner).run("run-x") is None  # never reported as recorded
        assert keys(inner.scan()) == [rk.meta("format")]
    else:
        # puts: 1 the writer's announcement, 2 the data row, then the run row is
        # claimed and 3 is its index rows: from then on fsck names it unfinished
        from fll.store import admin
        claimed = inner.get(rk.run("run-x")) is not None
        assert claimed == (fail_at == 3)
        assert admin.fsck(inner).unfinished == ([rk.run("run-x")] if claimed else [])
    # the retry path: recording again works and answers normally
    retry = LineageStore(inner)
    assert retry.record(cdap_example(), "run-x", 1_000, "p") is True
    assert retry.incoming(EndPointField(ANOTHER_FILE, "name"), 0, 2_000) == \
        {EndPointField(ENDPOINT1, "body")}


def test_the_suite_ran_on_the_backends_the_environment_promises(table_url):
    # guards against the emulator or FLL_TEST_HBASE silently dropping out
    if os.environ.get("FLL_TEST_HBASE"):
        assert "hbase" in BACKENDS
    assert {"sqlite", "bigtable", "hbase-thrift"} <= set(BACKENDS)
    assert table_url().split("://")[0] in ("sqlite", "bigtable", "hbase")
