"""Store formats: this fll reads and writes one format (8). A store of any
older one (1: before time buckets; 2: by-set index, hex bucket keys, programs
in index rows, plain data rows; 3: narrow run and bucket rows; 4: wide rows;
5: first-run rows and shapes; 1-5 with summaries that list every edge and no
tags, and schemas in their runs' rows; 6: a row per run naming its schema,
where format 7 has a column of the dataset's row; 7: a row per alias, where
format 8 has a column of the dataset's ``A|`` row) is refused with one line naming the upgrade, until `fll admin upgrade`
converts it in place (resumably) to answer exactly as before; a store of a
newer format is refused with one line naming both versions."""
from __future__ import annotations

import json
import struct
import zlib

import msgpack
import pytest

from fll import EndPoint, EndPointField, StoreError, open_store
from fll import rowkeys as rk
from fll.store import LineageStore, admin
from fll.codec import canonical_bytes
from fll.summaries import summaries_to_bytes
from fll.opset import decode_canonical
from fll.store.datarows import _ZDICTS, SHAPED, data_parts, decode_data
from fll.store.layout import SCHEMA_REF, row_sets, run_cells
from fll.store.lineage import FORMAT, OlderFormat
from tests.lineage_examples import chain

from .conftest import open_url

SRC, DST = EndPoint("n", "src"), EndPoint("n", "dst")
#: the by-set index format 2 kept beside each run index
BY_SET_OF_RUN = {rk.BACKWARD: rk.BACKWARD_BY_SET, rk.FORWARD: rk.FORWARD_BY_SET}
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
    store.record_alias("ref", "dst|2", "n", "dst")


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
    out["aliases"] = store.aliases("n", "dst")
    return out


def summaries_v1(info) -> bytes:
    """The summaries formats 2-5 stored: every edge listed, no tags."""
    eps: list = []
    fields: list = []
    index: dict = {}

    def f(ef):
        if ef not in index:
            e = (ef.endpoint.namespace, ef.endpoint.name)
            if e not in eps:
                eps.append(e)
            index[ef] = len(fields)
            fields.append([eps.index(e), ef.field])
        return index[ef]
    inc = sorted((f(k), sorted(f(x) for x in v)) for k, v in info.incoming_summary().items())
    out = sorted((f(k), sorted(f(x) for x in v)) for k, v in info.outgoing_summary().items())
    src = sorted(f(EndPointField(ep, n)) for ep, ns in info.source_fields().items() for n in ns)
    dst = sorted(f(EndPointField(ep, n)) for ep, ns in info.destination_fields().items()
                 for n in ns)
    return msgpack.packb({"v": 1, "endpoints": [list(e) for e in eps], "fields": fields,
                          "in": inc, "out": out, "src": src, "dst": dst}, use_bin_type=True)


def data_row_v1(info) -> dict[str, bytes]:
    """A whole d| row (or p| row) as formats 3-5 wrote it."""
    ops = canonical_bytes(info.operations)
    z = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zdict=_ZDICTS[1])
    body = z.compress(struct.pack(">I", len(ops)) + ops + summaries_v1(info)) + z.flush()
    return {"z": bytes([1]) + body}


def aliased_by_v7(namespace: str, name: str, alias_ns: str, alias_name: str) -> bytes:
    """Format 7's row per alias: ``A|<ns>|<name>|<alias ns>|<alias>``."""
    return rk.dataset_prefix(rk.ALIASED_BY, namespace, name) + rk.escape(alias_ns) + rk.SEP \
        + rk.escape(alias_name)


