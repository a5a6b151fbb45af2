"""The HBase backend in every transport/protocol combination its URL offers
(buffered/framed × binary/compact), through happybase's real client against
fll's HBase Thrift 1 test server: the contract suite runs whole on
buffered/binary (test_contract.py); here a smaller part of it runs on all four,
with several pooled connections under concurrent writers, and the Thrift calls
each field question costs are counted.
"""
from __future__ import annotations

import itertools
import threading

import pytest

from fll import EndPointField
from fll.store import LineageStore, open_table
from tests.lineage_examples import ANOTHER_FILE, ENDPOINT1

from .conftest import WIRE
from .test_contract import answers, record

_ids = itertools.count()


@pytest.fixture(params=WIRE, ids=lambda w: "-".join(w))
def wire(request, hbase_servers):
    server = hbase_servers[request.param]

    def make(**params):
        return open_table(server.url(f"w{next(_ids)}", page=7, batch=5, deadline=5, **params))
    return server, make


@pytest.fixture(scope="module")
def sqlite_answers(tmp_path_factory):
    path = tmp_path_factory.mktemp("wire") / "ref.db"
    with LineageStore(open_table(f"sqlite:///{path}")) as store:
        record(store)
        return answers(store)


def test_rows_round_trip_and_scan_both_ways_across_pages(wire):
    _, make = wire
    t = make()
    rows = {bytes([i, j]): {"v": bytes([j]) * 50} for i in (0, 1, 255) for j in range(12)}
    t.put(rows)
    assert dict(t.scan()) == rows
    assert [k for k, _ in t.scan(reverse=True)] == sorted(rows, reverse=True)
    assert [k for k, _ in t.scan(b"\x01", b"\xff", reverse=True, limit=5)] == \
        sorted((k for k in rows if b"\x01" <= k < b"\xff"), reverse=True)[:5]
    t.delete([b"\x00\x00", b"missing"])
    assert t.get(b"\x00\x00") is None and t.get_many([b"\x01\x01"]) == {b"\x01\x01": rows[b"\x01\x01"]}


def test_pooled_connections_under_concurrent_writers_lose_nothing(wire):
    _, make = wire
    t = make(pool=4)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(15):
                t.put({b"w%d-%02d" % (w, i): {"v": b"%d" % i}, b"shared": {f"w{w}-{i}": b"x"}})
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(list(t.scan(b"w", b"x"))) == 90
    assert t.get(b"shared") == {f"w{w}-{i}": b"x" for w in range(6) for i in range(15)}


def test_the_lineage_store_answers_as_on_sqlite(wire, sqlite_answers):
    _, make = wire
    with LineageStore(make()) as store:
        record(store)
        got = answers(store)
    assert [k for k in got if got[k] != sqlite_answers[k]] == []


QUESTIONS = [
    ("incoming", lambda s: s.incoming(EndPointField(ANOTHER_FILE, "name"), 0, 2_500)),
    ("outgoing", lambda s: s.outgoing(EndPointField(ENDPOINT1, "body"), 0, 2_500)),
    ("operations", lambda s: s.operations(EndPointField(ANOTHER_FILE, "name"), 0, 2_500)),
    ("fields", lambda s: s.fields(ANOTHER_FILE, 0, 2_500)),
]


@pytest.mark.parametrize("name,ask", QUESTIONS, ids=[q[0] for q in QUESTIONS])
def test_a_field_question_costs_a_few_thrift_calls(hbase_servers, name, ask):
    server = hbase_servers["buffered", "binary"]
    store = LineageStore(open_table(server.url(f"q{next(_ids)}")))
    record(store)
    before = server.total_calls()
    assert ask(store)
    calls = server.total_calls() - before
    print(f"{name}: {calls} Thrift calls")
    # a scan page is open + get + close; anything near one call per row is a regression
    assert calls <= 40, f"{name} took {calls} Thrift calls"


def _dated(store: LineageStore, sets_before: int, in_range: int) -> tuple[int, int]:
    """A daily job with a dated input: every run a new set; the range holds the last runs."""
    from fll import EndPoint
    from tests.lineage_examples import chain

    hour = 3_600_000
    store.record_many([(chain(EndPoint("n", f"raw/day={i}"), EndPoint("n", "dst"), ["a"]),
                        f"d{i}", 1_600_000_000_000 + i * hour, None)
                       for i in range(sets_before + in_range)])
    first = 1_600_000_000_000 + sets_before * hour
    return first - 1, first + in_range * hour


