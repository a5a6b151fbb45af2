"""Pipelined Thrift calls on HBase (`fll.store.hbase_pipe`): the scanners of a
read opened in one burst and read and closed in the next, through happybase's
real client over real sockets against fll's HBase Thrift test server.

Pipelined reads must answer what SQLite answers (many spans, spans past a
page, empty spans, on every transport and protocol); a failure mid-burst is a
`StoreError` that leaves no connection half read; and through
`LatencyProxy` a level of 40 datasets costs at most 3 round trips.
"""
from __future__ import annotations

import itertools
import threading
import time

import pytest

from fll import EndPoint
from fll.errors import StoreError
from fll.rowkeys import MAX_TIME
from fll.store import LineageStore, open_table
from fll.store.base import Span, read_span_groups_by_rows
from fll.testing.hbase_model import hb
from fll.testing.hbase_thrift import HBaseThriftServer
from fll.testing.latency import LatencyProxy
from tests.lineage_examples import chain

from .conftest import WIRE

_ids = itertools.count()
T0 = 1_700_000_000_000
HOUR = 3_600_000


def _rows() -> dict[bytes, dict[str, bytes]]:
    """Runs of rows under 40 prefixes: a few short, some past a 7-row page."""
    rows = {}
    for p in range(40):
        for j in range(p % 4 * 6):  # 0, 6, 12 or 18 rows
            rows[b"p%02d-%03d" % (p, j)] = {"v": b"%d" % j, f"c{j % 3}": b"x" * (p % 5)}
    return rows


def _ranges() -> list[tuple[bytes, bytes]]:
    whole = [(b"p%02d-" % p, b"p%02d." % p) for p in range(40)]
    parts = [(b"p%02d-003" % p, b"p%02d-009" % p) for p in range(0, 40, 3)]
    odd = [(b"p07", b"p07"), (b"zz", b""), (b"p10-005", b"p12-002"), (b"", b"p00-002"),
           (b"p39-010", b"p39-010\x00")]
    return whole + parts + odd


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipe") / "ref.db"
    table = open_table(f"sqlite:///{path}")
    table.put(_rows())
    yield table
    table.close()


@pytest.fixture(params=WIRE, ids=lambda w: "-".join(w))
def filled(request, hbase_servers):
    server = hbase_servers[request.param]
    table = open_table(server.url(f"pipe{next(_ids)}", page=7, deadline=5, pool=2))
    table.put(_rows())
    yield table
    table.close()


def test_many_ranges_answer_as_on_sqlite(filled, reference):
    ranges = _ranges()
    assert filled.scan_ranges(ranges) == reference.scan_ranges(ranges)
    sequential = [row for lo, hi in ranges for row in filled.scan(lo, hi)]
    assert filled.scan_ranges(ranges) == sequential
    assert len(sequential) > 300  # pages of 7 rows: many spans went on past a page


def test_span_groups_answer_as_on_sqlite(filled, reference):
    ranges = _ranges()
    # keys: every key the span can hold (some absent), as the protocol asks
    keyed = [Span(lo, hi, [lo + b"%03d" % j for j in range(20)]) for lo, hi in ranges[:40:2]]
    groups = [([Span(lo, hi)], (), ()) for lo, hi in ranges[1:40:2]] + \
        [(keyed[i:i + 3], [Span(*r) for r in ranges[40:45]], [Span(*r) for r in ranges[45:]])
         for i in range(0, 20, 3)] + [((), (), ())]
    assert filled.read_span_groups(groups) == reference.read_span_groups(groups)
    assert filled.read_span_groups(groups) == read_span_groups_by_rows(filled, groups,
                                                                        by_keys=True)


def test_first_rows_of_many_ranges(filled, reference):
    ranges = _ranges() + [(b"p05-", b"p05.")]
    want = [next(iter(reference.scan(lo, hi, limit=1)), None) for lo, hi in ranges]
    assert filled.first_rows(ranges) == want
    assert want.count(None) > 5 and want.count(None) < len(want) - 20


@pytest.fixture
def own_server():
    with HBaseThriftServer(transport="framed") as server:
        yield server


def _failing_nth(server: HBaseThriftServer, n: int, error: Exception | None = None,
                 sleep: float = 0.0):
    """Make the ``n``-th ``scannerGetList`` from now fail (or sleep first)."""
    real = server.handler.scannerGetList
    count = itertools.count(1)

    def patched(id, nbRows):
        if next(count) == n:
            if sleep:
                time.sleep(sleep)
            if error is not None:
                raise error
        return real(id, nbRows)
    server.handler.scannerGetList = patched


