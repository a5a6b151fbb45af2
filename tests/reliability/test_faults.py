"""Faults of the storage underneath: read-only store, full disk, Bigtable gone.

Each fault is made real where this machine allows it (as root: a read-only
bind mount, ``chattr +i``, a tiny tmpfs; without root: ``chmod`` and SQLite's
own page limit, which raises the same SQLITE_FULL). Each test checks a clear
`StoreError`, that the failed run is not visible in part, and that the same
store object works again once the fault is gone (a long-running server must
not need a restart).
"""
from __future__ import annotations

import os
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from fll import EndPoint
from fll.errors import StoreError
from fll.openlineage import info_to_event
from fll.server.app import create_app
from fll.store import open_store
from fll.store.admin import fsck
from tests.lineage_examples import cdap_example, chain

from .conftest import Emulator


def _run(*cmd: str) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


def wide(i: int):
    return chain(EndPoint("ns", f"s{i}"), EndPoint("ns", f"d{i}"),
                 [f"field_{i}_{j}" for j in range(20)])


def assert_absent(store, run_id: str) -> None:
    """Neither the run row nor any index row of ``run_id`` is visible."""
    assert store.run(run_id) is None
    for prefix in (b"b|", b"f|", b"B|", b"F|"):
        for key, cols in store.table.scan(prefix, prefix[:1] + b"}"):
            assert run_id.encode() not in key, f"partial run {run_id}: {key!r}"
            assert run_id not in cols, f"partial run {run_id}: a cell of {key!r}"


@contextmanager
def immutable_file(path: Path) -> Iterator[str]:
    """Make one file unwritable for real: ``chattr +i`` as root (chmod does not stop
    root), else ``chmod 0444``. Yields the mechanism used."""
    if os.geteuid() == 0 and _run("chattr", "+i", str(path)):
        try:
            yield "chattr +i"
        finally:
            _run("chattr", "-i", str(path))
        return
    if os.geteuid() == 0:
        pytest.fail("running as root and `chattr +i` does not work here: no real way to make "
                    "the store read-only", pytrace=False)
    path.chmod(0o444)
    try:
        yield "chmod 0444"
    finally:
        path.chmod(0o644)


@pytest.mark.reliability("the store file made read-only (chattr +i as root) under an open store")
def test_a_read_only_store_file_fails_writes_clearly_shows_no_partial_run_and_recovers(
        tmp_path, figures):
    """record() raises a StoreError naming the file and saying it is not writable;
    reads keep working; the failed run is absent (no index row either); once the
    file is writable again the same store object records it."""
    url = f"sqlite:///{tmp_path}/fll.db"
    store = open_store(url)
    store.record(cdap_example(), "before", 1000)
    store.close()  # a fresh open, as a restarted server would do
    with immutable_file(tmp_path / "fll.db") as how:
        store = open_store(url)
        assert store.run("before") is not None
        with pytest.raises(StoreError) as err:
            store.record(wide(1), "during", 2000)
        message = str(err.value)
        assert "readonly" in message and "not writable" in message and "fll.db" in message
        assert_absent(store, "during")
    store.record(wide(1), "during", 2000)  # the same object, fault gone
    assert store.run("during") is not None
    assert fsck(store.table).clean
    store.close()
    figures["mechanism"] = how


@pytest.fixture
def mount_point(tmp_path) -> Iterator[Path]:
    """A directory to mount on; unmounted after the test whatever happened."""
    target = tmp_path / "mnt"
    target.mkdir()
    yield target
    _run("umount", "-l", str(target))


def can_mount(target: Path) -> bool:
    if os.geteuid() != 0:
        return False
    if _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(target)):
        _run("umount", str(target))
        return True
    return False