def to_older_format(table, fmt: int) -> None:
    """Rewrite a store's rows as format ``fmt`` (1 to 5) wrote them: every
    whole d| and p| row with the summaries of formats 2-5; format 4
    without first-run rows nor shapes, every run with its bucket cells; before
    it a narrow index row per run and endpoint; format 3 with narrow bucket
    rows (4 s x16 levels, raw checksum in the key); format 2 with the by-set
    index ``B|``/``F|``, the program in every index row, plain ``o``/``s``
    data rows and hex-keyed bucket rows; format 1 like 2 without buckets nor
    a stamp; format 6 as 7 but for a row per run's schema report
    (formats 1-5 kept the schema there, 6 its digest); format 7 as this one
    but for a row per alias (every older format had that too)."""
    puts: dict[bytes, dict[str, bytes]] = {}
    gone: list[bytes] = []
    for key, cols in list(table.scan()):
        kind = key[:1]
        if kind == rk.ALIASED_BY:
            k = rk.decode(key)
            gone.append(key)
            for col in cols:
                puts[aliased_by_v7(k.namespace, k.name, *rk.alias_of_column(col))] = {"x": b""}
        elif fmt == 7:
            if key == rk.meta("format"):
                puts[key] = {"v": b"7"}
        elif kind == rk.SCHEMAS:  # every older format had a row per run and dataset
            k = rk.decode(key)
            gone.append(key)
            for col, digest in cols.items():
                at, run_id = rk.schema_column_of(col)
                body = table.get(rk.schema_body(rk.checksum_of(digest)))["f"]
                puts[rk.schema(k.namespace, k.name, at, run_id)] = \
                    {SCHEMA_REF: digest} if fmt == 6 else {"f": body}
        elif kind == rk.SCHEMA_BODY:
            if fmt < 6:
                gone.append(key)
        elif fmt == 6:
            if key == rk.meta("format"):
                puts[key] = {"v": b"6"}
        elif fmt == 5:
            if kind == rk.SHAPE or (kind == rk.DATA and SHAPED not in cols):
                puts[key] = data_row_v1(decode_canonical(data_parts(cols)[0]))
            elif key == rk.meta("format"):
                puts[key] = {"v": b"5"}
        elif kind in (rk.FIRST_BACKWARD, rk.FIRST_FORWARD):
            # format 4 had no first-run rows: every run had its bucket cells
            gone.append(key)
            if fmt == 4:
                k = rk.decode(key)
                run_kind = {rk.FIRST_BACKWARD: rk.BACKWARD, rk.FIRST_FORWARD: rk.FORWARD}[kind]
                for run_id, checksum, start in row_sets(key, cols):
                    for row, new in run_cells(run_kind, k.namespace, k.name, start, run_id,
                                              checksum).items():
                        puts.setdefault(row, {}).update(new)
        elif fmt == 4 and kind not in (rk.SHAPE, rk.DATA):
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
        elif kind == rk.DATA:
            info = decode_data(cols, table)
            gone.append(key)
            puts[key] = {"o": canonical_bytes(info.operations), "s": summaries_v1(info)} \
                if fmt < 3 else data_row_v1(info)
        elif key == rk.meta("format"):
            gone.append(key)
            if fmt >= 2:
                puts[key] = {"v": str(fmt).encode()}
    table.delete(gone)
    table.put(puts)


def _older_rows(table) -> list[bytes]:
    """Rows format 8 never has: narrow run and bucket rows, by-set rows, data
    rows with the older summaries, a row per run's schema report, a row per
    alias."""
    out = []
    for key, cols in table.scan():
        if key[:1] in (rk.BACKWARD_BY_SET, rk.FORWARD_BY_SET):
            out.append(key)
        elif key[:1] in (rk.BACKWARD, rk.FORWARD, rk.BACKWARD_BUCKET, rk.FORWARD_BUCKET):
            if not rk.is_wide(key) and not key.endswith(b"|*"):
                out.append(key)
        elif key[:1] == rk.SCHEMA or (key[:1] == rk.ALIASED_BY and key.count(rk.SEP) == 4):
            out.append(key)
        elif key[:1] in (rk.DATA, rk.SHAPE) and SHAPED not in cols:
            if "z" not in cols or msgpack.unpackb(data_parts(cols)[1])["v"] != 2:
                out.append(key)
    return out


@pytest.fixture(params=[1, 2, 3, 4, 5, 6, 7])
def older(tmp_path, request):
    url = f"sqlite:///{tmp_path}/old.db"
    with open_store(url) as store:
        _history(store)
        want = _answers(store)
        to_older_format(store.table, request.param)
        assert _older_rows(store.table)
    return url, want, request.param


@pytest.fixture
def format1(tmp_path):
    url = f"sqlite:///{tmp_path}/old.db"
    with open_store(url) as store:
        _history(store)
        want = _answers(store)
        to_older_format(store.table, 1)
    return url, want


