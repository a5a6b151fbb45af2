"""The explorer in headless Chromium against a live server over the demo store.

Each test opens a URL (or drives the controls), waits until the page reports
the view it finished drawing, and compares what it drew (DOM data attributes)
with the REST answers fetched here. Screenshots land in test-artifacts/.
"""
from __future__ import annotations

import os
from urllib.parse import quote

import pytest

from .conftest import (ARTIFACTS, drawn_graph, expected_field_graph, js_key, save_docs_screenshot,
                       screenshot, wait_ready)

pytestmark = pytest.mark.browser

NS = "MyNamespace"
EMPLOYEE = "Employee Data"


def open_view(page, hash_: str, state: str = "ready") -> None:
    page.goto(page.base + "/" + hash_)
    wait_ready(page, state)


def enc(value: str) -> str:
    return quote(value, safe="")


def test_picking_employee_data_shows_its_sources_left_and_destinations_right(page):
    open_view(page, "", state="idle")
    page.fill("#dataset-search", "empl")
    options = page.locator("#dataset-list li[data-dataset]")
    assert options.all_inner_texts()[:2] == ["Employee Data", "Employee Directory"]
    options.first.click()
    wait_ready(page)
    assert f"ds={enc(EMPLOYEE)}" in page.url
    roles = dict(page.eval_on_selector_all(
        "#viewport .dataset", "els => els.map(e => [e.dataset.dataset, e.dataset.role])"))
    assert roles == {"HR File": "source", "Person File": "source", EMPLOYEE: "selected",
                     "Employee Directory": "destination"}
    x = {name: page.locator(f'#viewport .dataset[data-dataset="{name}"]').bounding_box()["x"]
         for name in roles}
    assert x["HR File"] < x[EMPLOYEE] < x["Employee Directory"]
    screenshot(page, "explorer-1-datasets.png")


def test_the_fields_view_draws_every_field_mapping_of_the_rest_answer(page, rest):
    open_view(page, f"#ns={NS}&ds={enc(EMPLOYEE)}")
    page.click("#tab-fields")
    wait_ready(page)
    fields = page.eval_on_selector_all(
        f'#viewport .field[data-dataset="{EMPLOYEE}"]', "els => els.map(e => e.dataset.field)")
    assert fields == ["ContactDetails", "Department", "ID", "JoiningDate", "Name"]
    answer = rest.get(f"/v3/namespaces/{NS}/datasets/{enc(EMPLOYEE)}/fields/lineage",
                      params={"start": "now-7d", "end": "now"}).json()
    expected = {(js_key("field", m["source"]["namespace"], m["source"]["name"], f["from"]),
                 js_key("field", m["destination"]["namespace"], m["destination"]["name"], f["to"]))
                for m in answer for f in m["fieldmap"]}
    lines = page.eval_on_selector_all(".map-line", "els => els.map(e => [e.dataset.from, e.dataset.to])")
    assert {tuple(x) for x in lines} == expected
    screenshot(page, "explorer-2-fields.png")


def test_clicking_id_draws_the_graph_the_rest_api_answers(page, rest):
    open_view(page, f"#ns={NS}&ds={enc(EMPLOYEE)}&view=fields")
    page.click(f'#viewport .field[data-dataset="{EMPLOYEE}"][data-field="ID"]')
    wait_ready(page)
    assert "view=field" in page.url and "field=ID" in page.url
    nodes, edges = drawn_graph(page)
    want_nodes, want_edges = expected_field_graph(rest, NS, EMPLOYEE, "ID", "now-7d")
    assert nodes == want_nodes
    assert edges == want_edges
    # the seed's example, as drawn: both files' body are sources, GenerateID a bubble
    assert js_key("field", NS, "HR File", "body") in nodes
    assert js_key("node", "HR File Parser.Employee_Name") in nodes  # from the older run
    focus = page.locator("#viewport .fnode.focus")
    assert focus.get_attribute("data-node-key") == js_key("field", NS, EMPLOYEE, "ID")
    assert page.locator('#viewport .fnode:not(.focus)[data-roles~="source"]').count() == 2
    assert page.locator('#viewport .fnode:not(.focus)[data-roles~="destination"]').count() == 1
    assert page.locator('#viewport .bubble.op[data-operation="GenerateID"]').count() == 1
    masked = page.eval_on_selector_all('[data-edge][data-masked="true"]',
                                       "els => els.map(e => e.dataset.from)")
    assert masked == [js_key("node", "Person File Parser.SSN")]
    screenshot(page, "explorer-3-field-graph.png")


