"""HBase-specific behaviour through happybase's real client and real sockets,
against fll's HBase Thrift 1 test server: URLs, retries, error mapping, HBase's
limits, and faults on the wire.

The contract suite covers the data path (and a real server when
``FLL_TEST_HBASE`` is set).
"""
from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from fll import StoreError
from fll.store import open_table
from fll.store.hbase import _below, parse_url
from fll.store.layout import row_sets
from fll.testing.hbase_model import hb
from fll.testing.hbase_thrift import HBaseThriftServer

from .conftest import free_port

URLS = [
    ("hbase://h:9090/lineage", dict(host="h", port=9090, table="lineage", prefix=None,
                                    transport="buffered", protocol="binary", pool_size=4)),
    ("hbase://h", dict(host="h", port=9090, table="fll")),
    ("hbase://h:9091/t?prefix=team&transport=framed&protocol=compact&pool=8",
     dict(port=9091, table="t", prefix="team", transport="framed", protocol="compact",
          pool_size=8)),
    ("hbase://h/t?batch=50&page=20&timeout=2.5&deadline=9&create=false&compat=0.96&frame=16",
     dict(batch_rows=50, page_rows=20, timeout=2.5, deadline=9.0, create=False,
          compat="0.96", frame_mb=16.0)),
]


@pytest.mark.parametrize("url,expected", URLS)
def test_an_hbase_url_names_the_connection_settings(url, expected):
    settings = parse_url(url)
    assert {k: settings[k] for k in expected} == expected


BAD_URLS = [
    ("hbase:///t", "hbase://host:9090/table"),
    ("hbase://h:notaport/t", "bad port"),
    ("hbase://h/a/b", "one table"),
    ("hbase://h/t?transport=http", "transport must be one of buffered, framed"),
    ("hbase://h/t?protocol=json", "protocol must be one of binary, compact"),
    ("hbase://h/t?pool=0", "pool must be positive"),
    ("hbase://h/t?pool=many", "pool must be a number"),
    ("hbase://h/t?colour=red", "unknown hbase URL parameter(s) colour"),
]


@pytest.mark.parametrize("url,message", BAD_URLS)
def test_a_malformed_hbase_url_is_a_store_error_saying_what_is_wrong(url, message):
    with pytest.raises(StoreError) as e:
        open_table(url)
    assert message in str(e.value)


def test_a_refused_connection_fails_at_once_naming_host_and_table_but_no_password():
    port = free_port()
    began = time.monotonic()
    with pytest.raises(StoreError) as e:
        open_table(f"hbase://admin:s3cret@127.0.0.1:{port}/lineage?deadline=30&timeout=2")
    text = str(e.value)
    assert time.monotonic() - began < 5, "a refused connection must not wait for the deadline"
    assert f"127.0.0.1:{port}" in text and "'lineage'" in text and "refused" in text
    assert "s3cret" not in text and "\n" not in text


def test_a_missing_happybase_names_the_extra_to_install(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "happybase", None)
    with pytest.raises(StoreError, match=r"pip install 'fll\[hbase\]'"):
        open_table("hbase://127.0.0.1:9090/t")


def test_an_unknown_scheme_lists_hbase_and_bigtable_among_the_known_ones():
    with pytest.raises(StoreError) as e:
        open_table("cassandra://h/t")
    assert "hbase://" in str(e.value) and "bigtable://" in str(e.value)


@pytest.fixture
def server():
    s = HBaseThriftServer().start()
    yield s
    s.stop()


def test_the_table_and_its_column_family_are_created_once_on_first_use(server):
    t = open_table(server.url("t", prefix="team"))
    assert server.handler.getTableNames() == [b"team_t"]
    assert list(server.handler.getColumnDescriptors(b"team_t")) == [b"c:"]
    t2 = open_table(server.url("t", prefix="team"))
    assert server.calls["createTable"] == 1
    t2.put({b"k": {"v": b"1"}})
    assert t.get(b"k") == {"v": b"1"}


