"""Capture from DataFrames and write statements, JVM cost, operations, errors."""
from __future__ import annotations

import os

import pytest

from fll import EndPoint, EndPointField, FllError
from fll.errors import BadRequest
from fll.names import dataset_name
from fll.spark import capture, column_lineage, to_operations
from fll.spark.lineage_model import AGGREGATION, IDENTITY, TRANSFORMATION, compose

from .conftest import compact

pytestmark = pytest.mark.spark


def test_dataframe_api_job_gives_the_same_lineage_as_sql(spark, lineage_tables):
    from pyspark.sql import functions as F

    orders = spark.read.parquet(lineage_tables["orders"])
    customers = spark.read.option("header", True).schema(
        "customer_id int, name string, email string, city string").csv(lineage_tables["customers"])
    df = (orders.filter(F.col("status") == "paid")
          .join(customers, "customer_id")
          .withColumn("net", F.col("amount") * 0.8)
          .groupBy("city").agg(F.sum("net").alias("revenue"), F.count("email").alias("n")))
    fields, dataset = compact(column_lineage(df), lineage_tables)
    assert fields == {
        "city": ["customers.city DIRECT/IDENTITY"],
        "revenue": ["orders.amount DIRECT/AGGREGATION"],
        "n": ["customers.email DIRECT/AGGREGATION masked"],
    }
    assert dataset == sorted(["orders.status INDIRECT/FILTER", "orders.customer_id INDIRECT/JOIN",
                              "customers.customer_id INDIRECT/JOIN",
                              "customers.city INDIRECT/GROUP_BY"])


def test_dataframe_self_join_under_two_aliases_keeps_both_sides(spark, lineage_tables):
    from pyspark.sql import functions as F

    o = spark.read.parquet(lineage_tables["orders"])
    df = (o.alias("a").join(o.alias("b"), F.col("a.customer_id") == F.col("b.customer_id"))
          .select(F.col("a.order_id").alias("first"), F.col("b.status").alias("second_status")))
    fields, dataset = compact(column_lineage(df), lineage_tables)
    assert fields == {"first": ["orders.order_id DIRECT/IDENTITY"],
                      "second_status": ["orders.status DIRECT/IDENTITY"]}
    assert dataset == ["orders.customer_id INDIRECT/JOIN"]


def test_cached_dataframe_is_seen_through_to_its_source(spark, lineage_tables):
    cached = spark.read.parquet(lineage_tables["orders"]).filter("amount > 1").cache()
    try:
        cached.count()  # materialise, so later plans could use the InMemoryRelation
        fields, dataset = compact(column_lineage(cached.selectExpr("order_id * 2 AS o2")),
                                  lineage_tables)
    finally:
        cached.unpersist()
    assert fields == {"o2": ["orders.order_id DIRECT/TRANSFORMATION"]}
    assert dataset == ["orders.amount INDIRECT/FILTER"]


def test_datasets_are_named_by_location_scheme_and_path(spark, lineage_tables):
    cap = capture("SELECT o.order_id, c.name FROM orders o JOIN customers c "
                  "ON o.customer_id = c.customer_id", spark)
    assert cap.inputs == sorted([("file", os.path.abspath(lineage_tables["orders"])),
                                 ("file", os.path.abspath(lineage_tables["customers"]))])
    assert cap.destination is None


def test_ctas_is_analyzed_not_executed_and_names_its_destination(spark, lineage_tables, tmp_path):
    dest = tmp_path / "ctas_out"
    cap = capture(f"CREATE TABLE lin_ctas_never USING parquet LOCATION '{dest}' AS "
                  f"SELECT order_id, upper(status) AS s FROM orders", spark)
    assert cap.destination == ("file", str(dest))
    fields, _ = compact(cap.facet, lineage_tables)
    assert fields == {"order_id": ["orders.order_id DIRECT/IDENTITY"],
                      "s": ["orders.status DIRECT/TRANSFORMATION"]}
    assert not dest.exists()
    assert not spark.catalog.tableExists("lin_ctas_never")


