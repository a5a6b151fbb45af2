"""HBase-specific behaviour without an HBase server: URLs, retries, error mapping.

The contract suite covers the data path against the in-memory Thrift stand-in
(and against a real server when ``FLL_TEST_HBASE`` is set).
"""
from __future__ import annotations

import socket
import sys

import happybase  # noqa: F401  (loads the Hbase_thrift module)
import Hbase_thrift
import pytest
from thriftpy2.transport import TTransportException

from fll import StoreError
from fll.store import open_table
from fll.store.hbase import HBaseTable, _below, parse_url

from .conftest import free_port
from .fake_happybase import FakeHBase, FakePool

URLS = [
    ("hbase://h:9090/lineage", dict(host="h", port=9090, table="lineage", prefix=None,
                                    transport="buffered", protocol="binary", pool_size=4)),
    ("hbase://h", dict(host="h", port=9090, table="fll")),
    ("hbase://h:9091/t?prefix=team&transport=framed&protocol=compact&pool=8",
     dict(port=9091, table="t", prefix="team", transport="framed", protocol="compact",
          pool_size=8)),
    ("hbase://h/t?batch=50&page=20&timeout=2.5&deadline=9&create=false&compat=0.96",
     dict(batch_rows=50, page_rows=20, timeout=2.5, deadline=9.0, create=False,
          compat="0.96")),
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


def test_an_unreachable_server_is_a_store_error_with_host_and_table_but_no_password():
    port = free_port()
    with pytest.raises(StoreError) as e:
        open_table(f"hbase://admin:s3cret@127.0.0.1:{port}/lineage?deadline=0.3&timeout=0.2")
    text = str(e.value)
    assert f"127.0.0.1:{port}" in text and "'lineage'" in text and "gave up" in text
    assert "s3cret" not in text


def test_a_missing_happybase_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "happybase", None)
    with pytest.raises(StoreError, match=r"pip install 'fll\[hbase\]'"):
        open_table("hbase://127.0.0.1:9090/t")


def test_an_unknown_scheme_lists_hbase_and_bigtable_among_the_known_ones():
    with pytest.raises(StoreError) as e:
        open_table("cassandra://h/t")
    assert "hbase://" in str(e.value) and "bigtable://" in str(e.value)


def fake_table(**kw) -> tuple[HBaseTable, FakeHBase]:
    server = FakeHBase()
    kw.setdefault("deadline", 2)
    return HBaseTable("hb.example", 9090, "t", pool=FakePool(server, kw.pop("prefix", None)),
                      **kw), server


def test_the_table_and_its_column_family_are_created_once_on_first_use():
    t, server = fake_table(prefix="team")
    assert server.created == [b"team_t"]
    t2 = HBaseTable("hb.example", 9090, "t", pool=FakePool(server, "team"))
    assert server.created == [b"team_t"]
    t2.put({b"k": {"v": b"1"}})
    assert t.get(b"k") == {"v": b"1"}


def test_transient_thrift_errors_are_retried_until_the_call_succeeds():
    t, server = fake_table()
    server.fail_next(TTransportException(message="reset"), socket.timeout("slow"),
                     BrokenPipeError("pipe"),
                     Hbase_thrift.IOError(message=b"org.apache...NotServingRegionException"))
    t.put({b"k": {"v": b"1"}})
    assert t.get(b"k") == {"v": b"1"}
    assert server.faults == []


def test_persistent_transient_errors_give_up_at_the_deadline_with_a_store_error():
    t, server = fake_table(deadline=0.3)
    server.fail_next(*[TTransportException(message="connection reset")] * 1000)
    with pytest.raises(StoreError) as e:
        t.put({b"k": {"v": b"1"}})
    assert "hb.example:9090" in str(e.value) and "'t'" in str(e.value)
    assert "gave up after 0.3s" in str(e.value) and "connection reset" in str(e.value)


def test_a_server_error_is_not_retried_and_says_what_failed():
    t, server = fake_table()
    server.fail_next(Hbase_thrift.IllegalArgument(message=b"bad column"))
    with pytest.raises(StoreError, match="write failed: IllegalArgument: bad column"):
        t.put({b"k": {"v": b"1"}})
    assert server.faults == []


def test_a_table_dropped_behind_our_back_is_recreated_and_the_write_retried():
    t, server = fake_table()
    del server.tables[b"t"]
    t.put({b"k": {"v": b"1"}})
    assert t.get(b"k") == {"v": b"1"}
    assert server.created == [b"t", b"t"]


def test_a_scan_generator_holds_no_connection_between_pages():
    t, server = fake_table(page_rows=3)
    t.put({b"k%d" % i: {"v": b"x"} for i in range(10)})
    before = server.calls
    walk = t.scan()
    first = [next(walk) for _ in range(3)]
    assert server.calls == before + 1  # one page read, nothing open now
    rest = list(walk)
    assert [k for k, _ in first + rest] == [b"k%d" % i for i in range(10)]


@pytest.mark.parametrize("key,below", [(b"", None), (b"\x00", None), (b"a\x00", b"a"),
                                       (b"b", b"a"), (b"ab", b"aa"), (b"\xff", b"\xfe")])
def test_the_reverse_scan_lower_bound_is_a_key_just_below_start(key, below):
    assert _below(key) == below
    if below is not None:
        assert below < key
