"""`fll scan`, `fll get` and `fll stats`: raw rows, decoded."""
from __future__ import annotations

import json

import pytest

from fll import rowkeys as rk
from fll.store import admin, open_table
from tests.cli.conftest import RUNS, T0, B


def full_scan(url: str) -> list[tuple[bytes, dict]]:
    table = open_table(url)
    try:
        return list(table.scan())
    finally:
        table.close()


def test_scan_json_lists_every_row_with_decoded_keys_and_values(run_cli, lineage_store):
    result = run_cli("scan", "--format", "json", store=lineage_store)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [bytes.fromhex(r["key_hex"]) for r in rows] == [k for k, _ in full_scan(lineage_store)]
    kinds = {r["kind"] for r in rows}
    assert kinds == {"data", "backward", "forward", "run", "backward-buckets", "forward-buckets",
                     "meta", "backward-first", "forward-first", "shape"}
    run_row = next(r for r in rows if r["kind"] == "run" and r["run_id"] == "run-cdap")
    assert run_row["columns"]["t"] == T0
    assert run_row["start"] == "2023-11-14T22:13:20.000Z"
    shape_row = next(r for r in rows if r["kind"] == "shape")
    assert shape_row["columns"]["z"]["o"]["v"] == 1  # inflated, msgpack decoded into JSON
    assert isinstance(shape_row["columns"]["z"]["o"]["operations"], list)
    data_rows = [r["columns"]["y"] for r in rows if r["kind"] == "data"]
    assert {d["shape"] for d in data_rows} <= {r["checksum"] for r in rows if r["kind"] == "shape"}
    assert all(set(e) == {"name", "namespace", "properties"} for d in data_rows
               for e in d["endpoints"])


def test_scan_shows_inverted_time_as_an_iso_timestamp(run_cli, lineage_store):
    result = run_cli("scan", "--prefix", "b", "--dataset", "myns:another_file",
                     store=lineage_store)
    assert result.exit_code == 0
    assert result.stdout.split()[1] == "b|myns|another_file|2023-11-14T22:13:20.000Z"


