"""Check-and-put, run-start claims, superseding sets, schemas and aliases, on every backend.

The same sentences hold on SQLite, the Bigtable emulator and the HBase stand-in;
the races run real threads against one table, repeated so that a check-then-act
that is not atomic loses at least once.
"""
from __future__ import annotations

import struct
import threading

import pytest

from fll import EndPoint, EndPointField, InvalidLineageError, StoreError
from fll import rowkeys as rk
from fll.store import LineageStore
from fll.store.base import read_span_groups_by_rows, read_spans_by_rows
from fll.store.layout import row_sets, run_cells
from tests.lineage_examples import chain

from .conftest import BACKENDS

pytestmark = pytest.mark.parametrize("table_url", BACKENDS, indirect=True)

SRC, DST, OTHER = EndPoint("n", "src"), EndPoint("n", "dst"), EndPoint("n", "other")


def _race(n: int, fn) -> list:
    """Run ``fn(i)`` in ``n`` threads released at once; their results in order."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def body(i: int) -> None:
        barrier.wait()
        results[i] = fn(i)
    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


# -- check_and_put ------------------------------------------------------------------

CAS_CASES = [
    # (stored value of column x or None, expected, applies)
    (None, None, True),
    (None, b"1", False),
    (b"1", None, False),
    (b"1", b"1", True),
    (b"1", b"2", False),
    (b"", b"", True),
    (b"", None, False),
    (b"\x00\xff|*.", b"\x00\xff|*.", True),
    (b"\x00\xff|*.", b"\x00\xff|*", False),
]


def test_check_and_put_applies_exactly_when_the_cell_holds_the_expected_value(open_table_for):
    t = open_table_for()
    for i, (stored, expected, applies) in enumerate(CAS_CASES):
        row = b"cas%d" % i
        before = {"y": b"keep"} if stored is None else {"x": stored, "y": b"keep"}
        t.put({row: before})
        assert t.check_and_put(row, "x", expected, {"x": b"new", "z": b"z"}) is applies, i
        after = {**before, "x": b"new", "z": b"z"} if applies else before
        assert t.get(row) == after, i


def test_check_and_put_on_a_missing_row_with_nothing_expected_creates_it(open_table_for):
    t = open_table_for()
    assert t.check_and_put(b"fresh", "x", None, {"x": b"1"}) is True
    assert t.get(b"fresh") == {"x": b"1"}
    assert t.check_and_put(b"fresh", "x", None, {"x": b"2"}) is False
    assert t.get(b"fresh") == {"x": b"1"}


def test_of_threads_racing_check_and_put_on_an_absent_cell_exactly_one_wins(open_table_for):
    t = open_table_for()
    for round_ in range(10):
        row = b"race%d" % round_
        won = _race(6, lambda i, row=row: t.check_and_put(row, "x", None, {"x": b"%d" % i}))
        assert sum(won) == 1, (round_, won)
        assert t.get(row) == {"x": b"%d" % won.index(True)}


# -- claim_run_start ----------------------------------------------------------------

def test_the_first_claimed_start_of_a_run_wins_and_is_persisted(open_table_for):
    table = open_table_for()
    store = LineageStore(table)
    assert store.claim_run_start("r1", 5_000) == 5_000
    assert store.claim_run_start("r1", 7_000) == 5_000
    assert LineageStore(table).claim_run_start("r1", 1) == 5_000  # another "server"
    assert store.run("r1") is None  # a claimed start is not a recorded run


def test_servers_racing_to_claim_a_run_all_get_the_same_start(open_table_for):
    table = open_table_for()
    stores = [LineageStore(table) for _ in range(5)]
    for round_ in range(8):
        got = _race(5, lambda i, r=f"run{round_}": stores[i].claim_run_start(r, 1_000 * (i + 1)))
        assert len(set(got)) == 1, got


def test_a_run_recorded_after_its_claim_keeps_the_claimed_start(open_table_for):
    store = LineageStore(open_table_for())
    assert store.claim_run_start("r1", 5_000) == 5_000
    assert store.record(chain(SRC, DST, ["a"]), "r1", 9_000, "p") is True
    assert store.run("r1").start_ms == 5_000
    assert [r.start_ms for r in store.runs(DST, 0, 10**6)] == [5_000]
    assert store.runs(DST, 9_000, 9_001) == []


def test_the_same_run_recorded_at_once_with_two_start_times_is_stored_once(open_table_for):
    table = open_table_for()
    stores = [LineageStore(table) for _ in range(4)]
    info = chain(SRC, DST, ["a"])
    for round_ in range(6):
        run = f"twice{round_}"
        _race(4, lambda i, run=run: stores[i].record(info, run, 1_000 + i, "p"))
        runs = [r for r in stores[0].runs(DST, 0, 10**6) if r.run_id == run]
        assert len(runs) == 1, runs
        assert runs[0].start_ms == stores[0].run(run).start_ms


def test_one_run_sent_at_once_with_two_sets_keeps_one_and_refuses_the_other(open_table_for):
    table = open_table_for()
    stores = [LineageStore(table) for _ in range(2)]
    sets = [chain(SRC, DST, ["a"]), chain(SRC, DST, ["b"])]
    for round_ in range(6):
        run = f"clash{round_}"

        def send(i: int, run: str = run):
            try:
                return stores[i].record(sets[i], run, 1_000, "p")
            except InvalidLineageError:
                return "refused"
        got = _race(2, send)
        assert sorted(map(str, got)) == ["True", "refused"], got
        winner = sets[got.index(True)].checksum
        assert stores[0].run(run).checksum == winner
        assert {r.checksum for r in stores[0].runs(DST, 0, 10**6) if r.run_id == run} == \
            {winner}
        # the by-set index holds the run under the winning set only
        for field in ("a", "b"):
            for group in stores[0].operations(EndPointField(DST, field), 0, 10**6):
                if run in [r.run_id for r in group.runs]:
                    assert group.checksum == winner


# -- supersede ----------------------------------------------------------------------

def test_a_different_set_for_a_known_run_is_a_conflict_without_supersede(open_table_for):
    store = LineageStore(open_table_for())
    store.record(chain(SRC, DST, ["a"]), "r1", 1_000)
    with pytest.raises(InvalidLineageError, match="already recorded"):
        store.record(chain(SRC, OTHER, ["a"]), "r1", 2_000)
    assert store.runs(OTHER, 0, 10**6) == []


def test_supersede_replaces_a_runs_set_and_keeps_its_start(open_table_for):
    store = LineageStore(open_table_for())
    old, new = chain(SRC, DST, ["a"]), chain(SRC, OTHER, ["a", "b"])
    store.record(old, "r1", 1_000, "p")
    assert store.record(new, "r1", 3_000, "p", supersede=True) is True
    assert store.run("r1") == (("r1", 1_000, "p", new.checksum))
    assert store.runs(DST, 0, 10**6) == []  # the old destination lost the run
    assert store.checksums(DST, 0, 10**6) == []
    assert [(r.run_id, r.start_ms) for r in store.runs(OTHER, 0, 10**6)] == [("r1", 1_000)]
    assert [r.checksum for r in store.runs(SRC, 0, 10**6)] == [new.checksum]
    assert store.checksums(SRC, 0, 10**6, "outgoing") == [new.checksum]
    assert store.incoming(EndPointField(OTHER, "b"), 0, 10**6) == {EndPointField(SRC, "b")}
    # the same set again changes nothing
    assert store.record(new, "r1", 3_000, "p", supersede=True) is False


def test_supersede_of_an_unknown_run_records_it(open_table_for):
    store = LineageStore(open_table_for())
    assert store.record_many([(chain(SRC, DST, ["a"]), "r9", 4_000, None)],
                             supersede=True) == 1
    assert store.run("r9").start_ms == 4_000


# -- schemas ------------------------------------------------------------------------

def test_the_schema_of_a_dataset_is_the_latest_runs_in_the_range(open_table_for):
    store = LineageStore(open_table_for())
    store.record_schema("n", "t", "r1", 1_000, [("id", "long"), ("name", None)])
    store.record_schema("n", "t", "r2", 2_000, [("id", "long"), ("email", "string")])
    assert store.schema("n", "t", 0, 10**6) == {"id": "long", "email": "string"}
    assert list(store.schema("n", "t", 0, 2_000) or {}) == ["id", "name"]
    assert store.schema("n", "t", 1_001, 2_000) is None
    assert store.schema("n", "t", 2_000, 2_001) == {"id": "long", "email": "string"}
    assert store.schema("n", "other", 0, 10**6) is None
    store.record_schema("n", "t", "r2", 2_000, [("id", "long"), ("email", "string")])
    assert store.schema("n", "t", 0, 10**6) == {"id": "long", "email": "string"}


@pytest.mark.parametrize("fields", [[("id",)], [("", "long")], [(1, "long")], [("id", 5)],
                                    ["id"]])
def test_a_malformed_schema_is_refused_naming_the_field(open_table_for, fields):
    store = LineageStore(open_table_for())
    with pytest.raises(InvalidLineageError, match="field 1"):
        store.record_schema("n", "t", "r1", 1_000, fields)
    assert store.schema("n", "t", 0, 10**6) is None


# -- aliases ------------------------------------------------------------------------

def test_an_alias_resolves_to_its_dataset_and_is_listed_under_it(open_table_for):
    store = LineageStore(open_table_for())
    assert store.resolve_dataset("ref", "raw") == ("ref", "raw")
    assert store.record_alias("ref", "raw", "file", "/data/raw/day=1") is True
    assert store.record_alias("ref", "raw", "file", "/data/raw/day=1") is False
    assert store.resolve_dataset("ref", "raw") == ("file", "/data/raw/day=1")
    assert store.resolve_dataset("file", "/data/raw/day=1") == ("file", "/data/raw/day=1")
    store.record_alias("ref", "raw|copy", "file", "/data/raw/day=1")
    assert store.aliases("file", "/data/raw/day=1") == [("ref", "raw"), ("ref", "raw|copy")]
    assert store.aliases("file", "/elsewhere") == []


def test_an_alias_pointed_elsewhere_moves_to_its_new_dataset(open_table_for):
    store = LineageStore(open_table_for())
    store.record_alias("ref", "raw", "file", "/a")
    assert store.record_alias("ref", "raw", "file", "/b") is True
    assert store.resolve_dataset("ref", "raw") == ("file", "/b")
    assert store.aliases("file", "/a") == []
    assert store.aliases("file", "/b") == [("ref", "raw")]


def test_a_datasets_aliases_are_the_columns_of_one_row_that_follow_each_change(
        open_table_for):
    """Format 8: every alias standing for a dataset is a column of the
    dataset's ``A|`` row (one key to read, as a walk's level read wants);
    pointing an alias elsewhere or turning a pair moves its column, and a
    column its alias row does not confirm (a crash between the puts) is not
    an alias."""
    from fll.store.admin import fsck
    table = open_table_for()
    store = LineageStore(table)
    store.record_alias("ref", "raw", "file", "/a")
    store.record_alias("ref", "r|2", "file", "/a")
    assert table.get(rk.aliased_by("file", "/a")) == {"ref|raw": b"", "ref|r%7C2": b""}
    store.record_alias("ref", "raw", "file", "/b")
    assert table.get(rk.aliased_by("file", "/a")) == {"ref|r%7C2": b""}
    assert table.get(rk.aliased_by("file", "/b")) == {"ref|raw": b""}
    # the pair the other way round is turned: one direction per pair
    store.record_alias("file", "/b", "ref", "raw")
    assert store.resolve_dataset("file", "/b") == ("ref", "raw")
    assert store.resolve_dataset("ref", "raw") == ("ref", "raw")
    assert not table.get(rk.aliased_by("file", "/b"))
    assert store.aliases("ref", "raw") == [("file", "/b")]
    # a column left by a crash before its alias row changed
    table.put({rk.aliased_by("file", "/a"): {rk.alias_column("ref", "gone"): b""}})
    assert store.aliases("file", "/a") == [("ref", "r|2")]
    assert store.read_level([("file", "/a")], 0, rk.MAX_TIME).aliases == {
        ("file", "/a"): [("ref", "r|2")]}
    assert fsck(table).clean
    # format 7's row per alias, left by an upgrade, is reported and repaired away
    old = rk.dataset_prefix(rk.ALIASED_BY, "file", "/a") + b"ref|raw"
    table.put({old: {"x": b""}})
    report = fsck(table)
    assert report.legacy == [old] and not report.clean
    assert fsck(table, repair=True).to_dict()["fixed"]
    assert table.get(old) is None and fsck(table).clean
    # a column of no alias's shape is a corrupt row, named
    table.put({rk.aliased_by("file", "/a"): {"no-separator": b""}})
    with pytest.raises(StoreError, match="fsck"):
        store.aliases("file", "/a")
    assert fsck(table).corrupt


def test_aliases_written_at_once_all_stand_and_a_contested_one_ends_under_one_target(
        open_table_for):
    """Threads adding aliases to one dataset's ``A|`` row at once lose none of
    them, and threads pointing one alias at different datasets (that one
    among them) at once leave it under exactly one, listed there and nowhere
    else: moving it off a dataset takes its column alone, not the row; 10
    rounds."""
    store = LineageStore(open_table_for())
    for r in range(10):
        target = ("file", f"/t{r}")
        contenders = [target] + [("file", f"/t{r}-{i}") for i in range(5, 8)]

        def write(i: int, r: int = r, target: tuple[str, str] = target,
                  contenders: list = contenders) -> bool:
            if i < 4:
                return store.record_alias("ref", f"a{r}-{i}", *target)
            return store.record_alias("ref", f"c{r}", *contenders[i - 4])
        assert all(_race(8, write))
        won = store.resolve_dataset("ref", f"c{r}")
        assert won in contenders
        mine = [("ref", f"a{r}-{i}") for i in range(4)]
        for c in contenders:
            want = sorted((mine if c == target else []) + ([("ref", f"c{r}")] if c == won else []))
            assert store.aliases(*c) == want, (r, c, won)


def test_an_alias_with_an_empty_part_is_refused(open_table_for):
    store = LineageStore(open_table_for())
    with pytest.raises(InvalidLineageError, match="alias name"):
        store.record_alias("ref", "", "file", "/a")


# -- cost follows the range -----------------------------------------------------------

class _Counting:
    """A table that counts protocol calls: each is one round trip on a remote backend."""

    def __init__(self, inner):
        self.inner = inner
        self.url = inner.url
        self.calls: list[str] = []

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name in ("get", "get_many", "scan", "scan_ranges", "put", "delete", "check_and_put",
                    "first_cells"):
            def counted(*a, **kw):
                # a multi-get of shape rows is told apart: it is the one read a
                # question may add when the shapes are not cached either; one of
                # schemas too (`LineageStore.schemas`)
                shapes = name == "get_many" and a and all(k[:2] == b"p|" for k in a[0])
                schemas = name == "get_many" and a and all(k[:2] == b"q|" for k in a[0])
                self.calls.append("get_many shapes" if shapes else
                                  "get_many schemas" if schemas else name)
                return attr(*a, **kw)
            return counted
        return attr

    def read_spans(self, spans, names=(), values=()):
        if getattr(self.inner, "one_call_ranges", False):
            # one call (SQLite: a statement for the rows, one for the sets)
            self.calls.append("read_spans")
            return self.inner.read_spans(spans, names, values)
        # HBase: its getRows and scanners, each counted
        return read_spans_by_rows(self, spans, names, values, by_keys=True)

    def read_span_groups(self, groups):
        if getattr(self.inner, "one_call_ranges", False):
            self.calls.append("read_span_groups")
            return self.inner.read_span_groups(groups)
        return read_span_groups_by_rows(self, groups, by_keys=True)


def _dated_history(store: LineageStore, n_sets: int, runs_in_range: int) -> tuple[int, int]:
    """A daily job reading a dated path: every run is a new set. Returns the range
    holding the last ``runs_in_range`` runs."""
    hour = 3_600_000
    batch = []
    for i in range(n_sets + runs_in_range):
        batch.append((chain(EndPoint("n", f"raw/day={i}"), DST, ["a"]), f"d{i}",
                      1_600_000_000_000 + i * hour, None))
    store.record_many(batch)
    first = 1_600_000_000_000 + n_sets * hour
    return first - 1, first + runs_in_range * hour


@pytest.mark.parametrize("shape", ["last runs", "odd edges", "all time"])
def test_a_field_question_costs_at_most_three_calls_whatever_the_history(open_table_for,
                                                                         shape):
    """With a cold cache: the cover in one read (a second only for a range
    wider than 64 top buckets on a backend that reads keys, not ranges), the
    sets in one more, and their shapes in one more when not cached either;
    never a scan, and the same count after 5 or 60 sets."""
    counts = []
    for sets_before in (5, 60):
        counting = _Counting(open_table_for())
        store = LineageStore(counting)
        start, end = _dated_history(store, sets_before, 5)
        if shape == "odd edges":
            start, end = start - 12_345, end + 777
        elif shape == "all time":
            start, end = 0, rk.MAX_TIME
        store._shapes.clear()
        for question in ("incoming", "field_map", "outgoing"):
            store.clear_caches(shapes=False)
            counting.calls.clear()
            if question == "field_map":
                store.field_map(DST, start, end)
            else:
                getattr(store, question)(EndPointField(DST, "a"), start, end)
            found = [c for c in counting.calls if c != "get_many shapes"]
            assert len(found) <= 3 and "scan" not in counting.calls, counting.calls
            # the shapes once, by the first question; the others find them cached
            assert counting.calls.count("get_many shapes") == (question == "incoming"), \
                counting.calls
            counts.append(len(counting.calls))
        assert len(store.checksums(DST, start, end)) == (5 if shape != "all time"
                                                         else sets_before + 5)
    assert counts[:3] == counts[3:]


def test_sets_in_a_range_are_exactly_those_with_a_run_in_it(open_table_for):
    import random

    store = LineageStore(open_table_for())
    rng = random.Random(7)
    sets = [chain(SRC, DST, [f"c{i}"]) for i in range(6)]
    runs = []
    base = 1_650_000_000_000
    for i in range(160):
        # clustered within a run row (64 ms, same millisecond too) and spread
        # over every bucket level
        t = base + rng.choice([rng.randrange(0, 200), rng.randrange(0, 1 << 13),
                               rng.randrange(0, 1 << 21), rng.randrange(0, 1 << 31)])
        info = rng.choice(sets)
        runs.append((info, f"x{i}", t, None))
    for i in range(0, len(runs), 40):
        store.record_many(runs[i:i + 40])
    times = sorted(t for _, _, t, _ in runs)
    probes = [(base, base + 1), (0, 10**15), (0, rk.MAX_TIME), (base + 64, base + 128)]
    for _ in range(200):
        a, b = rng.choice(times), rng.choice(times)
        probes.append((min(a, b) + rng.choice([-64, -1, 0, 1, 63]),
                       max(a, b) + rng.choice([0, 1, 64, 4096])))
    for start, end in probes:
        inside = [(info, r, t) for info, r, t, _ in runs if start <= t < end]
        want = sorted({info.checksum for info, _, _ in inside})
        assert store.checksums(DST, start, end) == want, (start, end)
        assert store.checksums(SRC, start, end, "outgoing") == want, (start, end)
        newest = sorted(((r, t) for _, r, t in inside), key=lambda x: (-x[1], x[0]))
        assert [(r.run_id, r.start_ms) for r in store.runs(DST, start, end)] == newest
        limit = rng.choice([1, 3, 17, 40])
        assert [(r.run_id, r.start_ms) for r in store.runs(DST, start, end, "incoming",
                                                           limit)] == newest[:limit]


# -- admin commands beside writers ---------------------------------------------------

def _writers_gone(table) -> None:
    """Expire every writer's announcement, as 30 s without a write would."""
    for key, _ in list(table.scan(rk.meta("writer-"), rk.prefix_end(rk.meta("writer-")))):
        table.put({key: {"t": struct.pack(">q", 0)}})