def test_an_older_store_is_refused_until_upgraded_in_place_then_answers_as_before(older):
    url, want, fmt = older
    for _ in range(2):  # nothing about the refusal changes the store
        with pytest.raises(OlderFormat, match=rf"format {fmt}; this fll reads and writes "
                                              rf"format {FORMAT}: .*admin upgrade"):
            open_store(url)
    table = open_url(url)
    with pytest.raises(OlderFormat):
        admin.fsck(table)
    rows = sorted(table.scan())
    dry = admin.upgrade(table, dry_run=True)
    assert dry.from_format == fmt and (dry.data_rows > 0) == (fmt < 6)
    assert (dry.index_rows > 0 and dry.removed_rows > 0) == (fmt < 4)
    assert sorted(table.scan()) == rows  # the dry run changed nothing
    report = admin.upgrade(table, batch_size=7)
    assert admin.store_format(table) == FORMAT
    assert (report.index_rows, report.removed_rows) == ((80, dry.removed_rows) if fmt < 4
                                                        else (0, 0))
    assert report.data_rows == dry.data_rows
    assert report.schema_rows == dry.schema_rows == (fmt < 6)
    assert report.schema_refs == dry.schema_refs == (fmt < 7)
    assert report.alias_rows == dry.alias_rows == 2
    assert _older_rows(table) == []
    table.close()
    with open_store(url) as store:
        assert store.format == FORMAT
        assert _answers(store) == want
        fsck = admin.fsck(store.table)
        assert fsck.clean, fsck.to_dict()
        assert admin.upgrade(store.table).from_format == FORMAT  # nothing left to do


def test_the_cli_names_the_upgrade_for_an_older_store_in_one_line_and_exit_3(format1):
    from click.testing import CliRunner

    from fll.cli import main
    url, _ = format1
    for args in (["lineage", "n:dst:a"], ["datasets"], ["admin", "fsck"]):
        result = CliRunner().invoke(main, ["--store", url, *args])
        assert result.exit_code == 3, result.output
        assert "format 1" in result.output and "admin upgrade" in result.output
        assert len(result.output.strip().splitlines()) == 1


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


@pytest.mark.parametrize("fails_after", [5, 40])
def test_an_interrupted_upgrade_resumes_where_it_stopped(format1, fails_after):
    # 5: in the index pass; 40: in the data rows' pass
    url, want = format1
    table = open_url(url)
    with pytest.raises(StoreError, match="connection lost"):
        admin.upgrade(_PutsThenFails(table, fails_after), batch_size=4)
    assert admin.store_format(table) < FORMAT
    with pytest.raises(OlderFormat):
        LineageStore(table)  # half converted: still refused
    report = admin.upgrade(table, batch_size=4)
    assert report.resumed_from is not None
    assert admin.store_format(table) == FORMAT
    table.close()
    with open_store(url) as store:
        assert _answers(store) == want
        assert admin.fsck(store.table).clean


class _MovesThenFails(_PutsThenFails):
    """Fails at the put of a batch of ``S|`` columns after ``ok`` of them."""

    def put(self, rows):
        if any(k[:1] == rk.SCHEMAS for k in rows):
            super().put(rows)
        else:
            self.inner.put(rows)