def test_a_server_error_is_not_retried_and_says_what_failed(server, monkeypatch):
    t = open_table(server.url("t"))

    def refuse(*args):
        raise hb.IllegalArgument(message="bad column")
    monkeypatch.setattr(server.handler, "mutateRowsTs", refuse)
    before = server.calls["mutateRowsTs"]
    with pytest.raises(StoreError, match="write failed: IllegalArgument: bad column"):
        t.put({b"k": {"v": b"1"}})
    assert server.calls["mutateRowsTs"] == before + 1


@pytest.mark.parametrize("api", ["mutateRowsTs", "getRowWithColumns", "scannerOpenWithScan"])
def test_a_table_dropped_behind_our_back_is_recreated_on_every_kind_of_call(server, api):
    t = open_table(server.url("t"))
    server.handler.disableTable(b"t")
    server.handler.deleteTable(b"t")
    if api == "mutateRowsTs":
        t.put({b"k": {"v": b"1"}})  # HBase 2's batched "was not found" text
        assert t.get(b"k") == {"v": b"1"}
    elif api == "getRowWithColumns":
        assert t.get(b"k") is None
    else:
        assert list(t.scan()) == []
    assert server.calls["createTable"] == 2


def test_a_scan_generator_holds_no_scanner_between_pages(server):
    t = open_table(server.url("t", page=3))
    t.put({b"k%d" % i: {"v": b"x"} for i in range(10)})
    walk = t.scan()
    first = [next(walk) for _ in range(3)]
    assert server.calls["scannerOpenWithScan"] == server.calls["scannerClose"] == 1
    assert server.handler.scanners == {}
    rest = list(walk)
    assert [k for k, _ in first + rest] == [b"k%d" % i for i in range(10)]


@pytest.mark.parametrize("key,below", [(b"", None), (b"\x00", None), (b"a\x00", b"a"),
                                       (b"b", b"a"), (b"ab", b"aa"), (b"\xff", b"\xfe")])
def test_the_reverse_scan_lower_bound_is_a_key_just_below_start(key, below):
    assert _below(key) == below
    if below is not None:
        assert below < key


# -- HBase's limits ------------------------------------------------------------

def test_a_batch_larger_than_the_frame_is_split_by_bytes_and_every_row_arrives():
    with HBaseThriftServer(transport="framed") as server:
        t = open_table(server.url("t", deadline=15))
        rows = {b"r%03d" % i: {"v": b"x" * 300_000} for i in range(24)}  # ~7 MB in all
        began = time.monotonic()
        t.put(rows)
        assert time.monotonic() - began < 10
        assert len(list(t.scan())) == 24
        assert server.calls["mutateRowsTs"] >= 4  # no request over 2 MiB


def test_a_single_row_too_large_for_the_frame_fails_at_once_naming_the_server_setting():
    with HBaseThriftServer(transport="framed") as server:
        t = open_table(server.url("t", deadline=15))
        began = time.monotonic()
        with pytest.raises(StoreError) as e:
            t.put({b"small": {"v": b"1"}, b"huge": {"v": b"x" * (3 * 1024 * 1024)}})
        assert time.monotonic() - began < 2
        assert "hbase.regionserver.thrift.framed.max_frame_size_in_mb" in str(e.value)
        assert t.get(b"small") is None, "nothing of the call is written"


def test_the_test_server_closes_a_connection_whose_frame_exceeds_two_mebibytes():
    import happybase
    with HBaseThriftServer(transport="framed") as server:
        conn = happybase.Connection("127.0.0.1", server.port, transport="framed")
        conn.create_table("t", {"c": {}})
        with pytest.raises(Exception) as e:
            conn.table("t").put(b"k", {b"c:v": b"x" * (3 * 1024 * 1024)})
        assert "TTransportException" in type(e.value).__name__ or isinstance(e.value, OSError)


def test_a_row_key_over_hbase_limit_is_refused_before_anything_is_written(server):
    t = open_table(server.url("t"))
    with pytest.raises(StoreError) as e:
        t.put({b"ok": {"v": b"1"}, b"k" * 40_000: {"v": b"1"}})
    assert "32,767" in str(e.value) and "40,000" in str(e.value)
    assert t.get(b"ok") is None