def test_a_purge_refuses_while_writers_are_active_where_there_are_no_transactions(
        open_table_for):
    from fll.store import admin

    table = open_table_for()
    writer = LineageStore(table)
    writer.record(chain(SRC, DST, ["a"]), "r1", 1_000)
    if callable(getattr(table, "atomic", None)):
        # SQLite: every purge step is one transaction, safe beside writers
        assert admin.purge(writer, 2_000).runs == 1
        return
    with pytest.raises(StoreError, match="writer.*active"):
        admin.purge(LineageStore(table), 2_000)
    assert writer.run("r1") is not None  # nothing was purged
    assert table.get(rk.meta("lease")) is None  # and the lease was given back
    _writers_gone(table)  # once the writer is gone (its row expired), the purge runs
    assert admin.purge(LineageStore(table), 2_000).runs == 1


def test_a_writer_refuses_while_maintenance_holds_the_lease(open_table_for):
    from fll.store import admin

    table = open_table_for()
    if callable(getattr(table, "atomic", None)):
        # SQLite takes no lease: writes go on beside maintenance, each a transaction
        with admin.maintenance(table, "test"):
            assert LineageStore(table).record(chain(SRC, DST, ["a"]), "r1", 1_000) is True
        assert table.get(rk.meta("lease")) is None
        return
    with admin.maintenance(table, "test"):
        with pytest.raises(StoreError, match="maintenance in progress"):
            LineageStore(table).record(chain(SRC, DST, ["a"]), "r1", 1_000)
    assert LineageStore(table).record(chain(SRC, DST, ["a"]), "r1", 1_000) is True


