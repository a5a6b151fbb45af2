"""The explorer's search finds a dataset by an alias (a pipeline file's
``referenceName``, an OpenLineage symlink) as well as by its name."""
from __future__ import annotations

import pytest

from .conftest import wait_ready

pytestmark = pytest.mark.browser


def test_searching_a_reference_name_finds_the_dataset_it_stands_for(page, demo_store):
    demo_store.record_alias("MyNamespace", "Payroll Extract", "MyNamespace", "HR File")
    page.goto(page.base + "/")
    wait_ready(page, "idle")
    page.fill("#dataset-search", "payroll")
    options = page.locator("#dataset-list li[data-dataset]")
    assert options.count() == 1
    assert options.first.get_attribute("data-dataset") == "HR File"
    assert "Payroll Extract" in options.first.inner_text()
    options.first.click()
    wait_ready(page)
    assert "ds=HR%20File" in page.url
