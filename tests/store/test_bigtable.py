"""Bigtable-specific behaviour: URLs, per-row mutation status, faults and recovery."""
from __future__ import annotations

import sys

import pytest

from fll import EndPoint, EndPointField, StoreError
from fll.store import LineageStore, open_table
from fll.store.bigtable import BigtableTable
from tests.lineage_examples import chain

from .conftest import Emulator

BAD_URLS = [
    ("bigtable://project/instance", "bigtable://project/instance/table"),
    ("bigtable://project/instance/table/extra", "bigtable://project/instance/table"),
    ("bigtable:///instance/table", "bigtable://project/instance/table"),
    ("bigtable://p/i/t?colour=red", "unknown bigtable URL parameter(s) colour"),
    ("bigtable://p/i/t?timeout=soon", "timeout must be a number"),
    ("bigtable://p/i/t?batch=0", "batch must be positive"),
    ("bigtable://p/i/t?create=maybe", "create must be true or false"),
]


@pytest.mark.parametrize("url,message", BAD_URLS)
def test_a_malformed_bigtable_url_is_a_store_error_saying_what_is_wrong(url, message):
    with pytest.raises(StoreError) as e:
        open_table(url)
    assert message in str(e.value)


def test_bigtable_emulator_host_is_honoured_when_the_url_names_no_emulator(
        bigtable_emulator, monkeypatch):
    monkeypatch.setenv("BIGTABLE_EMULATOR_HOST", bigtable_emulator.host)
    t = open_table("bigtable://fll-test/env/from-env")
    try:
        assert t.emulator == bigtable_emulator.host
        t.put({b"k": {"v": b"1"}})
        assert t.get(b"k") == {"v": b"1"}
    finally:
        t.close()


def test_a_missing_client_library_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.cloud.bigtable_v2", None)
    with pytest.raises(StoreError, match=r"pip install 'fll\[bigtable\]'"):
        open_table("bigtable://p/i/t?emulator=127.0.0.1:1")


# -- per-row status, with a scripted data client ------------------------------------------

class _Status:
    def __init__(self, code: int, message: str = ""):
        self.code, self.message = code, message


class _Entry:
    def __init__(self, index: int, code: int, message: str = ""):
        self.index, self.status = index, _Status(code, message)


class _Response:
    def __init__(self, entries):
        self.entries = entries


class _ScriptedData:
    """Answers each MutateRows call from a script of per-row codes; records requests.

    A script item is a list of codes (one per row in the request; None leaves
    the row without a status, as a broken stream would) or an exception."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[list[bytes]] = []

    def mutate_rows(self, request, timeout=None, retry=None):
        self.requests.append([e.row_key for e in request.entries])
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return iter([_Response([_Entry(i, c, f"code {c}") for i, c in enumerate(step)
                                if c is not None])])


def scripted_table(script) -> tuple[BigtableTable, _ScriptedData]:
    t = BigtableTable("p", "i", "t", emulator="127.0.0.1:1", create=False, deadline=5)
    data = _ScriptedData(script)
    t._data = data
    return t, data


def test_a_row_the_server_rejects_is_a_store_error_naming_the_row():
    t, _ = scripted_table([[0, 3, 0]])
    with pytest.raises(StoreError) as e:
        t.put({b"a": {"v": b"1"}, b"bad": {"v": b"2"}, b"c": {"v": b"3"}})
    assert "b'bad'" in str(e.value) and "INVALID_ARGUMENT" in str(e.value)
    assert "projects/p/instances/i/tables/t" in str(e.value)
    t.close()


def test_only_rows_with_a_transient_status_are_sent_again():
    t, data = scripted_table([[0, 14, 0], [0]])
    t.put({b"a": {"v": b"1"}, b"b": {"v": b"2"}, b"c": {"v": b"3"}})
    assert data.requests == [[b"a", b"b", b"c"], [b"b"]]
    t.close()


def test_rows_left_without_status_by_a_broken_stream_are_sent_again():
    t, data = scripted_table([[0, None, None], [0, 0]])
    t.put({b"a": {"v": b"1"}, b"b": {"v": b"2"}, b"c": {"v": b"3"}})
    assert data.requests == [[b"a", b"b", b"c"], [b"b", b"c"]]
    t.close()


def test_rows_never_confirmed_before_the_deadline_fail_the_write():
    t, _ = scripted_table([[14]] * 1000)
    t.deadline = 0.3
    with pytest.raises(StoreError, match="gave up after 0.3s.*1 of 1 rows not confirmed"):
        t.put({b"a": {"v": b"1"}})
    t.close()


# -- the fault test: the emulator dies in the middle of a batch ------------------------------

def test_an_emulator_killed_mid_batch_fails_the_record_and_a_fresh_one_takes_the_retry(
        emulator_binary, monkeypatch):
    emu = Emulator(emulator_binary).start()
    try:
        table = open_table(f"bigtable://fll-test/fault/t?emulator={emu.host}"
                           f"&batch=5&deadline=1.5")
        store = LineageStore(table)
        src, dst = EndPoint("f", "src"), EndPoint("f", "dst")
        runs = [(chain(src, dst, [f"c{i % 4}", "id"]), f"run-{i}", 1_000 + i, "job")
                for i in range(30)]
        real = BigtableTable._mutate_chunk
        sent = []

        def dying(self, what, chunk, request_type):
            sent.append(len(chunk))
            if len(sent) == 3:
                emu.stop()  # killed with two chunks of the batch acknowledged
            return real(self, what, chunk, request_type)

        monkeypatch.setattr(BigtableTable, "_mutate_chunk", dying)
        with pytest.raises(StoreError) as e:
            store.record_many(runs)
        assert "UNAVAILABLE" in str(e.value) and emu.host in str(e.value)
        assert len(sent) == 3  # it stopped at the failed chunk, claiming nothing more
        with pytest.raises(StoreError):
            store.run("run-0")  # still down: reads fail too, never answer "not recorded"

        emu.start()  # a fresh, empty emulator on the same port
        # room for gRPC's reconnect backoff (capped at 1 s for emulator channels)
        table.deadline = 10
        assert store.record_many(runs) == 30
        assert len(store.runs(dst, 0, 10**6)) == 30
        assert store.incoming(EndPointField(dst, "id"), 0, 10**6) == {EndPointField(src, "id")}
        table.close()
    finally:
        emu.stop()


def test_a_server_without_reversed_reads_still_answers_reverse_scans(bigtable_emulator):
    t = open_table(f"bigtable://fll-test/rev/t?emulator={bigtable_emulator.host}&page=3")
    try:
        t._features = []  # without the feature header the emulator refuses reversed reads
        all_keys = [b"k%02d" % i for i in range(10)]
        t.put({k: {"v": k} for k in all_keys})
        assert [k for k, _ in t.scan(b"k02", b"k09", reverse=True)] == all_keys[8:1:-1]
        assert t._native_reverse is False
        assert [k for k, _ in t.scan(reverse=True, limit=4)] == all_keys[:5:-1]
        assert [k for k, _ in t.scan(b"k05", reverse=True, limit=2)] == [b"k09", b"k08"]
    finally:
        t.close()


def test_a_refused_emulator_address_fails_in_seconds_not_after_the_deadline():
    import time

    from .conftest import free_port
    port = free_port()
    began = time.monotonic()
    with pytest.raises(StoreError) as e:
        open_table(f"bigtable://p/i/t?emulator=127.0.0.1:{port}&deadline=60&timeout=5")
    assert time.monotonic() - began < 15
    assert "connection refused" in str(e.value) and f"127.0.0.1:{port}" in str(e.value)
