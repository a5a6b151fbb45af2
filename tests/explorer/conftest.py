"""Fixtures for the explorer tests: the demo store served by a live uvicorn, and
headless Chromium driven by Playwright.

The server runs in a thread on 127.0.0.1 with a port the OS picks; it serves the
REST API plus the explorer page (`mount_explorer`). Chromium is Debian's
(/usr/bin/chromium, installed by scripts/install-browser.sh); `playwright
install` is never used. Screenshots go to test-artifacts/ (gitignored).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from fll import open_store
from fll.demo_data import record_demo
from fll.server import create_app
from fll.server.explorer import mount_explorer

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1440, "height": 880}  # a laptop screen


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 in a background thread."""

    def __init__(self, app):
        import uvicorn

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start within 10 s")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def _ensure_chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    script = ROOT / "scripts" / "install-browser.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not os.path.exists(CHROMIUM):
        raise RuntimeError(f"could not install chromium with {script}:\n{proc.stderr[-2000:]}")


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory):
    """A store holding `fll.demo_data`, recorded relative to the test's clock."""
    path = tmp_path_factory.mktemp("explorer") / "demo.db"
    store = open_store(f"sqlite:///{path}")
    record_demo(store)
    yield store
    store.close()


@pytest.fixture(scope="session")
def live(demo_store):
    with LiveServer(mount_explorer(create_app(demo_store))) as server:
        yield server


@pytest.fixture(scope="session")
def rest(live):
    with httpx.Client(base_url=live.url, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module. Not session-wide: Playwright's sync API keeps
    an asyncio loop running in this thread while it is open, which breaks any
    later test that calls asyncio.run()."""
    _ensure_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, live):
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.base = live.url  # type: ignore[attr-defined]
    yield pg
    context.close()
    # a 404 answer the page asked for on purpose logs a console error; nothing else may
    real = [e for e in errors if "404" not in e]
    assert not real, f"the page logged errors: {real}"


# -- helpers used by the tests -------------------------------------------------------

def v3(ns: str, ds: str, rest: str = "") -> str:
    return f"/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(ds, safe='')}{rest}"


def js_key(*parts: str) -> str:
    """The key explorer.js gives a node (JSON.stringify of an array)."""
    return json.dumps(list(parts), separators=(",", ":"), ensure_ascii=False)


def expected_field_graph(rest: httpx.Client, ns: str, ds: str, field: str, start: str,
                         end: str = "now", directions=("backward", "forward")
                         ) -> tuple[set[str], set[tuple[str, str, str]]]:
    """Node keys and (from, to, operation) edges the page must draw at depth 1,
    computed from the REST answers: endpoint nodes are dataset fields, the rest
    keep their REST id."""
    nodes = {js_key("field", ns, ds, field)}
    edges: set[tuple[str, str, str]] = set()
    for d in directions:
        r = rest.get(v3(ns, ds, f"/fields/{quote(field, safe='')}/lineage"),
                      params={"start": start, "end": end, "direction": d})
        assert r.status_code == 200, r.text
        for path in r.json()["paths"]:
            key = {}
            for n in path["nodes"]:
                ep = n.get("sourceEndPoint") or n.get("destinationEndPoint")
                key[n["id"]] = (js_key("field", ep["namespace"], ep["name"], n["label"]) if ep
                                else js_key("node", n["id"]))
            nodes.update(key.values())
            edges.update((key[c["from"]], key[c["to"]], c["operation"])
                         for c in path["connections"])
    return nodes, edges


def drawn_graph(page) -> tuple[set[str], set[tuple[str, str, str]]]:
    nodes = page.eval_on_selector_all("#viewport [data-node-key]",
                                      "els => els.map(e => e.dataset.nodeKey)")
    edges = page.eval_on_selector_all(
        "#viewport [data-edge]",
        "els => els.map(e => [e.dataset.from, e.dataset.to, e.dataset.operation])")
    return set(nodes), {tuple(e) for e in edges}


def wait_ready(page, state: str = "ready", timeout: float = 10_000) -> None:
    """Wait until the page finished the view the current URL asks for."""
    page.wait_for_function(
        "s => { const v = document.getElementById('view');"
        " return v.dataset.state === s && v.dataset.rendered === (location.hash || '#'); }",
        arg=state, timeout=timeout)


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path


def save_docs_screenshot(page) -> Path:
    """The README's picture, under test-artifacts/; copied over docs/explorer.png
    only when FLL_UPDATE_DOCS=1, so a test run never changes a committed file."""
    tmp = ARTIFACTS / "explorer-docs.png"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(tmp))
    if os.environ.get("FLL_UPDATE_DOCS") == "1":
        docs = ROOT / "docs"
        docs.mkdir(exist_ok=True)
        shutil.copyfile(tmp, docs / "explorer.png")
    return tmp
