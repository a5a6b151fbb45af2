"""The explorer against a server that needs a token, in headless Chromium.

The page sends the token it was given in the URL fragment (and drops it from
the address bar), or asks for it once when the server answers 401, and keeps
it for the tab in sessionStorage; without a token it shows the server's error.
"""
from __future__ import annotations

import pytest

from fll.server import create_app

from .conftest import VIEWPORT, LiveServer, wait_ready

pytestmark = pytest.mark.browser

TOKEN = "explorer-t0ken/with+odd=chars"
NS, EMPLOYEE = "MyNamespace", "Employee Data"


@pytest.fixture(scope="module")
def guarded(demo_store):
    with LiveServer(create_app(demo_store, token=TOKEN)) as server:
        yield server


@pytest.fixture
def tab(browser, guarded):
    """A fresh browser context (empty sessionStorage) that records what it sent."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    sent: list[tuple[str, str | None]] = []
    page.on("request", lambda r: sent.append((r.url, r.headers.get("authorization"))))
    page.sent = sent  # type: ignore[attr-defined]
    yield page
    context.close()


def api_requests(page) -> list[tuple[str, str | None]]:
    return [(u, a) for u, a in page.sent if "/v3/" in u or "/api/v1/" in u]


def test_a_token_in_the_fragment_is_sent_kept_for_the_tab_and_removed_from_the_url(tab, guarded):
    from urllib.parse import quote

    tab.goto(f"{guarded.url}/#token={quote(TOKEN, safe='')}&ns={NS}&ds={quote(EMPLOYEE)}")
    wait_ready(tab)
    assert "token" not in tab.url and f"ds={quote(EMPLOYEE)}" in tab.url
    calls = api_requests(tab)
    assert calls and all(a == f"Bearer {TOKEN}" for _, a in calls), calls
    assert tab.evaluate("sessionStorage.getItem('fll.token')") == TOKEN
    assert tab.locator("#viewport .dataset").count() >= 4
    # a reload keeps the tab's token: the page still draws
    tab.reload()
    wait_ready(tab)
    assert tab.locator("#viewport .dataset").count() >= 4


def test_without_a_token_the_page_asks_once_and_then_draws(tab, guarded):
    prompts: list[str] = []

    def answer(dialog) -> None:
        prompts.append(dialog.message)
        dialog.accept(TOKEN)

    tab.on("dialog", answer)
    tab.goto(f"{guarded.url}/#ns={NS}&ds=Employee%20Data")
    wait_ready(tab)
    assert len(prompts) == 1 and "access token" in prompts[0]
    assert tab.locator("#viewport .dataset").count() >= 4
    refused = [u for u, a in api_requests(tab) if a is None]
    assert refused, "the first request went without a token"
    assert api_requests(tab)[-1][1] == f"Bearer {TOKEN}"


def test_a_refused_prompt_shows_the_servers_401_message(tab, guarded):
    tab.on("dialog", lambda dialog: dialog.dismiss())
    tab.goto(f"{guarded.url}/#ns={NS}&ds=Employee%20Data")
    wait_ready(tab, state="error")
    assert "bearer token is required to read lineage" in tab.inner_text("#message")