@pytest.mark.parametrize("shape", ["last runs", "odd edges", "all time"])
def test_a_field_question_costs_at_most_three_thrift_calls_whatever_the_history(
        hbase_servers, shape):
    """The question's cover is one ``getRows`` (a second, for the top buckets
    the directory row lists, only when the range spans more than 64 of
    them), then one ``getRows`` of the operation sets not cached, and one
    of their shapes when those are not cached either: never a scanner, and
    the same count with 10 or 300 sets before the range."""
    from fll import EndPoint
    from fll import rowkeys as rk

    server = hbase_servers["buffered", "binary"]
    counts = []
    for sets_before in (10, 300):
        store = LineageStore(open_table(server.url(f"h{next(_ids)}")))
        start, end = _dated(store, sets_before, 5)
        if shape == "odd edges":
            start, end = start - 12_345, end + 777
        elif shape == "all time":
            start, end = 0, rk.MAX_TIME
        for shapes_cached in (False, True):
            store.clear_caches(shapes=not shapes_cached)
            before = dict(server.calls)
            got = store.incoming(EndPointField(EndPoint("n", "dst"), "a"), start, end)
            calls = {k: v - before.get(k, 0) for k, v in server.calls.items()
                     if v != before.get(k, 0)}
            assert got, calls
            print(f"{shape}, {sets_before} sets before the range, shapes cached: "
                  f"{shapes_cached}: {sum(calls.values())} Thrift calls {calls}")
            assert set(calls) == {"getRows"}, calls
            assert sum(calls.values()) <= (3 if shapes_cached else 4), calls
            counts.append(sum(calls.values()))
    assert counts[:2] == counts[2:]


def test_a_level_read_is_one_get_rows_for_a_range_of_keys_or_all_time(hbase_servers):
    """A walk's level read on HBase: every dataset's alias row, ``A|`` row and
    cover are keys, so one ``getRows`` and no scanner. Over all time (more
    than 64 top buckets) the directory row is read with the top buckets it
    most likely lists (now's, the one before, those directories listed
    lately) by key: a dataset with a run in an older top bucket costs one
    more ``getRows`` the first time, none once its directory was read, and
    the answers are those of `checksums` either way."""
    import time

    from fll import EndPoint
    from fll import rowkeys as rk
    from tests.lineage_examples import chain

    server = hbase_servers["buffered", "binary"]
    store = LineageStore(open_table(server.url(f"l{next(_ids)}")))
    now = int(time.time() * 1000)
    old, recent = 1_000_000_000_000, now - 3_600_000  # 2001, an hour ago
    eps = [EndPoint("n", f"d{i}") for i in range(5)]
    store.record_many([(chain(eps[i], eps[i + 1], ["a"], prefix=f"v{i}"), f"r{i}",
                        old if i == 2 else recent, None) for i in range(4)])
    asked = [(e.namespace, e.name) for e in eps]

    def level(start: int, end: int) -> dict:
        before = dict(server.calls)
        got = store.read_level(asked, start, end)
        calls = {k: v - before.get(k, 0) for k, v in server.calls.items()
                 if v != before.get(k, 0)}
        assert got.checksums == {d: store.checksums(EndPoint(*d), start, end) for d in asked}
        assert got.checksums[("n", "d3")] and got.checksums[("n", "d4")]
        return calls

    assert level(0, now + 1) == {"getRows": 1}  # a range ending now: its cover is keys
    # all time: the old top bucket is read once the directory named it, the
    # first time only
    assert level(0, rk.MAX_TIME) == {"getRows": 2}
    assert level(0, rk.MAX_TIME) == {"getRows": 1}
    # an alias found is confirmed in one more call
    store.record_alias("ref", "d3", "n", "d3")
    assert level(0, now + 1) == {"getRows": 2}
    assert store.read_level(asked, 0, now + 1).aliases[("n", "d3")] == [("ref", "d3")]