def test_scan_of_one_dataset_and_time_range_keeps_only_its_runs(run_cli, lineage_store):
    # runs of ns:B:x as a destination: r-ab at T0+100 s; as a source r-bc, r-bc-2
    result = run_cli("scan", "--prefix", "f", "--dataset", "ns:B:x", "--start",
                     str((T0 + 250_000) // 1000), "--end", "now", "--format", "json",
                     store=lineage_store)
    rows = json.loads(result.stdout)
    assert [(r["kind"], r["runs"]) for r in rows] == [("forward", ["r-bc-2"])]
    everything = json.loads(run_cli("scan", "--dataset", "ns:B:x", "--format", "json",
                                    store=lineage_store).stdout)
    assert {r["kind"] for r in everything} == {"backward", "forward", "backward-first",
                                               "forward-first"}
    assert {r["name"] for r in everything} == {"B:x"}


def test_scan_time_filter_accepts_iso_8601_and_drops_rows_without_time(run_cli, lineage_store):
    result = run_cli("scan", "--start", "2023-11-14T22:15:00Z", "--end",
                     "2023-11-14T22:15:00.001Z", "--format", "json", store=lineage_store)
    rows = json.loads(result.stdout)
    # the run row names its run; a run row of an endpoint holds it as a column
    assert rows and {run for r in rows for run in r.get("runs", [r.get("run_id")])} == {"r-ab"}
    # both endpoints' 64 ms run rows hold it, though their rows start earlier, and
    # so do their first-run rows (it was its set's first run)
    assert sorted(r["kind"] for r in rows) == ["backward", "backward-first", "forward",
                                               "forward-first", "run"]
    assert [r["start_ms"] for r in rows if r["kind"] == "run"] == [T0 + 100_000]


def test_scan_limit_and_reverse_take_the_last_rows_first(run_cli, lineage_store):
    forward = json.loads(run_cli("scan", "--format", "json", store=lineage_store).stdout)
    back = json.loads(run_cli("scan", "--reverse", "--limit", "3", "--format", "json",
                              store=lineage_store).stdout)
    assert [r["key"] for r in back] == [r["key"] for r in forward[::-1][:3]]


def test_scan_of_an_empty_selection_is_an_empty_json_array(run_cli, lineage_store):
    result = run_cli("scan", "--prefix", "b", "--dataset", "ns:nothing", "--format", "json",
                     store=lineage_store)
    assert result.exit_code == 0 and json.loads(result.stdout) == []


def test_scan_raw_keys_can_be_pasted_into_get(run_cli, lineage_store):
    # bucket keys end in a raw checksum: any byte may appear
    lines = run_cli("scan", "--prefix", "g", "--format", "raw",
                    store=lineage_store).stdout.splitlines()
    assert len(lines) >= rk.TOP
    for line in lines:
        printable = line.split("\t")[0]
        got = run_cli("get", printable, store=lineage_store)
        assert got.exit_code == 0, got.output
        row = json.loads(got.stdout)
        assert row["key"] == printable and row["kind"] == "backward-buckets"


@pytest.mark.parametrize("form", ["human", "printable", "hex"])
def test_get_accepts_the_human_printable_and_hex_forms_of_a_key(run_cli, lineage_store, form):
    key = rk.run_row(rk.BACKWARD, B.namespace, B.name, T0 + 100_000)
    text = {"human": admin.human_key(key), "printable": admin.printable_key(key),
            "hex": key.hex()}[form]
    args = ["get", text] + (["--hex"] if form == "hex" else [])
    result = run_cli(*args, store=lineage_store)
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    assert bytes.fromhex(row["key_hex"]) == key
    # a column per run of that millisecond, its set's checksum (the program: in r| only)
    assert set(row["columns"]) == {"r-ab"} and len(row["columns"]["r-ab"]["checksum"]) == 32


def test_get_of_a_missing_row_exits_1_with_one_line(run_cli, lineage_store):
    result = run_cli("get", "r|no-such-run", store=lineage_store)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "not found" in result.stderr


@pytest.mark.parametrize("key", [
    b"d|abc", b"r|run%7Cwith%25pipe", rk.backward("n|s", "a\\b", 0, "r"),
    rk.run_row(rk.BACKWARD, "n|s", "a\\b", 1_700_000_000_123),
    rk.by_set(rk.FORWARD_BY_SET, "ns", "x", "c" * 32, rk.MAX_TIME, "z"), bytes(range(256)),
])
def test_printable_and_human_key_forms_read_back_exactly(key):
    assert admin.parse_printable_key(admin.printable_key(key)) == key
    assert admin.parse_row_key(admin.human_key(key)) == key


def test_stats_json_counts_rows_sets_datasets_and_runs(run_cli, lineage_store):
    result = run_cli("stats", "--format", "json", store=lineage_store)
    assert result.exit_code == 0
    s = json.loads(result.stdout)
    rows = full_scan(lineage_store)
    assert s["rows"] == len(rows)
    assert s["runs"] == len(RUNS) == s["kinds"]["run"]["rows"]
    assert s["operation_sets"] == 3  # r-bc and r-bc-2 share one set
    assert s["datasets"] == 5  # ns:endpoint1, myns:another_file, ns:A, ns:B:x, ns:C
    assert s["bytes"] == sum(admin.row_bytes(k, c) for k, c in rows)
    assert sum(k["rows"] for k in s["kinds"].values()) == s["rows"]
    table = run_cli("stats", store=lineage_store).stdout
    assert "operation sets  3" in table and "runs            4" in table


class _Endless:
    """A table whose scan never ends: only a streaming reader can take rows from it."""

    url = "endless://"

    def scan(self, start=b"", stop=b"", *, limit=None, reverse=False):
        n = 0
        while True:
            n += 1
            yield rk.run(f"run-{n:09d}"), {"t": (n * 1000).to_bytes(8, "big"), "c": b"x"}


def test_scan_streams_rows_instead_of_reading_the_whole_range():
    rows = admin.scan_rows(_Endless(), kinds=[rk.RUN], start_ms=3000, limit=4)
    assert [admin.describe_row(k, c)["run_id"] for k, c in rows] == [
        "run-000000003", "run-000000004", "run-000000005", "run-000000006"]


def test_a_time_ranged_scan_shows_exactly_the_runs_that_started_in_the_range(tmp_path):
    # a run row spans 64 ms: the rows at either edge hold runs on both sides
    import random

    from fll import EndPoint, open_store
    from tests.lineage_examples import chain

    rnd = random.Random(7)
    starts = sorted(rnd.sample(range(1_000, 1_700), 40))
    src, dst = EndPoint("n", "src"), EndPoint("n", "dst")
    with open_store(f"sqlite:///{tmp_path}/s.db") as store:
        store.record_many([(chain(src, dst, ["a"]), f"r{t}", t, "p") for t in starts])
        for _ in range(60):
            lo = rnd.randrange(950, 1_750)
            hi = lo + rnd.randrange(0, 200)
            want = {f"r{t}" for t in starts if lo <= t < hi}
            for dataset in (("n", "dst"), None):
                rows = admin.scan_rows(store.table, kinds=[rk.BACKWARD], dataset=dataset,
                                       start_ms=lo, end_ms=hi)
                got = [run for _, cols in rows for run in cols]
                assert sorted(got) == sorted(want), (lo, hi, dataset)