@pytest.mark.parametrize("fails_after", [0, 1, 2])
def test_a_format_6_store_moves_its_schema_rows_resumably_and_answers_as_before(
        tmp_path, fails_after):
    """Format 6 to 7: each run's schema row becomes a column of its dataset's
    row, a batch at a time; an upgrade interrupted between batches, then run
    again, leaves every schema answered as before and no row of format 6."""
    url = f"sqlite:///{tmp_path}/six.db"
    with open_store(url) as store:
        _history(store)
        for i in range(12):
            store.record_schema("n", f"d{i % 3}", f"s{i}", 1_650_000_000_000 + i * DAY,
                                [("a", "string"), ("b", f"t{i % 5}")])
        store.record_schema("n", "d0", "tie", 1_650_000_000_000, [("tie", None)])
        datasets = [("n", "dst")] + [("n", f"d{i}") for i in range(3)]
        ranges = [(0, rk.MAX_TIME), (1_650_000_000_000, 1_650_000_000_001),
                  (1_650_000_000_000 + DAY, 1_650_000_000_000 + 5 * DAY)]
        want = [store.schemas(datasets, lo, hi) for lo, hi in ranges]
        history = [store.schema_history(*d, 0, rk.MAX_TIME) for d in datasets]
        to_older_format(store.table, 6)
    table = open_url(url)
    assert len([k for k in _older_rows(table) if k[:1] == rk.SCHEMA]) == 14
    with pytest.raises(StoreError, match="connection lost"):
        admin.upgrade(_MovesThenFails(table, fails_after), batch_size=5)
    assert admin.store_format(table) == 6
    report = admin.upgrade(table, batch_size=5)
    assert report.schema_refs == 14 - 5 * fails_after and _older_rows(table) == []
    table.close()
    with open_store(url) as store:
        assert [store.schemas(datasets, lo, hi) for lo, hi in ranges] == want
        assert [store.schema_history(*d, 0, rk.MAX_TIME) for d in datasets] == history
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
def test_migrate_copies_runs_from_an_upgraded_format_1_store_to_any_backend(format1,
                                                                            open_table_for):
    url, want = format1
    table = open_url(url)
    admin.upgrade(table)
    table.close()
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
    from fll.store.datarows import data_parts, data_row
    info = _wide(width)
    row = data_row(info)
    assert list(row) == ["z"]
    ops, summaries = data_parts(row)
    assert ops == canonical_bytes(info.operations) and summaries == summaries_to_bytes(info)
    assert len(row["z"]) < (len(ops) + len(summaries)) // 2
    with open_store(f"sqlite:///{tmp_path}/d.db") as store:
        store.record(info, "r1", 1000)
        store.clear_caches()
        assert store.operation_set(info.checksum) == info
        assert store.incoming(EndPointField(DST, "col1"), 0, 2000) == {EndPointField(SRC, "col1")}


def test_a_data_row_of_an_unknown_encoding_is_a_corrupt_row_never_cached(tmp_path):
    info = _wide(3)
    with open_store(f"sqlite:///{tmp_path}/d.db") as store:
        store.record(info, "r1", 1000)
        store.clear_caches()
        key = rk.data(info.checksum)
        good = store.table.get(key)
        from fll.store.datarows import data_row
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
        store.clear_caches()
        with pytest.raises(StoreError, match=r"shape .* row is missing.*fll admin fsck"):
            store.operation_set(info.checksum)
        assert admin.fsck(store.table).corrupt == [key]
        store.table.put({shape_key: shape})
        # endpoints that make another set than the key says
        value = shaped[SHAPED]
        store.table.put({key: {SHAPED: value.replace(b"dst", b"dsx")}})
        store.clear_caches()
        with pytest.raises(StoreError, match=r"d\|.*is corrupt"):
            store.operation_set(info.checksum)
        assert admin.fsck(store.table).corrupt == [key]
        store.table.put({key: shaped})
        store.clear_caches()
        assert store.operation_set(info.checksum) == info
        assert admin.fsck(store.table).clean


@pytest.mark.parametrize("fmt", [2, 3, 5, 6])
@pytest.mark.parametrize("table_url", ["bigtable", "hbase-thrift"], indirect=True)
def test_an_older_store_upgrades_in_place_on_backends_without_transactions(open_table_for,
                                                                           fmt):
    store = LineageStore(open_table_for())
    _history(store)
    want = _answers(store)
    to_older_format(store.table, fmt)
    with pytest.raises(OlderFormat):
        LineageStore(store.table)
    report = admin.upgrade(store.table, batch_size=9)
    assert report.index_rows == (80 if fmt < 4 else 0) and (report.data_rows > 0) == (fmt < 6)
    assert report.schema_refs == 1 and _older_rows(store.table) == []
    store = LineageStore(store.table)
    assert store.format == FORMAT and _answers(store) == want
    fsck = admin.fsck(store.table)
    assert fsck.clean, fsck.to_dict()


def _first_run_rows(table) -> list[bytes]:
    return [k for k, _ in table.scan() if k[:1] in (rk.FIRST_BACKWARD, rk.FIRST_FORWARD)]


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
