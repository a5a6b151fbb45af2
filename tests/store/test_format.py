"""Store formats: a store of format 1 (before time buckets), 2 (by-set index,
hex bucket keys, programs in index rows, plain data rows) or 3 (narrow run and
bucket rows) reads as before, upgrades in place to format 4, resumes an interrupted upgrade, migrates run by
run to any backend, and a store of a newer format is refused with one line
naming both versions."""
from __future__ import annotations

import json

import pytest

from fll import EndPoint, EndPointField, StoreError, open_store
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.codec import canonical_bytes, summaries_to_bytes
from fll.store.lineage import (BY_SET_OF_RUN, FORMAT, SHAPED, data_row, decode_data, row_sets,
                               run_cells)
from tests.lineage_examples import chain

from .conftest import open_url

SRC, DST = EndPoint("n", "src"), EndPoint("n", "dst")
DAY = 86_400_000


def _history(store: LineageStore) -> None:
    runs = []
    for i in range(40):
        src = EndPoint("n", f"raw/day={i % 13}")
        runs.append((chain(src, DST, ["a", f"f{i % 3}"]), f"r{i}", 1_650_000_000_000 + i * DAY // 3,
                     f"p{i % 2}"))
    store.record_many(runs)
    store.claim_run_start("claimed-only", 1_650_000_000_000)
    store.record_schema("n", "dst", "r1", 1_650_000_000_000, [("a", "string")])
    store.record_alias("ref", "dst", "n", "dst")


