"""Security: the token on every data route, the store as the only place touched, no
leaked secrets."""
from __future__ import annotations

import inspect
import re
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
from fll.server import guard
from fll.server.app import create_app
from fll.store import open_store, open_table
from tests.lineage_examples import chain

from .conftest import running_server

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
    check = inspect.getsource(guard.TokenMiddleware.authorized)
    assert "hmac.compare_digest" in check
    assert "== self.token" not in check and "self.token ==" not in check
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


# -- the token on every route -------------------------------------------------------

#: the routes anyone may call with a token set: the health check and the explorer's
#: shell (page, static files, API description). A new public route must be added here.
PUBLIC = {("GET", "/"), ("GET", "/health"), ("GET", "/openapi.json"), ("GET", "/docs"),
          ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"), ("GET", "/static/explorer.js")}


def route_table(app) -> list[tuple[str, str]]:
    """(method, concrete path) for every route of the app, read from its route table
    (so a route added later is walked too), routers included by the app
    descended into; path parameters get a sample value."""
    from starlette.routing import Mount, Route

    def flat(routes, prefix=""):
        for route in routes:
            # FastAPI keeps an included router as one entry of the table (the
            # router and its prefix); older FastAPI copied its routes in
            inner = getattr(route, "original_router", None)
            if inner is not None:
                yield from flat(inner.routes, prefix + route.include_context.prefix)
            else:
                yield prefix, route

    out = []
    for prefix, route in flat(app.routes):
        if isinstance(route, Mount):
            out.append(("GET", prefix + route.path + "/explorer.js"))
        elif isinstance(route, Route):
            path = re.sub(r"\{[^}]+\}", "x", prefix + route.path)
            out += [(m, path) for m in sorted(route.methods or ()) if m != "HEAD"]
    return out


def test_the_route_walk_sees_every_kind_of_route(secured):
    """The walk is not vacuous: it finds the reads, the ingest and the public shell."""
    client, _ = secured
    routes = route_table(client.app)
    assert ("POST", "/api/v1/lineage") in routes
    assert ("GET", "/api/v1/column-lineage") in routes
    assert sum(p.startswith("/v3/") for _, p in routes) >= 6
    assert PUBLIC <= set(routes)
    # every operation the API describes is walked (the routers' routes too)
    described = {(m.upper(), re.sub(r"\{[^}]+\}", "x", p))
                 for p, ops in client.app.openapi()["paths"].items() for m in ops}
    assert described <= set(routes), sorted(described - set(routes))


@pytest.mark.reliability("every route of the route table, without and with the token")
def test_with_a_token_every_route_but_the_public_shell_answers_401_without_it(secured, figures):
    """Walks the app's route table: every data route (reads and writes) answers 401
    in the error shape without the token and something else with it; only the
    health check and the explorer's shell stay public."""
    client, store = secured
    good = {"Authorization": f"Bearer {TOKEN}"}
    checked = 0
    for method, path in route_table(client.app):
        anonymous = client.request(method, path, json=event("walk") if method == "POST" else None)
        authed = client.request(method, path, headers=good,
                                json=event("walk") if method == "POST" else None)
        if (method, path) in PUBLIC:
            assert anonymous.status_code != 401, (method, path)
            assert anonymous.status_code == authed.status_code, (method, path)
        else:
            assert anonymous.status_code == 401, (method, path, anonymous.status_code)
            assert anonymous.json() == {"error": anonymous.json()["error"], "status": 401}
            assert anonymous.headers["www-authenticate"].startswith("Bearer")
            assert authed.status_code != 401, (method, path)
            checked += 1
    assert store.run("walk") is not None  # the authorised POST went through
    figures["data_routes_checked"] = checked


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x",
                                    f"Token {TOKEN}"],
                         ids=["missing", "wrong", "basic", "suffix", "other-scheme"])
def test_a_read_with_a_bad_token_answers_401_naming_reads(secured, header):
    client, _ = secured
    r = client.get("/api/v1/datasets", headers={"Authorization": header} if header else {})
    assert r.status_code == 401
    assert r.json() == {"error": "a valid bearer token is required to read lineage",
                        "status": 401}


def test_public_reads_let_gets_through_and_still_guard_the_ingest(tmp_path):
    """``public_reads``: every GET route answers without the token; the ingest still
    needs it."""
    store = open_store(f"sqlite:///{tmp_path}/fll.db")
    client = TestClient(create_app(store, token=TOKEN, public_reads=True),
                        raise_server_exceptions=False)
    for method, path in route_table(client.app):
        r = client.request(method, path, json=event("pr") if method == "POST" else None)
        assert (r.status_code == 401) == (method != "GET"), (method, path, r.status_code)
    assert store.run("pr") is None
    store.close()


def test_without_a_token_every_route_is_open(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/fll.db")
    client = TestClient(create_app(store), raise_server_exceptions=False)
    for method, path in route_table(client.app):
        r = client.request(method, path, json=event("open") if method == "POST" else None)
        assert r.status_code != 401, (method, path)
    store.close()


@pytest.mark.reliability("the openlineage-python HttpTransport (auth type api_key) against a "
                         "real `fll serve --token`")
def test_the_openlineage_client_sends_the_token_the_server_accepts(tmp_path):
    """The reference client's ``auth: {type: api_key, apiKey}`` is accepted, and the
    same client with a wrong key is refused: nothing is stored from it."""
    import httpx
    import requests
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    with running_server(f"sqlite:///{tmp_path}/fll.db", token=TOKEN) as server:
        def transport(key: str) -> HttpTransport:
            return HttpTransport(HttpConfig.from_dict({
                "type": "http", "url": server.base, "timeout": 10,
                "auth": {"type": "api_key", "apiKey": key}, "retry": {"total": 0}}))

        transport(TOKEN).emit(event("ol-good"))  # type: ignore[arg-type]
        with pytest.raises(requests.HTTPError, match="401"):
            transport("not-the-token").emit(event("ol-bad"))  # type: ignore[arg-type]
        runs = httpx.get(server.base + "/v3/namespaces/out/datasets/b/lineage/fields",
                         params={"start": 0, "end": "now"},
                         headers={"Authorization": f"Bearer {TOKEN}"})
        assert runs.status_code == 200 and runs.json() == ["x"]
        assert httpx.get(server.base + "/api/v1/datasets").status_code == 401
        assert httpx.get(server.base + "/health").status_code == 200
    store = open_store(f"sqlite:///{tmp_path}/fll.db")
    assert store.run("ol-good") is not None and store.run("ol-bad") is None
    store.close()


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
