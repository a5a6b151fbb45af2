"""Fixtures for the Spark lineage tests: five small tables written to a temp dir.

The files are read by path and registered as temp views (``orders``,
``customers``, ``items``, the two-column ``la`` and ``lb`` of issue 30's LATERAL
example, plus the SQL view ``lin_big_orders``) on the shared session; no catalog
table or metastore outside tmp is ever created.
"""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def lineage_tables(spark, tmp_path_factory):
    """Paths of the five tables, by short name; their temp views are registered."""
    root = tmp_path_factory.mktemp("lineage_tables")
    paths = {"orders": str(root / "orders.parquet"), "customers": str(root / "customers.csv"),
             "items": str(root / "items.parquet"), "la": str(root / "la.parquet"),
             "lb": str(root / "lb.parquet")}
    spark.createDataFrame(
        [(1, 1, 120.0, "paid", "2024-01-01"), (2, 1, 5.0, "open", "2024-01-02"),
         (3, 2, 40.0, "paid", "2024-01-03")],
        "order_id int, customer_id int, amount double, status string, placed string",
    ).coalesce(1).write.parquet(paths["orders"])
    spark.createDataFrame(
        [(1, "Ann", "ann@x.org", "Paris"), (2, "Bob", "bob@x.org", "Lyon")],
        "customer_id int, name string, email string, city string",
    ).coalesce(1).write.csv(paths["customers"], header=True)
    spark.createDataFrame(
        [(1, "a", 2, ["red", "big"]), (3, "b", 1, ["blue"])],
        "order_id int, sku string, qty int, tags array<string>",
    ).coalesce(1).write.parquet(paths["items"])
    spark.read.parquet(paths["orders"]).createOrReplaceTempView("orders")
    (spark.read.option("header", True).schema(
        "customer_id int, name string, email string, city string")
     .csv(paths["customers"]).createOrReplaceTempView("customers"))
    spark.read.parquet(paths["items"]).createOrReplaceTempView("items")
    spark.createDataFrame([(1, 10), (2, 20)], "id int, a int").coalesce(1).write.parquet(
        paths["la"])
    spark.createDataFrame([(5, 15), (6, 1)], "b int, w int").coalesce(1).write.parquet(
        paths["lb"])
    spark.read.parquet(paths["la"]).createOrReplaceTempView("la")
    spark.read.parquet(paths["lb"]).createOrReplaceTempView("lb")
    spark.sql("CREATE OR REPLACE TEMP VIEW lin_big_orders AS "
              "SELECT order_id AS big_id FROM orders WHERE amount > 100")
    return paths


def compact(facet: dict, paths: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """The facet as the case file writes it: ``{out: sorted ["table.field TYPE/SUBTYPE"]}``
    and the sorted dataset[] lines; datasets are named by their table short name."""
    import os

    by_path = {os.path.abspath(p): name for name, p in paths.items()}

    def lines(items: list[dict]) -> list[str]:
        out = []
        for item in items:
            assert item["namespace"] == "file", item
            table = by_path.get(item["name"], item["name"])
            for t in item["transformations"]:
                out.append(f"{table}.{item['field']} {t['type']}/{t['subtype']}"
                           + (" masked" if t["masking"] else ""))
        return sorted(out)

    fields = {out: lines(spec["inputFields"]) for out, spec in facet["fields"].items()}
    return fields, lines(facet["dataset"])
