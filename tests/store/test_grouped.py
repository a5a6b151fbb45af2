"""The write calls of concurrent writers sent as one call (`fll.store.grouped`),
on the Bigtable emulator and the HBase Thrift double (and SQLite, which the
wrapper must not change either).

To make a group certain, a test holds the first call of a lane on the wire
(`_Held`) until the other threads have queued behind it; they then go out
together in the next call.
"""
from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fll.errors import StoreError
from fll.store import open_table
from fll.store.grouped import GroupedTable, _grouped, grouping, meanwhile

THREADS = 12
REMOTE = ["bigtable", "hbase-thrift", "hbase-thrift-framed-compact"]


class _Held:
    """A table whose first call of ``method`` waits for `release`."""

    def __init__(self, table: Any, method: str):
        self.table = table
        self.url = table.url
        self.method = method
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.sent: list[Any] = []
        self._first = True
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.table, name)
        if name != self.method:
            return real

        def call(*args: Any) -> Any:
            with self._lock:
                first, self._first = self._first, False
            self.sent.append(args[0] if len(args) == 1 else args)
            if first:
                self.entered.set()
                assert self.gate.wait(30)
            return real(*args)
        return call


def _wait_for(cond, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def _queued(lane: Any) -> int:
    group = lane._open
    return 0 if group is None else len(group.parts)


def _in_one_group(grouped: GroupedTable, held: _Held, lane: Any, work: list) -> list:
    """Run ``work`` (callables) in threads inside `grouping`: the first is held on
    the wire, the rest queue behind it and go as one call. Each one's outcome
    (its result or its exception)."""
    def run(fn):
        with grouping():
            try:
                return fn()
            except Exception as e:  # noqa: BLE001 - the outcome the test checks
                return e
    with ThreadPoolExecutor(len(work)) as pool:
        first = pool.submit(run, work[0])
        assert held.entered.wait(30)
        rest = [pool.submit(run, fn) for fn in work[1:]]
        _wait_for(lambda: _queued(lane) == len(work) - 1, "the calls to queue")
        held.gate.set()
        return [first.result(60)] + [f.result(60) for f in rest]


@pytest.mark.parametrize("table_url", REMOTE + ["sqlite"], indirect=True)
def test_concurrent_puts_go_as_one_call_and_each_writer_reads_its_rows(table_url):
    held = _Held(open_table(table_url()), "put")
    grouped = GroupedTable(held)
    try:
        def writer(i: int):
            def work() -> dict:
                # its own row, and one cell of a row every writer shares
                grouped.put({f"own{i:02d}".encode(): {"a": b"%d" % i, "b": b"x"},
                             b"shared": {f"w{i}": b"%d" % i}})
                return grouped.get_many([f"own{i:02d}".encode(), b"shared", b"absent"])
            return work
        outcomes = _in_one_group(grouped, held, grouped.puts, [writer(i) for i in range(THREADS)])
        assert len(held.sent) == 2  # the held one, then every other writer's in one call
        assert grouped.puts.calls == 2 and grouped.puts.parts == THREADS
        for i, got in enumerate(outcomes):
            assert not isinstance(got, Exception), got
            assert got[f"own{i:02d}".encode()] == {"a": b"%d" % i, "b": b"x"}
            assert got[b"shared"][f"w{i}"] == b"%d" % i
            assert b"absent" not in got
        assert held.table.get(b"shared") == {f"w{i}": b"%d" % i for i in range(THREADS)}
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", REMOTE, indirect=True)
def test_concurrent_multi_gets_and_column_deletes_are_grouped_and_answered_apart(table_url):
    table = open_table(table_url())
    rows = {f"r{i:02d}".encode(): {"k": b"keep", "d": b"drop", "n": b"%d" % i}
            for i in range(THREADS)}
    table.put(rows)
    held = _Held(table, "delete_columns")
    grouped = GroupedTable(held)
    try:
        def deleter(i: int):
            key = f"r{i:02d}".encode()
            return lambda: grouped.delete_columns({key: ["d"]})
        outcomes = _in_one_group(grouped, held, grouped.deletes,
                                 [deleter(i) for i in range(THREADS)])
        assert outcomes == [None] * THREADS
        assert len(held.sent) == 2
        assert len(held.sent[1]) == THREADS - 1  # every other writer's rows in one call
        assert table.get_many(sorted(rows)) == {
            k: {"k": b"keep", "n": v["n"]} for k, v in rows.items()}

        held2 = _Held(table, "get_many")
        grouped2 = GroupedTable(held2)

        def reader(i: int):
            mine = [f"r{i:02d}".encode(), f"r{(i + 1) % THREADS:02d}".encode(), b"none"]
            return lambda: grouped2.get_many(mine)
        got = _in_one_group(grouped2, held2, grouped2.reads, [reader(i) for i in range(THREADS)])
        assert len(held2.sent) == 2 and grouped2.reads.calls == 2
        assert len(held2.sent[1]) == THREADS + 1  # every key once, "none" too
        for i, answer in enumerate(got):
            a, b = f"r{i:02d}".encode(), f"r{(i + 1) % THREADS:02d}".encode()
            assert answer == {a: {"k": b"keep", "n": b"%d" % i},
                              b: {"k": b"keep", "n": b"%d" % ((i + 1) % THREADS)}}
        # each caller has its own copies: changing one changes no other answer
        got[0][b"r00"]["k"] = b"changed"
        assert got[THREADS - 1][b"r00"]["k"] == b"keep"
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", REMOTE, indirect=True)
def test_one_writers_bad_row_fails_only_that_writer(table_url):
    """A row the backend refuses (an empty key) in a group: the group's call
    fails, then each writer sends its own rows alone, and only the one with the
    bad row gets the error; the others' rows are stored."""
    held = _Held(open_table(table_url()), "put")
    grouped = GroupedTable(held)
    try:
        def writer(i: int):
            rows = {f"ok{i:02d}".encode(): {"v": b"1"}}
            if i == 5:
                rows[b""] = {"v": b"bad"}
            return lambda: grouped.put(rows)
        outcomes = _in_one_group(grouped, held, grouped.puts, [writer(i) for i in range(THREADS)])
        assert [i for i, o in enumerate(outcomes) if o is not None] == [5]
        assert isinstance(outcomes[5], StoreError) and "empty" in str(outcomes[5])
        stored = held.table.get_many([f"ok{i:02d}".encode() for i in range(THREADS)])
        assert sorted(stored) == [f"ok{i:02d}".encode() for i in range(THREADS) if i != 5]
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", ["bigtable", "hbase-thrift"], indirect=True)
def test_calls_outside_grouping_go_straight_to_the_table(table_url):
    grouped = GroupedTable(open_table(table_url()))
    try:
        grouped.put({b"a": {"x": b"1"}})
        assert grouped.get_many([b"a"]) == {b"a": {"x": b"1"}}
        grouped.delete_columns({b"a": ["x"]})
        assert grouped.get(b"a") is None
        assert grouped.puts.calls == grouped.reads.calls == grouped.deletes.calls == 0
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", REMOTE, indirect=True)
def test_many_threads_at_once_each_keep_their_order_and_rows(table_url):
    """Threads each putting, deleting and putting again the same cells of their
    own rows, many rounds at once: every thread reads its own last write (a put
    and a delete of one caller are never reordered), whatever groups formed."""
    grouped = GroupedTable(open_table(table_url()))
    rounds = 15
    try:
        def work(i: int) -> list[str]:
            wrong = []
            key = f"t{i:02d}".encode()
            with grouping():
                for r in range(rounds):
                    grouped.put({key: {"c": b"%d" % r, "gone": b"x"}, b"common": {"c": b"x"}})
                    grouped.delete_columns({key: ["gone"]})
                    got = grouped.get_many([key, b"common"])
                    if got.get(key) != {"c": b"%d" % r}:
                        wrong.append(f"{key!r} round {r}: {got.get(key)}")
            return wrong
        with ThreadPoolExecutor(THREADS) as pool:
            wrong = [w for ws in pool.map(work, range(THREADS)) for w in ws]
        assert not wrong, wrong[:5]
        calls = grouped.puts.calls + grouped.deletes.calls + grouped.reads.calls
        assert grouped.puts.parts == THREADS * rounds
        assert calls < 3 * THREADS * rounds  # some grouping happened
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", ["hbase-thrift", "bigtable", "sqlite"], indirect=True)
def test_a_writers_span_read_of_known_keys_is_a_grouped_multi_get_where_keys_are_read(
        table_url):
    """On HBase (keys, not ranges, in one call) a grouped thread's spans that
    know their keys are read through the grouped multi-get; elsewhere, and for
    a span without keys, the table reads them itself. The answer is the same."""
    from fll.store.base import Span

    table = open_table(table_url())
    table.put({b"k%02d" % i: {f"c{i % 3}": b"%d" % (i % 4)} for i in range(20)})
    grouped = GroupedTable(table)
    keyed = [Span(b"k00", b"k10", [b"k%02d" % i for i in range(10)]),
             Span(b"k15", b"k18", [b"k15", b"k16", b"k17"])]
    names = [Span(b"k10", b"k13", [b"k10", b"k11", b"k12"])]
    try:
        want = table.read_spans(keyed, names, names)
        with grouping():
            got = grouped.read_spans(keyed, names, names)
            assert got == want
            by_keys = not getattr(table, "one_call_ranges", False)
            assert grouped.reads.calls == (1 if by_keys else 0)
            assert grouped.read_spans([Span(b"k00", b"k05")]) == table.read_spans(
                [Span(b"k00", b"k05")])
            assert grouped.reads.calls == (1 if by_keys else 0)  # no keys: the table's own
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", REMOTE, indirect=True)
def test_a_writers_one_row_read_joins_the_multi_gets_with_the_same_answer(table_url):
    table = open_table(table_url())
    table.put({b"here": {"a": b"1"}})
    held = _Held(table, "get_many")
    grouped = GroupedTable(held)
    try:
        work = [lambda: grouped.get_many([b"here"])] + \
            [lambda k=k: grouped.get(k) for k in (b"here", b"absent", b"here", b"absent")]
        got = _in_one_group(grouped, held, grouped.reads, work)
        assert got == [{b"here": {"a": b"1"}}, {"a": b"1"}, None, {"a": b"1"}, None]
        assert len(held.sent) == 2 and sorted(held.sent[1]) == [b"absent", b"here"]
        with grouping():
            assert grouped.get(b"") is None
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", ["bigtable"], indirect=True)
def test_writers_span_reads_go_as_one_read_where_ranges_are_one_call(table_url):
    """On Bigtable the range reads of writers asking at once are one
    ``read_span_groups``; each writer gets the rows of its own spans."""
    from fll.store.base import Span

    table = open_table(table_url())
    table.put({b"k%02d" % i: {"c": b"%d" % i} for i in range(40)})
    held = _Held(table, "read_span_groups")
    grouped = GroupedTable(held)
    try:
        def reader(i: int):
            spans = [Span(b"k%02d" % i, b"k%02d" % (i + 3)), Span(b"k39", b"k40")]
            return lambda: grouped.read_spans(spans)
        got = _in_one_group(grouped, held, grouped.spans, [reader(i) for i in range(THREADS)])
        assert len(held.sent) == 2 and grouped.spans.calls == 2
        assert len(held.sent[1]) == THREADS - 1  # every other writer's group in one call
        for i, answer in enumerate(got):
            assert not isinstance(answer, Exception), answer
            assert answer.rows == {b"k%02d" % j: {"c": b"%d" % j}
                                   for j in [*range(i, i + 3), 39]}
    finally:
        grouped.close()


@pytest.mark.parametrize("table_url", REMOTE, indirect=True)
def test_a_put_with_column_deletes_is_one_call_where_the_backend_has_it(table_url):
    """Bigtable: `put_and_delete` in one MutateRows, the writers' at once
    joined with their puts; a cell one writer deletes and another puts stays
    put. HBase has no such call: the write path sends the two."""
    table = open_table(table_url())
    if not callable(getattr(table, "put_and_delete", None)):
        assert getattr(GroupedTable(table), "put_and_delete", None) is None
        table.close()
        return
    rows = {f"r{i:02d}".encode(): {"k": b"keep", "d": b"drop"} for i in range(THREADS)}
    table.put({**rows, b"shared": {"x": b"old"}})
    held = _Held(table, "put_and_delete")
    grouped = GroupedTable(held)
    try:
        def writer(i: int):
            key = f"r{i:02d}".encode()
            if i == 1:  # puts the cell writer 2 deletes
                return lambda: grouped.put({b"shared": {"x": b"new"}})
            if i == 2:
                return lambda: grouped.put_and_delete({}, {b"shared": ["x"]})
            return lambda: grouped.put_and_delete({key: {"n": b"%d" % i}}, {key: ["d"]})
        outcomes = _in_one_group(grouped, held, grouped.puts, [writer(i) for i in range(THREADS)])
        assert outcomes == [None] * THREADS
        assert len(held.sent) == 2 and grouped.puts.calls == 2
        for i, key in enumerate(sorted(rows)):
            want = rows[key] if i in (1, 2) else {"k": b"keep", "n": b"%d" % i}
            assert table.get(key) == want
        assert table.get(b"shared") == {"x": b"new"}
        # alone, sets and deletes of one row in one call
        grouped.put_and_delete({b"r01": {"n": b"1"}}, {b"r01": ["k", "d"]})
        assert table.get(b"r01") == {"n": b"1"}
    finally:
        grouped.close()


def test_a_call_made_meanwhile_overlaps_the_callers_own_and_is_grouped_like_it():
    # the call made meanwhile waits for the caller to go on: made before
    # `meanwhile` returned, it would wait out its timeout instead
    for grouped in (True, False):
        went_on = threading.Event()

        def other(went_on: threading.Event = went_on) -> tuple[bool, bool]:
            return went_on.wait(5), _grouped()

        with grouping() if grouped else contextlib.nullcontext():
            got = meanwhile(other)
            went_on.set()
            assert got.result(10) == (True, grouped)