def test_insert_into_is_analyzed_not_executed(spark, lineage_tables, tmp_path):
    dest = tmp_path / "insert_target"
    spark.sql(f"CREATE TABLE lin_insert_target (id INT, total DOUBLE) USING parquet "
              f"LOCATION '{dest}'")
    try:
        cap = capture("INSERT INTO lin_insert_target SELECT customer_id, sum(amount) "
                      "FROM orders GROUP BY customer_id", spark)
        assert cap.destination == ("file", str(dest))
        fields, dataset = compact(cap.facet, lineage_tables)
        assert fields == {"id": ["orders.customer_id DIRECT/IDENTITY"],
                          "total": ["orders.amount DIRECT/AGGREGATION"]}
        assert dataset == ["orders.customer_id INDIRECT/GROUP_BY"]
        assert spark.table("lin_insert_target").count() == 0
        assert not dest.exists() or not any(dest.iterdir())
    finally:
        spark.sql("DROP TABLE IF EXISTS lin_insert_target")


def test_insert_overwrite_directory_is_analyzed_not_executed(spark, lineage_tables, tmp_path):
    dest = tmp_path / "dir_out"
    cap = capture(f"INSERT OVERWRITE DIRECTORY '{dest}' USING parquet "
                  f"SELECT order_id FROM orders WHERE amount > 3", spark)
    assert cap.destination == ("file", str(dest))
    assert not dest.exists()


class _CountingClient:
    """Wraps the py4j client to count every round trip and every toJSON call."""

    def __init__(self, send):
        self.send, self.commands = send, []

    def send_command(self, command, *args, **kwargs):
        self.commands.append(command)
        return self.send(command, *args, **kwargs)


def _count_round_trips(spark, monkeypatch, fn):
    client = spark.sparkContext._gateway._gateway_client
    counter = _CountingClient(client.send_command)
    monkeypatch.setattr(client, "send_command", counter.send_command)
    result = fn()
    monkeypatch.undo()
    return result, counter.commands


def test_capture_serializes_the_plan_once_and_a_few_calls_per_leaf(spark, lineage_tables,
                                                                   monkeypatch):
    sql = ("SELECT o.order_id, c.name, (SELECT max(qty) FROM items i WHERE i.order_id = "
           "o.order_id) AS q FROM orders o JOIN customers c ON o.customer_id = c.customer_id "
           "WHERE o.amount > 1")
    capture(sql, spark)  # the first capture also looks up the JVM's JSON mapper
    cap, commands = _count_round_trips(spark, monkeypatch, lambda: capture(sql, spark))
    assert sum(1 for c in commands if "\ntoJSON\n" in c or "\njsonValue\n" in c) == 1
    # method calls and constructors; the rest is py4j freeing objects
    calls = [c for c in commands if c.startswith(("c\n", "i\n"))]
    assert cap.jvm_calls == len(calls)
    assert len(cap.inputs) == 3
    # analysis (6) + serializing the plan (3), then at most 6 per relation leaf
    assert len(calls) <= 9 + 6 * 3
    assert cap.plan_nodes > 12  # more nodes than calls spent on them


def test_jvm_calls_do_not_grow_with_plan_size(spark, lineage_tables):
    from pyspark.sql import functions as F

    small = spark.read.parquet(lineage_tables["orders"])
    big = small
    for i in range(40):
        big = big.withColumn(f"c{i}", F.col("amount") + i).filter(F.col("order_id") > -i)
    small_cap, big_cap = capture(small.select("order_id")), capture(big)
    assert big_cap.plan_nodes > 80
    assert big_cap.jvm_calls == small_cap.jvm_calls
    fields, _ = compact(big_cap.facet, lineage_tables)
    assert fields["c39"] == ["orders.amount DIRECT/TRANSFORMATION"]