def test_fsck_finishes_a_run_whose_writer_stopped_between_its_puts(open_table_for):
    from fll.store import admin

    table = open_table_for()
    store = LineageStore(table)
    info = chain(SRC, DST, ["a"])
    store.record(info, "r1", 1_000, "p")
    # as a writer without transactions leaves it when it dies after claiming
    index = [k for k, _ in table.scan() if k[:1] in (b"b", b"f", b"B", b"F")]
    table.delete(index)
    table.put({rk.run("r1"): {"w": b"0"}})
    report = admin.fsck(table)
    assert report.unfinished == [rk.run("r1")] and report.exit_code == 1
    _writers_gone(table)
    repaired = admin.fsck(table, repair=True)
    assert repaired.exit_code == 0
    assert admin.fsck(table).clean
    assert [r.run_id for r in LineageStore(table).runs(DST, 0, 10**6)] == ["r1"]


class _WritesBetweenScans:
    """A table on which, as fsck starts its scan of the data rows and then
    its scan of every row, another thread records a run of a set of a new
    shape with a schema: what the scans before saw no longer matches."""

    def __init__(self, inner, first: int):
        self.inner, self.n, self.writes = inner, first, 0
        self.store = LineageStore(inner)
        self.at = [(rk.DATA + rk.SEP, rk.prefix_end(rk.DATA + rk.SEP)), (b"", b"")]

    def scan(self, start=b"", stop=b"", **kw):
        if (start, stop) in self.at:
            self.at.remove((start, stop))
            n = self.n + self.writes
            self.writes += 1
            info = chain(EndPoint("n", f"late{n}"), DST, ["a", f"late{n}"])

            def write() -> None:
                self.store.record(info, f"late-{n}", 5_000 + n, "p")
                self.store.record_schema("n", "dst", f"late-{n}", 5_000 + n,
                                         [("a", None), (f"late{n}", "int")])
            t = threading.Thread(target=write)  # a writer of its own, not fsck's reads
            t.start()
            t.join()
        return self.inner.scan(start, stop, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_fsck_reports_nothing_a_writer_adds_between_its_scans(open_table_for):
    """A set written after fsck read the shapes (its d| row then names a shape
    fsck did not see) and after it read the data rows (its index rows then
    name a set fsck did not see) is no problem: SQLite reads one snapshot,
    the other backends re-read what they suspect before reporting it."""
    from fll.store import admin

    table = open_table_for()
    store = LineageStore(table)
    store.record(chain(SRC, DST, ["a"]), "r1", 1_000, "p")
    for first, repair in ((1, False), (3, True)):
        racing = _WritesBetweenScans(table, first)
        report = admin.fsck(racing, repair=repair)  # type: ignore[arg-type]
        assert racing.writes == 2
        assert report.clean and not report.repaired and report.fixed == 0, report.to_dict()
        # SQLite: the snapshot never saw them; elsewhere the re-read cleared them
        assert (report.unconfirmed == 0) == callable(getattr(table, "snapshot", None))
    assert admin.fsck(table).clean
    assert {r.run_id for r in store.runs(DST, 0, 10**6)} == \
        {"r1", "late-1", "late-2", "late-3", "late-4"}


def _bucket_cells(table) -> set[tuple[bytes, str]]:
    """Every (row, column) of the bucket and directory rows."""
    return {(key, col) for prefix in (b"g|", b"h|")
            for key, cols in table.scan(prefix, rk.prefix_end(prefix)) for col in cols}


def _cells_of(runs) -> set[tuple[bytes, str]]:
    """The bucket and directory cells format 4 calls for, for (set, start) runs
    of SRC -> DST."""
    return {(key, col) for info, t in runs
            for kind, ep in ((rk.BACKWARD, DST), (rk.FORWARD, SRC))
            for key, cols in run_cells(kind, ep.namespace, ep.name, t, "r", info.checksum).items()
            if key[:1] in (b"g", b"h") for col in cols}


def test_bucket_rows_are_exactly_those_of_the_runs_whatever_order_and_batches(
        open_table_for):
    """The write path memoizes bucket keys per finest bucket and per level:
    runs recorded out of order, in small batches, clustered so the memo is
    hit and missed, leave exactly the bucket rows their times call for."""
    import random

    store = LineageStore(open_table_for())
    rng = random.Random(11)
    sets = [chain(SRC, DST, [f"c{i}"]) for i in range(3)]
    base = 1_650_000_000_000
    runs = [(rng.choice(sets), f"y{i}",
             base + rng.choice([rng.randrange(0, 1 << 14), rng.randrange(0, 1 << 26),
                                rng.randrange(0, 1 << 34)]), None) for i in range(100)]
    for i in range(0, len(runs), 7):
        store.record_many(runs[i:i + 7])
    # format 5 on a backend reading ranges: a set's first run (in recording
    # order) is in the first-run rows instead of the buckets
    firsts: dict[str, tuple[str, int]] = {}
    for info, run_id, t, _ in runs:
        firsts.setdefault(info.checksum, (run_id, t))
    later = [(info, t) for info, run_id, t, _ in runs
             if not store.first_runs or firsts[info.checksum][0] != run_id]
    assert _bucket_cells(store.table) == _cells_of(later)
    in_first_rows = {(run_id, t) for prefix in (b"i|", b"o|")
                     for key, cols in store.table.scan(prefix, rk.prefix_end(prefix))
                     for run_id, _, t in row_sets(key, cols)}
    assert in_first_rows == (set(firsts.values()) if store.first_runs else set())


@pytest.mark.parametrize("batch", [2, 5, 64])  # against one run at a time
def test_a_batch_of_dense_reruns_stores_the_same_rows_as_one_run_at_a_time(
        open_table_for, batch):
    """A batch skips the bucket cells of a set re-run within 4 s of a run
    earlier in it: two sets re-run every 700 ms, interleaved, one run
    superseded in the batch and one re-recorded, leave row for row what
    recording each run alone leaves."""
    a, b = chain(SRC, DST, ["a"]), chain(SRC, DST, ["b"])
    base = 1_650_000_000_000 - 3_000  # crosses a 4 s bucket early on
    runs = [(a if i % 3 else b, f"z{i}", base + 700 * i, None) for i in range(64)]
    runs.insert(20, (b, "z7", base + 700 * 7, None))  # a different set for z7: superseded

    def rows_after(size: int) -> list:
        table = open_table_for()
        store = LineageStore(table)
        for i in range(0, len(runs), size):
            store.record_many(runs[i:i + size], supersede=True)
        store.record_many(runs[:10], supersede=True)  # re-recorded: nothing changes
        return [(k, c) for k, c in table.scan() if not k.startswith(rk.meta("writer-"))]

    assert rows_after(batch) == rows_after(1)


def test_supersedes_and_a_purge_leave_exactly_the_bucket_rows_the_remaining_runs_call_for(
        open_table_for):
    """Format 4 has no by-set index: whether a bucket cell is still used is
    decided from the run rows (level 1) and the children one level down.
    Runs clustered in and across buckets of every level, some superseded by
    another set, then the older half purged: the bucket rows left are exactly
    those of the runs left, every query agrees with brute force, fsck is clean."""
    import random

    from fll.store import admin

    table = open_table_for()
    store = LineageStore(table)
    rng = random.Random(5)
    sets = [chain(SRC, DST, [f"c{i}"]) for i in range(3)]
    base = 1_650_000_000_000
    runs = {}
    for i in range(60):
        t = base + rng.choice([rng.randrange(0, 1 << 13), rng.randrange(0, 1 << 21),
                               rng.randrange(0, 1 << 33)])
        runs[f"y{i}"] = (rng.choice(sets), t)
    store.record_many([(info, r, t, None) for r, (info, t) in runs.items()])
    # each set's first run (format 5, on a backend reading ranges) has no bucket cells
    firsts = set()
    for r, (info, _) in runs.items():
        if store.first_runs and not any(runs[f][0] == info for f in firsts):
            firsts.add(r)
    for r in rng.sample(sorted(runs), 15):
        info = rng.choice([s for s in sets if s != runs[r][0]])
        assert store.record(info, r, 0, supersede=True)
        runs[r] = (info, runs[r][1])  # the stored start stays
        firsts.discard(r)  # the set it now has was recorded before: buckets
    cut = sorted(t for _, t in runs.values())[len(runs) // 2]
    _writers_gone(table)
    admin.purge(store, cut)
    left = {r: v for r, v in runs.items() if v[1] >= cut}
    # directory cells stay (one per endpoint and 2.2 years); every other cell
    # is one a run left calls for, and every run left but a first run has all
    # of its own (a first run may keep a cell another run of its set wrote:
    # a true statement, and the one fsck's rule makes)
    cells = {c for c in _bucket_cells(table) if not c[0].endswith(b"*")}
    assert cells <= {c for c in _cells_of(left.values()) if not c[0].endswith(b"*")}
    assert cells >= {c for c in _cells_of(v for r, v in left.items() if r not in firsts)
                     if not c[0].endswith(b"*")}
    in_first_rows = {run_id for prefix in (b"i|", b"o|")
                     for key, cols in table.scan(prefix, rk.prefix_end(prefix))
                     for run_id, _, _ in row_sets(key, cols)}
    assert in_first_rows == firsts & set(left)
    assert {rk.data(i.checksum) for i, _ in left.values()} == \
        {k for k, _ in table.scan(b"d|", rk.prefix_end(b"d|"))}
    for _ in range(40):
        lo = base + rng.randrange(0, 1 << 33)
        hi = lo + rng.choice([1, 1 << 12, 1 << 20, 1 << 30, 1 << 34])
        assert store.checksums(DST, lo, hi) == sorted({i.checksum for i, t in left.values()
                                                       if lo <= t < hi})
    assert admin.fsck(table).clean


def test_first_runs_are_found_exactly_whatever_the_range(open_table_for):
    """Mostly first runs (a new set per run, some re-run, out of order, some
    in one millisecond, at 64 ms row edges): every range answers as brute force
    does, on a backend reading first-run rows as on one writing buckets."""
    import random

    store = LineageStore(open_table_for())
    rng = random.Random(17)
    base = 1_650_000_000_000
    sets = [chain(EndPoint("n", f"raw/day={i}"), DST, ["a"]) for i in range(50)]
    runs = []
    for i in range(90):
        t = base + rng.choice([64 * rng.randrange(0, 40), 64 * rng.randrange(0, 40) + 63,
                               rng.randrange(0, 1 << 16), rng.randrange(0, 1 << 30)])
        runs.append((sets[i] if i < 50 else rng.choice(sets), f"q{i}", t, None))
    rng.shuffle(runs)
    for i in range(0, len(runs), 9):
        store.record_many(runs[i:i + 9])
    times = sorted(t for _, _, t, _ in runs)
    probes = [(0, rk.MAX_TIME), (base, base + 64), (base + 63, base + 65)]
    for _ in range(150):
        a, b = rng.choice(times), rng.choice(times)
        probes.append((min(a, b) + rng.choice([-64, -1, 0, 1, 63, 64]),
                       max(a, b) + rng.choice([0, 1, 63, 64, 65])))
    for start, end in probes:
        want = sorted({info.checksum for info, _, t, _ in runs if start <= t < end})
        assert store.checksums(DST, start, end) == want, (start, end)
        sources = {info.checksum for info, _, t, _ in runs if start <= t < end}
        for info in sets[:3]:
            src = sorted(info.sources)[0]
            assert store.checksums(src, start, end, "outgoing") == \
                ([info.checksum] if info.checksum in sources else [])


class _WriterFixesFirst:
    """A table on which a writer records a set again (its data and shape rows
    back) just before the repair's first change: between fsck's report and
    its repair."""

    def __init__(self, inner, rows):
        self.inner, self.rows, self.done = inner, rows, False

    def _restore(self) -> None:
        if not self.done:
            self.done = True
            self.inner.put(self.rows)

    def atomic(self, fn):
        self._restore()
        return self.inner.atomic(lambda _t: fn(self))

    def check_and_put(self, *args, **kw):  # the maintenance lease, elsewhere
        self._restore()
        return self.inner.check_and_put(*args, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_fsck_repair_counts_what_it_changed_not_what_it_found(open_table_for):
    from fll.store import admin

    table = open_table_for()
    info = chain(SRC, DST, ["a"])
    LineageStore(table).record(info, "r1", 1_000, "p")
    _writers_gone(table)
    set_rows = {k: c for k, c in table.scan() if k[:1] in (rk.DATA, rk.SHAPE)}
    table.delete(sorted(set_rows))
    found = admin.fsck(table)
    assert found.problems > 0 and found.fixed == 0
    wrapped = _WriterFixesFirst(table, set_rows)
    if not callable(getattr(table, "atomic", None)):
        wrapped.atomic = None  # type: ignore[assignment]  # no transactions here
    report = admin.fsck(wrapped, repair=True)  # type: ignore[arg-type]
    assert wrapped.done and report.fixed == 0, report.to_dict()
    assert admin.fsck(table).clean
    assert LineageStore(table).run("r1") is not None
