"""The lineage explorer: the static web page served at ``/`` and ``/static/...``.

The page (fll/server/static: index.html, explorer.css, explorer.js and the
ES modules it imports from explorer/) is plain HTML, CSS and JavaScript
shipped inside the package: no build step, no CDN, so it works offline. It only reads the REST API of the same server.

`mount_explorer(app)` adds the two routes to a FastAPI app. This module must
never serve anything outside the package's static folder, never cache
index.html (so an upgrade is seen at once), and never touch the store.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(str(resources.files("fll.server").joinpath("static")))

# a strict policy: everything comes from this origin, nothing inline
_CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")


def mount_explorer(app: FastAPI) -> FastAPI:
    """Serve the explorer page at ``/`` and its files under ``/static/``; returns ``app``.

    Calling it twice on one app is harmless (the second call does nothing).
    """
    if getattr(app.state, "explorer_mounted", False):
        return app
    index = STATIC_DIR / "index.html"
    if not index.is_file():
        raise FileNotFoundError(f"the explorer's page is missing from the package: {index}")

    @app.get("/", include_in_schema=False)
    def explorer_page() -> Response:
        return FileResponse(index, media_type="text/html; charset=utf-8",
                            headers={"Cache-Control": "no-cache",
                                     "Content-Security-Policy": _CSP,
                                     "X-Content-Type-Options": "nosniff"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="explorer-static")
    app.state.explorer_mounted = True
    return app