def test_to_operations_round_trips_through_incoming_summary(spark, lineage_tables, tmp_path):
    dest = EndPoint("file", str(tmp_path / "report"))
    info = to_operations(
        "SELECT c.name, sum(o.amount) AS total FROM orders o JOIN customers c "
        "ON o.customer_id = c.customer_id WHERE o.status = 'paid' GROUP BY c.name",
        dest, spark=spark)
    orders = EndPoint("file", os.path.abspath(lineage_tables["orders"]))
    customers = EndPoint("file", os.path.abspath(lineage_tables["customers"]))
    shared = {EndPointField(orders, "customer_id"), EndPointField(customers, "customer_id"),
              EndPointField(orders, "status"), EndPointField(customers, "name")}
    summary = info.incoming_summary()
    assert summary[EndPointField(dest, "name")] == frozenset(shared)
    assert summary[EndPointField(dest, "total")] == frozenset(
        shared | {EndPointField(orders, "amount")})
    transform = next(op for op in info.operations if op.name == "spark.transform total")
    tags = {(i.name, t.type, t.subtype) for i, ts in transform.transformations.items()
            for t in ts}
    assert ("amount", "DIRECT", "AGGREGATION") in tags
    assert ("status", "INDIRECT", "FILTER") in tags
    assert ("name", "INDIRECT", "GROUP_BY") in tags


def test_to_operations_takes_the_destination_of_a_captured_ctas(spark, lineage_tables, tmp_path):
    dest = tmp_path / "ctas2"
    cap = capture(f"CREATE TABLE lin_ctas_two USING parquet LOCATION '{dest}' AS "
                  f"SELECT order_id FROM orders", spark)
    info = cap.to_operations()
    assert info.destinations == {EndPoint("file", str(dest))}
    assert info.incoming_summary()[EndPointField(EndPoint("file", str(dest)), "order_id")] == {
        EndPointField(EndPoint("file", os.path.abspath(lineage_tables["orders"])), "order_id")}


def test_to_operations_without_a_destination_for_a_query_is_a_clear_error(spark, lineage_tables):
    with pytest.raises(BadRequest, match="destination"):
        to_operations(column_lineage("SELECT order_id FROM orders", spark))


class _ConnectLikeDataFrame:
    """Has what a Spark Connect DataFrame has (a session, a schema) but no _jdf."""

    sparkSession = object()
    schema = None


def test_spark_connect_dataframe_raises_a_clear_error():
    with pytest.raises(FllError, match="classic SparkSession"):
        column_lineage(_ConnectLikeDataFrame())


def test_spark_connect_session_raises_a_clear_error():
    with pytest.raises(FllError, match="Spark Connect"):
        column_lineage("SELECT 1", spark=object())


def test_a_command_that_is_not_a_write_is_refused_and_not_run(spark, lineage_tables):
    with pytest.raises(BadRequest, match="command"):
        capture("DROP VIEW lin_big_orders", spark)
    assert spark.catalog.tableExists("lin_big_orders")


def test_sql_that_does_not_analyze_names_the_problem(spark):
    with pytest.raises(BadRequest, match="cannot analyze"):
        capture("SELECT nope FROM no_such_table_anywhere", spark)


def test_target_of_the_wrong_type_names_the_parameter():
    with pytest.raises(BadRequest) as err:
        column_lineage(42)
    assert err.value.parameter == "target"


@pytest.mark.parametrize("location, expected", [
    ("file:/tmp/a/b.parquet", ("file", "/tmp/a/b.parquet")),
    ("/tmp/a", ("file", "/tmp/a")),
    ("hdfs://nn:8020/data/x/", ("hdfs://nn:8020", "/data/x")),
    ("s3a://bucket/key/part", ("s3://bucket", "key/part")),
    ("gs://b/k", ("gs://b", "k")),
])
def test_dataset_names_follow_the_openlineage_naming(location, expected):
    assert dataset_name(location) == expected


def test_composition_prefers_indirect_then_the_strongest_direct_and_keeps_masking():
    cond = ("INDIRECT", "CONDITIONAL", False)
    assert compose(IDENTITY, cond) == cond
    assert compose(("INDIRECT", "FILTER", False), cond) == ("INDIRECT", "FILTER", False)
    assert compose(TRANSFORMATION, AGGREGATION) == AGGREGATION
    assert compose(AGGREGATION, IDENTITY) == AGGREGATION
    assert compose(IDENTITY, ("DIRECT", "TRANSFORMATION", True)) == (
        "DIRECT", "TRANSFORMATION", True)