def test_the_headline_graph_opens_whole_without_pressing_fit(page):
    open_view(page, f"#ns={NS}&ds={enc(EMPLOYEE)}&view=field&field=ID")
    canvas = page.locator("#canvas").bounding_box()
    boxes = [n.bounding_box() for n in page.locator("#viewport .fnode").all()]
    assert boxes
    for b in boxes:  # every field, sources included, is on screen
        assert canvas["x"] - 1 <= b["x"] and b["x"] + b["width"] <= canvas["x"] + canvas["width"] + 1
        assert canvas["y"] - 1 <= b["y"] and b["y"] + b["height"] <= canvas["y"] + canvas["height"] + 1


def test_changing_the_time_range_redraws_the_graph_from_the_new_range(page, rest):
    open_view(page, f"#ns={NS}&ds={enc(EMPLOYEE)}&view=field&field=ID")
    week_nodes, _ = drawn_graph(page)
    page.select_option("#range", "hour")
    wait_ready(page)
    assert "range=hour" in page.url
    nodes, edges = drawn_graph(page)
    want_nodes, want_edges = expected_field_graph(rest, NS, EMPLOYEE, "ID", "now-1h")
    assert (nodes, edges) == (want_nodes, want_edges)
    assert nodes != week_nodes
    assert js_key("node", "HR File Parser.Employee_Name") in week_nodes - nodes
    assert page.inner_text("#crumbs").endswith("runs in the last hour")


def test_a_custom_range_before_any_run_shows_an_empty_state(page):
    open_view(page, f"#ns={NS}&ds={enc(EMPLOYEE)}&view=field&field=ID&range=custom"
                    f"&start=1000&end=2000", state="empty")
    assert page.input_value("#range") == "custom"
    assert page.is_visible("#custom-range")
    assert "No lineage for ID" in page.inner_text("#message")


def test_an_operation_shows_its_description_stage_transformations_and_runs(page):
    open_view(page, f"#ns={NS}&ds={enc(EMPLOYEE)}&view=field&field=ID")
    page.click('#viewport .bubble.op[data-operation="GenerateID"]')
    wait_ready(page)
    assert "sel=op%3AGenerateID" in page.url or "sel=op:GenerateID" in page.url
    assert page.inner_text('[data-testid="op-description"]') == "Generate unique Employee Id"
    assert page.inner_text('[data-testid="op-stage"]') == "GenerateID"
    details = page.inner_text("#details")
    assert "MASKED" in details and "last 4 digits" in details and "DIRECT" in details
    runs = page.eval_on_selector_all("#details [data-run]", "els => els.map(e => e.dataset.run)")
    assert runs == ["employee-run-2", "employee-run-1"]  # newest first
    page.mouse.move(400, 800)  # no tooltip in the picture
    page.wait_for_selector("#tooltip", state="hidden")
    docs = save_docs_screenshot(page)  # the README's picture: graph plus operation details
    assert docs.stat().st_size < 300_000


