"""The explorer reading a real `track()` job whose datasets are named by path.

A PySpark job joins orders to customers, keeps paid orders, sums amounts per
customer and sorts: its output fields have DIRECT sources (the summed amount,
the grouping key copied out) and INDIRECT ones (the join key, the filter
column, the sort). The page must draw the INDIRECT ones dashed, hide them on
request, keep the distinguishing tail of path names, and show the dataset's
short name on field nodes. Screenshots land in test-artifacts/.
"""
from __future__ import annotations

from urllib.parse import quote

import pytest

from fll import open_store
from fll.server import create_app
from fll.server.explorer import mount_explorer

from .conftest import LiveServer, screenshot, wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def tracked(spark, tmp_path_factory):
    """(store, orders dataset, output dataset) after one tracked job over deep paths."""
    from fll.spark import track

    root = tmp_path_factory.mktemp("reading") / "data" / "lake" / "landing" / "2026"
    root.mkdir(parents=True)
    (root / "orders.csv").write_text("order_id,customer_id,amount,status\n"
                                     "1,10,5.0,paid\n2,10,7.0,open\n3,11,2.5,paid\n")
    (root / "customers.csv").write_text("customer_id,name,country\n10,Ann,NL\n11,Bob,BE\n")
    out = root.parent / "marts" / "customer_revenue"
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('reading-store')}/fll.db")
    orders = spark.read.option("header", True).option("inferSchema", True).csv(
        str(root / "orders.csv"))
    customers = spark.read.option("header", True).csv(str(root / "customers.csv"))
    with track(spark, store, "customer_revenue", strict=True) as tracker:
        (orders.join(customers, "customer_id").where("status = 'paid'")
         .groupBy("customer_id", "name").agg({"amount": "sum"})
         .withColumnRenamed("sum(amount)", "revenue").orderBy("name")
         .write.mode("overwrite").csv(str(out)))
    assert len(tracker.runs) == 1
    yield store, tracker.runs[0].destination
    store.close()


@pytest.fixture(scope="module")
def live(tracked):
    with LiveServer(mount_explorer(create_app(tracked[0]))) as server:
        yield server


def _field_view(page, dest, field: str, extra: str = "") -> None:
    page.goto(page.base + f"/#ns={quote(dest.namespace, safe='')}&ds={quote(dest.name, safe='')}"
              f"&view=field&field={field}&range=all&dir=backward{extra}")
    wait_ready(page)


def _edges(page) -> dict[str, str]:
    return dict(page.eval_on_selector_all(
        "#viewport [data-edge]", "els => els.map(e => [JSON.parse(e.dataset.from)[3] || "
        "JSON.parse(e.dataset.from)[1], e.getAttribute('class')])"))


def test_indirect_sources_are_dashed_and_can_be_hidden(page, tracked):
    _, dest = tracked
    _field_view(page, dest, "revenue")
    classes = _edges(page)
    assert "indirect" not in classes["amount"]          # sum(amount): DIRECT/AGGREGATION
    assert "indirect" in classes["status"]              # WHERE status = 'paid'
    screenshot(page, "explorer-reading-indirect-shown.png")
    page.check("#hide-indirect-field")
    wait_ready(page)
    assert "ind=hide" in page.url
    hidden = _edges(page)
    assert "amount" in hidden and "status" not in hidden
    assert not any("indirect" in c for c in hidden.values())
    screenshot(page, "explorer-reading-indirect-hidden.png")


def test_path_names_keep_their_tail_and_field_nodes_show_the_short_name(page, tracked):
    _, dest = tracked
    _field_view(page, dest, "revenue")
    subs = page.eval_on_selector_all(
        "#viewport .fnode.field .sub", "els => els.map(e => e.textContent)")
    assert any(s.endswith("orders.csv") for s in subs), subs
    assert not any("/" in s for s in subs), subs  # the short name, not a cut-off path
    # the whole graph is on screen on open: every node inside the canvas
    canvas = page.locator("#canvas").bounding_box()
    for box in page.locator("#viewport .fnode").all():
        b = box.bounding_box()
        assert canvas["x"] - 1 <= b["x"] and b["x"] + b["width"] <= canvas["x"] + canvas["width"] + 1
    screenshot(page, "explorer-reading-field-graph.png")


def test_the_fields_view_dashes_indirect_mappings_and_titles_keep_the_tail(page, tracked):
    _, dest = tracked
    page.goto(page.base + f"/#ns={quote(dest.namespace, safe='')}"
              f"&ds={quote(dest.name, safe='')}&view=fields&range=all")
    wait_ready(page)
    titles = page.eval_on_selector_all("#viewport .dsbox .title",
                                       "els => els.map(e => e.textContent)")
    assert any(t.startswith("…") and t.endswith("orders.csv") for t in titles), titles
    kinds = page.eval_on_selector_all(".map-line", "els => els.map(e => e.dataset.kind)")
    assert "INDIRECT" in kinds and "DIRECT" in kinds
    assert all("indirect" in c for c in page.eval_on_selector_all(
        '.map-line[data-kind="INDIRECT"]', "els => els.map(e => e.getAttribute('class'))"))
    screenshot(page, "explorer-reading-fields.png")
    page.check("#hide-indirect-fields")
    wait_ready(page)
    assert page.locator('.map-line[data-kind="INDIRECT"]').count() == 0
    assert page.locator('.map-line[data-kind="DIRECT"]').count() > 0


def test_hovering_an_operation_shows_its_details(page, tracked):
    _, dest = tracked
    _field_view(page, dest, "revenue")
    bubble = page.locator("#viewport .bubble.op").first
    bubble.hover()
    tip = page.locator("#tooltip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "stage" in text and "Click to keep" in text
    assert "run" in text  # how many runs produced it