def test_the_test_server_refuses_a_long_key_in_mutate_rows_as_hbase_does(server):
    import happybase
    conn = happybase.Connection("127.0.0.1", server.port)
    conn.create_table("t", {"c": {}})
    from thriftpy2.thrift import TApplicationException
    with pytest.raises(TApplicationException) as e:
        with conn.table("t").batch() as b:
            b.put(b"fine", {b"c:v": b"1"})
            b.put(b"k" * 40_000, {b"c:v": b"1"})
    assert e.value.message == b"Internal error processing mutateRows"
    assert conn.table("t").row(b"fine") == {}


def test_a_delete_without_timestamp_hides_a_put_in_the_same_millisecond_on_the_server(server):
    # HBase's delete-marker semantics, which fll's own deletes must avoid
    import happybase
    conn = happybase.Connection("127.0.0.1", server.port)
    conn.create_table("t", {"c": {}})
    tbl = conn.table("t")
    with tbl.batch(timestamp=1000) as b:
        b.delete(b"k", columns=[b"c"])
    tbl.put(b"k", {b"c:v": b"1"}, timestamp=1000)
    assert tbl.row(b"k") == {}
    tbl.put(b"k", {b"c:v": b"2"}, timestamp=1001)
    assert tbl.row(b"k") == {b"c:v": b"2"}


def test_a_write_right_after_a_delete_is_never_hidden(server):
    t = open_table(server.url("t"))
    for i in range(200):
        t.put({b"k": {"v": b"%d" % i}})
        t.delete([b"k"])
        t.put({b"k": {"v": b"again%d" % i}})
        assert t.get(b"k") == {"v": b"again%d" % i}, f"hidden on round {i}"


def test_check_and_put_uses_thrift_check_and_put_and_only_the_first_writer_wins(server):
    t = open_table(server.url("t", pool=8))
    wins: list[int] = []

    def claim(n: int) -> None:
        if t.check_and_put(b"run", "t", None, {"t": b"%d" % n, "who": b"%d" % n}):
            wins.append(n)
    for _ in range(5):
        t.delete([b"run"])
        wins.clear()
        threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len(wins) == 1
        assert t.get(b"run") == {"t": b"%d" % wins[0], "who": b"%d" % wins[0]}
    assert server.calls["checkAndPut"] == 40
    assert t.check_and_put(b"run", "t", b"%d" % wins[0], {"t": b"x"}) is True
    assert t.check_and_put(b"run", "t", b"nope", {"t": b"y"}) is False
    assert t.get(b"run")["t"] == b"x"


@pytest.mark.parametrize("client,srv", [("framed", "buffered"), ("buffered", "framed")])
def test_a_transport_mismatch_fails_soon_with_a_hint_to_check_the_settings(client, srv):
    with HBaseThriftServer(transport=srv) as server:
        began = time.monotonic()
        with pytest.raises(StoreError) as e:
            open_table(f"hbase://{server.address}/t?transport={client}&deadline=30&timeout=1")
        assert time.monotonic() - began < 15
        assert "transport=" + client in str(e.value) and "hbase.regionserver.thrift" in str(e.value)


# -- faults on the wire --------------------------------------------------------

def _restart_after(server: HBaseThriftServer, seconds: float) -> threading.Thread:
    def later() -> None:
        time.sleep(seconds)
        server.start()
    th = threading.Thread(target=later)
    th.start()
    return th


def test_a_server_killed_mid_batch_is_retried_and_every_row_arrives_when_it_returns(server):
    t = open_table(server.url("t", batch=5, deadline=20))
    t.put({b"warm": {"v": b"1"}})
    original = server.handler.mutateRowsTs
    sent = []

    def dies_on_third(*args, **kw):
        sent.append(1)
        if len(sent) == 3:
            server.stop()  # the gateway dies while this call is in flight
            raise ConnectionResetError("killed")
        return original(*args, **kw)
    server.handler.mutateRowsTs = dies_on_third
    restart = _restart_after(server, 0.5)
    t.put({b"r%02d" % i: {"v": b"x"} for i in range(30)})
    restart.join()
    assert len([k for k, _ in t.scan(b"r", b"s")]) == 30


