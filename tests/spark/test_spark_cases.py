"""Every construct of semantics §5, driven by data/lineage_cases.yaml."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fll.spark import column_lineage

from .conftest import compact

CASES = yaml.safe_load((Path(__file__).parent / "data" / "lineage_cases.yaml").read_text())

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_sql_query_gives_the_exact_column_lineage(spark, lineage_tables, case):
    fields, dataset = compact(column_lineage(case["sql"], spark), lineage_tables)
    expected = {out: sorted(inputs) for out, inputs in case["fields"].items()}
    assert fields == expected
    assert dataset == sorted(case.get("dataset") or [])