def test_the_plan_json_handed_over_by_file_equals_spark_tojson(spark, lineage_tables):
    import json
    from pathlib import Path

    import yaml

    from fll.spark.plan import JvmCalls, _plan_json

    cases = yaml.safe_load((Path(__file__).parent / "data" / "lineage_cases.yaml").read_text())
    for case in cases:
        jplan = spark.sql(case["sql"])._jdf.queryExecution().analyzed()
        handed = _plan_json(jplan, JvmCalls())
        assert isinstance(handed, bytes), "the file hand-over was not used"
        assert json.loads(handed) == json.loads(jplan.toJSON()), case["name"]


def test_capture_falls_back_to_tojson_when_the_file_hand_over_is_unavailable(
        spark, lineage_tables, monkeypatch):
    from fll.spark import plan

    sql = "SELECT upper(status) AS s FROM orders WHERE amount > 3"
    expected = column_lineage(sql, spark)
    client = spark._jsparkSession._gateway_client
    monkeypatch.setitem(plan._MAPPERS, id(client), False)
    assert column_lineage(sql, spark) == expected


def test_a_catalog_table_read_twice_is_resolved_once(spark, lineage_tables, tmp_path):
    loc = tmp_path / "twice"
    spark.sql(f"CREATE TABLE lin_twice USING parquet LOCATION '{loc}' AS "
              f"SELECT order_id, customer_id FROM orders")
    try:
        once = capture("SELECT order_id FROM lin_twice", spark)
        twice = capture("SELECT a.order_id, b.customer_id FROM lin_twice a JOIN lin_twice b "
                        "ON a.order_id = b.customer_id", spark)
    finally:
        spark.sql("DROP TABLE IF EXISTS lin_twice")
    assert twice.inputs == once.inputs == [("file", str(loc))]
    assert twice.jvm_calls == once.jvm_calls
    fields = {out: {(i["name"], i["field"]) for i in spec["inputFields"]}
              for out, spec in twice.facet["fields"].items()}
    assert fields == {"order_id": {(str(loc), "order_id")},
                      "customer_id": {(str(loc), "customer_id")}}


# -- issue 30 -----------------------------------------------------------------------

def test_dataframe_pivot_makes_the_pivot_column_conditional_not_aggregated(spark, lineage_tables):
    orders = spark.read.parquet(lineage_tables["orders"])
    df = orders.groupBy("customer_id").pivot("status", ["paid", "open"]).sum("amount")
    fields, dataset = compact(column_lineage(df), lineage_tables)
    pivoted = ["orders.amount DIRECT/AGGREGATION", "orders.status INDIRECT/CONDITIONAL"]
    assert fields == {"customer_id": ["orders.customer_id DIRECT/IDENTITY"],
                      "paid": pivoted, "open": pivoted}
    assert dataset == ["orders.customer_id INDIRECT/GROUP_BY"]


def test_dataframe_stack_in_select_expr_copies_values_and_not_labels(spark, lineage_tables):
    orders = spark.read.parquet(lineage_tables["orders"])
    df = orders.selectExpr("order_id", "stack(2, 'c', customer_id, 'o', order_id) AS (k, v)")
    fields, _ = compact(column_lineage(df), lineage_tables)
    assert fields == {"order_id": ["orders.order_id DIRECT/IDENTITY"], "k": [],
                      "v": ["orders.customer_id DIRECT/IDENTITY", "orders.order_id DIRECT/IDENTITY"]}


@pytest.mark.parametrize("method, distinct", [
    ("intersect", True), ("intersectAll", False), ("subtract", True), ("exceptAll", False)])
def test_dataframe_set_operations_group_only_when_they_are_distinct(spark, lineage_tables,
                                                                    method, distinct):
    left = spark.read.parquet(lineage_tables["orders"]).select("status")
    right = spark.table("customers").select("city")
    fields, dataset = compact(column_lineage(getattr(left, method)(right)), lineage_tables)
    assert fields == {"status": ["orders.status DIRECT/IDENTITY"]}
    assert dataset == sorted(["orders.status INDIRECT/FILTER", "customers.city INDIRECT/FILTER"]
                             + (["orders.status INDIRECT/GROUP_BY"] if distinct else []))


