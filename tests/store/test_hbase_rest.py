"""The REST server on an HBase store (happybase's real client over sockets to
fll's HBase Thrift test server) answers every CDAP-style and design query
exactly as on SQLite, for the same recorded runs, and an HBase that goes away
is a store error (503, details in the server log), not a client error or a 500.
"""
from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from fll import open_store
from fll.server import create_app
from fll.testing.hbase_thrift import HBaseThriftServer
from tests.server.fixtures import record_all

ALL = "start=0&end=2000000000"


def v3(ns: str, ds: str, rest: str = "") -> str:
    return f"/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(ds, safe='')}{rest}"


EMP = ("MyNamespace", "Employee Data")
PATHS = [
    v3(*EMP, f"/lineage/fields?{ALL}"),
    v3(*EMP, f"/lineage/fields?prefix=dEpT&{ALL}"),
    v3("chain", "C", f"/lineage/fields?includeCurrent=true&{ALL}"),
    v3(*EMP, f"/lineage/fields/ID?direction=incoming&{ALL}"),
    v3("MyNamespace", "HR File", f"/lineage/fields/body?direction=outgoing&{ALL}"),
    v3("chain", "B", f"/lineage/fields/x2?direction=both&{ALL}"),
    v3("chain", "C", f"/lineage/fields/z?direction=incoming&level=2&{ALL}"),
    v3(*EMP, f"/lineage/fields/ID/operations?direction=incoming&{ALL}"),
    v3("chain", "B", f"/lineage/fields/x2/operations?{ALL}"),
    v3(*EMP, "/lineage/allfieldlineage?start=0&end=1600000000"),
    v3("chain", "B", f"/lineage/allfieldlineage?direction=outgoing&{ALL}"),
    "/api/v1/column-lineage?nodeId=datasetField:chain:A:z&depth=100",
    v3(*EMP, f"/lineage/fields/Nope?direction=incoming&{ALL}"),
]


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    server = HBaseThriftServer(transport="framed", protocol="compact").start()
    sqlite = open_store(f"sqlite:///{tmp_path_factory.mktemp('rest')}/ref.db")
    hbase = open_store(server.url("rest", pool=4, page=7, batch=5, deadline=2, timeout=1))
    record_all(sqlite)
    record_all(hbase)
    with TestClient(create_app(sqlite)) as ref, TestClient(create_app(hbase)) as hb:
        yield server, ref, hb
    sqlite.close()
    hbase.close()
    server.stop()


@pytest.mark.parametrize("path", PATHS)
def test_every_query_answers_on_hbase_as_on_sqlite(apps, path):
    _, ref, hb = apps
    want, got = ref.get(path), hb.get(path)
    assert got.status_code == want.status_code
    assert got.json() == want.json()


def test_an_hbase_that_goes_away_is_a_503_logged_with_host_and_table_not_a_500(apps, caplog):
    server, _, hb = apps
    path = v3(*EMP, f"/lineage/fields/ID?direction=incoming&{ALL}")
    server.stop()
    try:
        r = hb.get(path)
        assert r.status_code == 503
        assert "store is unavailable" in r.json()["error"]
        assert any(server.address in m and "'rest'" in m for m in caplog.messages)
    finally:
        server.start()
    assert hb.get(path).status_code == 200  # back without a restart