def test_a_server_killed_mid_scan_resumes_after_the_last_row_when_it_returns(server):
    t = open_table(server.url("t", page=4, deadline=20))
    t.put({b"r%02d" % i: {"v": b"x"} for i in range(20)})
    walk = t.scan()
    got = [next(walk) for _ in range(6)]
    server.stop()
    restart = _restart_after(server, 0.5)
    got += list(walk)
    restart.join()
    assert [k for k, _ in got] == [b"r%02d" % i for i in range(20)]


def test_a_server_gone_for_good_gives_one_store_error_line_after_the_deadline(server, caplog):
    t = open_table(server.url("lineage", deadline=1.5, timeout=1))
    t.put({b"k": {"v": b"1"}})
    server.stop()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="fll.store"):
        with pytest.raises(StoreError) as e:
            t.put({b"k2": {"v": b"1"}})
        with pytest.raises(StoreError):
            t.get(b"k")
    took = time.monotonic() - began
    text = str(e.value)
    assert 1.0 < took < 8
    assert server.address in text and "'lineage'" in text and "gave up after 1.5s" in text
    assert "\n" not in text
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 1


def test_a_slow_server_is_waited_for_within_the_deadline(server):
    t = open_table(server.url("t", timeout=0.3, deadline=3))
    t.put({b"k": {"v": b"1"}})
    server.delay = 0.5  # every call now outlasts the client's timeout

    def recover() -> None:
        time.sleep(1.0)
        server.delay = 0.0
    th = threading.Thread(target=recover)
    th.start()
    assert t.get(b"k") == {"v": b"1"}
    th.join()


def test_a_fault_mid_record_never_leaves_an_index_row_without_its_data_row(server):
    from fll.rowkeys import data as data_key
    from fll.store import LineageStore

    from ..lineage_examples import cdap_example

    t = open_table(server.url("t", batch=3, deadline=0.5, timeout=0.5))
    original = server.handler.mutateRowsTs
    calls = []

    def dies_on_second(*args, **kw):
        calls.append(1)
        if len(calls) >= 2:
            raise ConnectionResetError("killed")
        return original(*args, **kw)
    server.handler.mutateRowsTs = dies_on_second
    with pytest.raises(StoreError):
        LineageStore(t).record(cdap_example(), "run-x", 1_000, "p")
    data = {k for k, _ in t.scan(b"d|", b"d}")}
    for kind in (b"b|", b"f|"):
        for key, cols in t.scan(kind, kind[:1] + b"}"):
            assert all(data_key(c) in data for _, c, _ in row_sets(key, cols))
    server.handler.mutateRowsTs = original
    assert LineageStore(t).record(cdap_example(), "run-x", 1_000, "p") is True


def test_the_test_server_listens_on_loopback_only(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=2):
        pass
    assert server.address.startswith("127.0.0.1:")


def test_a_dataset_name_too_long_for_an_hbase_key_records_nothing(server):
    from fll import InvalidLineageError
    from fll.store import LineageStore

    from ..lineage_examples import chain

    store = LineageStore(open_table(server.url("t")))
    from fll import EndPoint
    info = chain(EndPoint("ns", "A" * 40_000), EndPoint("ns", "B"), ["x"])
    with pytest.raises(InvalidLineageError, match="32,767"):
        store.record(info, "run-long", 1_000, "p")
    assert list(store.table.scan(b"d|", b"d}")) == []
    assert store.run("run-long") is None


@pytest.mark.slow
def test_four_runs_of_large_operation_sets_record_over_framed_transport_within_the_deadline():
    from fll import EndPoint
    from fll.store import LineageStore

    from ..lineage_examples import chain

    fields = [f"field_{i:05d}_" + "x" * 40 for i in range(2500)]
    runs = [(chain(EndPoint("ns", f"src{n}"), EndPoint("ns", f"dst{n}"), fields), f"run-{n}",
             1_000 + n, "p") for n in range(4)]
    with HBaseThriftServer(transport="framed") as server:
        store = LineageStore(open_table(server.url("t", deadline=15)))
        began = time.monotonic()
        assert store.record_many(runs) == 4
        assert time.monotonic() - began < 60
        assert all(store.run(f"run-{n}") is not None for n in range(4))