@pytest.mark.parametrize("error", [
    hb.IOError(message="java.io.IOException: region went away"),
    RuntimeError("an undeclared server failure"),  # TApplicationException on the wire
    hb.IllegalArgument(message="scanner ID is invalid")], ids=["io", "internal", "illegal"])
def test_a_scanner_error_mid_burst_is_a_store_error_and_closes_every_scanner(
        own_server, error, reference):
    table = open_table(own_server.url("t", page=7, deadline=2, pool=1))
    table.put(_rows())
    ranges = _ranges()
    _failing_nth(own_server, 5, error)
    with pytest.raises(StoreError, match="hbase table 't'"):
        table.scan_ranges(ranges)
    assert own_server.handler.scanners == {}  # the others were closed in the same burst
    # the one pooled connection answers the next reads rightly
    assert table.scan_ranges(ranges) == reference.scan_ranges(ranges)
    assert table.get_many([b"p01-000"]) == reference.get_many([b"p01-000"])
    table.close()


def test_a_connection_dropped_mid_burst_is_rebuilt_not_reused_half_read(own_server, reference):
    """The client gives up waiting for the 3rd answer of a burst (the server is
    slow); the connection, half read, is replaced and the retried read is right."""
    table = open_table(own_server.url("t", page=7, deadline=10, timeout=0.3, pool=1))
    table.put(_rows())
    ranges = _ranges()
    _failing_nth(own_server, 3, sleep=1.0)
    assert table.scan_ranges(ranges) == reference.scan_ranges(ranges)
    for _ in range(3):  # had stale answers stayed queued, these would read them
        assert table.scan_ranges(ranges[:5]) == reference.scan_ranges(ranges[:5])
        assert table.get(b"p02-001") == reference.get(b"p02-001")
    table.close()


def test_without_thriftpy2s_send_and_recv_it_fails_loudly(own_server, monkeypatch):
    from thriftpy2.thrift import TClient

    table = open_table(own_server.url("t", deadline=1))
    table.put({b"a": {"v": b"1"}})
    monkeypatch.delattr(TClient, "_recv")
    with pytest.raises(StoreError, match="_recv"):
        table.scan_ranges([(b"a", b"b")])


def test_pooled_connections_pipeline_side_by_side(own_server, reference):
    table = open_table(own_server.url("t", page=7, pool=3))
    table.put(_rows())
    ranges = _ranges()
    want = reference.scan_ranges(ranges)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(5):
                assert table.scan_ranges(ranges) == want
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=reader) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    table.close()


@pytest.fixture
def proxied(own_server):
    with LatencyProxy(("127.0.0.1", own_server.port), rtt_ms=1.0) as proxy:
        def make(name: str, **params):
            query = "&".join(f"{k}={v}" for k, v in
                             {"transport": "framed", "deadline": 5, **params}.items())
            return open_table(f"hbase://127.0.0.1:{proxy.port}/{name}?{query}")
        yield proxy, make


def test_many_ranges_cost_two_round_trips(proxied, reference):
    proxy, make = proxied
    table = make("t", pool=1)
    table.put(_rows())
    ranges = [(lo, hi) for lo, hi in _ranges() if lo.startswith(b"p")]
    before = proxy.turns
    assert table.scan_ranges(ranges) == reference.scan_ranges(ranges)  # 500-row pages
    assert proxy.turns - before == 2
    before = proxy.turns
    assert table.first_rows(ranges) == [next(iter(reference.scan(lo, hi, limit=1)), None)
                                        for lo, hi in ranges]
    assert proxy.turns - before == 2
    # 320 ranges apart: scanners opened at most 128 a burst (MAX_BURST), so 3 × 2
    single = [(b"p%02d-%03d" % (p, j), b"p%02d-%03d\x00" % (p, j))
              for p in range(40) for j in range(8)]
    before = proxy.turns
    assert table.scan_ranges(single) == reference.scan_ranges(single)
    assert proxy.turns - before == 6


def test_a_level_of_40_datasets_costs_at_most_3_round_trips(proxied):
    proxy, make = proxied
    store = LineageStore(make("lvl"))
    eps = [EndPoint("n", f"d{i:02d}") for i in range(41)]
    store.record_many([(chain(eps[i], eps[i + 1], ["a", "b"], prefix=f"v{i}"), f"r{i}-{h}",
                        T0 + (i + 7 * h) * HOUR, None) for i in range(40) for h in range(3)])
    store.record_alias("ref", "raw", "n", "d05")
    level = [(e.namespace, e.name) for e in eps[1:]]
    for start, end in [(0, MAX_TIME), (T0 + 3 * HOUR + 1, T0 + 30 * HOUR - 1)]:
        before = proxy.turns
        got = store.read_level(level, start, end)
        # 2: a burst opening every scanner and reading every keyed row, one
        # reading and closing the scanners; one more to confirm the alias found
        assert proxy.turns - before <= 3, (start, end)
        assert got.aliases[("n", "d05")] == [("ref", "raw")]
        assert got.checksums == {d: store.checksums(EndPoint(*d), start, end) for d in level}
        assert sum(1 for c in got.checksums.values() if c) >= 30