@pytest.mark.reliability("the store's directory bind-mounted read-only (mount -o remount,ro)")
def test_a_store_on_a_read_only_file_system_names_the_cause_and_recovers_after_remount(
        tmp_path, mount_point, figures):
    """Opening a WAL store on a read-only file system fails with a StoreError that
    says the file system is read-only (SQLite alone only says 'unable to open');
    after a read-write remount the same store object reads and writes."""
    if not can_mount(mount_point):
        # without root the file-level fault above covers read-only stores
        how = "chmod 0555 on the directory"
        mount_point.chmod(0o555)
    else:
        how = "read-only bind mount"
    data = tmp_path / "data"
    data.mkdir()
    url_rw = f"sqlite:///{data}/fll.db"
    s = open_store(url_rw)
    s.record(cdap_example(), "before", 1000)
    s.close()
    if how == "read-only bind mount":
        assert _run("mount", "--bind", str(data), str(mount_point))
        assert _run("mount", "-o", "remount,ro,bind", str(mount_point))
        url = f"sqlite:///{mount_point}/fll.db"
    else:
        mount_point.chmod(0o755)
        url = url_rw
        data.chmod(0o555)
    try:
        with pytest.raises(StoreError) as err:
            store = open_store(url)
            store.record(wide(2), "during", 2000)
        message = str(err.value)
        assert "read-only" in message or "not writable" in message, message
    finally:
        if how == "read-only bind mount":
            assert _run("mount", "-o", "remount,rw,bind", str(mount_point))
        else:
            data.chmod(0o755)
    store = open_store(url)
    assert_absent(store, "during")
    store.record(wide(2), "during", 2000)
    assert store.run("during") is not None and store.run("before") is not None
    store.close()
    figures["mechanism"] = how


@pytest.mark.reliability("disk full: the store on a 512 KiB tmpfs, written until it fills")
def test_a_full_disk_fails_the_run_whole_answers_503_and_recovers_when_space_returns(
        mount_point, tmp_path, figures):
    """Recording until the file system is full gives a StoreError saying 'disk is
    full'; the run that failed is absent, fsck is clean, the REST ingest answers
    503 without the store path; after the file system grows the same store object
    records the run."""
    if can_mount(mount_point):
        assert _run("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount_point))
        how = "tmpfs size=512k"
    else:
        how = "SQLite max_page_count (non-root)"
    url = f"sqlite:///{mount_point}/fll.db"
    store = open_store(url)
    if how.startswith("SQLite"):
        pages = store.table._conn().execute("PRAGMA page_count").fetchone()[0]
        store.table._conn().execute(f"PRAGMA max_page_count={pages + 100}")
    recorded = 0
    with pytest.raises(StoreError) as err:
        for i in range(10_000):
            store.record(wide(i), f"run{i}", 1000 + i)
            recorded += 1
    assert "full" in str(err.value)
    assert recorded > 5
    assert_absent(store, f"run{recorded}")
    assert fsck(store.table).clean
    client = TestClient(create_app(store), raise_server_exceptions=False)
    event = info_to_event(wide(99_999), "via-rest", 5_000_000, "ingest/job")
    r = client.post("/api/v1/lineage", json=event)
    assert r.status_code == 503, r.text
    assert str(mount_point) not in r.text and "fll.db" not in r.text
    if how.startswith("tmpfs"):
        assert _run("mount", "-o", "remount,size=16m", str(mount_point))
    else:
        store.table._conn().execute("PRAGMA max_page_count=1073741823")
    store.record(wide(recorded), f"run{recorded}", 1000 + recorded)
    assert store.run(f"run{recorded}") is not None
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    store.close()
    figures["mechanism"] = how
    figures["runs_before_full"] = recorded


@pytest.mark.reliability("the Bigtable emulator stopped mid-use, then restarted on its port")
def test_a_stopped_bigtable_emulator_gives_a_prompt_store_error_and_writes_resume_after_restart(
        emulator_binary, figures):
    """With the emulator gone, record() and reads fail within the configured
    deadline with a StoreError naming the table (no credentials, no partial run);
    after a restart on the same port the same store object records and reads."""
    emu = Emulator(emulator_binary).start()
    try:
        url = (f"bigtable://fll-rel/rel/faults-{uuid.uuid4().hex[:6]}?emulator={emu.host}"
               f"&deadline=3&timeout=1")
        store = open_store(url)
        store.record(cdap_example(), "before", 1000)
        emu.stop()
        began = time.monotonic()
        with pytest.raises(StoreError) as err:
            store.record(wide(3), "during", 2000)
        took = time.monotonic() - began
        assert took < 15, f"the failure took {took:.1f} s with a 3 s deadline"
        assert "bigtable table" in str(err.value) and "failed" in str(err.value)
        with pytest.raises(StoreError):
            store.run("before")
        emu.start()  # same port; the emulator keeps nothing, the table is re-created
        store.record(wide(3), "during", 2000)
        assert store.run("during") is not None
        assert_absent(store, "before")  # nothing half-restored from the old process
        assert fsck(store.table).clean
        store.close()
        figures["failure_seconds"] = took
    finally:
        emu.stop()
