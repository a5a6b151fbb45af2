"""The explorer's files are served from the package, and the demo store holds
what the browser tests rely on (no browser needed here)."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from fll.demo_data import AUDIT, EMPLOYEE, demo_runs, record_demo
from fll.model import EndPointField
from fll.server import create_app
from fll.server.explorer import STATIC_DIR, mount_explorer


@pytest.fixture
def client(store):
    record_demo(store, now_ms=10 * 86_400_000)
    with TestClient(mount_explorer(create_app(store))) as c:
        yield c


def test_the_page_is_served_at_the_root_without_caching(client):
    r = client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["cache-control"] == "no-cache"
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert '<script type="module" src="static/explorer.js">' in r.text


@pytest.mark.parametrize("name, kind", [("explorer.js", "javascript"), ("explorer.css", "text/css")])
def test_the_static_files_are_served_from_the_package(client, name, kind):
    r = client.get(f"/static/{name}")
    assert r.status_code == 200
    assert kind in r.headers["content-type"]
    assert r.content == (STATIC_DIR / name).read_bytes()


def test_the_page_s_modules_are_all_served_and_import_one_way(client):
    """explorer.js imports its modules (ES modules, no build step): every one it
    reaches is served as JavaScript, and no module imports back along the way."""
    imports: dict[str, list[str]] = {}
    todo = ["explorer.js"]
    while todo:
        name = todo.pop()
        if name in imports:
            continue
        r = client.get(f"/static/{name}")
        assert r.status_code == 200, name
        assert "javascript" in r.headers["content-type"], name
        base = name.rpartition("/")[0]
        found = re.findall(r'^import [^;]*? from "\./([\w/.-]+)";', r.text, re.M)
        imports[name] = [f"{base}/{f}" if base else f for f in found]
        todo.extend(imports[name])
    assert len(imports) >= 5 and "explorer/page.js" in imports

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in imports[start]:
            if nxt == goal or (nxt not in seen and not seen.add(nxt)
                               and reaches(nxt, goal, seen)):
                return True
        return False
    assert not [m for m in imports if reaches(m, m, set())]


def test_nothing_outside_the_static_folder_is_served(client):
    assert client.get("/static/../explorer.py").status_code == 404
    assert client.get("/static/%2e%2e/explorer.py").status_code == 404
    assert client.get("/static/missing.js").status_code == 404


def test_the_page_loads_nothing_from_another_origin():
    for path in STATIC_DIR.rglob("*"):
        if path.suffix in (".html", ".js", ".css"):
            text = path.read_text()
            assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), path
            assert "url(http" not in text and "@import" not in text, path
            assert not re.search(r"""fetch\(\s*["'`]https?:""", text), path


def test_mounting_the_explorer_twice_is_harmless(store):
    app = mount_explorer(mount_explorer(create_app(store)))
    assert sum(1 for r in app.routes if getattr(r, "path", None) == "/") == 1


def test_the_rest_api_still_answers_beside_the_page(client):
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/api/v1/datasets").status_code == 200


def test_the_demo_runs_are_timed_relative_to_now():
    now = 100 * 86_400_000
    runs = {r.run_id: r.start_ms for r in demo_runs(now)}
    assert now - runs["employee-run-1"] == 3 * 86_400_000
    assert 0 < now - runs["employee-run-2"] < 3_600_000


def test_recording_the_demo_twice_records_nothing_new(store):
    now = 10 * 86_400_000
    record_demo(store, now)
    before = store.runs(EMPLOYEE, 0, now + 1)
    record_demo(store, now)
    assert store.runs(EMPLOYEE, 0, now + 1) == before
    assert len(before) == 3  # two runs wrote it, one read it


def test_the_audit_log_is_a_dataset_without_lineage(store):
    now = 10 * 86_400_000
    record_demo(store, now)
    assert store.exists(AUDIT)
    assert store.fields(AUDIT, 0, now) == ["actor", "at", "event"]
    assert all(not targets for targets in store.field_map(AUDIT, 0, now, "outgoing").values())


def test_the_newer_employee_run_builds_id_without_employee_name(store):
    now = 10 * 86_400_000
    record_demo(store, now)
    eid = EndPointField(EMPLOYEE, "ID")
    last_hour = {f.field for f in store.incoming(eid, now - 3_600_000, now)}
    last_week = {f.field for f in store.incoming(eid, now - 7 * 86_400_000, now)}
    assert last_hour == last_week == {"body"}  # both runs read the two files' body
    ops = store.operations(eid, now - 3_600_000, now)
    gen = next(o for o in ops[0].operations if o.name == "GenerateID")
    assert {i.name for i in gen.inputs} == {"Dept_Name", "SSN", "Start_Date"}
    assert any(t.masking for tags in gen.transformations.values() for t in tags)