def _answers(store: LineageStore) -> dict:
    out = {}
    t0 = 1_650_000_000_000
    for lo, hi in [(0, rk.MAX_TIME), (t0, t0 + 5 * DAY), (t0 + DAY // 2, t0 + 3 * DAY + 7),
                   (t0 + 4 * DAY, t0 + 4 * DAY + 1)]:
        out[(lo, hi, "sets")] = store.checksums(DST, lo, hi)
        out[(lo, hi, "in")] = sorted(map(str, store.incoming(EndPointField(DST, "a"), lo, hi)))
        out[(lo, hi, "fields")] = store.fields(DST, lo, hi)
        out[(lo, hi, "runs")] = [tuple(r) for r in store.runs(DST, lo, hi)]
    out["schema"] = store.schema("n", "dst", 0, rk.MAX_TIME)
    out["alias"] = store.resolve_dataset("ref", "dst")
    return out


def to_older_format(table, fmt: int) -> None:
    """Rewrite a store's rows as format ``fmt`` (1 to 4) wrote them: format 4
    without first-run rows, every run with its bucket cells; before it a
    narrow index row per run and endpoint; format 3 with narrow bucket rows
    (4 s x16 levels, raw checksum in the key); format 2 with the by-set index
    ``B|``/``F|``, the program in every index row, plain ``o``/``s`` data rows
    and hex-keyed bucket rows; format 1 like 2 without buckets nor a stamp."""
    puts: dict[bytes, dict[str, bytes]] = {}
    gone: list[bytes] = []
    for key, cols in list(table.scan()):
        kind = key[:1]
        if kind in (rk.FIRST_BACKWARD, rk.FIRST_FORWARD):
            # format 4 had no first-run rows: every run had its bucket cells
            gone.append(key)
            if fmt == 4:
                k = rk.decode(key)
                run_kind = {rk.FIRST_BACKWARD: rk.BACKWARD, rk.FIRST_FORWARD: rk.FORWARD}[kind]
                for run_id, checksum, start in row_sets(key, cols):
                    for row, new in run_cells(run_kind, k.namespace, k.name, start, run_id,
                                              checksum).items():
                        puts.setdefault(row, {}).update(new)
        elif fmt == 4 and kind != rk.SHAPE and not (kind == rk.DATA and SHAPED in cols):
            if key == rk.meta("format"):
                puts[key] = {"v": b"4"}
        elif kind in (rk.BACKWARD, rk.FORWARD):
            k = rk.decode(key)
            gone.append(key)
            for run_id, checksum, start in row_sets(key, cols):
                program = (table.get(rk.run(run_id)) or {}).get("p", b"")
                narrow = rk.dataset_prefix(kind, k.namespace, k.name) + \
                    rk.run_suffix(start, run_id)
                puts[narrow] = {"c": checksum.encode()} if fmt == 3 else \
                    {"c": checksum.encode(), "p": program}
                if fmt < 3:
                    puts[rk.by_set(BY_SET_OF_RUN[kind], k.namespace, k.name, checksum,
                                   start, run_id)] = {"p": program}
                bucket_kind = {rk.BACKWARD: rk.BACKWARD_BUCKET,
                               rk.FORWARD: rk.FORWARD_BUCKET}[kind]
                for level in range(len(rk.LEVELS)) if fmt >= 2 else ():
                    shape = rk.bucket if fmt == 3 else rk.bucket_v2
                    puts[shape(k.namespace, k.name, bucket_kind, level, start,
                               checksum)] = {"x": b""}
        elif kind in (rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET):
            gone.append(key)
        elif kind == rk.SHAPE:
            gone.append(key)  # format 5's shapes: every older format has whole d| rows
        elif kind == rk.DATA and (fmt < 3 or SHAPED in cols):
            info = decode_data(cols, table)
            gone.append(key)
            puts[key] = {"o": canonical_bytes(info.operations), "s": summaries_to_bytes(info)} \
                if fmt < 3 else data_row(info)
        elif key == rk.meta("format"):
            gone.append(key)
            if fmt >= 2:
                puts[key] = {"v": str(fmt).encode()}
    table.delete(gone)
    table.put(puts)


def _older_rows(table) -> list[bytes]:
    """Rows format 4 never has: narrow run and bucket rows, by-set rows."""
    out = []
    for key, cols in table.scan():
        if key[:1] in (rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET):
            out.append(key)
        elif key[:1] in (rk.BACKWARD, rk.FORWARD, rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET):
            if not rk.is_wide(key) and not key.endswith(b"|*"):
                out.append(key)
        elif key[:1] == rk.DATA and "o" in cols:
            pass  # a format-2 data row reads as well: the upgrade leaves it
    return out


@pytest.fixture(params=[1, 2, 3])
def older(tmp_path, request):
    url = f"sqlite:///{tmp_path}/old.db"
    with open_store(url) as store:
        _history(store)
        want = _answers(store)
        to_older_format(store.table, request.param)
        assert _older_rows(store.table)
    return url, want, request.param


@pytest.fixture
def format1(older):
    return older[0], older[1]


def test_an_older_store_answers_as_before_and_upgrades_in_place(older):
    url, want, fmt = older
    with open_store(url) as store:
        assert store.format == fmt
        assert _answers(store) == want
        assert admin.fsck(store.table).clean
        rows = sorted(store.table.scan())
        dry = admin.upgrade(store.table, dry_run=True)
        assert dry.from_format == fmt and dry.index_rows > 0 and dry.removed_rows > 0
        assert sorted(store.table.scan()) == rows  # the dry run changed nothing
        report = admin.upgrade(store.table, batch_size=7)
        assert report.bucket_rows > 0 and admin.store_format(store.table) == FORMAT
        assert report.index_rows == 80 and report.removed_rows == dry.removed_rows
        assert _older_rows(store.table) == []
    with open_store(url) as store:
        assert store.format == FORMAT
        assert _answers(store) == want
        fsck = admin.fsck(store.table)
        assert fsck.clean, fsck.to_dict()
        assert admin.upgrade(store.table).from_format == FORMAT  # nothing left to do


def _before(answers: dict) -> dict:
    """The answers over ranges that end before the late run."""
    return {k: v for k, v in answers.items() if not (isinstance(k, tuple) and k[1] == rk.MAX_TIME)}


def test_runs_recorded_into_an_older_store_before_its_upgrade_are_answered_throughout(older):
    """This fll writes format 4 rows into a store not upgraded yet: its queries
    read both shapes, fsck of the half-old store is clean, and the upgrade keeps them."""
    url, want, fmt = older
    late = chain(EndPoint("n", "raw/late"), DST, ["a", "late"])
    t = 1_650_000_000_000 + 50 * DAY
    with open_store(url) as store:
        assert store.record(late, "late-run", t, "p-late")
        assert late.checksum in store.checksums(DST, t, t + 1)
        assert store.fields(DST, t - DAY, t + DAY) == ["a", "late"]
        assert store.runs(DST, t, t + 1)[0].program == "p-late"
        assert _before(_answers(store)) == _before(want)  # the older runs, unchanged
        assert admin.fsck(store.table).clean
        admin.upgrade(store.table, batch_size=5)
    with open_store(url) as store:
        assert late.checksum in store.checksums(DST, t, t + 1)
        assert _before(_answers(store)) == _before(want)
        assert admin.fsck(store.table).clean


def test_an_older_store_can_be_purged_and_superseded_before_its_upgrade(older):
    url, want, fmt = older
    t0 = 1_650_000_000_000
    with open_store(url) as store:
        keep = [r for r in store.runs(DST, t0 + 5 * DAY, rk.MAX_TIME)]
        other = chain(EndPoint("n", "raw/other"), DST, ["a", "z"])
        assert store.record(other, keep[0].run_id, 0, supersede=True)
        admin.purge(store, t0 + 5 * DAY)
        assert store.runs(DST, 0, t0 + 5 * DAY) == []
        assert [r.run_id for r in store.runs(DST, 0, rk.MAX_TIME)] == [r.run_id for r in keep]
        assert store.checksums(DST, 0, t0 + 5 * DAY) == []
        admin.upgrade(store.table)
        fsck = admin.fsck(store.table)
        assert fsck.clean, fsck.to_dict()
        assert store.fields(DST, 0, rk.MAX_TIME) == sorted({"a", "z"} | {
            f for r in keep[1:] for f in store.operation_set(r.checksum).destination_fields()
            .get(DST, ())})


class _PutsThenFails:
    def __init__(self, inner, ok: int):
        self.inner, self.ok, self.url = inner, ok, inner.url

    def put(self, rows):
        if self.ok == 0:
            raise StoreError("connection lost")
        self.ok -= 1
        self.inner.put(rows)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_an_interrupted_upgrade_resumes_where_it_stopped(format1):
    url, want = format1
    with open_store(url) as store:
        with pytest.raises(StoreError, match="connection lost"):
            admin.upgrade(_PutsThenFails(store.table, 5), batch_size=4)
        assert admin.store_format(store.table) < FORMAT
        report = admin.upgrade(store.table, batch_size=4)
        assert report.resumed_from is not None
        assert admin.store_format(store.table) == FORMAT
    with open_store(url) as store:
        assert _answers(store) == want
        assert admin.fsck(store.table).clean


def test_a_store_of_a_newer_format_is_refused_naming_both_versions(tmp_path):
    url = f"sqlite:///{tmp_path}/new.db"
    open_store(url).close()
    table = open_url(url)
    table.put({rk.meta("format"): {"v": str(FORMAT + 1).encode()}})
    table.close()
    with pytest.raises(StoreError, match=f"format {FORMAT + 1}, newer than format {FORMAT}"):
        open_store(url)
    from click.testing import CliRunner

    from fll.cli import main
    result = CliRunner().invoke(main, ["--store", url, "admin", "fsck"])
    assert result.exit_code == 3
    assert f"format {FORMAT + 1}" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("table_url", ["sqlite", "bigtable", "hbase-thrift"], indirect=True)
def test_migrate_copies_runs_from_a_format_1_store_to_any_backend(format1, open_table_for):
    url, want = format1
    with open_store(url) as source:
        destination = LineageStore(open_table_for())
        report = admin.migrate_runs(source, destination, batch_size=6)
        assert report.runs == 41 and report.new_runs == 40
        assert destination.format == FORMAT
        assert _answers(destination) == want
        assert destination.claim_run_start("claimed-only", 1) == 1_650_000_000_000
        again = admin.migrate_runs(source, destination)  # rerun: idempotent
        assert again.new_runs == 0
        assert admin.fsck(destination.table).clean


def test_the_upgrade_command_shows_progress_and_reports_json(format1):
    from click.testing import CliRunner

    from fll.cli import main
    url, _ = format1
    runner = CliRunner()
    dry = runner.invoke(main, ["--store", url, "admin", "upgrade", "--dry-run",
                               "--format", "json"])
    assert dry.exit_code == 0, dry.output
    result = runner.invoke(main, ["--store", url, "admin", "upgrade", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["from_format"] < FORMAT and doc["to_format"] == FORMAT
    assert doc["bucket_rows_written"] and doc["older_rows_removed"]
    text = runner.invoke(main, ["--store", url, "admin", "upgrade"])
    assert text.exit_code == 0 and "already format" in text.stdout


def _wide(width: int):
    from fll import FieldLineageInfo, ReadOperation, WriteOperation
    from fll.model import InputField
    cols = [f"col{i}" for i in range(width)]
    return FieldLineageInfo([ReadOperation("read", "read", SRC, cols),
                             WriteOperation("write", "write", DST,
                                            [InputField("read", c) for c in cols])])


@pytest.mark.parametrize("width", [3, 2000])
def test_a_data_row_is_its_operations_and_summaries_deflated_and_reads_back_exactly(
        tmp_path, width):
    from fll.store.lineage import data_parts, data_row
    info = _wide(width)
    row = data_row(info)
    assert list(row) == ["z"]
    ops, summaries = data_parts(row)
    assert ops == canonical_bytes(info.operations) and summaries == summaries_to_bytes(info)
    assert len(row["z"]) < (len(ops) + len(summaries)) // 2
    with open_store(f"sqlite:///{tmp_path}/d.db") as store:
        store.record(info, "r1", 1000)
        store._cache.clear()
        assert store.operation_set(info.checksum) == info
        assert store.incoming(EndPointField(DST, "col1"), 0, 2000) == {EndPointField(SRC, "col1")}


def test_a_data_row_of_an_unknown_encoding_is_a_corrupt_row_never_cached(tmp_path):
    info = _wide(3)
    with open_store(f"sqlite:///{tmp_path}/d.db") as store:
        store.record(info, "r1", 1000)
        store._cache.clear()
        key = rk.data(info.checksum)
        good = store.table.get(key)
        from fll.store.lineage import data_row
        store.table.delete([key])
        store.table.put({key: {"z": b"\x09" + data_row(info)["z"][1:]}})  # an unknown version
        for _ in range(2):
            with pytest.raises(StoreError, match=r"d\|.*is corrupt.*fll admin fsck"):
                store.operation_set(info.checksum)
        assert admin.fsck(store.table).corrupt == [key]
        store.table.delete([key])
        store.table.put({key: good})
        assert store.operation_set(info.checksum) == info


def test_a_set_whose_shape_is_missing_or_wrong_is_a_store_error_and_fsck_names_it(tmp_path):
    info = _wide(3)
    with open_store(f"sqlite:///{tmp_path}/d.db") as store:
        store.record(info, "r1", 1000)
        key = rk.data(info.checksum)
        shaped = store.table.get(key)
        assert list(shaped) == [SHAPED]
        shape_key = next(k for k, _ in store.table.scan(b"p|", b"p}"))
        shape = store.table.get(shape_key)
        store.table.delete([shape_key])
        store._cache.clear()
        store._shapes.clear()
        with pytest.raises(StoreError, match=r"shape .* row is missing.*fll admin fsck"):
            store.operation_set(info.checksum)
        assert admin.fsck(store.table).corrupt == [key]
        store.table.put({shape_key: shape})
        # endpoints that make another set than the key says
        value = shaped[SHAPED]
        store.table.put({key: {SHAPED: value.replace(b"dst", b"dsx")}})
        store._cache.clear()
        with pytest.raises(StoreError, match=r"d\|.*is corrupt"):
            store.operation_set(info.checksum)
        assert admin.fsck(store.table).corrupt == [key]
        store.table.put({key: shaped})
        store._cache.clear()
        assert store.operation_set(info.checksum) == info
        assert admin.fsck(store.table).clean


@pytest.mark.parametrize("fmt", [2, 3])
@pytest.mark.parametrize("table_url", ["bigtable", "hbase-thrift"], indirect=True)
def test_an_older_store_upgrades_in_place_on_backends_without_transactions(open_table_for,
                                                                           fmt):
    store = LineageStore(open_table_for())
    _history(store)
    want = _answers(store)
    to_older_format(store.table, fmt)
    store = LineageStore(store.table)
    assert store.format == fmt and _answers(store) == want
    report = admin.upgrade(store.table, batch_size=9)
    assert report.index_rows == 80 and report.removed_rows > 0
    assert _older_rows(store.table) == []
    store = LineageStore(store.table)
    assert store.format == FORMAT and _answers(store) == want
    fsck = admin.fsck(store.table)
    assert fsck.clean, fsck.to_dict()


def _first_run_rows(table) -> list[bytes]:
    return [k for k, _ in table.scan() if k[:1] in (rk.FIRST_BACKWARD, rk.FIRST_FORWARD)]


def test_a_format_4_store_upgrades_to_5_without_rewriting_a_row(tmp_path):
    """Format 5 only adds first-run rows: a format-4 store is read as it is,
    gets none until it is upgraded (a format-4 reader beside it would miss
    them), and the upgrade only stamps the format."""
    url = f"sqlite:///{tmp_path}/four.db"
    with open_store(url) as store:
        _history(store)
        want = _answers(store)
        assert _first_run_rows(store.table)
        to_older_format(store.table, 4)
        assert not _first_run_rows(store.table)
    with open_store(url) as store:
        assert store.format == 4 and not store.first_runs
        assert _answers(store) == want
        assert admin.fsck(store.table).clean
        store.record(chain(EndPoint("n", "raw/new"), DST, ["a"]), "new-4", 1_650_000_000_000)
        assert not _first_run_rows(store.table)
        want = _answers(store)
        rows = [r for r in store.table.scan() if r[0] != rk.meta("format")]
        report = admin.upgrade(store.table)
        assert (report.from_format, report.to_format) == (4, FORMAT) == (4, 5)
        assert [r for r in store.table.scan() if r[0] != rk.meta("format")] == rows
    with open_store(url) as store, open_store(url) as before:
        assert store.format == 5 and store.first_runs
        assert _answers(store) == want
        assert admin.fsck(store.table).clean
        # a process that opened the store at format 4 and reads on after the upgrade
        before.format, before.first_runs = 4, False
        newer = chain(EndPoint("n", "raw/newer"), DST, ["a"])
        store.record(newer, "new-5", 1_650_000_000_001)
        assert _first_run_rows(store.table)
        assert "new-5" in {r.run_id for r in store.runs(DST, 0, rk.MAX_TIME)}
        for reader in (store, before):
            assert newer.checksum in reader.checksums(DST, 1_650_000_000_000, 1_650_000_000_002)
            assert newer.checksum in reader.checksums(DST, 0, rk.MAX_TIME)
        assert admin.fsck(store.table).clean


@pytest.mark.parametrize("table_url", ["hbase-thrift", "bigtable"], indirect=True)
def test_a_raw_copy_answers_as_its_source_on_a_backend_without_first_run_reads(
        tmp_path, open_table_for):
    """HBase's questions read no first-run rows (Thrift 1 reads keys, not
    ranges, in one call): a raw copy into it adds the bucket cells of the
    first runs it copies; into Bigtable it copies rows as they are."""
    import random

    with open_store(f"sqlite:///{tmp_path}/src.db") as source:
        _history(source)
        assert _first_run_rows(source.table)
        want = _answers(source)
        rng = random.Random(3)
        t0 = 1_650_000_000_000
        probes = [(t0 + rng.randrange(0, 14 * DAY), rng.randrange(1, 5 * DAY)) for _ in range(30)]
        sets = [source.checksums(DST, a, a + n) for a, n in probes]
        copy = open_table_for()
        admin.migrate(source.table, copy, batch_size=7)
    store = LineageStore(copy)
    assert store.format == FORMAT
    assert store.first_runs == (not copy.url.startswith("hbase"))
    assert _answers(store) == want
    assert [store.checksums(DST, a, a + n) for a, n in probes] == sets
    assert admin.fsck(copy).clean