def test_a_shared_link_reopens_the_same_view(page, rest):
    link = (f"#ns={NS}&ds={enc(EMPLOYEE)}&view=field&field=ID&dir=backward&depth=2"
            f"&range=hour")
    open_view(page, link)
    first = drawn_graph(page)
    assert page.input_value("#direction") == "backward"
    assert page.input_value("#depth") == "2"
    assert page.input_value("#range") == "hour"
    page.reload()
    wait_ready(page)
    assert drawn_graph(page) == first
    want_nodes, want_edges = expected_field_graph(rest, NS, EMPLOYEE, "ID", "now-1h",
                                                  directions=("backward",))
    assert first == (want_nodes, want_edges)  # the files have no producer: depth 2 adds nothing


def test_depth_follows_a_field_across_datasets(page):
    open_view(page, "#ns=analytics&ds=Clickstream%20Sessions&view=field&field=s01&dir=backward")
    one, _ = drawn_graph(page)
    page.select_option("#depth", "2")
    wait_ready(page)
    two, _ = drawn_graph(page)
    assert js_key("field", "analytics", "Clickstream Wide", "c006_v") in one
    assert js_key("field", "analytics", "Clickstream Raw", "c006") not in one
    assert js_key("field", "analytics", "Clickstream Raw", "c006") in two


def test_a_dataset_with_no_lineage_shows_a_clear_empty_state(page):
    open_view(page, f"#ns={NS}&ds=Audit%20Log", state="empty")
    message = page.inner_text("#message")
    assert "No field lineage for “Audit Log”" in message
    assert page.locator("#message").get_attribute("class") == "message empty"
    page.click("#tab-fields")
    wait_ready(page, "empty")
    fields = page.eval_on_selector_all("#viewport .field.nolineage", "els => els.map(e => e.dataset.field)")
    assert fields == ["actor", "at", "event"]
    screenshot(page, "explorer-empty.png")
    page.click("#widen-range")
    wait_ready(page, "empty")
    assert "all time" in page.inner_text("#message")


def test_an_unknown_dataset_is_reported_not_crashed_on(page):
    open_view(page, f"#ns={NS}&ds=No%20Such%20Dataset", state="error")
    assert "No Such Dataset" in page.inner_text("#message")


def test_a_field_built_from_hundreds_of_fields_stays_usable(page):
    open_view(page, "#ns=analytics&ds=Clickstream%20Sessions&view=field&field=row_hash&dir=backward")
    assert page.locator("#viewport [data-node-key]").count() == 242  # 240 inputs, ID, row_hash
    zoom = float(page.get_attribute("#view", "data-zoom"))
    assert zoom >= 0.59  # never shrunk into unreadable text: centred on the field instead
    box = page.locator("#canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, 600)
    page.wait_for_function("z => +document.getElementById('view').dataset.zoom < z", arg=zoom)
    page.check("#collapse")
    wait_ready(page)
    nodes, edges = drawn_graph(page)
    assert len(nodes) == 241  # intermediate fields folded away
    assert all(op.endswith("operations") or op for _, _, op in edges)


def test_the_fields_view_collapses_large_datasets(page):
    open_view(page, "#ns=analytics&ds=Clickstream%20Wide&view=fields")
    shown = page.locator('#viewport .field[data-dataset="Clickstream Raw"]').count()
    assert shown < 240
    assert "more fields" in page.text_content('#viewport .dsbox[data-dataset="Clickstream Raw"] .more')
    page.click("#expand-all")
    page.wait_for_function(
        "() => document.querySelectorAll("
        "'#viewport .field[data-dataset=\"Clickstream Raw\"]').length == 240")
    page.fill("#field-filter", "c12")
    page.wait_for_function("() => location.hash.includes('filter=c12')")
    wait_ready(page)
    names = page.eval_on_selector_all('#viewport .field[data-dataset="Clickstream Raw"]',
                                      "els => els.map(e => e.dataset.field)")
    assert names == [f"c12{i}" for i in range(10)]


def test_screenshots_are_kept_out_of_the_repository():
    gitignore = (ARTIFACTS.parent / ".gitignore").read_text().split()
    assert "test-artifacts/" in gitignore
    assert os.path.isdir(ARTIFACTS)
