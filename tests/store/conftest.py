"""Backends for the contract suite: SQLite always, the Bigtable emulator always,
the HBase backend through happybase's real client and real sockets against
fll's HBase Thrift 1 test server (`fll.testing.hbase_thrift`) always, and a
real HBase when ``FLL_TEST_HBASE=host:port`` names a Thrift server.

The whole suite runs on the test server over each transport/protocol pair the
URL offers (buffered/framed × binary/compact), one `hbase_servers` server each;
test_hbase_wire.py adds the wire-level cases (frames, pools, faults).

The emulator (``cbtemulator``) is started once per session on a free loopback
port and stopped after. A missing emulator FAILS the Bigtable tests (install it
with ``scripts/install-bigtable-emulator.sh``) unless ``FLL_SKIP_BIGTABLE=1``.
"""
from __future__ import annotations

import itertools
import os
import uuid

import pytest

from fll.store.emulator import EMULATOR_PATHS, Emulator, find_emulator, free_port  # noqa: F401

_ids = itertools.count()


@pytest.fixture(scope="session")
def emulator_binary() -> str:
    if os.environ.get("FLL_SKIP_BIGTABLE") == "1":
        pytest.skip("FLL_SKIP_BIGTABLE=1: Bigtable emulator tests skipped on request")
    binary = find_emulator()
    if binary is None:
        pytest.fail("the Bigtable emulator `cbtemulator` is not installed: run "
                    "scripts/install-bigtable-emulator.sh (Debian package "
                    "google-cloud-cli-bigtable-emulator), set FLL_CBTEMULATOR=/path/to/it, "
                    "or set FLL_SKIP_BIGTABLE=1 to skip these tests", pytrace=False)
    return binary


@pytest.fixture(scope="session")
def bigtable_emulator(emulator_binary):
    """A running emulator for the whole session."""
    last: Exception | None = None
    for _ in range(3):  # another process may grab the free port first
        emu = Emulator(emulator_binary)
        try:
            emu.start()
        except RuntimeError as e:
            last = e
            continue
        yield emu
        emu.stop()
        return
    pytest.fail(f"could not start cbtemulator: {last}", pytrace=False)


def hbase_server() -> str | None:
    return os.environ.get("FLL_TEST_HBASE") or None


WIRE = [("buffered", "binary"), ("buffered", "compact"), ("framed", "binary"),
        ("framed", "compact")]
# the whole contract suite runs over every transport/protocol pair the URL offers:
# "hbase-thrift" is buffered/binary (happybase's default), the others say theirs
HBASE_WIRES = {"hbase-thrift": WIRE[0],
               **{f"hbase-thrift-{t}-{p}": (t, p) for t, p in WIRE[1:]}}
BACKENDS = ["sqlite", "bigtable", *HBASE_WIRES] + (["hbase"] if hbase_server() else [])


@pytest.fixture(scope="session")
def hbase_servers():
    """One HBase Thrift test server per transport/protocol pair, for the session."""
    from fll.testing.hbase_thrift import HBaseThriftServer

    servers = {}
    for transport, protocol in WIRE:
        servers[transport, protocol] = HBaseThriftServer(
            transport=transport, protocol=protocol).start()
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture
def table_url(request, tmp_path):
    """A factory of URLs of fresh, empty tables on the backend ``request.param``.

    Remote backends use tiny pages and batches so a handful of rows already
    crosses page boundaries.
    """
    backend = request.param
    cleanups = []

    def make() -> str:
        n = next(_ids)
        if backend == "sqlite":
            return f"sqlite:///{tmp_path}/t{n}.db"
        if backend == "bigtable":
            emu = request.getfixturevalue("bigtable_emulator")
            return (f"bigtable://fll-test/contract/t{n}-{uuid.uuid4().hex[:8]}"
                    f"?emulator={emu.host}&page=7&batch=5&deadline=10")
        if backend in HBASE_WIRES:
            server = request.getfixturevalue("hbase_servers")[HBASE_WIRES[backend]]
            return server.url(f"t{n}", page=7, batch=5, deadline=5, pool=4)
        name = f"t{n}_{uuid.uuid4().hex[:8]}"
        cleanups.append(name)
        return f"hbase://{hbase_server()}/{name}?prefix=flltest&page=7&batch=5"

    yield make
    if backend == "hbase" and cleanups:
        import happybase

        host, _, port = hbase_server().partition(":")
        conn = happybase.Connection(host, int(port or 9090), table_prefix="flltest")
        for name in cleanups:
            try:
                conn.delete_table(name, disable=True)
            except Exception:  # the test may have failed before creating it
                pass
        conn.close()


def open_url(url: str):
    from fll.store import open_table

    return open_table(url)


@pytest.fixture
def open_table_for(table_url):
    """Open a fresh table on the backend under test; closed after the test."""
    opened = []

    def make():
        t = open_url(table_url())
        opened.append(t)
        return t

    yield make
    for t in opened:
        t.close()


@pytest.fixture(autouse=True)
def _fsck_settles_briefly(monkeypatch):
    """No writer runs beside the fsck of these tests: what it suspects need not
    wait `SETTLE_S` (2 s on Bigtable and HBase) before it is re-read."""
    from fll.store.admin import fsck_confirm

    monkeypatch.setattr(fsck_confirm, "SETTLE_S", 0.0)