def test_a_first_pass_level_of_a_deep_question_costs_3_round_trips(proxied):
    """A walk's level not cached costs the multi-get of its sets, then their
    shapes read with the next level's index rows: a burst opening the next
    level's scanners with one ``getRows`` of the shapes and keyed rows, and
    one reading and closing them. So 3 round trips a level, however long the
    chain (4 when the shapes were a call of their own); warm, the index read
    alone (2)."""
    from fll.server.column_graph import column_lineage
    from fll.store.reads import ReadView, SetMerges

    proxy, make = proxied
    store = LineageStore(make("deep", pool=1))
    eps = [EndPoint("c", f"d{i:02d}") for i in range(13)]
    # every set its own shape (its operations' names differ): none is cached
    store.record_many([(chain(eps[i], eps[i + 1], ["a", "b"], prefix=f"v{i}"), f"r{i}",
                        T0 + i * HOUR, None) for i in range(12)])
    costs = {}
    for hops in (6, 12):
        for warm in (False, True):
            if not warm:
                store.clear_caches()
            before = proxy.turns
            got = column_lineage(ReadView(store, SetMerges()),
                                 f"datasetField:c:d{hops:02d}:a", 25, False, 0, T0 + 99 * HOUR)
            costs[hops, warm] = proxy.turns - before
            assert {n["id"] for n in got["graph"]} == \
                {f"datasetField:c:d{i:02d}:a" for i in range(hops + 1)}
    print(costs)
    assert costs[12, False] - costs[6, False] <= 3 * 6, costs
    assert costs[12, True] - costs[6, True] <= 2 * 6, costs
    assert costs[12, False] <= 3 * 12 + 4, costs  # the node id's schemas, every node's


@pytest.mark.parametrize("wire", WIRE, ids=lambda w: "-".join(w))
def test_the_double_answers_pipelined_calls_in_order(hbase_servers, wire):
    """Raw calls written together on one connection get the answers the same
    calls get one at a time, errors included, and the connection goes on."""
    import happybase

    from fll.store.hbase_conn import thrift_idl
    from fll.store.hbase_pipe import Burst, Failed

    server = hbase_servers[wire]
    name = f"raw{next(_ids)}"
    open_table(server.url(name)).put(_rows())
    idl = thrift_idl()
    conn = happybase.Connection("127.0.0.1", server.port, transport=wire[0], protocol=wire[1])
    table = name.encode()
    calls = [("getRow", dict(tableName=table, row=b"p%02d-%03d" % (p, p % 7), attributes={}))
             for p in range(40)]
    calls.insert(7, ("scannerGetList", dict(id=987654, nbRows=3)))  # no such scanner
    calls.insert(20, ("getRow", dict(tableName=b"missing", row=b"a", attributes={})))
    calls.append(("getRowsWithColumns", dict(tableName=table, rows=[b"p01-001", b"p02-002"],
                                             columns=[b"c:v"], attributes={})))

    def one_at_a_time() -> list:
        client = happybase.Connection("127.0.0.1", server.port, transport=wire[0],
                                      protocol=wire[1])
        from thriftpy2.thrift import TClient
        c = TClient(idl.Hbase, client.client._iprot)
        out = []
        for api, kwargs in calls:
            try:
                out.append(getattr(c, api)(**kwargs))
            except (idl.IOError, idl.IllegalArgument) as e:
                out.append(type(e).__name__)
        client.close()
        return out
    want = one_at_a_time()
    for _ in range(2):  # the same connection, twice
        burst = Burst(conn, idl.Hbase, framed=wire[0] == "framed", protocol=wire[1],
                      declared=(idl.IOError, idl.IllegalArgument))
        for api, kwargs in calls:
            burst.add(api, **kwargs)
        got = [type(a.error).__name__ if isinstance(a, Failed) else a for a in burst.run()]
        assert got == want
    absent = sum(1 for p in range(40) if b"p%02d-%03d" % (p, p % 7) not in _rows())
    assert sum(1 for a in want if a == []) == absent and 5 < absent < 30
    assert want[7] == "IllegalArgument" and want[20] == "IOError"
    conn.close()