def test_dataframe_union_by_name_matches_columns_by_name(spark, lineage_tables):
    orders = spark.read.parquet(lineage_tables["orders"]).select("status", "customer_id")
    customers = spark.table("customers")
    fields, dataset = compact(column_lineage(orders.unionByName(
        customers.select("customer_id", customers.city.alias("status")))), lineage_tables)
    assert fields == {
        "status": ["customers.city DIRECT/IDENTITY", "orders.status DIRECT/IDENTITY"],
        "customer_id": ["customers.customer_id DIRECT/IDENTITY",
                        "orders.customer_id DIRECT/IDENTITY"]}
    fields, _ = compact(column_lineage(orders.unionByName(
        customers.select("customer_id"), allowMissingColumns=True)), lineage_tables)
    assert fields["status"] == ["orders.status DIRECT/IDENTITY"]  # null on the other side


def test_nodes_that_pass_columns_on_leave_nothing_unknown(spark, lineage_tables):
    from pyspark.sql import functions as F

    orders = spark.read.parquet(lineage_tables["orders"])
    stamped = orders.withColumn("ts", F.current_timestamp()).withWatermark("ts", "1 minute")
    for df in (orders.limit(2), orders.offset(1), orders.sample(0.5), orders.hint("broadcast"),
               orders.repartition(3), orders.repartition("status"), orders.coalesce(1),
               orders.observe("m", F.count(F.lit(1))), stamped,
               stamped.dropDuplicatesWithinWatermark(["status"]),
               spark.sql("SELECT /*+ REBALANCE */ * FROM orders")):
        cap = capture(df.select("order_id"))
        assert cap.lineage.unknown == [], cap.lineage.unknown
        assert compact(cap.facet, lineage_tables)[0] == {
            "order_id": ["orders.order_id DIRECT/IDENTITY"]}


RDD_REASON = "unknown: built from an RDD (LogicalRDD)"


def test_a_dataframe_built_from_an_rdd_says_its_lineage_is_unknown(spark, lineage_tables,
                                                                   validators):
    rdd = spark.sparkContext.parallelize([(1, "x"), (3, "y")])
    side = spark.createDataFrame(rdd, "k int, label string")
    alone = capture(side.selectExpr("k + 1 AS k1", "label"))
    assert alone.inputs == [] and alone.lineage.unknown == [RDD_REASON]
    assert alone.facet["fields"] == {"k1": {"inputFields": [], "reason": RDD_REASON},
                                     "label": {"inputFields": [], "reason": RDD_REASON}}
    orders = spark.read.parquet(lineage_tables["orders"])
    joined = capture(orders.join(side, orders.order_id == side.k).select("status", "label"))
    # the join on an RDD column decides every row, so every field says so; the
    # known inputs stay as they are
    assert joined.facet["fields"]["label"] == {"inputFields": [], "reason": RDD_REASON}
    assert joined.facet["fields"]["status"]["reason"] == RDD_REASON
    fields, dataset = compact(joined.facet, lineage_tables)
    assert fields == {"status": ["orders.status DIRECT/IDENTITY"], "label": []}
    assert dataset == ["orders.order_id INDIRECT/JOIN"]
    validators[1].validate(joined.facet)
    untouched = capture(orders.join(side, orders.order_id == side.k, "left_semi")
                        .select("status"))
    assert untouched.lineage.unknown == [RDD_REASON]  # the semi join's condition
    rdd_free = capture(orders.select("status"))
    assert rdd_free.lineage.unknown == [] and "reason" not in rdd_free.facet["fields"]["status"]


def test_a_checkpointed_dataframe_says_its_lineage_is_unknown(spark, lineage_tables):
    # a checkpoint cuts the plan: what was read before it is no longer in the plan
    orders = spark.read.parquet(lineage_tables["orders"]).localCheckpoint()
    cap = capture(orders.select("status"))
    reason = "unknown: read from a checkpoint (LogicalRDD)"
    assert cap.lineage.unknown == [reason]
    assert cap.facet["fields"] == {"status": {"inputFields": [], "reason": reason}}


