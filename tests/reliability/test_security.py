"""Security: the write token, the store as the only place touched, no leaked secrets."""
from __future__ import annotations

import inspect
import statistics
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from fll import EndPoint
from fll.cli import main as fll_main
from fll.errors import StoreError
from fll.openlineage import info_to_event
from fll.server import app as app_module
from fll.server.app import create_app
from fll.store import open_store, open_table
from tests.lineage_examples import chain

SECRET = "hunter2-s3cr3t"
TOKEN = "correct-horse-battery-staple"


def event(run_id: str, src: EndPoint = EndPoint("in", "a"), dst: EndPoint = EndPoint("out", "b"),
          fields: tuple[str, ...] = ("x",)) -> dict:
    return info_to_event(chain(src, dst, list(fields)), run_id, 1_700_000_000_000, "ns/job")


@pytest.fixture
def secured(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/store/fll.db")
    yield TestClient(create_app(store, token=TOKEN), raise_server_exceptions=False), store
    store.close()


@pytest.mark.reliability("ingest with a token: missing, wrong, wrong scheme, prefix, suffix")
@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN[:-1]}",
                                    f"Bearer {TOKEN}x", "Bearer ", f"bearer{TOKEN}"],
                         ids=["missing", "wrong", "basic", "prefix", "suffix", "empty", "no-space"])
def test_a_token_protected_ingest_answers_401_to_a_bad_token_and_stores_nothing(secured, header):
    """Every bad Authorization header gets 401 with WWW-Authenticate and stores no
    run; the right token gets 201."""
    client, store = secured
    headers = {"Authorization": header} if header is not None else {}
    r = client.post("/api/v1/lineage", json=event("r-bad"), headers=headers)
    assert r.status_code == 401, r.text
    assert r.headers.get("www-authenticate", "").startswith("Bearer")
    assert TOKEN not in r.text
    assert store.run("r-bad") is None
    ok = client.post("/api/v1/lineage", json=event("r-good"),
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 201, ok.text


@pytest.mark.reliability("token comparison: source check + 400 timed wrong tokens")
def test_the_token_is_compared_in_constant_time(secured, figures):
    """The check uses hmac.compare_digest (never ==) on the token; wrong tokens
    differing in the first or the last byte take the same time (figures only:
    a timing assertion would be flaky on a shared CI machine)."""
    source = inspect.getsource(app_module.create_app)
    check = source[source.index("def check_token"):source.index("@app.post")]
    assert "hmac.compare_digest" in check
    assert "== token" not in check and "token_bytes ==" not in check
    client, _ = secured
    timings: dict[str, list[float]] = {"first": [], "last": []}
    wrong = {"first": "X" + TOKEN[1:], "last": TOKEN[:-1] + "X"}
    for _ in range(200):
        for kind in ("first", "last"):
            began = time.perf_counter()
            client.post("/api/v1/lineage", content=b"{}",
                        headers={"Authorization": f"Bearer {wrong[kind]}"})
            timings[kind].append(time.perf_counter() - began)
    first, last = statistics.median(timings["first"]), statistics.median(timings["last"])
    figures["median_ms_wrong_first_byte"] = first * 1000
    figures["median_ms_wrong_last_byte"] = last * 1000


def tree(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime for p in root.rglob("*")}


TRAVERSALS = ["..", "../..", "../../../../etc/passwd", "/etc/passwd", "..%2F..%2Fetc",
              "....//....//etc", "%2e%2e", "C:\\Windows\\win.ini", "fll.db", "\x00"]


@pytest.mark.reliability("dataset, namespace and field names like ../../etc/passwd, ingested "
                         "and queried; ../ paths under /static")
def test_no_endpoint_reads_or_writes_a_file_outside_the_store(tmp_path, monkeypatch, figures):
    """Ingesting and querying datasets named like paths creates or changes no file
    but the store's own (fll.db, -wal, -shm), serves no file content, and the
    static route serves nothing outside the package's static folder."""
    work = tmp_path / "cwd"
    work.mkdir()
    (tmp_path / "outside.txt").write_text("do not touch")
    monkeypatch.chdir(work)
    store = open_store(f"sqlite:///{tmp_path}/store/fll.db")
    client = TestClient(create_app(store), raise_server_exceptions=False)
    before = tree(tmp_path)
    statuses = []
    for i, name in enumerate(TRAVERSALS):
        ev = event(f"t{i}", EndPoint(name, name), EndPoint(name, name + "-out"), (name,))
        statuses.append(client.post("/api/v1/lineage", json=ev).status_code)
        from urllib.parse import quote
        seg = quote(name, safe="")
        for path in (f"/v3/namespaces/{seg}/datasets/{seg}/lineage/fields?start=0&end=now",
                     f"/v3/namespaces/{seg}/datasets/{seg}-out/lineage/fields/{seg}"
                     f"?direction=both&start=0&end=now",
                     f"/v3/namespaces/{seg}/datasets/{seg}/properties?start=0&end=now",
                     f"/api/v1/column-lineage?nodeId=dataset:{seg}:{seg}"):
            r = client.get(path)
            assert r.status_code < 500 and "root:x:0:0" not in r.text, (path, r.text)
    for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2Fapp.py",
                 "/static/%2e%2e%2f%2e%2e%2fstore%2f__init__.py", "/static//etc/passwd",
                 "/static/../../../../etc/passwd"):
        r = client.get(path)
        assert r.status_code in (400, 404), (path, r.status_code)
        assert "import" not in r.text and "root:x:0:0" not in r.text
    store.close()
    after = tree(tmp_path)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    assert changed <= {"store", "store/fll.db", "store/fll.db-wal", "store/fll.db-shm"}, changed
    assert (tmp_path / "outside.txt").read_text() == "do not touch"
    assert list(work.iterdir()) == []
    assert statuses.count(201) >= len(TRAVERSALS) - 1  # the NUL name may be refused
    figures["hostile_names"] = len(TRAVERSALS)


BAD_URLS = [
    f"sqlite:///tmp/x.db?password={SECRET}",
    f"sqlite://admin:{SECRET}@host/x.db",
    f"sqlite:///tmp/x.db?token={SECRET}&timeout=abc",
    f"bigtable://admin:{SECRET}@proj/inst/table?bogus=1",
    f"bigtable://proj/inst/table?token={SECRET}",
    f"hbase://admin:{SECRET}@127.0.0.1:1/t?bogus=1",
    f"nosuch://admin:{SECRET}@host/x",
]


@pytest.mark.reliability("store URLs holding a password or token in user-info or query")
@pytest.mark.parametrize("url", BAD_URLS)
def test_store_errors_never_echo_credentials_of_the_store_url(url):
    """Opening a bad store URL raises a StoreError whose message names the problem
    but never the password/token (the SQLite backend used to echo the whole URL)."""
    with pytest.raises(StoreError) as err:
        open_table(url).close()
    assert SECRET not in str(err.value), str(err.value)


@pytest.mark.reliability("the CLI given a store URL with credentials that fails")
def test_the_cli_never_prints_the_credentials_of_a_failing_store_url(tmp_path):
    """`fll --store URL scan` with a bad URL exits non-zero, naming the URL without
    the secret, also with --verbose."""
    for args in (["--store", BAD_URLS[0], "scan"], ["-v", "--store", BAD_URLS[1], "scan"]):
        result = CliRunner().invoke(fll_main, args)
        assert result.exit_code != 0
        assert SECRET not in result.output, result.output
