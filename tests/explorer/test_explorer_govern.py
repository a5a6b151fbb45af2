"""The explorer marks classification tags on a field graph (put there,
reaching through lineage, stopped) and, compared with the period before,
the edges a lineage diff adds, removes and changes; checked against the
REST answers, in headless Chromium."""
from __future__ import annotations

import time
from urllib.parse import quote

import httpx
import pytest

from fll import EndPoint, open_store
from fll.server import create_app
from fll.server.explorer import mount_explorer
from fll.store.tags import Tags
from tests.govern.jobs import COPY, HASH, SUM, UPPER, job

from .conftest import LiveServer, js_key, screenshot, wait_ready

pytestmark = pytest.mark.browser

DAY = 86_400
NOW = int(time.time())
# two periods of two days: the field graph shows the second, compares with the first
P1, P2, P3 = NOW - 5 * DAY, NOW - 3 * DAY, NOW - DAY
RAW, COPIED, HASHED, STATS = (EndPoint("shop", n) for n in ("customers", "customers_copy",
                                                             "customers_hashed", "ssn_stats"))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    path = tmp_path_factory.mktemp("govern") / "g.db"
    store = open_store(f"sqlite:///{path}")
    t1, t2 = (P1 + DAY) * 1000, (P2 + DAY) * 1000
    for t, suffix in ((t1, "1"), (t2, "2")):
        store.record(job(RAW, COPIED, {"ssn": [("ssn", COPY)]}), "copy-" + suffix, t, "copy")
        store.record(job(RAW, STATS, {"total": [("ssn", SUM)]}), "sum-" + suffix, t + 1, "sum")
    # the hash job's SQL changed between the periods: it hashed, now it only upper-cases
    store.record(job(RAW, HASHED, {"ssn_sha": [("ssn", HASH)]}), "hash-1", t1 + 2, "hash")
    store.record(job(RAW, HASHED, {"ssn_sha": [("ssn", UPPER)], "zip": [("zip", COPY)]}),
                 "hash-2", t2 + 2, "hash")
    Tags(store.table).add("shop", "customers", "ssn", "PII", "alice")
    Tags(store.table).add("shop", "customers_copy", "ssn", "AUDITED", "bob")
    with LiveServer(mount_explorer(create_app(store))) as server:
        yield server
    store.close()


def view(live, field: str, start: int, end: int, **more: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in more.items())
    return (f"{live.url}/#ns=shop&ds=customers&view=field&field={field}&range=custom"
            f"&start={start}&end={end}&depth=2{extra}")


def tags_of(page) -> dict[str, tuple[str, str, str]]:
    rows = page.eval_on_selector_all(
        "#viewport .fnode[data-kind=field]",
        "els => els.map(e => [e.dataset.nodeKey, e.dataset.tagsDirect || '',"
        " e.dataset.tagsPropagated || '', e.dataset.tagsStopped || ''])")
    return {r[0]: (r[1], r[2], r[3]) for r in rows if any(r[1:])}


def test_tags_are_marked_direct_propagated_and_stopped_as_the_rest_api_answers(page, live):
    page.goto(view(live, "ssn", P2, P3))
    wait_ready(page)
    got = tags_of(page)
    with httpx.Client(base_url=live.url) as rest:
        pii = rest.get("/api/v1/tags/PII/fields", params={"start": P2, "end": P3}).json()
    by_id = {f["field"]: f for f in pii["fields"]}
    assert by_id["shop:customers_copy:ssn"]["stopped"] is False
    assert by_id["shop:ssn_stats:total"]["stopped"] is True
    key = lambda ds, f: js_key("field", "shop", ds, f)  # noqa: E731
    assert got[key("customers", "ssn")] == ("PII", "", "")
    assert got[key("customers_copy", "ssn")] == ("AUDITED", "PII", "")
    assert got[key("ssn_stats", "total")] == ("", "", "PII")
    # in the second period the hash job no longer masks: the tag reaches its output
    assert got[key("customers_hashed", "ssn_sha")] == ("", "PII", "")
    badges = page.eval_on_selector_all(".tag-badge", "els => els.map(e => e.dataset.kind)")
    assert sorted(badges) == ["direct", "direct", "propagated", "propagated", "stopped"]
    screenshot(page, "explorer-govern-tags.png")


def test_the_first_period_shows_the_hash_stopping_the_tag(page, live):
    page.goto(view(live, "ssn", P1, P2))
    wait_ready(page)
    got = tags_of(page)
    assert got[js_key("field", "shop", "customers_hashed", "ssn_sha")] == ("", "", "PII")


def test_comparing_with_the_period_before_highlights_the_diff(page, live):
    page.goto(view(live, "ssn", P2, P3, cmp="prev"))
    wait_ready(page)
    with httpx.Client(base_url=live.url) as rest:
        want = rest.get("/api/v1/column-lineage/diff", params={
            "nodeId": "datasetField:shop:customers:ssn", "before": f"{P1},{P2}",
            "after": f"{P2},{P3}", "depth": 2}).json()
    assert [c["edge"]["destination"] for c in want["changed"]] == ["shop:customers_hashed:ssn_sha"]
    drawn = page.eval_on_selector_all(
        ".diff-edge", "els => els.map(e => [e.dataset.diff, e.dataset.from, e.dataset.to])")
    assert drawn == [["changed", js_key("field", "shop", "customers", "ssn"),
                      js_key("field", "shop", "customers_hashed", "ssn_sha")]]
    listed = page.eval_on_selector_all(".diff-list li", "els => els.map(e => e.dataset.diff)")
    assert listed == ["changed"]
    assert page.locator("[data-diff-summary]").inner_text() == "0 edges added, 0 removed, 1 changed"
    assert page.locator("#compare").input_value() == "prev"
    screenshot(page, "explorer-govern-diff.png")


def test_the_compare_control_sets_the_link(page, live):
    page.goto(view(live, "ssn", P2, P3))
    wait_ready(page)
    page.select_option("#compare", "prev")
    page.wait_for_function("() => location.hash.includes('cmp=prev')")
    wait_ready(page)
    assert page.locator(".diff-list li").count() == 1
    # a field whose lineage did not change: nothing highlighted, the panel says so
    page.goto(view(live, quote("zip"), P2, P3, cmp="prev"))
    wait_ready(page)
    assert page.locator(".diff-edge").count() == 1  # zip -> customers_hashed.zip is new
    assert page.eval_on_selector(".diff-edge", "e => e.dataset.diff") == "added"
