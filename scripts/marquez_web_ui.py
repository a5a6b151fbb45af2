"""Look at Marquez's web UI over `fll serve` (a manual check; CI does not need it).

    .venv/bin/python scripts/marquez_web_ui.py --web PATH/TO/marquez/web [--out shots]

``--web``: the ``web/`` directory of a Marquez checkout, after ``npm ci`` and
``npm run build`` (its ``dist/`` is served). Starts `fll serve` on a free
127.0.0.1 port over a fresh SQLite store fed the events of
``tests/openlineage/shop_events.py`` through openlineage-python, serves the
UI with a small Express server bound to 127.0.0.1 that proxies ``/api/v1`` to
fll (as the UI's own production server does), opens the home, datasets,
table-level lineage (with the dataset drawer), column-level lineage, jobs, a
job's lineage and drawer (its runs), events and search pages in Chromium (``--browser``, default ``/usr/bin/chromium``) and
saves a screenshot of each under ``--out``. Prints every API call the UI
made with its status. Every process it starts is stopped by its id.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.openlineage.conftest import free_port, start_server, stop  # noqa: E402
from tests.openlineage.shop_events import DUCK, TOTALS, send_shop  # noqa: E402

# the UI's production server (its setupProxy.js does the same on all interfaces)
SERVER_JS = """
const { createProxyMiddleware } = require('http-proxy-middleware')
const express = require('express')
const target = `http://127.0.0.1:${process.env.FLL_PORT}/`
const dist = process.env.UI_DIST
const app = express()
app.use(createProxyMiddleware('/api/v1', { target }))
app.use(createProxyMiddleware('/api/v2beta', { target }))
app.use(express.static(dist))
app.get('*', (req, res) => res.sendFile(dist + '/index.html'))
app.listen(process.env.WEB_PORT, '127.0.0.1')
"""


def pages() -> list[tuple[str, str]]:
    ns, ds = quote(DUCK, safe=""), quote(TOTALS, safe="")
    node = quote(f"dataset:{DUCK}:{TOTALS}", safe="")
    return [("home", "/"), ("datasets", "/datasets"),
            ("table-lineage", f"/lineage/dataset/{ns}/{ds}"),
            ("dataset-drawer", f"/lineage/dataset/{ns}/{ds}?tableLevelNode={node}"),
            ("column-lineage", f"/datasets/column-level/{ns}/{ds}"),
            ("jobs", "/jobs"),
            ("job-lineage", "/lineage/job/shop/customer_totals"),
            ("job-drawer-runs", "/lineage/job/shop/customer_totals?tableLevelNode="
             + quote("job:shop:customer_totals", safe="")),
            ("events", "/events")]


@click.command()
@click.option("--web", "web", required=True, type=click.Path(exists=True, file_okay=False),
              help="Marquez's web/ directory, built (npm ci && npm run build)")
@click.option("--out", default="marquez-ui-shots", show_default=True)
@click.option("--browser", default="/usr/bin/chromium", show_default=True)
def main(web: str, out: str, browser: str) -> None:
    from playwright.sync_api import sync_playwright

    web_dir = Path(web).resolve()
    if not (web_dir / "dist" / "index.html").exists():
        raise click.UsageError(f"{web_dir}/dist/index.html is missing: run npm run build there")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="fll-marquez-ui-")
    proc, base = start_server(f"sqlite:///{tmp}/ui.db", token=None)
    node = None
    calls: list[str] = []
    try:
        send_shop(base, "unused")
        script = web_dir / ".fll-ui-server.js"  # beside node_modules, so require() finds them
        script.write_text(SERVER_JS)
        web_port = free_port()
        node = subprocess.Popen(["node", str(script)], cwd=web_dir, env={
            **os.environ, "FLL_PORT": base.rsplit(":", 1)[1], "WEB_PORT": str(web_port),
            "UI_DIST": str(web_dir / "dist")})
        time.sleep(2)
        ui = f"http://127.0.0.1:{web_port}"
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser,
                                         args=["--no-sandbox", "--disable-gpu"])
            page = chromium.new_page(viewport={"width": 1400, "height": 900})
            page.on("response", lambda r: calls.append(f"  {r.status} {r.request.method} "
                                                       f"{r.url.removeprefix(ui)}")
                    if "/api/" in r.url else None)
            for name, path in pages():
                calls.append(f"{name}: {path}")
                page.goto(ui + path)
                page.wait_for_timeout(4000)
                page.screenshot(path=f"{out}/{name}.png")
            calls.append("search: 'total' typed in the search bar")
            page.goto(ui + "/")
            page.wait_for_timeout(2000)
            page.locator("#searchBar").click()
            page.keyboard.type("total")
            page.wait_for_timeout(4000)
            page.screenshot(path=f"{out}/search.png")
            chromium.close()
        script.unlink()
    finally:
        if node is not None:
            node.terminate()
            node.wait(10)
        stop(proc)
    print("\n".join(calls))
    print(f"screenshots in {out}/")


if __name__ == "__main__":
    main()