def test_rows_the_query_makes_itself_have_no_inputs_and_nothing_unknown(spark):
    for df in (spark.range(3), spark.sql("SELECT * FROM VALUES (1, 'a') AS t(x, y)"),
               spark.sql("SELECT 1 AS one")):
        cap = capture(df)
        assert cap.inputs == [] and cap.lineage.unknown == []
        assert all(spec == {"inputFields": []} for spec in cap.facet["fields"].values())


def _attr(name: str, expr_id: int) -> list[dict]:
    return [{"class": "org.apache.spark.sql.catalyst.expressions.AttributeReference",
             "num-children": 0, "name": name, "dataType": "integer", "nullable": True,
             "metadata": {}, "exprId": {"product-class":
                                        "org.apache.spark.sql.catalyst.expressions.ExprId",
                                        "id": expr_id, "jvmId": "j"}, "qualifier": []}]


def _relation(expr_id: int) -> dict:
    return {"class": "org.apache.spark.sql.execution.datasources.LogicalRelation",
            "num-children": 0, "output": [_attr("x", expr_id)], "isStreaming": False}


@pytest.mark.parametrize("node, out_id", [
    # makes new columns, listed in its own output (as mapInPandas does)
    ({"class": "org.apache.spark.sql.catalyst.plans.logical.MapInPandas", "num-children": 1,
      "output": [_attr("y", 2)], "child": 0, "isBarrier": False}, 2),
    # passes its child's columns on, for all this walk knows
    ({"class": "org.apache.spark.sql.catalyst.plans.logical.SomeFutureNode",
      "num-children": 1, "child": 0}, 1),
])
def test_a_plan_node_the_walk_does_not_know_is_named_in_a_reason(node, out_id):
    from fll.spark.facet import build_facet
    from fll.spark.lineage import walk
    from fll.spark.plan import parse_plan_json

    project = {"class": "org.apache.spark.sql.catalyst.plans.logical.Project",
               "num-children": 1, "projectList": [_attr("out", out_id)], "child": 0}
    root = parse_plan_json([project, node, _relation(1)])
    result = walk(root, {2: [("file", "/t")]})
    short = node["class"].rsplit(".", 1)[-1]
    assert result.unknown == [f"unknown: plan node {short} is not understood"]
    spec = build_facet(result)["fields"]["out"]
    assert spec["reason"] == f"unknown: plan node {short} is not understood"
    known = [(i["name"], i["field"]) for i in spec["inputFields"]]
    assert known == ([] if out_id == 2 else [("/t", "x")])


@pytest.mark.parametrize("second, lineage", [
    # the analyzer's ROLLUP / CUBE / GROUPING SETS shape: the child's columns, then
    # the grouping id; without projections each column still copies the child's
    ("spark_grouping_id", [("/t", "x")]),
    # any other Expand without its projections: unknown, never silently empty
    ("y", None),
])
def test_an_expand_whose_json_lacks_its_projections(second, lineage):
    from fll.spark.facet import build_facet
    from fll.spark.lineage import walk
    from fll.spark.plan import parse_plan_json

    project = {"class": "org.apache.spark.sql.catalyst.plans.logical.Project",
               "num-children": 1, "projectList": [_attr("out", 1)], "child": 0}
    expand = {"class": "org.apache.spark.sql.catalyst.plans.logical.Expand",
              "num-children": 1, "projections": None,
              "output": [_attr("x", 1), _attr(second, 5)], "child": 0}
    result = walk(parse_plan_json([project, expand, _relation(1)]), {2: [("file", "/t")]})
    spec = build_facet(result)["fields"]["out"]
    if lineage is None:
        assert result.unknown == ["unknown: an Expand whose projections the plan JSON omits"]
        assert spec["reason"] == result.unknown[0] and spec["inputFields"] == []
    else:
        assert result.unknown == []
        assert [(i["name"], i["field"]) for i in spec["inputFields"]] == lineage
